"""What the instruction side is doing, told to the user while it happens.

The core (:mod:`inspo.core.coevolution`) only emits typed events; :class:`PhaseAnnouncer` is an
observer of its :class:`~inspo.core.events.EventLog` that turns them into lines: the warm-up of
the seed, the start of P_0 or of an evolution round, each optimizer round (candidates proposed,
then how many were verified and admitted, and the population size after it), and the end of the
refill. A round's closing line goes out as soon as its last candidate is decided, so its time
stamp marks the end of that round's verification, not the end of the next optimizer call. A line
goes out through :func:`say`: above any tqdm bar with ``progress`` on, else to the
``inspo.training`` log at INFO (the CLI's default level), so no long phase runs silently either way.

The drivers say what the events cannot announce in advance (the warm-up starting, the final
choice and the held-out test, the periodic evaluation), and show a bar over the episodes of
long evaluations when ``progress`` is on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inspo.core.events import (
    Admitted,
    Event,
    EventLog,
    EvolutionFinished,
    EvolutionStarted,
    OptimizerFailed,
    Proposed,
    Rejected,
    Verified,
    WarmedUp,
)

log = logging.getLogger("inspo.training")


def say(lines: str | Sequence[str], progress: bool) -> None:
    """Lines for the user: written above any tqdm bar with ``progress`` on, logged at INFO on the
    ``inspo.training`` logger otherwise."""
    for line in [lines] if isinstance(lines, str) else lines:
        if progress:
            from tqdm.auto import tqdm

            tqdm.write(line)
        else:
            log.info(line)


@dataclass
class _Round:
    number: int
    proposed: int = 0
    refused: int = 0
    """Turned away before verification (the guard, a leaked answer)."""
    verified: int = 0
    admitted: int = 0
    decided: int = 0
    """Candidates with their outcome known (admitted, or rejected at any stage)."""
    guarded: int = 0
    failed: str = ""

    def settled(self) -> bool:
        """Every candidate has its outcome, so the round's line can go out now rather than after
        the next optimizer call. A round whose every candidate the guard refused is settled by its
        :class:`~inspo.core.events.OptimizerFailed` instead, which says why."""
        return 0 < self.proposed <= self.decided and self.guarded < self.proposed


class PhaseAnnouncer:
    """An :class:`~inspo.core.events.EventLog` observer that tells the user, one line at a time,
    how the initial population and each evolution round are going (module docstring). It only
    watches: it keeps its own counts and never touches the loop."""

    def __init__(self, tell: Callable[[str], None], *, max_rounds: int = 0):
        self.tell = tell
        self.max_rounds = max_rounds
        self.size = 0
        self.target = 0
        self.prefix = ""
        self.round: _Round | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, WarmedUp):
            self.tell(
                f"warm-up: the seed scored {event.mean_reward:.3f} on {event.n_rollouts} rollout(s)"
            )
        elif isinstance(event, EvolutionStarted):
            self._started(event)
        elif isinstance(event, Proposed):
            self._end_round()
            self.round = _Round(event.round, proposed=len(event.candidate_ids))
            if event.candidate_ids:  # a failed call is told at the round's end
                self.tell(
                    f"{self.prefix} round {event.round}{self._of_rounds()}: "
                    f"{len(event.candidate_ids)} candidate(s) proposed; verifying with the current "
                    "policy"
                )
        elif self.round is not None:
            self._count(event)
        if isinstance(event, EvolutionFinished):
            self._end_round()
            self._finished(event)

    def resumed(self, size: int, target: int) -> None:
        """Pick up an initial population a saved state stopped inside (its start was told by the
        run that saved it): later rounds count from ``size`` of ``target``."""
        self.size, self.target, self.prefix = size, target, "initial population:"

    def _of_rounds(self) -> str:
        return f"/{self.max_rounds}" if self.max_rounds else ""

    def _started(self, event: EvolutionStarted) -> None:
        self.size, self.target = len(event.parents), event.target_size
        if event.step == 0:
            self.prefix = "initial population:"
            self.tell(
                f"{self.prefix} growing the seed into {event.target_size} instructions "
                f"(optimizer rounds, each candidate verified with the current policy)"
            )
        else:
            self.prefix = f"step {event.step} evolution:"
            self.tell(
                f"{self.prefix} {len(event.parents)} parent(s) kept, refilling to "
                f"{event.target_size}"
            )

    def _count(self, event: Event) -> None:
        assert self.round is not None
        if isinstance(event, Verified):
            self.round.verified += 1
        elif isinstance(event, Admitted):
            self.round.admitted += 1
            self.round.decided += 1
            self.size += 1
        elif isinstance(event, Rejected):
            self.round.decided += 1
            self.round.refused += event.stage in ("guard", "leak")
            self.round.guarded += event.stage == "guard"
        elif isinstance(event, OptimizerFailed):
            self.round.failed = event.reason
            self._end_round()
            return
        if self.round.settled():
            self._end_round()

    def _end_round(self) -> None:
        r, self.round = self.round, None
        if r is None:
            return
        if r.failed:
            self.tell(
                f"{self.prefix} round {r.number}{self._of_rounds()}: nothing usable ({r.failed})"
            )
            return
        refused = f", {r.refused} refused before verification" if r.refused else ""
        self.tell(
            f"{self.prefix} round {r.number}{self._of_rounds()}: {r.proposed} proposed{refused}, "
            f"{r.verified} verified, {r.admitted} admitted (population {self.size}/{self.target})"
        )

    def _finished(self, event: EvolutionFinished) -> None:
        short = f", {event.short_by} short: {event.reason}" if event.short_by else ""
        self.tell(
            f"{self.prefix} done: {len(event.population)} instruction(s) after {event.rounds} "
            f"round(s){short}"
        )


def announce_events(events: EventLog, progress: bool, *, max_rounds: int = 0) -> PhaseAnnouncer:
    """Attach a :class:`PhaseAnnouncer` to ``events`` that says its lines through :func:`say`."""
    announcer = PhaseAnnouncer(lambda line: say(line, progress), max_rounds=max_rounds)
    events.observers.append(announcer)
    return announcer
