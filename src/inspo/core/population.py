"""The instruction population: importance weights, softmax sampling, pruning, parents, I*.

The maths is in pure functions at the top (each tested against a naive reference); the
:class:`Population` below only keeps records and calls them.

Weights (Eq. 6) look at the most recent ``window`` *steps*: an observation made at step ``s``
counts at step ``t`` while ``s > t - window``. Evidence that old expires; an instruction with
no observation in its window has no evidence (weight 0, as Algorithm 1 initialises W).

Evidence rules (all off by default, which is Algorithm 1 exactly):

- ``min_evidence`` (rollouts): a member observed on fewer rollouts in its window is never
  pruned, and is ranked for parents and I* only after every member that has enough evidence;
- ``prior_rollouts``: members are scored by a posterior mean that shrinks the rewards in the
  window towards the member's prior (its verification score on D_B, or the score it carried
  into a reset) with the weight of ``prior_rollouts`` pseudo-rollouts. The score replaces the
  weight for sampling, pruning, parents and I*, so an unobserved member is sampled at its
  prior instead of at 0;
- ``fair_share`` (needs ``min_evidence``): a member below the evidence floor is sampled with
  probability 1/N, its uniform share, whatever its score; the members with enough evidence split
  the rest by softmax. Without it a member whose prior is low is rarely sampled, so it stays
  below the floor, and the floor keeps it from every prune: it lingers untried.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.records import Instruction

# --------------------------------------------------------------------------------------------
# Pure maths
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What one instruction earned at one step: ``n_rollouts`` trajectories, their mean reward."""

    step: int
    n_rollouts: int
    mean_reward: float


def windowed_mean(observations: Sequence[float], window: int) -> float:
    """Eq. 6: the mean of the last ``window`` observations; 0.0 when there are none.

    ``observations`` are one instruction's per-step mean rewards, oldest first.
    """
    recent = list(observations)[-window:]
    return sum(recent) / len(recent) if recent else 0.0


def in_window(observations: Sequence[Observation], now: int, window: int) -> list[Observation]:
    """The observations of the most recent ``window`` steps at step ``now``:
    ``step > now - window``."""
    return [o for o in observations if o.step > now - window]


def evidence(observations: Sequence[Observation]) -> int:
    """How many rollouts stand behind ``observations``."""
    return sum(o.n_rollouts for o in observations)


def posterior_mean(
    observations: Sequence[Observation], prior: float, prior_rollouts: float
) -> float:
    """``(prior_rollouts * prior + sum of rewards) / (prior_rollouts + rollouts)``.

    The mean reward per rollout, shrunk towards ``prior`` as if ``prior_rollouts`` extra
    rollouts had scored it; ``prior`` itself when there are no observations. Units: reward.
    """
    n = evidence(observations)
    total = sum(o.n_rollouts * o.mean_reward for o in observations)
    if prior_rollouts + n == 0:
        return prior
    return (prior_rollouts * prior + total) / (prior_rollouts + n)


def selection_probabilities(weights: Sequence[float], tau: float) -> list[float]:
    """Eq. 4: ``softmax(w / tau)``, shifted by the max for numerical stability. Sums to 1."""
    if not weights:
        return []
    scaled = [w / tau for w in weights]
    top = max(scaled)
    exps = [math.exp(s - top) for s in scaled]
    total = sum(exps)
    return [e / total for e in exps]


def fair_share_probabilities(
    weights: Sequence[float], tau: float, short: Sequence[bool]
) -> list[float]:
    """Sampling probabilities when the members flagged ``short`` (below the evidence floor) each
    get their uniform share ``1/N`` and the others split ``1 - (number short)/N`` by
    ``softmax(w / tau)`` among themselves. Nobody short: Eq. 4 exactly; everybody short: uniform."""
    n = len(weights)
    if len(short) != n:
        raise ValueError(f"fair_share_probabilities: {n} weights but {len(short)} evidence flags")
    known = [i for i in range(n) if not short[i]]
    rest = 1.0 - (n - len(known)) / n
    split = dict(zip(known, selection_probabilities([weights[i] for i in known], tau), strict=True))
    return [rest * split[i] if i in split else 1.0 / n for i in range(n)]


def rank(weights: Sequence[float], eligible: Sequence[bool] | None = None) -> list[int]:
    """Indices by weight, best first; ties keep the earlier (older) member first.

    With ``eligible``, every eligible index comes before every ineligible one (each part
    ordered by weight): members without enough evidence rank last.
    """
    ok = list(eligible) if eligible is not None else [True] * len(weights)
    return sorted(range(len(weights)), key=lambda i: (not ok[i], -weights[i], i))


