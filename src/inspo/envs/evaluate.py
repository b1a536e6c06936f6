"""The evaluate seam shared by the verifier and the eval command.

``make_evaluate(engine, env, config, group_size=G)`` returns
``evaluate(instruction, questions) -> list[Rollout]`` with these rules:

- it returns ``len(questions) * G`` rollouts, question-major: the G rollouts of question 0,
  then those of question 1, …;
- it never raises for one bad example: when a batch fails, its examples are replayed one at a
  time, and an example that still fails becomes an *error rollout*: reward 0,
  ``finish_reason="error"`` and ``error`` set to the exception's type and message;
- a batch that fails on an :class:`~inspo.records.EndpointDown` (a server a tool needs, or the
  policy server, did not answer after its retries) is not replayed: every example of it becomes an
  error rollout with that error at once (replaying it would multiply the outage by the batch size);
- an error rollout is not the policy's failure and is never scored (this changes DESIGN.md's
  earlier rule that it "feeds the replay buffer"): :func:`inspo.records.scored` leaves it out of
  EM/F1 means, instruction weights, verification scores on D_B and the replay buffer, and every
  table and metric counts it apart (``errors``, ``rollout/errors``, ``inspo/error_rate``);
- ``max_error_rate`` (None: no limit): once the error rollouts of a call are more than that
  share of the call's episodes, it raises :class:`~inspo.records.TooManyErrors` (naming the
  commonest error and ``error_setting``, the knob that raises the limit) holding the rollouts
  played so far; it checks after every batch, so an outage stops the call early;
- a tool that raises or runs past its timeout makes that one episode an error rollout (the loop
  does it: :mod:`inspo.envs.loop`);
- rewards are the environment's, computed on the response only.

Episodes run in batches of ``batch_size`` through :func:`~inspo.envs.loop.run_rollouts`;
``progress=True`` shows a tqdm bar over examples (for long evaluations).

``paired_seed``: when set, every episode gets its own sampling seed derived from
(``paired_seed``, the question id, the replicate), so two instructions evaluated on the same
questions sample with the same random numbers question by question, in one call or in two, in
any batch (common random numbers: the paired comparison of a candidate with its parent, or of
instructions on dev questions; :mod:`inspo.engines.row_seeds`). ``HFEngine`` and ``VLLMEngine``
honour the episode seeds (``row_seeds = True``); an engine that does not but has an ``rng`` gets a
fresh stream derived from (``paired_seed``, the question ids) at the start of every call instead,
and ``many`` then plays one instruction per call so that the pairing holds.

The returned :class:`Evaluate` also has ``many(instructions, questions)``: the episodes of several
instructions in shared batches, one rollout list per instruction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from inspo.engines.base import PolicyEngine
from inspo.engines.row_seeds import seed_of
from inspo.envs.base import Environment
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.records import EndpointDown, Instruction, Question, Rollout, check_error_rate
from inspo.rng import derived_rng


def error_rollout(episode: Episode, error: BaseException) -> Rollout:
    """The Rollout standing in for an example that raised: reward 0, the error recorded (never
    scored: :func:`inspo.records.scored`)."""
    return Rollout(
        question=episode.question,
        instruction_id=episode.instruction.id,
        response="",
        reward=0.0,
        finish_reason="error",
        error=f"{type(error).__name__}: {error}",
    )


def play_isolated(
    engine: PolicyEngine, env: Environment, config: AgentConfig, episodes: list[Episode]
) -> list[Rollout]:
    """Rollouts of ``episodes`` in one batch; a batch that raises is replayed one episode at a
    time, and an episode that still raises becomes an :func:`error_rollout`. A batch that raises
    :class:`~inspo.records.EndpointDown` (an endpoint did not answer) is not replayed: each of its
    episodes becomes an error rollout with that error."""
    try:
        rollouts = run_rollouts(engine, env, config, episodes)
        if len(rollouts) == len(episodes):
            return rollouts
        raise RuntimeError(f"{len(rollouts)} rollouts for {len(episodes)} episodes")
    except Exception as batch_error:  # noqa: BLE001 - isolate the bad example(s)
        if len(episodes) == 1 or isinstance(batch_error, EndpointDown):
            return [error_rollout(ep, batch_error) for ep in episodes]
        return [r for ep in episodes for r in play_isolated(engine, env, config, [ep])]


@dataclass
class Evaluate:
    """``evaluate(instruction, questions)``, and :meth:`many` for several instructions at once.

    ``many(instructions, questions)`` returns one rollout list per instruction, playing the
    episodes of all the instructions in shared batches: the verifier plays every candidate of a
    round in one batch, which on a GPU costs about what one candidate alone does (a batch of 8
    rows takes as many sequential decoding steps as a batch of 48). Episodes with their own seeds
    (``paired_seed``) sample the same whichever batch they share.
    """

    many: Callable[[Sequence[Instruction], Sequence[Question]], list[list[Rollout]]]

    def __call__(self, instruction: Instruction, questions: Sequence[Question]) -> list[Rollout]:
        return self.many([instruction], questions)[0]

    def mapped(self, fn: Callable[[list[Rollout]], list[Rollout]]) -> Evaluate:
        """The same evaluation with ``fn`` applied to each instruction's rollouts (rescoring)."""
        return Evaluate(
            lambda instructions, questions: [fn(rs) for rs in self.many(instructions, questions)]
        )


