"""Records shared by every layer: questions, passages, rollouts, instructions, candidates.

Records instead of parallel lists: each thing the system handles is one dataclass with named
fields. They hold plain Python values only (str, int, float, lists, dicts), so they serialise to
JSON with :func:`dataclasses.asdict` and come back with ``from_dict``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any


def _from_dict(cls, data: dict[str, Any]):
    """Build ``cls`` from a dict, ignoring keys the record does not know (forward compatible)."""
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class Question:
    """One QA example.

    ``answers`` are the gold answers (any one matching counts). ``id`` must be unique within a
    dataset: it keys the deterministic instruction choice of a question's group.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    meta: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.answers, tuple):
            object.__setattr__(self, "answers", tuple(self.answers))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "answers": list(self.answers),
            "meta": dict(self.meta),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Question:
        return _from_dict(cls, data)


@dataclass(frozen=True)
class Passage:
    """One retrieved document. ``contents`` is Search-R1's ``"Title"\\ntext`` form."""

    id: str
    title: str
    text: str
    score: float | None = None

    @property
    def contents(self) -> str:
        return f'"{self.title}"\n{self.text}'

    @classmethod
    def from_contents(cls, id: str, contents: str, score: float | None = None) -> Passage:
        """Parse Search-R1's ``"Title"\\ntext``; a row without a title line gets an empty title."""
        head, sep, rest = contents.partition("\n")
        if sep and len(head) >= 2 and head.startswith('"') and head.endswith('"'):
            return cls(id=id, title=head[1:-1], text=rest, score=score)
        return cls(id=id, title="", text=contents, score=score)


@dataclass(frozen=True)
class ToolCall:
    """A turn that calls ``tool`` with ``args`` (the text the policy wrote for it, stripped)."""

    tool: str
    args: str


@dataclass
class Rollout:
    """One trajectory of the agent on one question under one instruction.

    ``response`` is everything generated after the prompt: the policy's actions interleaved with
    the environment's observations (tool results). ``tool_calls`` are the calls the environment
    ran, in order. Rewards are computed on the response alone, never on the prompt. An example that
    raised (an endpoint down, an engine crash) is still a Rollout, with ``error`` set,
    ``finish_reason="error"`` and reward 0; but it is not the policy's answer, so it is never
    scored: :func:`scored` leaves it out of every mean, weight, verification score and the replay
    buffer, and it is counted apart (see :func:`check_error_rate`).

    Token-level fields are filled by engines that keep token ids (empty otherwise):
    ``completion_ids`` and ``env_mask`` have equal length; ``env_mask`` is 1 for the policy's own
    tokens and 0 for retrieved ones.
    """

    question: Question
    instruction_id: str
    response: str
    reward: float = 0.0
    answer: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    turns: int = 0
    finish_reason: str = ""
    error: str | None = None
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    metrics: dict[str, float] = field(default_factory=dict)

    def to_dict(self, *, with_tokens: bool = False) -> dict[str, Any]:
        d = asdict(self)
        d["question"] = self.question.to_dict()
        if not with_tokens:
            for key in ("prompt_ids", "completion_ids", "env_mask", "logprobs"):
                d.pop(key)
        return d

    def calls_of(self, tool: str) -> list[str]:
        """The arguments of every call of ``tool``, in order."""
        return [c.args for c in self.tool_calls if c.tool == tool]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rollout:
        data = dict(data)
        data["question"] = Question.from_dict(data["question"])
        calls = data.get("tool_calls")
        if (
            calls is None and "searches" in data
        ):  # written before the environment seam: Search-R1's searches
            calls = [{"tool": "search", "args": q} for q in data["searches"]]
        data["tool_calls"] = [
            ToolCall(**c) if isinstance(c, dict) else ToolCall(*c) for c in calls or []
        ]
        return _from_dict(cls, data)


@dataclass(frozen=True)
class Instruction:
    """A member (or former member) of the instruction population.

    ``origin`` says where it came from: ``seed``, or the proposer template that wrote it
    (``reflection``, ``paraphrase``, ``history``, ``rule-based`` …). ``critique`` is the
    optimizer's analysis that produced it (empty for the seed).
    """

    id: str
    text: str
    parent_ids: tuple[str, ...] = ()
    origin: str = "seed"
    step_created: int = 0
    critique: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.parent_ids, tuple):
            object.__setattr__(self, "parent_ids", tuple(self.parent_ids))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["parent_ids"] = list(self.parent_ids)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Instruction:
        return _from_dict(cls, data)


