"""D_B: the questions verification plays in one optimizer round (Algorithm 1, line 21).

Drawn from the replay buffer (App. B) or, under ``validation_from: train``, from the training
questions the core was given; under ``validation_unseen`` never a question whose failure the
round's optimizer call was shown. Under ``admission: paired`` D_B is drawn once an evolution
(:class:`EvolutionBar`) and each parent's per-question results there are kept, so every round
races against one play of the parent; a round shown one of its problems takes the first
``validation_size`` others, drawing more when they run short.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.core.replay import ReplayBuffer
from inspo.records import Question

Draw = Callable[[set[str], int], list[Question]]
"""``draw(exclude, size)``: up to ``size`` fresh questions, none of them in ``exclude``."""


@dataclass
class EvolutionBar:
    """``admission: paired``'s D_B for one evolution: drawn once at ``step`` and shared by all its
    rounds (each round leaves out the problems its optimizer call was shown), with each parent's
    per-question scores there (parent id -> question id -> score), so that a parent plays D_B
    once an evolution, not once a round. Kept in the core's state, so a resumed run goes on
    with the same D_B and the same parent results."""

    step: int
    questions: list[Question]
    parents: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def for_round(self, shown: set[str]) -> list[Question]:
        return [q for q in self.questions if q.id not in shown]

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "questions": [q.to_dict() for q in self.questions],
            "parents": self.parents,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EvolutionBar | None:
        if not data:
            return None
        return cls(
            int(data["step"]),
            [Question.from_dict(q) for q in data["questions"]],
            {k: dict(v) for k, v in data["parents"].items()},
        )


def draw_validation(
    pool: Sequence[Question], buffer: ReplayBuffer, rng: random.Random, exclude: set[str], size: int
) -> list[Question]:
    """Up to ``size`` questions not in ``exclude``: a sample of ``pool`` (the training questions,
    ``validation_from: train``; all of them when fewer) when one is given, else from ``buffer``."""
    if pool:
        fresh = [q for q in dict((q.id, q) for q in pool).values() if q.id not in exclude]
        return fresh if len(fresh) <= size else rng.sample(fresh, size)
    return buffer.validation_questions(size, rng, exclude=exclude)


def round_questions(
    bar: EvolutionBar | None, step: int, shown: set[str], size: int, draw: Draw
) -> tuple[EvolutionBar, list[Question]]:
    """``admission: paired``'s D_B for one round of the evolution at ``step``: ``bar`` (a new one
    when it is None or from another step) and its first ``size`` questions not ``shown``, topped up
    by ``draw`` (and kept in the bar) when they run short."""
    if bar is None or bar.step != step:
        bar = EvolutionBar(step, [])
    chosen = bar.for_round(shown)[:size]
    if len(chosen) < size:
        more = draw(shown | {q.id for q in bar.questions}, size - len(chosen))
        bar.questions += more
        chosen += more
    return bar, chosen


__all__ = ["Draw", "EvolutionBar", "draw_validation", "round_questions"]
