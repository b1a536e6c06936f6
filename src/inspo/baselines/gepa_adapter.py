"""GEPA on any inspo agent: the `gepa` package's optimizer evolving the same instruction, with the
same frozen policy, environment (tools, protocol, reward) that ``inspo evolve`` uses.

GEPA (Agrawal et al., 2025) keeps a Pareto front of candidates over a validation set, mutates
one candidate per iteration by reflecting on a minibatch, and accepts the child only when it
beats its parent on that minibatch. This module plugs inspo's agent into it:

- :class:`AgentAdapter` is a ``gepa.GEPAAdapter``: ``evaluate`` plays one rollout per
  question under ``candidate["instruction"]`` in the environment (the score is the rollout's
  reward; an empty proposal is not raised, as GEPA's contract asks, but scores 0 with the agent's
  error recorded) and counts the rollouts it played; ``make_reflective_dataset`` turns them into
  GEPA's reflective records (question, response, correct answers, reward, and the environment's
  line of feedback, ``env.feedback``: the seam mirrors GEPA's adapter for this reason).
- :func:`inspo_reflection_proposer` is a GEPA ``custom_candidate_proposer`` that writes INSPO's
  App. E reflection prompt from those records, calls an inspo
  :class:`~inspo.core.optimizer_llm.LLMClient` once, and keeps the first candidate that passes
  INSPO's guard. With it both optimizers share
  the reflection step (even the offline rule-based reflector), and only the search differs.
- :func:`gepa_reflection_lm` wraps an inspo ``LLMClient`` as GEPA's ``reflection_lm``, for GEPA
  with its own reflection prompt. The records and both reflections live in
  :mod:`inspo.baselines.gepa_reflection` (importable from here too).
- :class:`ProposalLog` is a GEPA callback that keeps every proposal GEPA went on to evaluate (its
  parent, the answers its reflection was shown, accepted or not), and :func:`proposal_yield` says
  what INSPO's guard and leak check would have made of them: GEPA has neither, so this is how its
  optimizer's yield compares with INSPO's. Both live in :mod:`inspo.baselines.gepa_proposals`
  (importable from here too).

``gepa`` is imported only by :func:`optimize_instruction` (``pip install inspo[gepa]``). Where a
run saved in a folder stands is :func:`inspo.baselines.gepa_saved.saved_progress`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inspo.baselines.gepa_proposals import (  # noqa: F401 (proposal_yield: re-exported from its old home)
    COMPONENT,
    GEPAProposal,
    ProposalLog,
    proposal_yield,
)
from inspo.baselines.gepa_reflection import (
    ProposerStats,
    gepa_reflection_lm,
    inspo_reflection_proposer,
    reflective_record,
)
from inspo.baselines.gepa_saved import GEPA_STOP_FILE, STATE_FILE, GEPAStreams, saved_progress
from inspo.core.optimizer_llm import LLMClient
from inspo.engines.base import PolicyEngine
from inspo.envs.evaluate import make_evaluate
from inspo.envs.loop import AgentConfig
from inspo.records import Instruction, Question, RunStopped
from inspo.rng import derived_rng

PROPOSALS_FILE = "proposals.jsonl"
log = logging.getLogger("inspo.gepa")


class AgentAdapter:
    """A ``gepa.GEPAAdapter`` over an inspo agent: a multi-turn policy in an environment.

    Args:
        engine: the frozen policy.
        env: the agent's environment (:class:`~inspo.envs.base.Environment`): tools, protocol,
            reward, feedback.
        agent: how episodes are played (turns, tokens, sampling).
        batch_size: episodes per batched ``generate`` call.
        seed: each ``evaluate`` call samples from a stream derived from (seed, call number), so
            a run is reproducible.
    """

    propose_new_texts = None  # GEPA checks this attribute: reflection is done elsewhere

    def __init__(
        self,
        engine: PolicyEngine,
        env: Any,
        agent: AgentConfig,
        *,
        batch_size: int = 16,
        seed: int = 0,
    ):
        self.engine = engine
        self.env = env
        self.agent = agent
        self.seed = seed
        self.calls = 0
        self.rollouts = 0
        self.replayed = 0  # rollouts a resumed run played again before its saved state was restored
        # set by optimize_instruction: the optimizer calls this process made, and the inspo
        # proposer's stats
        self.calls_now: Callable[[], int] = lambda: 0
        self.proposer: ProposerStats | None = None
        self.calls_before = (
            0  # optimizer calls of the runs before a resume (restored with the state)
        )
        self.streams: GEPAStreams | None = None  # set by optimize_instruction: saved with the state
        self.resume_exact: bool | None = None  # after a resume: do the streams go on as unbroken?
        self.saved_before_first = (
            False  # set by optimize_instruction: the state resumed is the i=-1 one
        )
        self._evaluate = make_evaluate(engine, env, agent, group_size=1, batch_size=batch_size)

    def reflection_calls(self) -> int:
        """Optimizer LLM calls over every run of this optimisation."""
        return self.calls_before + self.calls_now()

    def get_adapter_state(self) -> dict[str, Any]:
        """What GEPA saves with its state in ``run_dir`` each iteration (GEPA's adapter-state
        hook)."""
        return {
            "calls": self.calls,
            "rollouts": self.rollouts,
            "reflection_calls": self.reflection_calls(),
            "proposer": asdict(self.proposer) if self.proposer else None,
            "streams": self.streams.state_dict() if self.streams else None,
        }

    def set_adapter_state(self, state: Mapping[str, Any]) -> None:
        """Restore the counters a resumed GEPA run saved: the sampling stream goes on from the saved
        call number, the optimizer calls and the proposer's stats go on from the saved ones, and the
        rollouts played since the restart (GEPA re-scores its seed on the validation set before it
        loads the state) are counted apart as ``replayed``. GEPA's generator, its batch sampler and
        the optimizer's stream (:class:`GEPAStreams`) go on from the saved ones; a state saved
        without them (by an older inspo) leaves them restarted from the seed, and says so, unless
        it was saved before GEPA's first iteration, when nothing had drawn from them yet."""
        if not state:  # a new run: GEPA restores an empty state
            return
        saved_streams = state.get("streams")
        self.resume_exact = bool(saved_streams and self.streams) or self.saved_before_first
        if saved_streams and self.streams:
            self.streams.load_state_dict(saved_streams)
        elif not self.saved_before_first:
            log.warning(
                "GEPA: the saved state has no random streams (saved by an older inspo): "
                "minibatches, parents and optimizer samples restart from the seed, so this resumed "
                "run is not the one an unbroken run would have been"
            )
        self.replayed += self.rollouts
        self.calls, self.rollouts = int(state["calls"]), int(state["rollouts"])
        self.calls_before = int(
            state.get("reflection_calls", 0)
        )  # GEPA restores before its first reflection
        if self.proposer is not None and state.get("proposer"):
            for name, value in state[
                "proposer"
            ].items():  # in place: the proposer holds this object
                setattr(self.proposer, name, value)

    def evaluate(
        self, batch: list[Question], candidate: dict[str, str], capture_traces: bool = False
    ):
        from gepa import EvaluationBatch

        text = candidate.get(COMPONENT)
        if not isinstance(text, str):  # a wiring error; an empty proposal scores 0 in the agent
            raise ValueError(
                f"AgentAdapter: the candidate has no {COMPONENT!r} text: {candidate!r}"
            )
        self.calls += 1
        if hasattr(self.engine, "rng"):
            self.engine.rng = derived_rng(self.seed, "gepa-evaluate", self.calls)
        rollouts = self._evaluate(
            Instruction(id=f"gepa-{self.calls}", text=text, origin="gepa"), batch
        )
        self.rollouts += len(rollouts)
        return EvaluationBatch(
            outputs=[r.response for r in rollouts],
            scores=[float(r.reward) for r in rollouts],
            trajectories=rollouts if capture_traces else None,
        )

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch, components_to_update: list[str]
    ):
        records = [reflective_record(r, self.env) for r in eval_batch.trajectories or []]
        return {name: records for name in components_to_update}


