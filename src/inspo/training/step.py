"""One INSPO step ``t``, in one place: Algorithm 1's lines 4-24 as two halves around the policy
update (:class:`InspoStep`).

1. **questions**: the step's ``questions_per_step`` training questions, each ``G`` times in a row
   (``inspo train``: TRL's sampler deals the rows to the processes; ``inspo evolve``: a seeded
   order, :func:`inspo.training.evolve.step_questions`);
2. :meth:`InspoStep.play` (lines 4-5): :func:`choose_groups` gives every question group one
   instruction, ``coevo.choose(t, question id)``, the same on every process; the agent plays every
   row with the current policy in its environment (:func:`inspo.envs.loop.run_rollouts`); rewards
   are the environment's, read from the response only, and :func:`rescore` applies a custom
   :data:`RewardFn`;
3. **the policy update** (lines 6-8): in ``inspo train`` TRL turns the rewards into group
   advantages and makes ``mini_batches`` optimizer updates; ``inspo evolve`` has none (a frozen
   policy);
4. :meth:`InspoStep.finish` (lines 9-24), after the step's last update, on the main process with
   every process's rollouts: ``sampled`` events for the groups only other processes drew, then
   ``coevo.update`` (Eq. 6 attribution, pruning, the replay buffer, evolution with candidates
   verified by the current policy through
   :func:`~inspo.training.evaluators.verification_evaluate`), then the step's metrics line
   (:mod:`inspo.training.metrics`);
5. **records**: the driver appends the line to ``metrics.jsonl``
   (:class:`~inspo.training.metrics.MetricsLog`) and saves: ``inspo train`` broadcasts the
   population so every process holds the same one and puts the core state in its checkpoints;
   ``inspo evolve`` rewrites ``inspo_state.json``.

TRL owns its training loop, so ``inspo train`` calls the halves from TRL's hooks
(:mod:`inspo.training.grpo_trainer`: ``rollout_func`` calls :meth:`~InspoStep.play`, the
callback's ``on_step_end`` calls :meth:`~InspoStep.finish`); ``inspo evolve`` calls them in its own
loop, and ``inspo demo`` (:mod:`inspo.demo`) ends each step with :func:`finish_step` on the
synthetic environment: all three write one ``metrics.jsonl`` schema. Step 0 (the core and P_0
from warm-up rollouts of the seed) is :mod:`inspo.training.build_core`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from inspo.core.accounting import CostLedger
from inspo.core.coevolution import CoEvolution, StepReport
from inspo.core.events import Sampled
from inspo.envs.evaluate import play_isolated
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.records import EndpointDown, EvaluateFn, Question, Rollout, TooManyErrors
from inspo.training.metrics import env_means, step_metrics

#: Replaces the environment's response-only reward of a rollout (e.g. a learned verifier or a test's
#: scripted reward). It must read the response, never the prompt, and return a float.
RewardFn = Callable[[Rollout], float]


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


@dataclass
class Played:
    """What :meth:`InspoStep.play` played: the rollouts (one per row, in order) and the groups,
    ``[(question id, instruction id), ...]``."""

    rollouts: list[Rollout]
    groups: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class InspoStep:
    """Algorithm 1's step for one run: :meth:`play` before the policy update, :meth:`finish` after
    it (module docstring)."""

    coevo: CoEvolution
    env: Any
    """The agent's environment (:class:`~inspo.envs.base.Environment`)."""
    agent: AgentConfig
    reward_fn: RewardFn | None = None

    def play(
        self, t: int, rows: Sequence[Question], engine: Any, *, isolated: bool = False
    ) -> Played:
        """Lines 4-5: one instruction per question group of ``rows``, then every row played with
        ``engine`` (the current policy), rewarded from the response alone.

        ``isolated`` (``inspo evolve``): an episode that raises becomes an error rollout
        (:func:`~inspo.envs.evaluate.play_isolated`), counted and never scored. Otherwise
        (training) an outage, :class:`~inspo.records.EndpointDown`, stops the step with
        :class:`~inspo.records.TooManyErrors`: a batch that could not be played has no honest
        reward, and TRL cannot leave rows out of a step. Any other exception propagates."""
        instructions, groups = choose_groups(self.coevo, t, rows)
        episodes = [Episode(q, ins) for q, ins in zip(rows, instructions, strict=True)]
        if isolated:
            rollouts = play_isolated(engine, self.env, self.agent, episodes)
        else:
            try:
                rollouts = run_rollouts(engine, self.env, self.agent, episodes)
            except EndpointDown as exc:
                raise TooManyErrors(
                    f"the {len(episodes)} training rollouts of step {t} failed ({exc}): "
                    "stopping; fix the endpoint, then continue with --resume"
                ) from exc
        return Played(rescore(rollouts, self.reward_fn), groups)

    def finish(
        self,
        t: int,
        rollouts: Sequence[Rollout],
        evaluate: EvaluateFn | None,
        *,
        sampled: set[str] | None = None,
    ) -> StepEnd:
        """Lines 9-24 on every rollout of the step (:func:`finish_step`), with the environment's
        tools and metrics in the step's line."""
        return finish_step(
            self.coevo,
            t,
            rollouts,
            evaluate,
            sampled=sampled,
            tools=list(self.env.tools),
            env_metrics=self.env.metrics,
        )


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
