"""A played episode, turn by turn, for people to read (``inspo ask``, :meth:`inspo.trained.Agent.ask`).

:func:`turns_of` splits a :class:`~inspo.records.Rollout`'s response at what the environment
wrote into it (the ``<information>`` observations, Search-R1's corrective message and the
last-turn nudge; :mod:`inspo.agent.rollout`), so each piece between them is one policy turn.
Each :class:`Turn` holds the turn's text, its reasoning (the text without the action tag), its
action as :func:`~inspo.agent.protocol.parse_action` reads it, and, for an executed search, the
passages the retriever returned. The passages come from :class:`RecordingRetriever`, which wraps
the retriever an episode played with and keeps every query's results in order; nothing is
parsed back out of the observation text (an observation may be truncated).

Rules: the prefill (forced text) is part of the first turn's text, as the policy saw it; the
last turn's search is not executed (Search-R1's final turn), so it has no passages; pure
functions, no heavy imports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from inspo.agent.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    parse_action,
)
from inspo.records import Passage, Rollout
from inspo.retrieval.base import Retriever

#: What the environment writes between two policy turns: observations and its fixed messages, one
#: after another (an observation then the last-turn nudge is one piece).
_ENV_TEXT = re.compile(
    r"(?:\s*(?:<information>.*?</information>|"
    + "|".join(re.escape(m.strip()) for m in (INVALID_ACTION_MESSAGE, LAST_TURN_NUDGE)) + r")\s*)+",
    re.DOTALL,
)
_TAGS = re.compile(r"</?think>")
_ACTION_TAG = re.compile(r"<(search|answer)>.*?</\1>", re.DOTALL)


@dataclass
class Turn:
    """One policy turn of an episode."""

    index: int
    """1-based turn number."""
    text: str
    """Everything the policy wrote in the turn (with the prefill on turn 1)."""
    action: str
    """search, answer or invalid (no complete tag)."""
    content: str = ""
    """The search query or the answer ('' when invalid)."""
    passages: list[Passage] = field(default_factory=list)
    """What the search returned (empty: no search, or the final turn's search, which is not run)."""
    executed: bool = False
    """A search the environment ran (False for the final turn's search)."""

    @property
    def reasoning(self) -> str:
        """The turn's text without its action tag and ``<think>`` tags, stripped."""
        text = _ACTION_TAG.sub("", self.text, count=1) if self.action != "invalid" else self.text
        return _TAGS.sub("", text).strip()


def turns_of(rollout: Rollout, results: Sequence[Sequence[Passage]] = ()) -> list[Turn]:
    """The policy turns of ``rollout``; ``results`` are the passages of its executed searches, in
    order (:class:`RecordingRetriever`), attached to the searching turns."""
    pieces = _ENV_TEXT.split(rollout.response)
    if len(pieces) > 1 and not pieces[-1].strip():
        pieces.pop()  # the response ended with environment text
    if rollout.turns:
        pieces = pieces[: rollout.turns]
    turns, found, searched = [], list(results), 0
    for i, text in enumerate(pieces, 1):
        action = parse_action(text)
        turn = Turn(index=i, text=text.strip(), action=action.kind, content=action.content)
        if action.kind == "search" and searched < len(rollout.searches):  # only the final turn's is not run
            searched += 1
            turn.executed = True
            turn.passages = list(found.pop(0)) if found else []
        turns.append(turn)
    return turns


def transcript_lines(turns: Sequence[Turn], rollout: Rollout, *, passage_chars: int = 0) -> list[str]:
    """The turns as readable lines: each turn's reasoning, ``search: <query>`` with the retrieved
    titles or ``answer: <answer>``, then a closing ``final answer: ...`` (the last ``<answer>`` of
    the episode, or ``final answer: (none; ...)`` with how the episode ended).
    ``passage_chars > 0`` prints that many characters of each passage after its title."""
    out = []
    for turn in turns:
        out.append(f"turn {turn.index}")
        if turn.reasoning:
            out += [f"  {line}" for line in turn.reasoning.splitlines() if line.strip()]
        if turn.action == "search":
            out.append(f"  search: {turn.content}")
            if not turn.executed:
                out.append("    (not run: the final turn may only answer)")
            for k, p in enumerate(turn.passages, 1):
                text = f" - {p.text[:passage_chars].strip()}" if passage_chars else ""
                out.append(f"    {k}. {p.title or '(untitled)'}{text}")
        elif turn.action == "answer":
            out.append(f"  answer: {turn.content}")
        else:
            out.append("  (no <search> or <answer> in this turn)")
    if rollout.answer is not None:
        out.append(f"final answer: {rollout.answer}")
    else:
        out.append(f"final answer: (none; the episode ended by {rollout.finish_reason or 'turn_limit'}"
                   + (f": {rollout.error}" if rollout.error else "") + ")")
    return out


class RecordingRetriever:
    """A :class:`~inspo.retrieval.base.Retriever` that passes every call to ``inner`` and keeps
    each query's passages (``calls``: (query, passages) in order)."""

    def __init__(self, inner: Retriever):
        self.inner = inner
        self.calls: list[tuple[str, list[Passage]]] = []

    def search(self, queries: list[str], k: int) -> list[list[Passage]]:
        results = self.inner.search(queries, k)
        self.calls += [(q, list(r)[:k]) for q, r in zip(queries, results, strict=True)]
        return results

    def take(self) -> list[tuple[str, list[Passage]]]:
        """The calls recorded since the last ``take`` (and forget them)."""
        calls, self.calls = self.calls, []
        return calls