@dataclass
class GEPAOutcome:
    """What :func:`optimize_instruction` returns."""

    best_instruction: str
    best_val_score: float
    candidates: int
    rollouts: int
    metric_calls: int
    full_val_evals: int
    proposer: ProposerStats | None
    reflection_calls: int = 0  # optimizer LLM calls, over every run of a resumed optimisation
    resumed: bool = False  # continued from the state saved in run_dir
    replayed_rollouts: int = (
        0  # played again on resuming, outside GEPA's budget (``rollouts`` excludes them)
    )
    # resumed with GEPA's saved streams and the optimizer's where it has a sampling_rng (None: not
    # resumed); an endpoint optimizer samples on its server, so its answers are new draws either way
    resume_exact: bool | None = None
    proposals: list[GEPAProposal] = field(default_factory=list)  # every piece's, see ProposalLog
    proposal_log_errors: list[str] = field(
        default_factory=list
    )  # failed ProposalLog hooks, every piece's


def optimize_instruction(
    adapter: AgentAdapter,
    seed_instruction: str,
    trainset: list[Question],
    valset: list[Question],
    *,
    max_rollouts: int,
    llm: LLMClient,
    reflection: str = "inspo",
    minibatch_size: int = 3,
    n_candidates: int = 3,
    temperature: float = 1.0,
    max_tokens: int = 2048,
    guard_tags: Sequence[str] | None = None,
    seed: int = 0,
    run_dir: str | None = None,
    resume: bool = False,
    stop_file: str | Path | None = None,
) -> GEPAOutcome:
    """Run ``gepa.optimize`` on the instruction with a budget of ``max_rollouts`` policy rollouts.

    ``reflection`` is ``inspo`` (INSPO's App. E prompt through :func:`inspo_reflection_proposer`)
    or ``gepa`` (GEPA's own reflection prompt, ``llm`` as its ``reflection_lm``). GEPA checks
    the budget between iterations, so the last iteration may overshoot it by up to one minibatch
    pair plus one validation pass; ``rollouts`` is what was actually played. ``temperature`` and
    ``max_tokens`` apply to every reflection call and ``guard_tags`` to the ``inspo`` proposer's
    guard (give both optimizers the same; None: the environment's required tags).

    ``run_dir`` is GEPA's own folder: its log (``gepa.log``), the state GEPA saves before every
    iteration (``gepa_state.bin``, with the adapter's counters) and the proposals
    (``proposals.jsonl``, :class:`ProposalLog`). A new run removes an earlier run's state, proposals
    and outputs there first; ``resume=True`` continues the run saved there instead (starting one
    when none was saved). A resumed run keeps its candidates, Pareto front, budget used, proposals,
    the adapter's sampling stream, GEPA's generator and batch sampler (which this function builds,
    as GEPA's defaults, so that they are saved: :class:`GEPAStreams`) and ``llm``'s sampling stream
    where it has a ``sampling_rng``: it is the run an unbroken one would have been. A state saved by
    an older inspo lacks the streams; it resumes with them restarted (``resume_exact`` False, unless
    it was saved before GEPA's first iteration, when nothing had drawn from them).

    ``stop_file`` (and GEPA's own ``run_dir/gepa.stop``): when it is there before an iteration,
    GEPA saves and stops, and this raises :class:`~inspo.records.RunStopped` (the file removed)
    rather than return a run that has not spent its budget; ``resume=True`` goes on.
    """
    import random

    import gepa
    from gepa.strategies.batch_sampler import EpochShuffledBatchSampler
    from gepa.strategies.candidate_selector import ParetoCandidateSelector
    from gepa.utils.stop_condition import FileStopper

    _check_budget(reflection, minibatch_size, max_rollouts, len(valset))
    stats, kwargs = _reflection(
        reflection, llm, n_candidates, temperature, max_tokens, guard_tags, adapter.env
    )
    resumed, proposal_log = _prepare_run_dir(run_dir, resume, stop_file)
    rng = random.Random(seed)  # what gepa.optimize would build from seed, held here so it is saved
    sampler = EpochShuffledBatchSampler(minibatch_size=minibatch_size, rng=rng)
    _start_adapter(adapter, llm, stats, GEPAStreams(rng, sampler, llm), run_dir, resumed)
    logger = _gepa_log(run_dir, resumed)
    result = gepa.optimize(
        seed_candidate={COMPONENT: seed_instruction},
        trainset=trainset,
        valset=valset,
        adapter=adapter,
        max_metric_calls=max_rollouts,
        batch_sampler=adapter.streams.sampler,
        candidate_selection_strategy=ParetoCandidateSelector(rng=rng),
        seed=seed,
        logger=logger,
        run_dir=run_dir,
        display_progress_bar=False,
        # GEPA's default, pinned: ProposalLog pairs each proposal with its iteration's start
        use_merge=False,
        callbacks=[proposal_log],
        stop_callbacks=[FileStopper(str(stop_file))] if stop_file is not None else None,
        **kwargs,
    )
    spent = _budget_spent(result, adapter, max_rollouts, stop_file, run_dir)
    return _outcome(result, adapter, spent, stats, resumed, proposal_log)


