"""The paired race: a candidate against its parent on the same D_B questions, stopped early once it
clearly cannot beat the parent (``admission: paired``; docs/choosing-on-evidence.md).

Pure maths, no policy. A *paired outcome* is one question played by both instructions with the same
policy at the same step: the candidate **wins** it when its reward is higher, **loses** it when the
parent's is, and ties otherwise (both right or both wrong, the common case). Only the questions
where the two differ carry evidence, which is why pairing needs far fewer questions than comparing
two means: a tie costs nothing in variance.

The rule (:class:`RaceRule`):

- questions are played in chunks of ``chunk``; after each chunk a candidate **stops** (is refused)
  when ``losses - wins >= futility`` (it is clearly behind: a random walk on the discordant
  questions that has fallen ``futility`` steps), or when even winning every question left could
  not put its wins above its losses (curtailment: this stop never changes the verdict);
- a candidate that plays all of D_B is **admitted** when ``wins > losses`` (strictly: a rewording
  that ties its parent everywhere is not admitted).

Its error rates depend only on the per-question probabilities of a win and of a loss
(:func:`admit_probability` computes them exactly by dynamic programming over ``wins - losses``);
:func:`size_for_gap` finds the smallest D_B that separates a gap in mean reward at given rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RaceRule:
    """``futility``: losses minus wins that stop a candidate (0: only curtailment stops one);
    ``chunk``: questions played between checks (>= 1)."""

    futility: int = 4
    chunk: int = 8

    def __post_init__(self) -> None:
        if self.futility < 0 or self.chunk < 1:
            raise ValueError(f"RaceRule needs futility >= 0 and chunk >= 1, got {self}")


@dataclass(frozen=True)
class Tally:
    """Paired outcomes so far: questions won, lost and tied by the candidate against its parent."""

    wins: int = 0
    losses: int = 0
    ties: int = 0

    @property
    def played(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def lead(self) -> int:
        """``wins - losses``: the race's random walk."""
        return self.wins - self.losses

    @property
    def difference(self) -> float:
        """The paired mean difference of a 0/1 reward (``lead / played``; 0.0 before any
        question)."""
        return self.lead / self.played if self.played else 0.0

    def add(self, candidate: Sequence[float], parent: Sequence[float]) -> Tally:
        """This tally with the paired rewards ``candidate[i]`` against ``parent[i]`` added."""
        if len(candidate) != len(parent):
            raise ValueError(
                f"paired rewards differ in length: {len(candidate)} against {len(parent)}"
            )
        wins = sum(c > p for c, p in zip(candidate, parent, strict=True))
        losses = sum(c < p for c, p in zip(candidate, parent, strict=True))
        return Tally(
            self.wins + wins, self.losses + losses, self.ties + len(candidate) - wins - losses
        )


def stops(tally: Tally, remaining: int, rule: RaceRule) -> bool:
    """Whether a candidate at ``tally``, with ``remaining`` questions of D_B left, stops here:
    ``futility`` behind, or unable to end with more wins than losses."""
    if tally.lead + remaining <= 0:
        return True
    return rule.futility > 0 and -tally.lead >= rule.futility


def admits(tally: Tally) -> bool:
    """The verdict of a candidate that played all of D_B: more wins than losses."""
    return tally.wins > tally.losses


def checkpoints(n: int, chunk: int) -> list[int]:
    """The question counts after which the rule checks: every ``chunk``, and ``n`` itself."""
    return sorted({*range(chunk, n, chunk), n}) if n > 0 else []


# ------------------------------------------------------------------------------ error rates


@dataclass(frozen=True)
class RaceRates:
    """The rule's behaviour for one candidate whose questions are won with probability ``p_win``
    and lost with ``p_loss`` independently: the chance it is admitted, and the questions it plays
    on average (the verification's cost, against ``n`` without a race)."""

    p_win: float
    p_loss: float
    n: int
    admit: float
    expected_played: float


def admit_probability(p_win: float, p_loss: float, n: int, rule: RaceRule) -> RaceRates:
    """Exact admission probability and expected questions played under ``rule`` on a D_B of ``n``
    questions (dynamic programming over the lead ``wins - losses``, in ``O(n^2)``)."""
    if not (p_win >= 0 and p_loss >= 0 and p_win + p_loss <= 1):
        raise ValueError(f"need p_win, p_loss >= 0 and p_win + p_loss <= 1, got {p_win}, {p_loss}")
    p_tie = 1.0 - p_win - p_loss
    alive = {0: 1.0}  # lead -> probability of still racing with that lead
    played = 0.0
    done = 0
    for stop_at in checkpoints(n, rule.chunk):
        for _ in range(stop_at - done):
            step: dict[int, float] = {}
            for lead, p in alive.items():
                for move, q in ((1, p_win), (-1, p_loss), (0, p_tie)):
                    if q:
                        step[lead + move] = step.get(lead + move, 0.0) + p * q
            alive = step
        played += (stop_at - done) * sum(alive.values())
        done = stop_at
        alive = {
            lead: p
            for lead, p in alive.items()
            if not stops(Tally(max(lead, 0), max(-lead, 0)), n - done, rule)
        }
    admit = sum(p for lead, p in alive.items() if lead > 0)
    return RaceRates(p_win, p_loss, n, admit, played)


def gap_rates(
    gap: float, discordance: float, n: int, rule: RaceRule
) -> tuple[RaceRates, RaceRates, RaceRates]:
    """The rule's rates for a candidate ``gap`` better than its parent, one equal to it and one
    ``gap`` worse, when the two differ on a share ``discordance`` of the questions (a win minus a
    loss probability of ``gap``; needs ``discordance >= gap``)."""
    if not 0 <= gap <= discordance <= 1:
        raise ValueError(
            f"need 0 <= gap <= discordance <= 1, got gap {gap}, discordance {discordance}"
        )
    hi, lo = (discordance + gap) / 2, (discordance - gap) / 2
    half = discordance / 2
    return (
        admit_probability(hi, lo, n, rule),
        admit_probability(half, half, n, rule),
        admit_probability(lo, hi, n, rule),
    )


def size_for_gap(
    gap: float,
    discordance: float,
    rule: RaceRule,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
    n_max: int = 1024,
) -> int | None:
    """The smallest D_B on which ``rule`` admits a candidate ``gap`` better than its parent with at
    least ``power`` and one ``gap`` worse with at most ``alpha`` (None: not within ``n_max``)."""
    for n in range(1, n_max + 1):
        better, _, worse = gap_rates(gap, discordance, n, rule)
        if better.admit >= power and worse.admit <= alpha:
            return n
    return None
