"""Line 21 of Algorithm 1, one proposal's way into the population: the leak refusals, the
gate, verification on D_B and the verdict (:mod:`inspo.core.admission`), within what the evolution
may still spend on verification (``evolve_rollouts``, an :class:`~inspo.core.verifier.Allowance`).

:class:`VerifyRound` is a part of :class:`~inspo.core.coevolution.CoEvolution`, kept in its own file
so the loop reads like Algorithm 1: it reads the core's config, population, D_B of the evolution
(``bar``), paired record and ``emit``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from inspo.core.accounting import CostLedger
from inspo.core.admission import (
    Refused,
    Skip,
    gate,
    race,
    score_and_rank,
)
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import Admitted, Event, Rejected
from inspo.core.leak_scope import NamesFn, named_held_out, named_ids
from inspo.core.paired_credit import PairedRecord
from inspo.core.population import Population
from inspo.core.proposer import Proposal, leaked_answer
from inspo.core.race import RaceRule
from inspo.core.replay import ReplayBuffer
from inspo.core.validation import EvolutionBar, draw_validation, round_questions
from inspo.core.verifier import Allowance, EvaluateFn
from inspo.records import Candidate, Instruction, Question, Rollout


class VerifyRound:
    """Line 21 for :class:`~inspo.core.coevolution.CoEvolution` (which sets these attributes)."""

    config: CoEvolutionConfig
    population: Population
    buffer: ReplayBuffer
    ledger: CostLedger
    paired: PairedRecord
    bar: EvolutionBar | None
    rng: random.Random
    validation_pool: list[Question]
    held_out: list[Question]
    names: NamesFn
    leak_terms: Callable[[Question], Sequence[str]]
    emit: Callable[[Event], None]

    def _out_of_budget(self, spent: int) -> str:
        """Why no further optimizer call is made in this evolution ('' when one may be):
        ``evolve_rollouts`` spent on verification, or the run's ``max_optimizer_tokens`` used."""
        cfg, led = self.config, self.ledger
        if cfg.evolve_rollouts and spent >= cfg.evolve_rollouts:
            return (
                f"the evolution's verification budget is spent ({spent} of evolve_rollouts "
                f"{cfg.evolve_rollouts})"
            )
        used = led.optimizer_prompt_tokens + led.optimizer_completion_tokens
        if cfg.max_optimizer_tokens and used >= cfg.max_optimizer_tokens:
            return (
                f"the run's optimizer tokens are spent ({used} of max_optimizer_tokens "
                f"{cfg.max_optimizer_tokens})"
            )
        return ""

    def _cannot_play(
        self,
        spent_before: int,
        parent: Instruction,
        failures: Sequence[Rollout],
        evaluate: EvaluateFn | None,
    ) -> str:
        """Why the next round's optimizer call is not made ('' when it is): what ``evolve_rollouts``
        leaves (the evolution began at ``spent_before`` verification rollouts) cannot pay for the
        cheapest play that judges a candidate at all, so each candidate it returned would be
        refused for budget unplayed (checked once the round's parent and failures are drawn: the
        D_B questions left to the round depend on them)."""
        budget = self.config.evolve_rollouts
        if not budget or evaluate is None:
            return ""
        spent = self.ledger.verification_rollouts - spent_before
        cost = self._first_play(parent, failures)
        if budget - spent >= cost:
            return ""
        return (
            "the evolution's verification budget cannot pay for another candidate "
            f"({budget - spent} of evolve_rollouts {budget} left; one costs at least {cost})"
        )

    def _first_play(self, parent: Instruction, failures: Sequence[Rollout]) -> int:
        """A lower bound on the verification rollouts one candidate of the next round needs before
        any verdict on D_B: under ``admission: paired``, the parent's round D_B questions it has
        not played this evolution and one race chunk; otherwise a candidate on the whole of D_B.
        D_B is drawn as the round would draw it, on a copy of the evolution's bar and with a
        throwaway RNG (the run's own stream and bar are not touched). The gate's plays are left
        out (a gate that cannot be paid lets candidates on unjudged)."""
        cfg = self.config
        if not cfg.verify:
            return 0
        shown = {f.question.id for f in failures} if cfg.validation_unseen else set()

        def draw(exclude: set[str], size: int) -> list[Question]:
            return self._draw_validation(exclude, size, random.Random(0))

        if cfg.admission != "paired":
            return len(draw(shown, cfg.validation_size))
        bar = self.bar
        probe = EvolutionBar(bar.step, list(bar.questions)) if bar is not None else None
        _, questions = round_questions(
            probe, probe.step if probe else 0, shown, cfg.validation_size, draw
        )
        known = bar.parents.get(parent.id, {}) if bar is not None else {}
        unplayed = sum(q.id not in known for q in questions)
        return unplayed + min(cfg.race_chunk, len(questions))

    def _allowance(self, spent: int) -> Allowance:
        """What the evolution may still spend on verification this round (``evolve_rollouts``), so
        a round verifying several candidates stops inside it rather than after."""
        budget = self.config.evolve_rollouts
        return Allowance(max(0, budget - spent) if budget else None)

    def _verify_and_admit(
        self,
        step: int,
        proposal: Proposal,
        failures: Sequence[Rollout],
        evaluate: EvaluateFn | None,
        allowance: Allowance | None = None,
    ) -> list[str]:
        """Line 21: verify the candidates on D_B and admit the top-n (under ``beat-parent``, only
        those scoring at least their parent on the same questions and sampling seeds; under
        ``paired``, only those that won more D_B questions than they lost in a race against the
        parent: :mod:`inspo.core.admission`). Under ``leak_guard`` a candidate holding a gold answer
        of ``failures`` or of D_B is refused first."""
        cfg = self.config
        questions = self._validation_questions(step, failures) if cfg.verify else []
        shown = list(dict((f.question.id, f.question) for f in failures).values())
        parent = self.population.archive.get(proposal.parent_id)
        candidates = self._screen_leaks(step, proposal, shown + questions, parent)
        if not candidates:
            return []
        skip = None
        if cfg.leak_scope == "held-out":
            texts = {c.id: c.text for c in candidates} | (
                {parent.id: parent.text} if parent is not None else {}
            )
            skip = named_ids(texts, shown + questions, self.names)
        if cfg.gate and cfg.verify and evaluate is not None:
            candidates, gated_out = gate(
                step, parent, candidates, shown, evaluate, self.emit, skip, allowance
            )
            self._reject_all(step, proposal, gated_out)
            if not candidates:
                return []
        chosen, refused = self._judge(
            step, parent, candidates, questions, evaluate, skip, allowance
        )
        for cand in chosen:
            self.population.add(cand.to_instruction(step), prior=cand.score)
            self.emit(
                Admitted(step, instruction=cand.to_instruction(step).to_dict(), score=cand.score)
            )
        self._reject_all(step, proposal, refused)
        return [c.id for c in chosen]

    def _screen_leaks(
        self,
        step: int,
        proposal: Proposal,
        seen: list[Question],
        parent: Instruction | None,
    ) -> list[Candidate]:
        """The proposal's candidates that ``leak_guard`` lets through (``leak_scope``: a held-out
        problem named, or a leak term of ``seen``, the shown failures and D_B), each other one
        refused (stage ``leak``)."""
        cfg, candidates = self.config, list(proposal.candidates)
        if not cfg.leak_guard:
            return candidates
        if cfg.leak_scope == "held-out":
            candidates, leaks = refuse_held_out(candidates, self.held_out, self.names)
        else:
            answers = [a for q in seen for a in self.leak_terms(q)]
            candidates, leaks = refuse_leaks(
                candidates, answers, parent.text if parent is not None else ""
            )
        self._reject_all(step, proposal, leaks)
        return candidates

    def _judge(
        self,
        step: int,
        parent: Instruction | None,
        candidates: list[Candidate],
        questions: list[Question],
        evaluate: EvaluateFn | None,
        skip: Skip | None,
        allowance: Allowance | None,
    ) -> tuple[list[Candidate], Refused]:
        """The verdict on D_B (``admission``): the paired race against the parent, or every
        candidate scored and the top-n kept (beside the parent under ``beat-parent``)."""
        cfg = self.config
        n = cfg.admit_n(cfg.population_size - len(self.population))
        if cfg.admission == "paired" and cfg.verify and evaluate is not None:
            rule = RaceRule(cfg.race_futility, cfg.race_chunk)
            bar = (
                self.bar.parents.setdefault(parent.id, {})
                if self.bar is not None and parent is not None
                else None
            )
            chosen, refused = race(
                step,
                parent,
                candidates,
                questions,
                evaluate,
                n,
                rule,
                self.emit,
                skip,
                bar,
                allowance,
            )
            self.paired.race_winners |= {c.id for c in chosen}
            return chosen, refused
        beside = parent if cfg.admission == "beat-parent" else None
        return score_and_rank(
            step, beside, candidates, questions, evaluate, n, self.emit, allowance
        )

    def _reject_all(
        self, step: int, proposal: Proposal, refused: dict[str, tuple[str, str]]
    ) -> None:
        """A ``rejected`` event for each of ``proposal``'s candidates in ``refused``, in proposal
        order."""
        for cand in proposal.candidates:
            if cand.id in refused:
                stage, why = refused[cand.id]
                self._reject(step, cand.id, why, cand.text, stage=stage)

    def _validation_questions(self, step: int, failures: Sequence[Rollout]) -> list[Question]:
        """D_B for one round (:mod:`inspo.core.validation`: the source, ``validation_unseen``, and
        under ``admission: paired`` one draw an evolution)."""
        cfg = self.config
        shown = {f.question.id for f in failures} if cfg.validation_unseen else set()
        if cfg.admission != "paired":
            return self._draw_validation(shown, cfg.validation_size)
        self.bar, questions = round_questions(
            self.bar, step, shown, cfg.validation_size, self._draw_validation
        )
        return questions

    def _draw_validation(
        self, exclude: set[str], size: int, rng: random.Random | None = None
    ) -> list[Question]:
        pool = self.validation_pool if self.config.validation_from == "train" else ()
        return draw_validation(pool, self.buffer, rng or self.rng, exclude, size)

    def _reject(self, step: int, candidate_id: str, reason: str, text: str, *, stage: str) -> None:
        self.emit(Rejected(step, candidate_id=candidate_id, reason=reason, text=text, stage=stage))


