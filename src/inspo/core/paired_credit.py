"""Paired credit (``coevolution.split_groups``): instructions compared on the same questions.

Algorithm 1 credits each instruction with the mean reward of the groups it happened to be sampled
for, so two instructions are compared on different questions; at a few questions a step that is
noise (the calculator's prunes kept the worse instruction, by the test, in 11 of 31 decisions).
Under ``split_groups`` each question group is split in half between the **champion** (the
population's current best) and a **challenger** drawn by softmax from the others, so:

- GRPO's group advantage is computed across both halves (the question's G rollouts are one
  group whatever their instruction), as in the "fast and slow" and E-SPL loops;
- every split group is a paired comparison of the two on one question: the half with the higher
  mean reward wins it (:class:`PairedRecord`);
- an instruction admitted by the paired race (it beat its parent on paired evidence) is never
  pruned while its split-group record shows no paired evidence that it is worse (no more losses
  than wins).

The choice of the pair follows from (seed, step, question id, population version), like
Algorithm 1's choice, so every process picks the same pair.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from inspo.records import Instruction, Rollout, scored


def challenger_pair(
    members: list[Instruction],
    probabilities: list[float],
    champion: Instruction,
    rng: random.Random,
) -> tuple[Instruction, Instruction]:
    """(champion, challenger): the challenger drawn from the other members with their share of
    ``probabilities`` (Eq. 4's, renormalised over them)."""
    others = [(m, p) for m, p in zip(members, probabilities, strict=True) if m.id != champion.id]
    if not others:
        raise ValueError("challenger_pair needs at least two members")
    weights = [p for _, p in others]
    if sum(weights) <= 0:
        weights = [1.0] * len(others)
    (challenger,) = rng.choices([m for m, _ in others], weights=weights, k=1)
    return champion, challenger


def split_outcomes(rollouts: Iterable[Rollout]) -> list[tuple[str, str]]:
    """(winner id, loser id) of every question played by exactly two instructions whose mean
    rewards there differ (error rollouts left out; a tie gives nothing)."""
    by_question: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in scored(list(rollouts)):
        by_question[r.question.id][r.instruction_id].append(r.reward)
    out = []
    for groups in by_question.values():
        if len(groups) != 2:
            continue
        (a, ra), (b, rb) = groups.items()
        ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
        if ma != mb:
            out.append((a, b) if ma > mb else (b, a))
    return out


@dataclass
class PairedRecord:
    """The paired evidence the core keeps: who beat its parent in the race, and each instruction's
    split-group wins and losses (against whichever instruction shared the group)."""

    race_winners: set[str] = field(default_factory=set)
    wins: dict[str, int] = field(default_factory=dict)
    losses: dict[str, int] = field(default_factory=dict)

    def observe(self, rollouts: Iterable[Rollout]) -> None:
        for winner, loser in split_outcomes(rollouts):
            self.wins[winner] = self.wins.get(winner, 0) + 1
            self.losses[loser] = self.losses.get(loser, 0) + 1

    def protected(self, ids: Iterable[str]) -> set[str]:
        """Those of ``ids`` a prune must keep: race winners without paired evidence that they are
        worse (more split-group losses than wins)."""
        return {
            i
            for i in ids
            if i in self.race_winners and self.losses.get(i, 0) <= self.wins.get(i, 0)
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "race_winners": sorted(self.race_winners),
            "wins": dict(self.wins),
            "losses": dict(self.losses),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PairedRecord:
        data = data or {}
        return cls(
            set(data.get("race_winners", ())),
            dict(data.get("wins", {})),
            dict(data.get("losses", {})),
        )
