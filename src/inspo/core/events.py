"""Typed events of the co-evolution loop and the JSONL stream they are written to.

Each event is a small frozen dataclass with a ``kind``. :class:`EventLog` appends them, one JSON
object per line, to ``events.jsonl`` (when given a path) and hands them to observers. Observers
only watch: they cannot change what the loop does.

The events carry every number the cost ledger counts (:class:`inspo.core.accounting.CostLedger`
is computed from them): rollouts in :class:`WarmedUp`, :class:`Weights`, :class:`Verified` and
:class:`ParentVerified`, optimizer calls, tokens and failures in :class:`Proposed`, candidates in
:class:`Proposed`, :class:`Rejected` and :class:`Admitted`. :func:`event_from_dict` reads a line
of ``events.jsonl`` back into its event.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = "event"
    step: int

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class WarmedUp(Event):
    """The seed was rolled out on the warm-up questions before step 1 (its rollouts fill the
    buffer)."""

    kind: ClassVar[str] = "warmed_up"
    instruction_id: str = ""
    n_rollouts: int = 0
    mean_reward: float = 0.0
    """Over the rollouts without an error."""
    n_errors: int = 0
    """Those of the ``n_rollouts`` that failed on an error (an outage): not scored, not in the
    buffer."""


@dataclass(frozen=True)
class Sampled(Event):
    """A question group was given an instruction."""

    kind: ClassVar[str] = "sampled"
    question_id: str = ""
    instruction_id: str = ""


@dataclass(frozen=True)
class Attributed(Event):
    """An instruction's rewards of one step were credited to it (Eq. 6)."""

    kind: ClassVar[str] = "attributed"
    instruction_id: str = ""
    n_rollouts: int = 0
    mean_reward: float = 0.0
    weight: float = 0.0


@dataclass(frozen=True)
class Weights(Event):
    """Every member's weight at the end of a step (after attribution, before pruning)."""

    kind: ClassVar[str] = "weights"
    weights: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    """What ranking uses: the weights, or the posterior means under the evidence rules."""
    evidence: dict[str, int] = field(default_factory=dict)
    """Rollouts observed in each member's weight window."""
    n_rollouts: int = 0
    """The step's trajectories, all of them (also those of an instruction pruned while they were
    in flight, which credit nothing): the ledger's training rollouts."""
    n_errors: int = 0
    """Those of them that failed on an error (an outage): they credit nothing either."""


@dataclass(frozen=True)
class Pruned(Event):
    kind: ClassVar[str] = "pruned"
    removed: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    weights: dict[str, float] = field(default_factory=dict)
    evidence: dict[str, int] = field(default_factory=dict)
    protected: tuple[str, ...] = ()
    """Kept members below the evidence floor (fewer than min_evidence rollouts in their window),
    which this prune could not drop; the prune might have kept them anyway."""
    saved: tuple[str, ...] = ()
    """The protected members that the same prune without the floor would have dropped: the
    floor's effect at this step (on the same scores; later steps are not replayed)."""


@dataclass(frozen=True)
class EvolutionStarted(Event):
    kind: ClassVar[str] = "evolution_started"
    parents: tuple[str, ...] = ()
    target_size: int = 0


@dataclass(frozen=True)
class Proposed(Event):
    """One optimizer call and what came out of it (before the guard)."""

    kind: ClassVar[str] = "proposed"
    round: int = 0
    parent_id: str = ""
    template: str = ""
    failures: tuple[str, ...] = ()
    candidate_ids: tuple[str, ...] = ()
    critique: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    """Why the call failed (the optimizer raised, or its answer had no candidate); "" when it did
    not."""
    parse_fallbacks: dict[str, int] = field(default_factory=dict)
    """How often each parser fallback was needed to read the answer, by kind (the keys of
    :data:`inspo.core.templates.PARSE_FALLBACKS`); {} when none was, and in logs written before
    the field existed."""


@dataclass(frozen=True)
class Rejected(Event):
    """A candidate turned away, and why (guard or verifier)."""

    kind: ClassVar[str] = "rejected"
    candidate_id: str = ""
    reason: str = ""
    text: str = ""
    stage: str = ""
    """Which check turned it away: ``guard`` (the proposer's guard: tags, length, duplicates,
    truncation), ``leak`` (it contains a gold answer of a question its optimizer call was shown
    or of its D_B; checked before verification), ``verify`` (its D_B evaluation raised or
    returned nothing), ``parent`` (scored below its parent
    under ``beat-parent``) or ``top_n`` (no free slot left for its score). "" in logs written
    before the field existed."""