def _check_budget(reflection: str, minibatch_size: int, max_rollouts: int, n_val: int) -> None:
    """Refuse an unknown ``reflection``, an empty minibatch, and a budget that cannot pay for one
    pass over the ``n_val`` validation questions."""
    if reflection not in ("inspo", "gepa"):
        raise ValueError(f"reflection must be 'inspo' or 'gepa', got {reflection!r}")
    if minibatch_size < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
    if max_rollouts < n_val:
        raise ValueError(
            f"max_rollouts={max_rollouts} cannot even cover one pass over the {n_val} "
            "validation questions"
        )


def _reflection(
    reflection: str,
    llm: LLMClient,
    n_candidates: int,
    temperature: float,
    max_tokens: int,
    guard_tags: Sequence[str] | None,
    env: Any,
) -> tuple[ProposerStats | None, dict[str, Any]]:
    """``gepa.optimize``'s reflection argument for ``reflection`` (``inspo``: INSPO's proposer,
    guarding with ``guard_tags``, by default ``env``'s required tags, with the stats it keeps;
    ``gepa``: ``llm`` as GEPA's ``reflection_lm``, no stats)."""
    if guard_tags is None:
        guard_tags = tuple(env.required_tags)
    stats: ProposerStats | None = None
    if reflection == "inspo":
        stats = ProposerStats()
        kwargs: dict[str, Any] = {
            "custom_candidate_proposer": inspo_reflection_proposer(
                llm,
                n_candidates=n_candidates,
                temperature=temperature,
                max_tokens=max_tokens,
                guard_tags=guard_tags,
                stats=stats,
            )
        }
    else:
        kwargs = {
            "reflection_lm": gepa_reflection_lm(llm, temperature=temperature, max_tokens=max_tokens)
        }
    return stats, kwargs


