"""The instruction population: importance weights, softmax sampling, pruning, parents, I*.

The maths is in pure functions at the top (each tested against a naive reference); the
:class:`Population` below only keeps records and calls them.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.records import Instruction
from inspo.rng import derived_rng  # noqa: F401  (re-exported: part of the population's API)

# --------------------------------------------------------------------------------------------
# Pure maths
# --------------------------------------------------------------------------------------------


def windowed_mean(observations: Sequence[float], window: int) -> float:
    """Eq. 6: the mean of the last ``window`` observations; 0.0 when there are none.

    ``observations`` are one instruction's per-step mean rewards, oldest first.
    """
    recent = list(observations)[-window:]
    return sum(recent) / len(recent) if recent else 0.0


def selection_probabilities(weights: Sequence[float], tau: float) -> list[float]:
    """Eq. 4: ``softmax(w / tau)``, shifted by the max for numerical stability. Sums to 1."""
    if not weights:
        return []
    scaled = [w / tau for w in weights]
    top = max(scaled)
    exps = [math.exp(s - top) for s in scaled]
    total = sum(exps)
    return [e / total for e in exps]


def rank(weights: Sequence[float]) -> list[int]:
    """Indices by weight, best first; ties keep the earlier (older) member first."""
    return sorted(range(len(weights)), key=lambda i: (-weights[i], i))


def survivors_after_halving(weights: Sequence[float], n_parent: int) -> list[int]:
    """Successive halving: indices kept when the bottom half by weight is pruned.

    ``floor(n/2)`` members are dropped, so ``ceil(n/2)`` survive, but never fewer than
    ``n_parent`` (nor more than ``n``). Returned in their original order.
    """
    n = len(weights)
    keep = min(n, max(n - n // 2, n_parent))
    return sorted(rank(weights)[:keep])


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class Member:
    """A living instruction and the per-step mean rewards it has earned since its last reset."""

    instruction: Instruction
    observations: list[float] = field(default_factory=list)

    def weight(self, window: int) -> float:
        return windowed_mean(self.observations, window)

    def to_dict(self) -> dict[str, Any]:
        return {"instruction": self.instruction.to_dict(), "observations": list(self.observations)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        return cls(Instruction.from_dict(data["instruction"]), list(data["observations"]))


class Population:
    """At most ``max_size`` instructions with importance weights.

    ``version`` increases whenever membership changes or weights are reset, so a choice keyed by
    (seed, step, question id, version) is the same on every process that holds the same state.
    ``archive`` keeps every instruction that ever lived (for lineage and the history template).
    """

    def __init__(self, max_size: int, window: int, tau: float):
        self.max_size = max_size
        self.window = window
        self.tau = tau
        self.members: list[Member] = []
        self.archive: dict[str, Instruction] = {}
        self.last_weight: dict[str, float] = {}
        self.version = 0

    # -- views ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, instruction_id: str) -> bool:
        return any(m.instruction.id == instruction_id for m in self.members)

    @property
    def instructions(self) -> list[Instruction]:
        return [m.instruction for m in self.members]

    @property
    def weights(self) -> list[float]:
        return [m.weight(self.window) for m in self.members]

    def weight_of(self, instruction_id: str) -> float:
        return self._member(instruction_id).weight(self.window)

    def probabilities(self) -> list[float]:
        return selection_probabilities(self.weights, self.tau)

    def top(self, k: int) -> list[Instruction]:
        """The ``k`` best instructions by weight (ties: older first)."""
        order = rank(self.weights)
        return [self.members[i].instruction for i in order[:k]]

    def best(self) -> Instruction:
        """I* = argmax_j w_j."""
        if not self.members:
            raise RuntimeError("the population is empty: there is no best instruction")
        return self.top(1)[0]

    # -- changes -------------------------------------------------------------------------
    def add(self, instruction: Instruction) -> None:
        if len(self.members) >= self.max_size:
            raise RuntimeError(f"population is full ({self.max_size}); cannot add {instruction.id}")
        if instruction.id in self:
            raise ValueError(f"instruction id {instruction.id!r} is already in the population")
        self.members.append(Member(instruction))
        self.archive[instruction.id] = instruction
        self.version += 1

    def sample(self, rng: random.Random) -> Instruction:
        """Draw one instruction with probability softmax(w / tau)."""
        if not self.members:
            raise RuntimeError("cannot sample from an empty population")
        (member,) = rng.choices(self.members, weights=self.probabilities(), k=1)
        return member.instruction

    def observe(self, instruction_id: str, mean_reward: float) -> float:
        """Record one step's mean reward for an instruction; returns its new weight."""
        member = self._member(instruction_id)
        member.observations.append(float(mean_reward))
        # Only the window matters; keep the list bounded.
        del member.observations[: -self.window]
        self.last_weight[instruction_id] = member.weight(self.window)
        return self.last_weight[instruction_id]

    def prune(self, n_parent: int) -> list[Instruction]:
        """Drop the bottom half by weight (never below ``n_parent``); returns the removed."""
        keep = set(survivors_after_halving(self.weights, n_parent))
        removed = [m.instruction for i, m in enumerate(self.members) if i not in keep]
        if removed:
            self.members = [m for i, m in enumerate(self.members) if i in keep]
            self.version += 1
        return removed

    def retain(self, instruction_ids: Sequence[str]) -> None:
        """Keep only the given members (in their current order)."""
        wanted = set(instruction_ids)
        self.members = [m for m in self.members if m.instruction.id in wanted]
        self.version += 1

    def reset_weights(self) -> None:
        """W <- {0}: every member starts a fresh window."""
        for m in self.members:
            m.observations.clear()
        self.version += 1

    def _member(self, instruction_id: str) -> Member:
        for m in self.members:
            if m.instruction.id == instruction_id:
                return m
        raise KeyError(f"instruction {instruction_id!r} is not in the population")

    # -- state ---------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "max_size": self.max_size,
            "window": self.window,
            "tau": self.tau,
            "version": self.version,
            "members": [m.to_dict() for m in self.members],
            "archive": [i.to_dict() for i in self.archive.values()],
            "last_weight": dict(self.last_weight),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Population:
        pop = cls(data["max_size"], data["window"], data["tau"])
        pop.version = data["version"]
        pop.members = [Member.from_dict(m) for m in data["members"]]
        pop.archive = {d["id"]: Instruction.from_dict(d) for d in data["archive"]}
        pop.last_weight = {k: float(v) for k, v in data["last_weight"].items()}
        return pop