@dataclass(frozen=True)
class Verified(Event):
    """A candidate scored on D_B with the current policy."""

    kind: ClassVar[str] = "verified"
    candidate_id: str = ""
    score: float = 0.0
    n_questions: int = 0
    n_rollouts: int = 0
    """Trajectories the scoring generated (one per question, or more for a group-size evaluator)."""
    wins: int | None = None
    """Under ``admission: paired``: D_B questions on which the candidate scored above its parent
    (None under the other admissions)."""
    losses: int | None = None
    """Under ``admission: paired``: D_B questions on which it scored below its parent."""
    stopped: bool = False
    """Under ``admission: paired``: the race stopped it before the end of D_B
    (docs/choosing-on-evidence.md)."""

    def to_dict(self) -> dict[str, Any]:
        """The event's line; the race's fields only under ``admission: paired`` (a line written
        under the other admissions is what it always was)."""
        data = super().to_dict()
        if self.wins is None:
            for key in ("wins", "losses", "stopped"):
                data.pop(key)
        return data


@dataclass(frozen=True)
class ParentVerified(Event):
    """The parent scored on the same D_B questions and sampling seeds as its candidates."""

    kind: ClassVar[str] = "parent_verified"
    parent_id: str = ""
    score: float = 0.0
    n_questions: int = 0
    n_rollouts: int = 0


@dataclass(frozen=True)
class Gated(Event):
    """A candidate (or, with ``parent``, its parent, once per round) played on the failure problems
    its optimizer call was shown, before D_B (``coevolution.gate``): ``passed`` when it won more of
    them than it lost against the parent (questions where exactly one of the two scored higher)."""

    kind: ClassVar[str] = "gated"
    candidate_id: str = ""
    parent: bool = False
    wins: int = 0
    losses: int = 0
    n_questions: int = 0
    n_rollouts: int = 0
    passed: bool = False


@dataclass(frozen=True)
class Admitted(Event):
    kind: ClassVar[str] = "admitted"
    instruction: dict[str, Any] = field(default_factory=dict)
    score: float | None = None


@dataclass(frozen=True)
class OptimizerFailed(Event):
    """An optimizer round produced nothing usable; training goes on."""

    kind: ClassVar[str] = "optimizer_failed"
    round: int = 0
    reason: str = ""


@dataclass(frozen=True)
class EvolutionFinished(Event):
    kind: ClassVar[str] = "evolution_finished"
    rounds: int = 0
    population: tuple[str, ...] = ()
    short_by: int = 0
    reason: str = ""


@dataclass(frozen=True)
class SettingsChanged(Event):
    """A run resumed after ``step`` with co-evolution settings that differ from its saved state's;
    the new values apply from the next step on."""

    kind: ClassVar[str] = "settings_changed"
    changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """setting -> {"old": saved value, "new": value in use}."""


def _event_classes(base: type[Event] = Event) -> dict[str, type[Event]]:
    found: dict[str, type[Event]] = {}
    for cls in base.__subclasses__():
        found[cls.kind] = cls
        found.update(_event_classes(cls))
    return found


def event_from_dict(data: dict[str, Any]) -> Event | None:
    """The event a line of ``events.jsonl`` was written from (None for a kind this inspo does not
    know). Fields it does not know are dropped, missing ones take their defaults, and JSON lists
    become the tuples the event holds."""
    cls = _event_classes().get(data.get("kind", ""))
    if cls is None:
        return None
    values = {}
    for f in fields(cls):
        if f.name in data:
            value = data[f.name]
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


Observer = Callable[[Event], None]


class EventLog:
    """Writes events to a JSONL file (optional) and keeps them in memory for the caller."""

    def __init__(self, path: str | Path | None = None, *, keep: bool = True):
        self.path = Path(path) if path is not None else None
        self.keep = keep
        self.events: list[Event] = []
        self.observers: list[Observer] = []
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def emit(self, event: Event) -> None:
        if self.keep:
            self.events.append(event)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(event.to_dict(), ensure_ascii=False) + "\n")
        for observe in self.observers:
            observe(event)

    def of_kind(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]

    def count(self) -> int:
        """The events in the log: the file's readable lines (those of an earlier, resumed run too),
        or without a file the events kept."""
        return (
            len(read_events(self.path))
            if self.path is not None and self.path.is_file()
            else len(self.events)
        )


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """Read an ``events.jsonl`` back as dicts (a torn last line from a killed run is skipped)."""
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out