def survivors_after_halving(
    weights: Sequence[float], n_parent: int, protected: Sequence[bool] | None = None
) -> list[int]:
    """Successive halving: indices kept when the bottom half by weight is pruned.

    Of the ``k`` members that are not ``protected`` (all of them by default), the
    ``floor(k/2)`` worst are dropped, but never so many that fewer than ``n_parent`` members
    remain. Without protection: ``ceil(n/2)`` survive, never fewer than ``n_parent``.
    Returned in their original order.
    """
    n = len(weights)
    guard = list(protected) if protected is not None else [False] * n
    droppable = [i for i in reversed(rank(weights)) if not guard[i]]
    n_drop = max(0, min(len(droppable) // 2, n - n_parent))
    dropped = set(droppable[:n_drop])
    return [i for i in range(n) if i not in dropped]


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------


@dataclass
class Member:
    """A living instruction, the observations it earned since its last reset, and its prior
    (a verification score on D_B, or its score when the weights were last reset)."""

    instruction: Instruction
    observations: list[Observation] = field(default_factory=list)
    prior: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "instruction": self.instruction.to_dict(),
            "observations": [[o.step, o.n_rollouts, o.mean_reward] for o in self.observations],
            "prior": self.prior,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Member:
        obs = [Observation(int(s), int(n), float(m)) for s, n, m in data["observations"]]
        prior = data.get("prior")
        return cls(
            Instruction.from_dict(data["instruction"]), obs, None if prior is None else float(prior)
        )


class Population:
    """At most ``max_size`` instructions with importance weights.

    ``version`` increases whenever membership changes or weights are reset, so a choice keyed by
    (seed, step, question id, version) is the same on every process that holds the same state.
    ``archive`` keeps every instruction that ever lived (for lineage and the history template).
    ``now`` is the latest step observed: the weight window ends there.
    ``min_evidence`` and ``prior_rollouts`` are the evidence rules of the module docstring.
    """

    def __init__(
        self,
        max_size: int,
        window: int,
        tau: float,
        *,
        min_evidence: int = 0,
        prior_rollouts: float = 0.0,
        fair_share: bool = False,
    ):
        self.max_size = max_size
        self.window = window
        self.tau = tau
        self.min_evidence = min_evidence
        self.prior_rollouts = prior_rollouts
        self.fair_share = fair_share
        self.members: list[Member] = []
        self.archive: dict[str, Instruction] = {}
        self.last_weight: dict[str, float] = {}
        self.version = 0
        self.now = 0

    # -- views ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, instruction_id: str) -> bool:
        return any(m.instruction.id == instruction_id for m in self.members)

    @property
    def instructions(self) -> list[Instruction]:
        return [m.instruction for m in self.members]

    def _recent(self, member: Member) -> list[Observation]:
        return in_window(member.observations, self.now, self.window)

    def _weight(self, member: Member) -> float:
        return windowed_mean([o.mean_reward for o in self._recent(member)], self.window)

    def _score(self, member: Member) -> float:
        if self.prior_rollouts <= 0:
            return self._weight(member)
        return posterior_mean(self._recent(member), self._prior(member), self.prior_rollouts)

    def _prior(self, member: Member) -> float:
        """The member's prior; without one, the mean prior of the members that have one (0 if
        none)."""
        if member.prior is not None:
            return member.prior
        known = [m.prior for m in self.members if m.prior is not None]
        return sum(known) / len(known) if known else 0.0

    @property
    def weights(self) -> list[float]:
        """Eq. 6 importance weights over the step window (what the paper calls w_j)."""
        return [self._weight(m) for m in self.members]

    @property
    def scores(self) -> list[float]:
        """What sampling, pruning and ranking use: the weight, or the posterior mean when
        ``prior_rollouts`` > 0."""
        return [self._score(m) for m in self.members]

    @property
    def evidence(self) -> list[int]:
        """Rollouts observed in each member's window."""
        return [evidence(self._recent(m)) for m in self.members]

    def enough_evidence(self) -> list[bool]:
        return [n >= self.min_evidence for n in self.evidence]

    def weight_of(self, instruction_id: str) -> float:
        return self._weight(self._member(instruction_id))

    def score_of(self, instruction_id: str) -> float:
        return self._score(self._member(instruction_id))

    def evidence_of(self, instruction_id: str) -> int:
        return evidence(self._recent(self._member(instruction_id)))

    def probabilities(self) -> list[float]:
        """Eq. 4 over the scores; under ``fair_share``, members below the floor get 1/N each."""
        if self.fair_share:
            return fair_share_probabilities(
                self.scores, self.tau, [not ok for ok in self.enough_evidence()]
            )
        return selection_probabilities(self.scores, self.tau)

    def top(self, k: int) -> list[Instruction]:
        """The ``k`` best instructions by score (ties: older first); members without enough
        evidence come after those with enough."""
        order = rank(self.scores, self.enough_evidence())
        return [self.members[i].instruction for i in order[:k]]

    def best(self) -> Instruction:
        """I* = argmax_j w_j (the evidence rules' score when they are on)."""
        if not self.members:
            raise RuntimeError("the population is empty: there is no best instruction")
        return self.top(1)[0]

    # -- changes -------------------------------------------------------------------------
    def add(self, instruction: Instruction, prior: float | None = None) -> None:
        """Add a member; ``prior`` is its verification score on D_B when it has one."""
        if len(self.members) >= self.max_size:
            raise RuntimeError(f"population is full ({self.max_size}); cannot add {instruction.id}")
        if instruction.id in self:
            raise ValueError(f"instruction id {instruction.id!r} is already in the population")
        self.members.append(Member(instruction, prior=prior))
        self.archive[instruction.id] = instruction
        self.version += 1

    def set_prior(self, instruction_id: str, prior: float) -> None:
        self._member(instruction_id).prior = float(prior)

    def sample(self, rng: random.Random) -> Instruction:
        """Draw one instruction with probability softmax(score / tau)."""
        if not self.members:
            raise RuntimeError("cannot sample from an empty population")
        (member,) = rng.choices(self.members, weights=self.probabilities(), k=1)
        return member.instruction

    def advance(self, step: int) -> None:
        """Move the end of the weight window to ``step`` (never backwards)."""
        self.now = max(self.now, int(step))

    def observe(
        self,
        instruction_id: str,
        mean_reward: float,
        *,
        step: int | None = None,
        n_rollouts: int = 1,
    ) -> float:
        """Record one step's mean reward over ``n_rollouts`` trajectories; returns the new weight.

        ``step`` defaults to the step after the last one seen (for callers that observe once a
        step); the window then ends at that step.
        """
        step = self.now + 1 if step is None else int(step)
        self.advance(step)
        member = self._member(instruction_id)
        member.observations.append(Observation(step, int(n_rollouts), float(mean_reward)))
        # Only the window matters; keep the list bounded.
        member.observations[:] = self._recent(member)
        self.last_weight[instruction_id] = self._weight(member)
        return self.last_weight[instruction_id]

    def prune(self, n_parent: int, keep: Collection[str] = ()) -> list[Instruction]:
        """Drop the worse half by score of the members with enough evidence (all of them under
        Algorithm 1), never going below ``n_parent``; returns the removed. Members whose id is in
        ``keep`` are protected like those below the evidence floor (paired credit's race
        winners)."""
        protected = [
            not ok or m.instruction.id in keep
            for ok, m in zip(self.enough_evidence(), self.members, strict=True)
        ]
        keep = set(survivors_after_halving(self.scores, n_parent, protected))
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
        """W <- {0}: every member starts a fresh window; under the posterior rule its score so
        far becomes its prior (the evidence is summarised, not forgotten)."""
        for m in self.members:
            if self.prior_rollouts > 0:
                m.prior = self._score(m)
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
            "min_evidence": self.min_evidence,
            "prior_rollouts": self.prior_rollouts,
            "fair_share": self.fair_share,
            "version": self.version,
            "now": self.now,
            "members": [m.to_dict() for m in self.members],
            "archive": [i.to_dict() for i in self.archive.values()],
            "last_weight": dict(self.last_weight),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Population:
        pop = cls(
            data["max_size"],
            data["window"],
            data["tau"],
            min_evidence=int(data.get("min_evidence", 0)),
            prior_rollouts=float(data.get("prior_rollouts", 0.0)),
            fair_share=bool(data.get("fair_share", False)),
        )
        pop.version = data["version"]
        pop.now = int(data.get("now", 0))
        pop.members = [Member.from_dict(m) for m in data["members"]]
        pop.archive = {d["id"]: Instruction.from_dict(d) for d in data["archive"]}
        pop.last_weight = {k: float(v) for k, v in data["last_weight"].items()}
        return pop
