"""One INSPO step, in one place: what every driver does with a step's rollouts.

The order of one training step ``t`` of ``inspo train`` (GRPO on TRL, where
``t = global_step // mini_batches + 1``; the TRL side is :mod:`inspo.training.grpo_trainer`):

1. **questions**: TRL's sampler deals the step's ``questions_per_step x G`` rows to the
   processes, each question G times in a row; the trainer keeps the rows for the rollout function;
2. **instructions**: :func:`choose_groups` gives every question group one instruction,
   ``coevo.choose(t, question id)`` (Algorithm 1 line 5), the same on every process;
3. **rollouts**: the agent plays every row with the current policy in its environment
   (:func:`inspo.envs.loop.run_rollouts`, inside TRL's ``rollout_func``); rewards are the
   environment's, read from the response only, and :func:`rescore` applies a custom
   :data:`RewardFn`;
4. **policy update**: TRL turns the rewards into group advantages and makes ``mini_batches``
   optimizer updates (lines 6-8);
5. **the step's end**: after the step's last update the callback gathers every process's
   rollouts and the main process calls :func:`finish_step`: ``sampled`` events for the groups
   only other processes drew, then ``coevo.update`` (Eq. 6 attribution, pruning, the replay
   buffer, evolution with candidates verified by the current policy through
   :func:`verification_evaluate`: lines 9-24), then the step's metrics line; the population is
   broadcast so every process holds the same one;
6. **records**: :class:`MetricsLog` appends the line to ``metrics.jsonl`` (training merges TRL's
   loss and friends into it at TRL's next log) and shows the progress line; a checkpoint carries
   the core state.

Step 0 builds the core (:func:`build_coevolution`) and P_0 from warm-up rollouts of the seed
(:func:`warmup_questions`). ``inspo evolve`` (:mod:`inspo.training.evolve`) runs steps 1-3 and 5-6
with a frozen policy, and ``inspo demo`` (:mod:`inspo.demo`) on the synthetic environment: both
end every step with :func:`finish_step` and :class:`MetricsLog`, as training does, so all three
write one ``metrics.jsonl`` schema.

Metrics (one line per INSPO step; :func:`step_metrics`):

- ``step``; ``reward/mean``, ``reward/std`` over the step's trajectories that did not fail on an
  error (error rollouts, an outage, are never scored); ``rollout/errors`` (how many failed) and
  ``inspo/error_rate`` (their share of the step's trajectories);
- ``inspo/population_size`` (after the step), ``inspo/weight/<id>`` and ``inspo/best_weight``
  (after attribution, before pruning), ``inspo/admitted``, ``inspo/rejected``, ``inspo/pruned``
  (this step), ``inspo/optimizer_calls``, ``inspo/verification_rollouts`` (running totals);
- for agent episodes (not the synthetic environment's rollouts, which have no turns or tokens):
  ``rollout/tool_calls`` (mean tool calls per trajectory) and ``rollout/<tool>_calls`` for each
  of the environment's tools (Search-R1: ``rollout/search_calls``, mean searches),
  ``rollout/tool_errors`` (mean calls a tool refused, e.g. calc's ``error: ...``),
  ``rollout/obs_truncated`` (mean observations cut to ``rl.max_obs_tokens``), ``env/<name>`` (the
  mean of each of the environment's metrics: Search-R1's ``em``, a rubric's functions),
  ``rollout/turns``, ``rollout/prompt_tokens``, ``rollout/completion_tokens``, ``rollout/answered``
  (share that ended with an answer; these means too leave error rollouts out), ``rollout/count``
  (all), and ``rollout/finish/<reason>`` for each of :data:`~inspo.envs.loop.FINISH_REASONS`
  (``answer``, ``eos``, ``length``, ``turn_limit``, ``error``): the share of trajectories that ended
  that way. Read these, not TRL's ``completions/clipped_ratio``: TRL counts every completion that
  does not end in EOS as clipped, and an answered episode ends at ``</answer>``, without EOS;
- :class:`MetricsLog` adds ``system/rss_gib`` (the process's resident memory as the line is
  written, after the step's evolution: the level between steps; absent where the OS has no
  ``/proc``), ``system/peak_rss_gib`` (its peak so far, training's transients included) and, in
  training and ``inspo evolve``, which first hand freed memory back to the OS
  (:mod:`inspo.training.memory`), ``system/released_gib`` (what that gave back: garbage plus the
  allocator's retention), so a run's memory growth reads off its log step by step;
- a driver may add its own: training adds ``eval/reward`` and ``eval/<tool>_calls``
  (``rl.eval_every``), ``global_step`` and TRL's metrics; the demo adds
  ``inspo/best_true_quality``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.config.schedule import core_config
from inspo.core.accounting import CostLedger
from inspo.core.answer_cache import AnswerCache
from inspo.core.coevolution import CoEvolution, StepReport
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import EventLog, Sampled
from inspo.core.optimizer_llm import LLMClient, LLMUsage, Message
from inspo.core.proposer import LengthCheck, Proposer
from inspo.envs.evaluate import Evaluate, make_evaluate
from inspo.envs.loop import FINISH_REASONS, AgentConfig
from inspo.records import EvaluateFn, Question, Rollout, scored
from inspo.rng import derived_rng
from inspo.training.memory import memory_metrics

log = logging.getLogger("inspo.training")

#: Replaces the environment's response-only reward of a rollout (e.g. a learned verifier or a test's
#: scripted reward). It must read the response, never the prompt, and return a float.
RewardFn = Callable[[Rollout], float]


# ------------------------------------------------------------------------------ step 0


class NoOptimizer:
    """The optimizer of a static run, which evolves nothing: it answers no call (a call is a bug)
    and logs nothing, so a static run's log names no optimizer it does not have."""

    name = "none"

    def __init__(self) -> None:
        self.usage = LLMUsage()

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        raise RuntimeError("a static run has no optimizer LLM: it evolves no instruction")