def _prepare_run_dir(
    run_dir: str | None, resume: bool, stop_file: str | Path | None
) -> tuple[bool, ProposalLog]:
    """Check that resuming and a stop file have a ``run_dir``; for a new run, remove an earlier
    run's state, outputs and proposals there. Returns whether a saved state is resumed, and the
    proposal log."""
    if resume and not run_dir:
        raise ValueError("resume=True needs the run_dir the run was saved in")
    if stop_file is not None and not run_dir:
        raise ValueError(
            "stop_file needs a run_dir: a stopped run resumes from the state GEPA saves there"
        )
    state_file = Path(run_dir) / STATE_FILE if run_dir else None
    resumed = bool(resume and state_file and state_file.is_file())
    if (
        state_file and not resume
    ):  # a new run: GEPA would resume an earlier run's state, so remove it
        state_file.unlink(missing_ok=True)
        shutil.rmtree(state_file.parent / "generated_best_outputs_valset", ignore_errors=True)
    proposal_log = ProposalLog(Path(run_dir) / PROPOSALS_FILE if run_dir else None)
    if (
        proposal_log.path is not None and not resumed
    ):  # no saved state to go on from: its proposals go too
        proposal_log.path.unlink(missing_ok=True)
    return resumed, proposal_log


def _start_adapter(
    adapter: AgentAdapter,
    llm: LLMClient,
    stats: ProposerStats | None,
    streams: GEPAStreams,
    run_dir: str | None,
    resumed: bool,
) -> None:
    """Set what the adapter saves with GEPA's state for this run: the optimizer calls made from
    now on, the proposer's stats and the random streams; whether a resumed state is the one saved
    before GEPA's first iteration."""
    started_at = llm.usage.calls
    adapter.calls_now, adapter.proposer, adapter.calls_before = (
        (lambda: llm.usage.calls - started_at),
        stats,
        0,
    )
    adapter.streams = streams
    adapter.resume_exact = None
    adapter.saved_before_first = resumed and saved_progress(run_dir).iteration < 0


