"""The three optimizer prompt templates of App. E, and the parser for their answers.

- ``reflection`` (INSPO's default): the parent instruction plus failure examples from the replay
  buffer; the optimizer analyses the mistakes and writes N revised candidates.
- ``paraphrase``: the parent instruction only (APE-style "improve the above prompt").
- ``history``: instruction/score pairs (OPRO-style), scores on a 0-100 scale.

Every template asks for the candidates inside ``<ins_1>…</ins_1>`` … ``<ins_N>…</ins_N>``;
:func:`parse_candidates` reads them back and :func:`critique_of` returns the analysis the
optimizer wrote before its first candidate.

The rendered shapes are a contract other code reads (the rule-based reflector parses them):
the parent sits in ``<ins_0>\\n…\\n</ins_0>``; each failure is one ``<example>`` block with
``Question:``, ``Response:`` and ``Correct answer:`` lines (answers joined by `` | ``); each
history entry is ``<ins_i>…</ins_i>`` followed by ``<score_i>…</score_i>``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from inspo.records import Rollout

TEMPLATES = ("reflection", "paraphrase", "history")
# The Search-R1 tags an instruction may teach; the guard keeps those a parent has (see proposer).
PROTOCOL_TAGS = ("search", "information", "answer", "think")
# The tags the policy itself must write for the protocol to work (the default guard): a search
# call and a final answer. <information> is written by the environment, and <think> is optional
# for the protocol; BENCHMARKS.md §4 saw instructions without <think> help the default policy.
REQUIRED_TAGS = ("search", "answer")
#: Ends a failure response that :func:`render_example` cut to its ``max_chars``.
TRUNCATION_MARK = " …[truncated]"

_FORMAT_RULES = (
    "Make sure you include the same XML tags <>...</> as the original prompt in your improved prompts.\n"
    "For each XML tag, include both the beginning and ending tags, such as <answer>...</answer>.\n"
    "List the instruction candidates in <ins_1>...</ins_1> to <ins_{n}>...</ins_{n}> tags."
)


@dataclass(frozen=True)
class ScoredInstruction:
    """One entry of the history template: an instruction and its score in [0, 100]."""

    text: str
    score: float


def render_example(rollout: Rollout, max_chars: int = 3000) -> str:
    """One failure trajectory as an ``<example>`` block (the response is cut to ``max_chars``)."""
    response = rollout.response
    if len(response) > max_chars:
        response = response[:max_chars] + TRUNCATION_MARK
    answers = " | ".join(rollout.question.answers)
    return (
        "<example>\n"
        f"Question: {rollout.question.question}\n"
        f"Response: {response}\n"
        f"Correct answer: {answers}\n"
        "</example>"
    )


def render_reflection(parent: str, failures: Sequence[Rollout], n: int) -> str:
    """App. E's reflection-based template (INSPO)."""
    examples = "\n".join(render_example(r) for r in failures)
    return (
        "The initial prompt is:\n"
        f"<ins_0>\n{parent}\n</ins_0>\n"
        "However, it still gets the following examples wrong:\n"
        f"{examples}\n"
        "Analyze the reasons behind these mistakes and why the prompt could have gotten these "
        "examples wrong.\n"
        "Now take the reasons into account. Revise and improve the initial prompt by giving "
        f"{n} different but better candidates.\n" + _FORMAT_RULES.format(n=n)
    )


def render_paraphrase(parent: str, n: int) -> str:
    """App. E's paraphrasing-based template."""
    return (
        f"<ins_0>\n{parent}\n</ins_0>\n"
        "Improve the above prompt.\n"
        f"Give {n} different candidates.\n" + _FORMAT_RULES.format(n=n)
    )


def render_history(history: Sequence[ScoredInstruction], n: int) -> str:
    """App. E's history-based template (scores on a 0-100 scale)."""
    body = "\n".join(
        f"<ins_{i}>\n{h.text}\n</ins_{i}>\n<score_{i}>{h.score:.1f}</score_{i}>"
        for i, h in enumerate(history, start=1)
    )
    return (
        f"<history>\n{body}\n</history>\n"
        'Based on the above "instruction: score" history for instructions with their scores, '
        "where the score ranges from 0 to 100, analyze what components can lead to better "
        "performance.\n"
        f"Give {n} different but better candidates. Make it concise and effective. Be creative "
        "and diverse in your suggestions.\n" + _FORMAT_RULES.format(n=n)
    )


_INS_RE = re.compile(r"<ins_(\d+)>(.*?)</ins_\1>", re.DOTALL)


def parse_candidates(text: str) -> list[str]:
    """The candidate texts in ``<ins_1>…</ins_N>`` order (``<ins_0>`` echoes are skipped).

    Stripped of surrounding whitespace; an unclosed or missing tag yields nothing for it.
    """
    found = [(int(m.group(1)), m.group(2).strip()) for m in _INS_RE.finditer(text)]
    return [body for idx, body in sorted(found, key=lambda p: p[0]) if idx >= 1]


def unclosed_candidate(text: str) -> tuple[int, str] | None:
    """``(i, body)`` of an ``<ins_i>`` opened after the last closed block and never closed (an
    answer cut off by the completion limit), or None."""
    closed = list(_INS_RE.finditer(text))
    tail = text[closed[-1].end():] if closed else text
    m = re.search(r"<ins_([1-9]\d*)>", tail)
    if m is None:
        return None
    return int(m.group(1)), tail[m.end():].strip()


def critique_of(text: str) -> str:
    """The analysis the optimizer wrote before its first candidate (empty when none)."""
    m = re.search(r"<ins_[1-9]\d*>", text)
    return (text[: m.start()] if m else text).strip()
