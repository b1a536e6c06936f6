"""A played episode, turn by turn, for people to read (``inspo ask``,
:meth:`inspo.trained.Agent.ask`, the report).

:func:`turns_of` splits a :class:`~inspo.records.Rollout`'s response at what the environment wrote
into it (``env.split_turns``: observations, the corrective message, the last-turn nudge), so each
piece between them is one policy turn. Each :class:`Turn` holds the turn's text, its reasoning
(the text without the action tag), its action as ``env.parse`` reads it and, for a tool call that
ran, the result as the environment shows it to people (``env.show``: Search-R1 lists the retrieved
titles) from the observation that followed it.

Rules: the prefill (forced text) is part of the first turn's text, as the policy saw it; the last
turn's call is not run (Search-R1's final turn), so it has no result; a call whose tool failed
(an error rollout) has no result either; pure functions, no heavy imports.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.envs.base import Environment, FinalAnswer
from inspo.records import Rollout, ToolCall

_THINK = re.compile(r"</?think>")


@dataclass
class Turn:
    """One policy turn of an episode."""

    index: int
    """1-based turn number."""
    text: str
    """Everything the policy wrote in the turn (with the prefill on turn 1)."""
    action: str
    """call, answer or invalid (no complete tag)."""
    tool: str = ""
    """The tool called ('' unless ``action`` is call)."""
    content: str = ""
    """The call's arguments or the answer ('' when invalid)."""
    result: list[str] = field(default_factory=list)
    """The call's result as lines for people (empty: no call, a call not run, or a failed tool)."""
    executed: bool = False
    """A call the environment ran (False for the final turn's call)."""
    answer_tag: str = "answer"

    @property
    def reasoning(self) -> str:
        """The turn's text without its action tag and ``<think>`` tags, stripped."""
        text = self.text
        tag = (
            self.tool
            if self.action == "call"
            else self.answer_tag
            if self.action == "answer"
            else ""
        )
        if tag:
            text = re.sub(
                rf"<{re.escape(tag)}>.*?</{re.escape(tag)}>", "", text, count=1, flags=re.DOTALL
            )
        return _THINK.sub("", text).strip()


def turns_of(env: Environment, rollout: Rollout, *, detail: int = 0) -> list[Turn]:
    """The policy turns of ``rollout``, played in ``env`` (``detail``: passed to ``env.show``)."""
    split = env.split_turns(rollout.response)
    if rollout.turns:
        split = split[: rollout.turns]
    answer_tag = getattr(env, "answer_tag", "answer")
    turns, ran = [], 0
    for i, (text, observation) in enumerate(split, 1):
        action = env.parse(text)
        turn = Turn(index=i, text=text.strip(), action="invalid", answer_tag=answer_tag)
        if isinstance(action, FinalAnswer):
            turn.action, turn.content = "answer", action.text
        elif isinstance(action, ToolCall):
            turn.action, turn.tool, turn.content = "call", action.tool, action.args
            if ran < len(rollout.tool_calls):  # only the final turn's call is not run
                ran += 1
                turn.executed = True
                if observation.strip():
                    turn.result = env.show(action, observation, detail=detail)
        turns.append(turn)
    return turns


def transcript_lines(turns: Sequence[Turn], rollout: Rollout) -> list[str]:
    """The turns as readable lines: each turn's reasoning, ``TOOL: <arguments>`` with the result
    lines or ``answer: <answer>``, then a closing ``final answer: ...`` (the episode's answer, or
    ``final answer: (none; ...)`` with how the episode ended)."""
    out = []
    for turn in turns:
        out.append(f"turn {turn.index}")
        if turn.reasoning:
            out += [f"  {line}" for line in turn.reasoning.splitlines() if line.strip()]
        if turn.action == "call":
            out.append(f"  {turn.tool}: {turn.content}")
            if not turn.executed:
                out.append("    (not run: the final turn may only answer)")
            out += [f"    {line}" for line in turn.result]
        elif turn.action == "answer":
            out.append(f"  answer: {turn.content}")
        else:
            out.append("  (no tool call and no answer in this turn)")
    if rollout.answer is not None:
        out.append(f"final answer: {rollout.answer}")
    else:
        out.append(
            f"final answer: (none; the episode ended by {rollout.finish_reason or 'turn_limit'}"
            + (f": {rollout.error}" if rollout.error else "")
            + ")"
        )
    return out


def transcript(env: Environment, rollout: Rollout, **kwargs: Any) -> list[str]:
    """:func:`transcript_lines` of :func:`turns_of` in one call."""
    return transcript_lines(turns_of(env, rollout, **kwargs), rollout)
