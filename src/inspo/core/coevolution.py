"""Algorithm 1 of the paper: the instruction side of INSPO, trainer-agnostic.

A trainer (TRL's GRPO, a frozen API policy, a synthetic test environment) drives it like this::

    coevo.initialize(evaluate, warmup_questions)             # line 2: P_0 from the seed
    for t in range(1, T + 1):                                # line 3
        groups = [(q, coevo.choose(t, q.id)) for q in batch] # line 5: I_j ~ p(.|W; P)
        rollouts = generate(groups)                          # lines 6-7: G trajectories, rewards
        update_policy(rollouts)                              # line 8: theta_t (the trainer's job)
        coevo.update(t, rollouts, evaluate)                  # lines 9-24, below

``evaluate(instruction, questions) -> list[Rollout]`` must use the *current* policy: it is how
new candidates are verified on D_B (see :mod:`inspo.core.verifier` for its rules).

Every event goes out through :meth:`CoEvolution.emit`, which feeds the cost ledger
(:class:`~inspo.core.accounting.CostLedger` counts what the events say) before the event log
writes it; the loop below holds no accounting of its own.

Everything random goes through ``self.rng`` (parents, failures, D_B) or, for the per-group
choice of an instruction, through an RNG derived from (seed, step, question id, population
version), so every process holding the same state picks the same instruction for a group.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from inspo.core.accounting import CostLedger
from inspo.core.config import CoEvolutionConfig, SettingChange, resume_changes
from inspo.core.events import (
    Attributed,
    Event,
    EventLog,
    EvolutionFinished,
    EvolutionStarted,
    OptimizerFailed,
    Proposed,
    Pruned,
    Sampled,
    SettingsChanged,
    WarmedUp,
    Weights,
)
from inspo.core.leak_scope import NamesFn, names_problem
from inspo.core.paired_credit import PairedRecord, challenger_pair
from inspo.core.population import Population, survivors_after_halving
from inspo.core.proposer import Proposal, Proposer
from inspo.core.replay import ReplayBuffer
from inspo.core.schedule import is_evolve_step, is_prune_step
from inspo.core.templates import ScoredInstruction
from inspo.core.validation import EvolutionBar
from inspo.core.verifier import EvaluateFn
from inspo.core.verify_round import VerifyRound
from inspo.records import Instruction, Question, Rollout, scored
from inspo.rng import derived_rng, rng_from_json, rng_to_json

# --------------------------------------------------------------------------------------------
# The loop's state
# --------------------------------------------------------------------------------------------


@dataclass
class StepReport:
    """What :meth:`CoEvolution.update` did at one step."""

    step: int
    weights: dict[str, float]
    pruned: list[str] = field(default_factory=list)
    evolved: bool = False
    admitted: list[str] = field(default_factory=list)
    population: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InitRounds:
    """Where the initial population stood when its last round was saved (``initialize``'s
    ``after_round``): the rounds played, the last optimizer failure's reason, and how many events
    the log held then (a resumed run keeps exactly those, see
    :meth:`CoEvolution.continue_initialize`)."""

    rounds: int
    reason: str = ""
    events: int = 0


class CoEvolution(VerifyRound):
    """The population, the replay buffer and the optimizer, on Algorithm 1's schedule.

    ``leak_terms(question)`` gives the texts a candidate must not contain once its optimizer call
    has seen ``question`` (the environment's; default: the gold answers). ``validation_pool`` (the
    training questions): under ``validation_from: train`` D_B is drawn from it instead of the
    replay buffer, so a D_B of 64 exists from step 0, when the buffer holds only the warm-up.
    ``held_out`` (the dev and test questions) and ``names`` (the environment's
    ``names_problem``) serve ``leak_scope: held-out`` (:mod:`inspo.core.leak_scope`)."""

    SCHEMA_VERSION = (
        3  # 2: observations carry step and rollout count, members a prior; 3: init, proposer
    )
    READS = (2, 3)  # a version-2 state has no "init": it was saved after the initial population

    def __init__(
        self,
        config: CoEvolutionConfig,
        seed_instruction: str,
        proposer: Proposer,
        *,
        events: EventLog | None = None,
        rng: random.Random | None = None,
        leak_terms: Callable[[Question], Sequence[str]] | None = None,
        validation_pool: Sequence[Question] = (),
        held_out: Sequence[Question] = (),
        names: NamesFn | None = None,
    ):
        self.config = config
        self.validation_pool = list(validation_pool)
        self.held_out = list(held_out)
        self.names = names if names is not None else names_problem
        if (
            config.validation_from == "train"
            and config.evolve
            and config.verify
            and not self.validation_pool
        ):
            raise ValueError(
                "coevolution.validation_from is train, and no training questions were given to "
                "draw D_B from: pass CoEvolution(..., validation_pool=questions), or set "
                "validation_from: buffer"
            )
        self.proposer = proposer
        self.leak_terms = leak_terms if leak_terms is not None else (lambda q: q.answers)
        self.events = events if events is not None else EventLog()
        self.rng = rng if rng is not None else random.Random(config.rng_seed)
        self.population = Population(
            config.population_size,
            config.weight_window,
            config.tau_s,
            min_evidence=config.min_evidence,
            prior_rollouts=config.prior_rollouts,
            fair_share=config.fair_share,
        )
        self.buffer = ReplayBuffer(config.replay_capacity)
        self.ledger = CostLedger()
        self.paired = PairedRecord()
        self.bar: EvolutionBar | None = None  # admission: paired's D_B of the evolution under way
        self.last_step = 0
        self.init: InitRounds | None = None  # set while the initial population is being built
        self._next_id = 0
        self.population.add(Instruction(id=self._new_id(), text=seed_instruction, origin="seed"))

    # ---------------------------------------------------------------------------- line 2
    def initialize(
        self,
        evaluate: EvaluateFn | None = None,
        warmup: Sequence[Question] = (),
        *,
        after_round: Callable[[], None] | None = None,
    ) -> None:
        """Build P_0 from the seed: roll the seed out on ``warmup`` questions to fill the
        buffer (the reflection needs failures to look at), then refill the population with
        verified candidates exactly as an evolution round does.

        ``after_round`` is called at round 0 (after the warm-up, if any) and after each optimizer
        round, with :attr:`init` saying how far the build got, so the caller can save the state
        there (a run stopped inside the initial population then continues with
        :meth:`continue_initialize`); never under ``init_population=False``."""
        seed = self.population.instructions[0]
        if evaluate is not None and warmup:
            played = evaluate(seed, list(warmup))
            rollouts = scored(played)  # error rollouts are not the seed's answers: never scored
            mean = sum(r.reward for r in rollouts) / len(rollouts) if rollouts else 0.0
            self.emit(
                WarmedUp(
                    0,
                    instruction_id=seed.id,
                    n_rollouts=len(played),
                    mean_reward=mean,
                    n_errors=len(played) - len(rollouts),
                )
            )
            self.buffer.add(0, rollouts)
            if rollouts:  # the seed's prior under the evidence rules: its warm-up mean
                self.population.set_prior(seed.id, mean)
        if self.config.init_population:
            self.emit(
                EvolutionStarted(0, parents=(seed.id,), target_size=self.config.population_size)
            )
            self._build(evaluate, InitRounds(0), after_round)

    def continue_initialize(
        self, evaluate: EvaluateFn | None = None, *, after_round: Callable[[], None] | None = None
    ) -> None:
        """Finish the initial population a saved state stopped inside (:attr:`init` set by
        ``initialize``'s ``after_round``): the rounds left, as the uninterrupted run would play
        them. The caller first cuts its event log back to ``init.events`` lines."""
        if self.init is None:
            raise ValueError(
                "continue_initialize: this state was saved after the initial population was built "
                "(init is None): there is nothing to continue"
            )
        self._build(evaluate, self.init, after_round)

    def _build(
        self, evaluate: EvaluateFn | None, start: InitRounds, after_round: Callable[[], None] | None
    ) -> None:
        seed = next(i for i in self.population.instructions if i.origin == "seed")

        def saved(rounds: int, reason: str) -> None:
            if (
                after_round is not None
            ):  # the event count reads the log: only for a caller that saves
                self.init = InitRounds(rounds, reason, self.events.count())
                after_round()

        self.init = start
        if start.rounds == 0:
            saved(0, "")  # the warm-up's rollouts are the slow part before round 1
        self._refill(0, [seed], evaluate, start=start, after_round=saved)
        self.init = None

    # ---------------------------------------------------------------------------- line 5
    def choose(self, step: int, question_id: str) -> Instruction:
        """I_j ~ softmax(W / tau_s) for one question group, the same on every process."""
        rng = derived_rng(self.config.rng_seed, step, question_id, self.population.version)
        instruction = self.population.sample(rng)
        self.emit(Sampled(step, question_id=question_id, instruction_id=instruction.id))
        return instruction

    def choose_split(self, step: int, question_id: str) -> list[Instruction]:
        """Line 5 under paired credit (``split_groups``, :mod:`inspo.core.paired_credit`): the
        champion and a challenger, to share the group half and half; one instruction
        (:meth:`choose`) when the setting is off or the population holds one member."""
        if not self.config.split_groups or len(self.population) < 2:
            return [self.choose(step, question_id)]
        rng = derived_rng(self.config.rng_seed, step, question_id, self.population.version, "split")
        pop = self.population
        pair = challenger_pair(
            [m.instruction for m in pop.members], pop.probabilities(), pop.best(), rng
        )
        for instruction in pair:
            self.emit(Sampled(step, question_id=question_id, instruction_id=instruction.id))
        return list(pair)

    # ---------------------------------------------------------------------------- lines 9-24
    def update(
        self, step: int, rollouts: Sequence[Rollout], evaluate: EvaluateFn | None
    ) -> StepReport:
        """Credit the step's rewards, then prune and evolve on schedule. Error rollouts (``error``
        set: an outage, not the policy's answer) credit no weight and stay out of the buffer."""
        cfg = self.config
        if self.init is not None:
            raise ValueError(
                "update: the initial population is unfinished (a state saved inside it): "
                "call continue_initialize first"
            )
        report = StepReport(step, weights=self._attribute(step, rollouts))  # 9
        if cfg.split_groups:
            self.paired.observe(rollouts)
        if is_prune_step(step, cfg) and len(self.population) > cfg.n_parent:  # 10
            report.pruned = self._prune(step)  # 11-12
        self.buffer.add(step, scored(rollouts))  # 15
        if is_evolve_step(step, cfg):  # 16
            parents = self.population.top(cfg.n_parent)  # 17
            self.population.retain([p.id for p in parents])
            self.population.reset_weights()
            report.admitted = self._refill(step, parents, evaluate)  # 18-23
            report.evolved = True
        report.population = [i.id for i in self.population.instructions]
        self.last_step = step
        return report

    def best(self) -> Instruction:
        """Line 26: I* = argmax_j w_j (under ``min_evidence``, among members with enough evidence
        first; under ``prior_rollouts``, by posterior mean)."""
        return self.population.best()

    def emit(self, event: Event) -> None:
        """Where every event of the loop goes out: the ledger counts it, the event log keeps it."""
        self.ledger.observe(event)
        self.events.emit(event)

    # ---------------------------------------------------------------------------- helpers
    def _attribute(self, step: int, rollouts: Sequence[Rollout]) -> dict[str, float]:
        """Eq. 6: each instruction observes the mean reward of its trajectories this step (error
        rollouts left out: an instruction whose rollouts all failed observes nothing)."""
        rewards: dict[str, list[float]] = defaultdict(list)
        for r in scored(rollouts):
            rewards[r.instruction_id].append(r.reward)
        self.population.advance(step)  # the window ends at this step, sampled or not
        for instruction_id, values in rewards.items():
            if instruction_id not in self.population:
                continue  # pruned while its rollouts were in flight: nothing left to credit
            mean = sum(values) / len(values)
            weight = self.population.observe(
                instruction_id, mean, step=step, n_rollouts=len(values)
            )
            self.emit(
                Attributed(
                    step,
                    instruction_id=instruction_id,
                    n_rollouts=len(values),
                    mean_reward=mean,
                    weight=weight,
                )
            )
        ids = [i.id for i in self.population.instructions]
        weights = dict(zip(ids, self.population.weights, strict=True))
        self.emit(
            Weights(
                step,
                weights=weights,
                scores=dict(zip(ids, self.population.scores, strict=True)),
                evidence=dict(zip(ids, self.population.evidence, strict=True)),
                n_rollouts=len(rollouts),
                n_errors=len(rollouts) - len(scored(rollouts)),
            )
        )
        return weights

    def _prune(self, step: int) -> list[str]:
        ids = [i.id for i in self.population.instructions]
        scores = dict(zip(ids, self.population.scores, strict=True))
        evidence = dict(zip(ids, self.population.evidence, strict=True))
        unguarded = {
            ids[i] for i in survivors_after_halving(list(scores.values()), self.config.n_parent)
        }
        paired = self.paired.protected(ids)
        removed = [i.id for i in self.population.prune(self.config.n_parent, keep=paired)]
        kept = tuple(i.id for i in self.population.instructions)
        protected = tuple(i for i in kept if evidence[i] < self.config.min_evidence or i in paired)
        self.emit(
            Pruned(
                step,
                removed=tuple(removed),
                kept=kept,
                weights=scores,
                evidence=evidence,
                protected=protected,
                saved=tuple(i for i in protected if i not in unguarded),
            )
        )
        return removed

    def _refill(
        self,
        step: int,
        parents: Sequence[Instruction],
        evaluate: EvaluateFn | None,
        *,
        start: InitRounds | None = None,
        after_round: Callable[[int, str], None] | None = None,
    ) -> list[str]:
        """Lines 18-23: generate-and-verify until |P| = N_P or the rounds run out. ``start``
        continues a refill whose :class:`~inspo.core.events.EvolutionStarted` is already logged
        (the initial population's); ``after_round(rounds, reason)`` follows every round."""
        cfg = self.config
        if start is None:
            self.emit(
                EvolutionStarted(
                    step, parents=tuple(p.id for p in parents), target_size=cfg.population_size
                )
            )
        admitted: list[str] = []
        rounds = start.rounds if start is not None else 0
        reason = start.reason if start is not None else ""
        spent_before = 0 if start is not None else self.ledger.verification_rollouts  # P_0 first
        if start is None or start.rounds == 0:
            self.bar = None  # a new evolution draws its own D_B (admission: paired)
        while len(self.population) < cfg.population_size and rounds < cfg.max_rounds:
            stop = self._out_of_budget(self.ledger.verification_rollouts - spent_before)
            if stop:
                reason = stop
                break
            parent = self.rng.choice(list(parents))  # 19
            failures = self.buffer.sample_failures(cfg.n_failures, self.rng, cfg.failure_threshold)
            stop = self._cannot_play(spent_before, parent, failures, evaluate)
            if stop:
                reason = stop
                break
            rounds += 1
            proposal = self.proposer.propose(  # 20
                parent,
                failures,
                history=self._history(),
                existing=[i.text for i in self.population.instructions],
                new_id=self._new_id,
            )
            self._record_proposal(step, rounds, proposal, failures)
            if proposal.candidates:
                left = self._allowance(self.ledger.verification_rollouts - spent_before)
                admitted += self._verify_and_admit(step, proposal, failures, evaluate, left)  # 21
            else:
                reason = proposal.error or "every candidate was rejected by the guard"
                self.emit(OptimizerFailed(step, round=rounds, reason=reason))
            if after_round is not None:
                after_round(rounds, reason)
        short = cfg.population_size - len(self.population)
        if short and not reason:
            reason = "verification admitted too few candidates"
        self.emit(
            EvolutionFinished(
                step,
                rounds=rounds,
                population=tuple(i.id for i in self.population.instructions),
                short_by=short,
                reason=reason if short else "",
            )
        )
        return admitted

    def _record_proposal(
        self, step: int, round_: int, proposal: Proposal, failures: Sequence[Rollout]
    ) -> None:
        self.emit(
            Proposed(
                step,
                round=round_,
                parent_id=proposal.parent_id,
                template=proposal.template,
                failures=tuple(f.question.id for f in failures),
                candidate_ids=tuple(c.id for c in proposal.candidates + proposal.rejected),
                critique=proposal.critique,
                prompt_tokens=proposal.prompt_tokens,
                completion_tokens=proposal.completion_tokens,
                error=proposal.error or "",
                parse_fallbacks=dict(proposal.parse_fallbacks),
            )
        )
        for cand in proposal.rejected:
            self._reject(step, cand.id, cand.rejected or "", cand.text, stage="guard")

    def _history(self, limit: int = 20) -> list[ScoredInstruction]:
        """Instructions seen so far with their last weight on a 0-100 scale, worst first."""
        scored = [
            ScoredInstruction(self.population.archive[i].text, 100.0 * w)
            for i, w in self.population.last_weight.items()
            if i in self.population.archive
        ]
        return sorted(scored, key=lambda s: s.score)[-limit:]

    def _new_id(self) -> str:
        self._next_id += 1
        return f"ins-{self._next_id:04d}"

    # ---------------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this left off (JSON-serialisable)."""
        return {
            "schema_version": self.SCHEMA_VERSION,
            "config": self.config.to_dict(),
            "last_step": self.last_step,
            "init": asdict(self.init) if self.init is not None else None,
            "next_id": self._next_id,
            "rng_state": rng_to_json(self.rng.getstate()),
            "population": self.population.to_dict(),
            "buffer": self.buffer.to_dict(),
            "ledger": self.ledger.to_dict(),
            "proposer": self.proposer.state_dict(),
            "paired": self.paired.to_dict(),
            "bar": self.bar.to_dict() if self.bar is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any], *, emit: bool = True) -> list[SettingChange]:
        """Continue from a saved state under ``self.config`` (the resuming run's settings).

        Settings that differ from the state's are applied from the next step on (the schedule,
        the optimizer and verification read ``self.config`` when they run) and returned; with
        ``emit`` they are also emitted as one :class:`~inspo.core.events.SettingsChanged` event at
        the state's last step (``emit=False``: the caller reports them, as ``inspo train`` does
        with the other sections' changes). A change to one of
        :data:`~inspo.core.config.FIXED_ON_RESUME` raises
        :class:`~inspo.core.config.ResumeConfigError` (a ``ConfigError``) before anything is loaded.
        """
        version = state.get("schema_version")
        if version not in self.READS:
            raise ValueError(
                f"INSPO state has schema_version {version!r}; this inspo reads version "
                f"{' or '.join(map(str, self.READS))}. Resume with the inspo version that wrote it."
            )
        changes = resume_changes(CoEvolutionConfig.from_dict(state["config"]), self.config)
        self.last_step = int(state["last_step"])
        self.init = InitRounds(**state["init"]) if state.get("init") else None
        self._next_id = int(state["next_id"])
        self.rng.setstate(rng_from_json(state["rng_state"]))
        self.population = Population.from_dict(state["population"])
        self.buffer = ReplayBuffer.from_dict(state["buffer"])
        self.ledger = CostLedger.from_dict(state["ledger"])
        self.proposer.load_state_dict(state.get("proposer") or {})
        self.paired = PairedRecord.from_dict(state.get("paired"))
        self.bar = EvolutionBar.from_dict(state.get("bar"))
        if changes and emit:
            self.emit(
                SettingsChanged(
                    self.last_step, changes={c.key: {"old": c.old, "new": c.new} for c in changes}
                )
            )
        return changes