def refuse_leaks(
    candidates: list[Candidate], answers: Sequence[str], parent_text: str
) -> tuple[list[Candidate], dict[str, tuple[str, str]]]:
    """``leak_scope: shown``: the candidates that hold none of ``answers`` (the leak terms of the
    failures in the optimizer's prompt and of D_B), and a ``leak`` refusal for each other one.
    Answers the parent already holds do not count (:func:`~inspo.core.proposer.leaked_answer`)."""

    def why(cand: Candidate) -> str | None:
        answer = leaked_answer(cand.text, answers, parent_text)
        return None if answer is None else f"leaks an answer: {answer!r}"

    return _refuse(candidates, why)


def refuse_held_out(
    candidates: list[Candidate], held_out: Sequence[Question], names: NamesFn
) -> tuple[list[Candidate], dict[str, tuple[str, str]]]:
    """``leak_scope: held-out``: the candidates that name no held-out (dev or test) problem, and a
    ``leak`` refusal for each other one (:func:`named_held_out`)."""

    def why(cand: Candidate) -> str | None:
        named = named_held_out(cand.text, held_out, names)
        return (
            None
            if named is None
            else f"names held-out problem {named.id} ({named.question[:80]!r}) with its answer"
        )

    return _refuse(candidates, why)


def _refuse(
    candidates: list[Candidate], why: Callable[[Candidate], str | None]
) -> tuple[list[Candidate], dict[str, tuple[str, str]]]:
    """The candidates ``why`` finds nothing against, and a ``leak`` refusal (its reason, also set as
    the candidate's ``rejected``) for each other one."""
    clean, refused = [], {}
    for cand in candidates:
        reason = why(cand)
        if reason is None:
            clean.append(cand)
        else:
            cand.rejected = reason
            refused[cand.id] = ("leak", reason)
    return clean, refused