def make_evaluate(
    engine: PolicyEngine,
    env: Environment,
    config: AgentConfig,
    *,
    group_size: int = 1,
    batch_size: int = 32,
    progress: bool = False,
    paired_seed: Hashable | None = None,
    max_error_rate: float | None = None,
    error_setting: str = "rl.max_error_rate",
) -> Evaluate:
    """Build the ``evaluate(instruction, questions)`` function (rules in the module docstring)."""
    if group_size < 1:
        raise ValueError(f"make_evaluate: group_size must be >= 1, got {group_size}")
    if batch_size < 1:
        raise ValueError(f"make_evaluate: batch_size must be >= 1, got {batch_size}")

    def episode(question: Question, instruction: Instruction, j: int) -> Episode:
        seed = None if paired_seed is None else seed_of(paired_seed, question.id, j)
        return Episode(question, instruction, seed=seed)

    def play_many(
        instructions: Sequence[Instruction], questions: Sequence[Question]
    ) -> list[list[Rollout]]:
        if (
            paired_seed is not None
            and len(instructions) > 1
            and not getattr(engine, "row_seeds", False)
        ):
            # an engine that ignores row seeds is paired only by separate calls from the same stream
            return [play_many([instruction], questions)[0] for instruction in instructions]
        episodes = [
            episode(q, ins, j) for ins in instructions for q in questions for j in range(group_size)
        ]
        if paired_seed is not None and hasattr(
            engine, "rng"
        ):  # what an engine without row seeds samples from
            engine.rng = derived_rng(paired_seed, *(q.id for q in questions))
        bar = None
        if progress:
            from tqdm.auto import tqdm

            what = (
                instructions[0].id
                if len(instructions) == 1
                else f"{len(instructions)} instructions"
            )
            bar = tqdm(total=len(episodes), desc=f"eval {what}", unit="ex")
        results: list[Rollout] = []
        try:
            for start in range(0, len(episodes), batch_size):
                batch = episodes[start : start + batch_size]
                results.extend(play_isolated(engine, env, config, batch))
                if bar is not None:
                    bar.update(len(batch))
                check_error_rate(
                    results,
                    max_error_rate=max_error_rate,
                    planned=len(episodes),
                    setting=error_setting,
                )
        finally:
            if bar is not None:
                bar.close()
        per = len(questions) * group_size
        return [results[k * per : (k + 1) * per] for k in range(len(instructions))]

    return Evaluate(play_many)
