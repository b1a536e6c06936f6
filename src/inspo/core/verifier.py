"""The verifier: scores candidates with the current policy on D_B and keeps the top-n.

The policy is reached through an injected evaluate function — the seam the verifier and the
evaluation command share:

    evaluate(instruction: Instruction, questions: Sequence[Question]) -> list[Rollout]

Rules: one Rollout per question (a group-size > 1 evaluator may return more; the mean is taken
over all of them), higher reward is better, and it never raises for one bad example (a failed
example is a Rollout with ``error`` set). A score is the mean over the rollouts without an error
(:func:`inspo.records.scored`; an error is an outage, not the candidate's failure); a candidate
all of whose rollouts failed is rejected with the error. If the evaluate function raises, the
candidate is rejected with the error as its reason and the round goes on, except for
:class:`~inspo.records.TooManyErrors` (its error budget is spent), which stops the run. An evaluate
function that also has ``many(instructions, questions) -> list[list[Rollout]]``
(:class:`inspo.envs.evaluate.Evaluate`) gets all of a round's candidates in one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from inspo.records import (
    Candidate,
    EvaluateFn,
    Instruction,
    Question,
    Rollout,
    TooManyErrors,
    error_summary,
    scored,
)


@dataclass
class Verification:
    candidate: Candidate
    rollouts: list[Rollout]


def play_all(
    evaluate: EvaluateFn, instructions: Sequence[Instruction], questions: Sequence[Question]
) -> list[list[Rollout]]:
    """Each instruction's rollouts on ``questions``: one ``many`` call when ``evaluate`` has it
    (shared batches), else one call per instruction."""
    many = getattr(evaluate, "many", None)
    if many is not None:
        return [list(rs) for rs in many(instructions, questions)]
    return [list(evaluate(i, questions)) for i in instructions]


@dataclass
class Allowance:
    """The verification rollouts an evolution may still spend (``coevolution.evolve_rollouts``),
    kept while a round plays, so that a round verifying several candidates cannot run past it:
    every play is charged what it returned, and a caller asks :meth:`afford` before a play and
    plays only the instructions it can pay for. ``left`` None: no budget."""

    left: int | None = None
    per_question: int = 1
    """Rollouts one instruction costs on one question: 1 by the evaluate seam's rule, raised to what
    the plays return (an evaluator with a group larger than one)."""

    def afford(self, n_instructions: int, n_questions: int) -> int:
        """How many of ``n_instructions`` can play ``n_questions`` each within what is left."""
        if self.left is None or n_questions == 0:
            return n_instructions
        return min(n_instructions, self.left // (n_questions * self.per_question))

    def charge(self, rollouts: int, n_plays: int, n_questions: int) -> None:
        """Take a play of ``n_plays`` instructions on ``n_questions`` off what is left."""
        if n_plays and n_questions:
            self.per_question = max(
                self.per_question, math.ceil(rollouts / (n_plays * n_questions))
            )
        if self.left is not None:
            self.left = max(0, self.left - rollouts)

    def refusal(self, done: int, total: int) -> tuple[str, str]:
        """The ``(stage, reason)`` of a candidate this allowance could not pay for after ``done`` of
        ``total`` questions."""
        return "budget", (
            f"not verified past {done} of {total} question(s): the evolution's verification "
            "budget (evolve_rollouts) is spent"
        )


class Verifier:
    def __init__(self, evaluate: EvaluateFn, allowance: Allowance | None = None):
        self.evaluate = evaluate
        self.allowance = allowance if allowance is not None else Allowance()

    def score(
        self, candidates: Sequence[Candidate], questions: Sequence[Question], step: int
    ) -> list[Verification]:
        """Fill each candidate's ``score`` (mean reward on ``questions``) or ``rejected``.

        An evaluator with ``many(instructions, questions)`` plays all the candidates in one call
        (shared batches); if that call raises, each candidate is played on its own."""
        results = []
        for cand, played in zip(candidates, self.play(candidates, questions, step), strict=True):
            if isinstance(played, Exception):
                cand.rejected = failure_reason(played)
                results.append(Verification(cand, []))
            else:
                results.append(self._record(cand, played))
        return results

    def play(
        self, candidates: Sequence[Candidate], questions: Sequence[Question], step: int
    ) -> list[list[Rollout] | Exception]:
        """Each candidate's rollouts on ``questions`` (in shared batches where the evaluator has
        ``many``), or the exception its evaluation raised (:class:`~inspo.records.TooManyErrors`
        is raised: an outage stops the run). The rollouts are charged to the allowance."""
        results = self._play(candidates, questions, step)
        played = [r for r in results if not isinstance(r, Exception)]
        self.allowance.charge(sum(map(len, played)), len(played), len(questions))
        return results

    def _play(
        self, candidates: Sequence[Candidate], questions: Sequence[Question], step: int
    ) -> list[list[Rollout] | Exception]:
        together = self._together(candidates, questions, step)
        if together is not None:
            return list(together)
        results: list[list[Rollout] | Exception] = []
        for cand in candidates:
            try:
                results.append(list(self.evaluate(cand.to_instruction(step), questions)))
            except TooManyErrors:
                raise  # an outage: the run stops with its cause, it is no verdict on the candidate
            except Exception as exc:  # noqa: BLE001 - a broken evaluator must not end training
                results.append(exc)
        return results

    def _together(
        self, candidates: Sequence[Candidate], questions: Sequence[Question], step: int
    ) -> list[list[Rollout]] | None:
        if not hasattr(self.evaluate, "many") or len(candidates) < 2:
            return None
        try:
            together = play_all(
                self.evaluate, [c.to_instruction(step) for c in candidates], questions
            )
        except TooManyErrors:
            raise
        except Exception:  # noqa: BLE001 - fall back to one call per candidate, which isolates errors
            return None
        return together if len(together) == len(candidates) else None

    @staticmethod
    def _record(cand: Candidate, rollouts: list[Rollout]) -> Verification:
        ok = scored(rollouts)
        if not rollouts:
            cand.rejected = "verification produced no rollouts"
        elif not ok:
            cand.rejected = f"verification failed: every rollout raised ({error_summary(rollouts)})"
        else:
            cand.score = sum(r.reward for r in ok) / len(ok)
        return Verification(cand, rollouts)


def failure_reason(exc: Exception) -> str:
    """A candidate's rejection reason when its evaluation raised ``exc``."""
    return f"verification failed: {type(exc).__name__}: {exc}"


def per_question(rollouts: Sequence[Rollout], n_questions: int) -> list[float | None]:
    """Each question's mean reward over its scored rollouts (question-major, as the evaluate seam
    returns them), or None where every rollout of the question failed on an error."""
    if n_questions == 0:
        return []
    if len(rollouts) % n_questions:
        raise ValueError(f"{len(rollouts)} rollouts do not divide into {n_questions} questions")
    g = len(rollouts) // n_questions
    out: list[float | None] = []
    for k in range(n_questions):
        ok = scored(rollouts[k * g : (k + 1) * g])
        out.append(sum(r.reward for r in ok) / len(ok) if ok else None)
    return out


def top_n(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """The ``n`` best scored, not rejected candidates (ties: earlier proposal first)."""
    scored = [c for c in candidates if c.rejected is None and c.score is not None]
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    return [scored[i] for i in order[:n]]