def build_coevolution(
    co: CoEvolutionConfig,
    seed_text: str,
    llm: LLMClient | None,
    events: EventLog,
    *,
    static: bool,
    fits: LengthCheck | None = None,
    env: Any = None,
    questions: Sequence[Question] = (),
    held_out: Sequence[Question] = (),
) -> CoEvolution:
    """The core for a mode: ``static`` is a population of one (the seed) that never changes.
    ``llm`` is the optimizer; only a ``static`` core may go without one (it then holds a
    :class:`NoOptimizer`, which refuses every call). ``fits`` refuses evolved instructions whose
    prompt would exceed ``rl.max_prompt_tokens``.
    ``env`` (the agent's environment) gives what the core must know of the agent, and nothing
    else: the tags an evolved instruction must keep (``required_tags``, unless
    ``coevolution.guard_tags`` names them), the texts it must not leak (``leak_terms``) and the
    one-line account of a failure shown to the optimizer (``feedback``). ``questions`` (the
    training questions) are what D_B is drawn from under ``coevolution.validation_from: train``;
    ``held_out`` (the dev and test questions) what an instruction must never name under
    ``coevolution.leak_scope: held-out`` (the environment's ``names_problem`` says what naming
    is)."""
    co = core_config(co, static=static)
    if llm is None:
        if not static:
            raise ValueError(
                "build_coevolution: a mode that evolves instructions needs an optimizer LLM "
                "(llm=None)"
            )
        llm = NoOptimizer()
    proposer = Proposer.from_config(
        llm,
        co,
        fits=fits,
        required_tags=tuple(getattr(env, "required_tags", ())),
        feedback=getattr(env, "feedback", None),
        protocol=getattr(env, "protocol", None),
    )
    return CoEvolution(
        co,
        seed_text,
        proposer,
        events=events,
        leak_terms=getattr(env, "leak_terms", None),
        validation_pool=questions,
        held_out=held_out,
        names=getattr(env, "names_problem", None),
    )


def keep_paid_answers(coevo: CoEvolution, run_dir: Path) -> None:
    """The optimizer answers ``coevo`` pays for go to ``run_dir``'s answer file as they arrive, and
    a resumed run replays the ones it finds there (:mod:`inspo.core.answer_cache`). A new run starts
    without the file (:func:`inspo.artifacts.clear_run_files` removes an earlier run's)."""
    coevo.proposer.cache = AnswerCache(run_dir / artifacts.OPTIMIZER_ANSWERS_FILE)


def warmup_questions(questions: list[Question], n: int, seed: int) -> list[Question]:
    """``n`` training questions for the warm-up rollouts of the seed (a seeded sample)."""
    return derived_rng(seed, "warmup").sample(questions, min(n, len(questions)))


# ------------------------------------------------------------------------------ steps 2-3


