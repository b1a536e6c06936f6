"""The evaluate functions a run hands the core and the final choice: the current policy playing
one rollout per question, sampled with paired seeds for verification and P_0
(:func:`verification_evaluate`), greedy for the periodic evaluation and the final choice
(:func:`greedy_evaluate`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from inspo.envs.evaluate import Evaluate, make_evaluate
from inspo.envs.loop import AgentConfig
from inspo.rng import derived_rng
from inspo.training.step import RewardFn, rescore


def reseed(engine: Any, seed: int, tag: str, step: int) -> None:
    """Give an engine with an ``rng`` a stream derived from (seed, tag, step): a resumed run
    samples exactly what the uninterrupted one did."""
    if hasattr(engine, "rng"):
        engine.rng = derived_rng(seed, tag, step)


def verification_evaluate(
    engine: Any,
    env: Any,
    agent: AgentConfig,
    *,
    seed: int,
    tag: str,
    step: int,
    batch_size: int,
    reward_fn: RewardFn | None = None,
    progress: bool = False,
    max_error_rate: float | None = None,
    greedy: bool = False,
) -> Evaluate:
    """``evaluate(instruction, questions)`` with ``engine`` as the current policy, one rollout per
    question, for step ``step``'s verification (``tag`` "verify") or P_0 (``tag`` "init").

    An engine with an ``rng`` gets a stream derived from (seed, tag, step), and the same questions
    get the same sampling seeds whatever the instruction (paired: a candidate and its parent are
    compared on common random numbers), so a resumed run samples what the uninterrupted one did.
    ``progress``: a tqdm bar over the episodes of each call. ``max_error_rate``
    (``rl.max_error_rate``): a call with more error rollouts stops the run. ``greedy``
    (``coevolution.verify_greedy``): decode at temperature 0, so a question's outcome depends on the
    instruction alone."""
    reseed(engine, seed, tag, step)
    agent = replace(agent, temperature=0.0) if greedy else agent
    evaluate = make_evaluate(
        engine,
        env,
        agent,
        group_size=1,
        batch_size=batch_size,
        paired_seed=(seed, tag, step),
        progress=progress,
        max_error_rate=max_error_rate,
    )
    return evaluate if reward_fn is None else evaluate.mapped(lambda rs: rescore(rs, reward_fn))


def greedy_evaluate(
    engine: Any,
    env: Any,
    agent: AgentConfig,
    *,
    batch_size: int,
    reward_fn: RewardFn | None = None,
    progress: bool = False,
    max_error_rate: float | None = None,
) -> Evaluate:
    """``evaluate(instruction, questions)`` with ``engine`` decoding greedily, one rollout per
    question: the periodic evaluation and the final choice (``max_error_rate`` as above)."""
    evaluate = make_evaluate(
        engine,
        env,
        replace(agent, temperature=0.0),
        group_size=1,
        batch_size=batch_size,
        progress=progress,
        max_error_rate=max_error_rate,
    )
    return evaluate if reward_fn is None else evaluate.mapped(lambda rs: rescore(rs, reward_fn))