@dataclass
class Candidate:
    """A proposed instruction on its way through the guard and the verifier.

    ``id`` is assigned at proposal time and kept if the candidate is admitted.
    ``score`` is its mean reward on the validation subset D_B (None until verified);
    ``rejected`` holds the reason when the guard or the verifier turned it away.
    """

    id: str
    text: str
    parent_id: str
    origin: str
    critique: str = ""
    score: float | None = None
    rejected: str | None = None

    def to_instruction(self, step: int) -> Instruction:
        return Instruction(
            id=self.id,
            text=self.text,
            parent_ids=(self.parent_id,),
            origin=self.origin,
            step_created=step,
            critique=self.critique,
        )


#: The evaluate seam the verifier, the final choice and the eval command share: the current
#: policy plays ``instruction`` on ``questions`` and returns their rollouts (one per question, or
#: G per question, question-major), higher reward better; it never raises for one bad example
#: (that example is a Rollout with ``error`` set, which no score counts: :func:`scored`), and
#: raises :class:`TooManyErrors` when more of them failed than its error budget allows. See
#: :mod:`inspo.core.verifier` and :mod:`inspo.envs.evaluate`.
EvaluateFn = Callable[[Instruction, Sequence[Question]], list[Rollout]]


# ---------------------------------------------------------------------------- errors, counted apart


class SetupError(RuntimeError):
    """A run cannot start; the message says which setting is wrong and how to fix it."""


class EndpointDown(RuntimeError):
    """An endpoint the agent needs (the retrieval server, the policy server) did not answer after
    its retries: a connection refused, a timeout, a 5xx. Nothing about the example caused it, so
    the whole batch fails with it (no replay one example at a time)."""


class TooManyErrors(RuntimeError):
    """More rollouts failed on errors than the run's ``max_error_rate`` allows: the run stops
    rather than score an outage as the policy's failures. ``rollouts`` holds those played before
    it stopped (errors included), so what was done is not lost."""

    def __init__(self, message: str, rollouts: Sequence[Rollout] = ()):
        super().__init__(message)
        self.rollouts = list(rollouts)


class RunStopped(RuntimeError):
    """A run stopped because its stop file was there when it saved (``inspo evolve``: ``STOP`` in
    its run directory, :func:`inspo.artifacts.honour_stop`): everything up to that save is kept,
    the stop file is removed, and the same command with ``--resume`` continues. Not a failure: how
    a long job runs in pieces without losing the work since its last save."""


def scored(rollouts: Sequence[Rollout]) -> list[Rollout]:
    """The rollouts a score may count: those that did not raise (``error`` is None)."""
    return [r for r in rollouts if r.error is None]


def error_summary(rollouts: Sequence[Rollout]) -> str:
    """The commonest error among ``rollouts``, with its count (empty when none failed)."""
    errors = [r.error for r in rollouts if r.error is not None]
    if not errors:
        return ""
    top = max(dict.fromkeys(errors), key=errors.count)
    return f"{errors.count(top)} x {top}" if len(set(errors)) > 1 else top


def check_error_rate(
    rollouts: Sequence[Rollout], *, max_error_rate: float | None, planned: int, setting: str
) -> None:
    """Raise :class:`TooManyErrors` when the error rollouts among ``rollouts`` are more than
    ``max_error_rate`` of ``planned`` (the rollouts the call or step will play in all, so a
    partial count trips only when the rate over the whole is sure to be exceeded). ``setting``
    names the knob in the message; ``max_error_rate`` None never trips."""
    if max_error_rate is None:
        return
    failed = sum(r.error is not None for r in rollouts)
    if failed and failed > max_error_rate * planned:
        of = (
            f"{len(rollouts)} played of {planned}"
            if len(rollouts) < planned
            else f"{len(rollouts)}"
        )
        errors = [r.error for r in rollouts if r.error is not None]
        tool = max(dict.fromkeys(errors), key=errors.count).startswith(
            "tool '"
        )  # the commonest error's
        cause = "the tool (its traceback is in the log)" if tool else "the endpoint"
        raise TooManyErrors(
            f"{failed} of {of} rollouts failed ({error_summary(rollouts)}), over "
            f"{setting}={max_error_rate:g}: stopping; fix {cause} or raise {setting}",
            rollouts,
        )