def choose_groups(coevo: CoEvolution, step: int, questions: Sequence[Question]):
    """One instruction per distinct question (a group), in order; ``coevo.choose_split`` is called
    once per group. Under ``coevolution.split_groups`` it may give two (the champion and a
    challenger): the group's rows on this process then alternate between them, so each holds half.
    Returns ``(instructions per row, [(question id, instruction id), ...])``."""
    chosen: dict[str, list[Any]] = {}
    seen: dict[str, int] = {}
    rows = []
    for q in questions:
        if q.id not in chosen:
            chosen[q.id] = coevo.choose_split(step, q.id)
        k = seen.get(q.id, 0)
        seen[q.id] = k + 1
        rows.append(chosen[q.id][k % len(chosen[q.id])])
    return rows, [(qid, ins.id) for qid, pair in chosen.items() for ins in pair]


def rescore(rollouts: list[Rollout], reward_fn: RewardFn | None) -> list[Rollout]:
    """``rollouts`` with ``reward_fn``'s reward (unchanged when it is None; an error rollout keeps
    its 0: it is never scored)."""
    if reward_fn is None:
        return rollouts
    return [replace(r, reward=float(reward_fn(r))) if r.error is None else r for r in rollouts]


def light(rollout: Rollout) -> Rollout:
    """The rollout without token ids (what is gathered across processes and kept)."""
    return replace(rollout, prompt_ids=[], completion_ids=[], env_mask=[], logprobs=None)


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


# ------------------------------------------------------------------------------ step 5


@dataclass
class StepEnd:
    """What :func:`finish_step` did: the core's report and the step's metrics line."""

    report: StepReport
    metrics: dict[str, float]


def finish_step(
    coevo: CoEvolution,
    step: int,
    rollouts: Sequence[Rollout],
    evaluate: EvaluateFn | None,
    *,
    sampled: set[str] | None = None,
    episodes: bool = True,
    tools: Sequence[str] = (),
    env_metrics: Callable[[Rollout], dict[str, float]] | None = None,
) -> StepEnd:
    """The end of step ``step``: Algorithm 1 lines 9-24 on the step's rollouts, and its metrics.

    Args:
        rollouts: every trajectory of the step (all processes' when training on several).
        evaluate: the current policy, for verification on evolve steps (None: no verification).
        sampled: the question ids this process drew instructions for; a group in ``rollouts``
            that only another process drew gets its ``sampled`` event here (None: all drawn here).
        episodes: the rollouts are agent episodes, so the ``rollout/`` metrics mean something.
        tools: the environment's tool names (each gets ``rollout/<tool>_calls``).
        env_metrics: the environment's per-episode metrics (``env.metrics``; each gets
            ``env/<name>``, its mean over the step's scored rollouts: a rubric's functions one by
            one).
    """
    if sampled is not None:
        for qid, iid in dict.fromkeys((r.question.id, r.instruction_id) for r in rollouts):
            if qid not in sampled:
                coevo.emit(Sampled(step, question_id=qid, instruction_id=iid))
    before = CostLedger.from_dict(coevo.ledger.to_dict())
    report = coevo.update(step, rollouts, evaluate)
    line = step_metrics(step, rollouts, report, coevo, before, episodes=episodes, tools=tools)
    if env_metrics is not None:
        line.update(env_means(rollouts, env_metrics))
    return StepEnd(report, line)