def _gepa_log(run_dir: str | None, resumed: bool) -> _LogLines:
    """GEPA's logger for this run (``run_dir/gepa.log``, appended to when resumed). Says that a
    saved run is resumed, and warns when a stop file already waits in ``run_dir``."""
    logger = _LogLines(Path(run_dir) / "gepa.log" if run_dir else None, append=resumed)
    if resumed:
        log.info("GEPA: resuming the run saved in %s", run_dir)
    if run_dir and (Path(run_dir) / GEPA_STOP_FILE).exists():
        log.warning(
            "GEPA: %s is there: GEPA stops before its next iteration (RunStopped, the file "
            "removed)",
            Path(run_dir) / GEPA_STOP_FILE,
        )
    return logger


def _budget_spent(
    result: Any,
    adapter: AgentAdapter,
    max_rollouts: int,
    stop_file: str | Path | None,
    run_dir: str | None,
) -> int:
    """The rollouts GEPA spent. When that is short of ``max_rollouts``, a stop file ended GEPA:
    the stop files are removed and :class:`~inspo.records.RunStopped` raised."""
    spent = int(result.total_metric_calls or adapter.rollouts)
    if spent >= max_rollouts:
        return spent
    # only a stop file ends GEPA before its budget: not a finished run
    stops = [
        Path(p)
        for p in (stop_file, Path(run_dir) / GEPA_STOP_FILE if run_dir else None)
        if p is not None
    ]
    found = [str(p) for p in stops if p.exists()]
    for p in stops:
        p.unlink(missing_ok=True)
    raise RunStopped(
        f"GEPA stopped as asked ({', '.join(found) or 'a stop file'} was there, now removed) "
        f"with {spent} of {max_rollouts} rollouts spent, its state saved in {run_dir}; "
        "the same command with --resume continues"
    )


def _outcome(
    result: Any,
    adapter: AgentAdapter,
    spent: int,
    stats: ProposerStats | None,
    resumed: bool,
    proposal_log: ProposalLog,
) -> GEPAOutcome:
    """The :class:`GEPAOutcome` of a finished ``gepa.optimize`` run."""
    best = result.best_candidate
    return GEPAOutcome(
        best_instruction=best[COMPONENT] if isinstance(best, dict) else str(best),
        best_val_score=float(result.val_aggregate_scores[result.best_idx]),
        candidates=len(result.candidates),
        rollouts=adapter.rollouts,
        metric_calls=spent,
        full_val_evals=int(result.num_full_val_evals or 0),
        proposer=stats,
        reflection_calls=adapter.reflection_calls(),
        resumed=resumed,
        replayed_rollouts=adapter.replayed,
        resume_exact=adapter.resume_exact if resumed else None,
        proposals=proposal_log.proposals(),
        proposal_log_errors=proposal_log.errors(),
    )


class _LogLines:
    """GEPA's logger: its messages go to a file (one per line) or to the debug log."""

    def __init__(self, path: Path | None, *, append: bool = False):
        self.path = path
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not append:
                path.write_text("", encoding="utf-8")

    def log(self, message: str) -> None:
        if self.path is None:
            log.debug("gepa: %s", message)
            return
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"{message}\n")