def env_means(
    rollouts: Sequence[Rollout], env_metrics: Callable[[Rollout], dict[str, float]]
) -> dict[str, float]:
    """``env/<name>``: the mean of each of the environment's metrics over the scored rollouts."""
    rows = [env_metrics(r) for r in scored(rollouts)]
    names = list(dict.fromkeys(k for row in rows for k in row))
    return {f"env/{k}": _mean([row.get(k, 0.0) for row in rows]) for k in names}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def step_metrics(
    step: int,
    rollouts: Sequence[Rollout],
    report: StepReport,
    coevo: CoEvolution,
    before: CostLedger,
    *,
    episodes: bool = True,
    tools: Sequence[str] = (),
) -> dict[str, float]:
    """The metrics line of one INSPO step (names in the module docstring); ``before`` is the
    cost ledger before the step, ``tools`` the environment's tool names."""
    ok = scored(rollouts)
    rewards = [r.reward for r in ok]
    ledger = coevo.ledger
    weights = report.weights
    errors = len(rollouts) - len(ok)
    out: dict[str, float] = {
        "step": step,
        "reward/mean": _mean(rewards),
        "reward/std": _std(rewards),
        "rollout/errors": float(errors),
        "inspo/error_rate": errors / len(rollouts) if rollouts else 0.0,
    }
    if episodes:
        out.update(
            {
                "rollout/tool_calls": _mean([float(len(r.tool_calls)) for r in ok]),
                "rollout/tool_errors": _mean([r.metrics.get("n_tool_errors", 0.0) for r in ok]),
                "rollout/obs_truncated": _mean([r.metrics.get("n_obs_truncated", 0.0) for r in ok]),
                **{
                    f"rollout/{tool}_calls": _mean([float(len(r.calls_of(tool))) for r in ok])
                    for tool in tools
                },
                "rollout/turns": _mean([float(r.turns) for r in ok]),
                "rollout/prompt_tokens": _mean([r.metrics.get("n_prompt_tokens", 0.0) for r in ok]),
                "rollout/completion_tokens": _mean([r.metrics.get("n_tokens", 0.0) for r in ok]),
                "rollout/answered": _mean([float(r.finish_reason == "answer") for r in ok]),
                **{
                    f"rollout/finish/{reason}": _mean(
                        [float(r.finish_reason == reason) for r in rollouts]
                    )
                    for reason in FINISH_REASONS
                },
                "rollout/count": float(len(rollouts)),
            }
        )
    out.update(
        {
            "inspo/population_size": float(len(coevo.population)),
            "inspo/best_weight": max(weights.values()) if weights else 0.0,
            "inspo/admitted": float(len(report.admitted)),
            "inspo/rejected": float(ledger.candidates_rejected - before.candidates_rejected),
            "inspo/pruned": float(len(report.pruned)),
            "inspo/optimizer_calls": float(ledger.optimizer_calls),
            "inspo/verification_rollouts": float(ledger.verification_rollouts),
        }
    )
    out.update({f"inspo/weight/{k}": float(v) for k, v in weights.items()})
    return out


# ------------------------------------------------------------------------------ step 6


def step_line(metrics: dict[str, float], total: int) -> str:
    """A one-line progress report of a step."""
    parts = [f"step {int(metrics['step'])}/{total}", f"reward {metrics['reward/mean']:.3f}"]
    if "rollout/tool_calls" in metrics:
        parts.append(f"tool calls {metrics['rollout/tool_calls']:.2f}")
    parts += [
        f"population {int(metrics['inspo/population_size'])}",
        f"best w {metrics['inspo/best_weight']:.3f}",
    ]
    if metrics.get("rollout/errors"):
        parts.append(f"errors {int(metrics['rollout/errors'])} (not scored)")
    if metrics.get("inspo/pruned"):
        parts.append(f"pruned {int(metrics['inspo/pruned'])}")
    if metrics.get("inspo/admitted") or metrics.get("inspo/rejected"):
        parts.append(
            f"admitted {int(metrics['inspo/admitted'])} rejected {int(metrics['inspo/rejected'])}"
        )
    if "loss" in metrics:
        parts.append(f"loss {metrics['loss']:.4f}")
    if "system/rss_gib" in metrics:
        more = [
            f"{name} {metrics[f'system/{key}']:.1f}"
            for name, key in (("peak", "peak_rss_gib"), ("released", "released_gib"))
            if f"system/{key}" in metrics
        ]
        parts.append(
            f"memory {metrics['system/rss_gib']:.1f} GiB"
            + (f" ({', '.join(more)})" if more else "")
        )
    return " | ".join(parts)


class MetricsLog:
    """A run's ``metrics.jsonl``: :meth:`write` appends a step's line, keeps it in ``history``
    and shows its progress line (through tqdm, above any bar, with ``progress``; else to the
    ``inspo.training`` log). ``read_existing`` starts ``history`` with the lines already there (a
    resumed run). With ``release_memory`` each write first hands freed memory back to the OS
    (:func:`inspo.training.memory.release_memory`; training and ``inspo evolve``, whose steps take
    minutes, not the demo's)."""

    def __init__(
        self,
        path: str | Path,
        total_steps: int,
        *,
        progress: bool,
        read_existing: bool = False,
        release_memory: bool = False,
    ):
        self.path = Path(path)
        self.total_steps = total_steps
        self.progress = progress
        self.release_memory = release_memory
        self.history: list[dict[str, Any]] = (
            artifacts.read_jsonl(self.path) if read_existing else []
        )

    def write(self, line: dict[str, Any]) -> None:
        line = {**line, **memory_metrics(release=self.release_memory)}
        artifacts.append_jsonl(self.path, line)
        self.history.append(line)
        text = step_line(line, self.total_steps)
        if self.progress:
            from tqdm.auto import tqdm

            tqdm.write(text)
        else:
            log.info(text)
