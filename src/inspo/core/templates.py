"""The three optimizer prompt templates of App. E, and the parser for their answers.

- ``reflection`` (INSPO's default): the parent instruction plus failure examples from the replay
  buffer; the optimizer analyses the mistakes and writes N revised candidates.
- ``paraphrase``: the parent instruction only (APE-style "improve the above prompt").
- ``history``: instruction/score pairs (OPRO-style), scores on a 0-100 scale.

Every template asks for the candidates inside ``<ins_1>…</ins_1>`` … ``<ins_N>…</ins_N>``;
:func:`parse_answer` reads them back the way a small model writes them (its docstring lists the
forms it accepts and the fallbacks it counts), :func:`parse_candidates` gives just the texts and
:func:`critique_of` the analysis the optimizer wrote before its first candidate.

Under ``coevolution.protocol_block`` (``protocol_tags`` given) the parent and the history entries
are strategies (the instruction without the environment's protocol block) and the closing rules
ask for strategies only, saying the protocol is appended (:func:`format_rules`); without it every
prompt is App. E's, byte for byte.

The rendered shapes are a contract other code reads (the rule-based reflector parses them):
the parent sits in ``<ins_0>\\n…\\n</ins_0>``; each failure is one ``<example>`` block with
``Question:``, ``Response:`` and ``Correct answer:`` lines (answers joined by `` | ``), and a
``Feedback:`` line when the run shows the environment's feedback (``coevolution.feedback``; App. E
has none); each history entry is ``<ins_i>…</ins_i>`` followed by ``<score_i>…</score_i>``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from inspo.records import Rollout

TEMPLATES = ("reflection", "paraphrase", "history")
#: Ends a failure response that :func:`render_example` cut to its ``max_chars``.
TRUNCATION_MARK = " …[truncated]"

_FORMAT_RULES = (
    "Make sure you include the same XML tags <>...</> as the original prompt in your improved "
    "prompts.\nFor each XML tag, include both the beginning and ending tags, such as "
    "<answer>...</answer>.\nList the instruction candidates in <ins_1>...</ins_1> to "
    "<ins_{n}>...</ins_{n}> tags."
)
#: The format rules under ``coevolution.protocol_block``: ``<ins_0>`` shows the parent's strategy
#: only, and the optimizer is asked for strategies (the protocol block is appended to each).
_STRATEGY_RULES = (
    "The tool protocol ({tags}) is fixed: it is added after every candidate automatically.\n"
    "Write only the strategy (how to solve the task), not the tool protocol.\n"
    "List the instruction candidates in <ins_1>...</ins_1> to <ins_{n}>...</ins_{n}> tags."
)


def format_rules(n: int, protocol_tags: Sequence[str] | None = None) -> str:
    """The lines that end every template: App. E's (keep the XML tags, list the candidates) or,
    given ``protocol_tags`` (the environment's protocol block is appended to each candidate),
    the strategy-only rules naming those tags."""
    if protocol_tags is None:
        return _FORMAT_RULES.format(n=n)
    tags = ", ".join(f"<{t}>...</{t}>" for t in protocol_tags)
    return _STRATEGY_RULES.format(tags=tags, n=n)


@dataclass(frozen=True)
class ScoredInstruction:
    """One entry of the history template: an instruction and its score in [0, 100]."""

    text: str
    score: float


def render_example(rollout: Rollout, max_chars: int = 3000, feedback: str = "") -> str:
    """One failure trajectory as an ``<example>`` block (the response is cut to ``max_chars``;
    ``feedback``, when given, is one more line: how the episode went, in the environment's
    words)."""
    response = rollout.response
    if len(response) > max_chars:
        response = response[:max_chars] + TRUNCATION_MARK
    answers = " | ".join(rollout.question.answers)
    note = f"Feedback: {' '.join(feedback.split())}\n" if feedback.strip() else ""
    return (
        "<example>\n"
        f"Question: {rollout.question.question}\n"
        f"Response: {response}\n"
        f"Correct answer: {answers}\n"
        f"{note}"
        "</example>"
    )


def render_reflection(
    parent: str,
    failures: Sequence[Rollout],
    n: int,
    feedback: Callable[[Rollout], str] | None = None,
    *,
    protocol_tags: Sequence[str] | None = None,
) -> str:
    """App. E's reflection-based template (INSPO); ``feedback`` adds each failure's feedback line;
    ``protocol_tags``: ``parent`` is a strategy, and strategies are asked for
    (:func:`format_rules`)."""
    examples = "\n".join(
        render_example(r, feedback=feedback(r) if feedback else "") for r in failures
    )
    return (
        "The initial prompt is:\n"
        f"<ins_0>\n{parent}\n</ins_0>\n"
        "However, it still gets the following examples wrong:\n"
        f"{examples}\n"
        "Analyze the reasons behind these mistakes and why the prompt could have gotten these "
        "examples wrong.\n"
        "Now take the reasons into account. Revise and improve the initial prompt by giving "
        f"{n} different but better candidates.\n" + format_rules(n, protocol_tags)
    )


def render_paraphrase(parent: str, n: int, *, protocol_tags: Sequence[str] | None = None) -> str:
    """App. E's paraphrasing-based template (``protocol_tags``: as :func:`render_reflection`)."""
    return (
        f"<ins_0>\n{parent}\n</ins_0>\n"
        "Improve the above prompt.\n"
        f"Give {n} different candidates.\n" + format_rules(n, protocol_tags)
    )


def render_history(
    history: Sequence[ScoredInstruction], n: int, *, protocol_tags: Sequence[str] | None = None
) -> str:
    """App. E's history-based template (scores on a 0-100 scale; ``protocol_tags``: the entries
    are strategies, as :func:`render_reflection`)."""
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
        "and diverse in your suggestions.\n" + format_rules(n, protocol_tags)
    )


#: One tag of an ``<ins_k>`` block, as a small model writes it: any case, spaces inside the
#: brackets, and ``_``, ``-``, whitespace or nothing between ``ins`` and the number. So
#: ``<ins_1>``, ``<INS_1>``, ``< ins_1 >``, ``<ins1>``, ``<Ins 1>`` and ``</ ins-1 >`` are all
#: tags of block 1. Group 1 is ``/`` for a closing tag (else empty), group 2 the number.
_INS_RE = re.compile(r"<\s*(/?)\s*ins[\s_-]*(\d+)\s*>", re.IGNORECASE)

#: The fallbacks :func:`parse_answer` takes and counts, with what each means.
PARSE_FALLBACKS: dict[str, str] = {
    "tag_form": "a tag not written exactly <ins_k> / </ins_k> (case or spacing)",
    "missing_close": "no closing tag: the block ends at the next opening tag",
    "mismatched_close": "closed by another block's tag (<ins_2>…</ins_1>)",
    "end_of_text": "no closing tag: the block runs to the end of an answer the completion limit "
    "did not cut",
    "ins_0_revision": "a revision written in <ins_0>, the slot that shows the parent",
}


@dataclass
class ParsedAnswer:
    """What :func:`parse_answer` read in one optimizer answer."""

    candidates: list[str] = field(default_factory=list)
    """Candidate texts in block order (``<ins_0>`` first, then ``<ins_1>`` …), stripped."""
    truncated: tuple[int, str] | None = None
    """``(k, text so far)`` of the ``<ins_k>`` block the completion limit cut off, or None."""
    notes: list[tuple[str, int]] = field(default_factory=list)
    """Every fallback taken, as ``(kind, k)``: kind is a key of :data:`PARSE_FALLBACKS`, k the
    block."""

    @property
    def fallbacks(self) -> dict[str, int]:
        """How many times each kind of fallback was taken (kinds never taken are left out)."""
        counts: dict[str, int] = {}
        for kind, _ in self.notes:
            counts[kind] = counts.get(kind, 0) + 1
        return counts


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def parse_answer(text: str, *, parent: str | None = None, cut_off: bool = False) -> ParsedAnswer:
    """The candidates of one optimizer answer, read the way a small model writes App. E's format.

    Tags are matched by ``_INS_RE`` (any case and spacing, ``<ins1>``, ``<Ins 1>`` …). An
    opening ``<ins_k>`` starts a block, which ends at the next tag of any block: its own
    ``</ins_k>`` (the well-formed case), another block's closing tag, or the next opening tag
    (a missing close tag loses nothing). A block with no tag after it runs to the end of the
    text, and then one of two things holds:

    - ``cut_off`` (the completion stopped at its ``max_tokens``): the block was cut off; it is
      ``truncated`` and not a candidate (an ``<ins_0>`` whose text so far is the start of the
      parent is an echo cut off, and dropped);
    - otherwise the answer ended there, and the block is a candidate (``end_of_text``).

    ``<ins_0>`` is the slot where App. E shows the parent: a block 0 whose text equals
    ``parent`` (compared case- and whitespace-insensitively), or any block 0 when ``parent`` is
    None, is an echo and skipped; one that differs is a revision and a candidate (small models
    write their revision there). Closing tags with no open block, and text between blocks, are
    ignored. Each fallback taken is recorded in ``notes``: see :data:`PARSE_FALLBACKS`.
    """
    tags = list(_INS_RE.finditer(text))
    out = ParsedAnswer()
    found: list[tuple[int, str]] = []
    for i, m in enumerate(tags):
        if m.group(1):  # a closing tag: it ended the block before it, or is stray
            continue
        k = int(m.group(2))
        nxt = tags[i + 1] if i + 1 < len(tags) else None
        body = text[m.end() : nxt.start() if nxt is not None else len(text)].strip()
        kinds = [] if m.group(0) == f"<ins_{k}>" else ["tag_form"]
        if nxt is None:
            if cut_off:
                echo = k == 0 and (parent is None or _norm(parent).startswith(_norm(body)))
                if not echo:
                    out.truncated = (k, body)
                continue
            kinds.append("end_of_text")
        elif not nxt.group(1):
            kinds.append("missing_close")
        elif int(nxt.group(2)) != k:
            kinds.append("mismatched_close")
        elif nxt.group(0) != f"</ins_{k}>" and "tag_form" not in kinds:
            kinds.append("tag_form")
        if k == 0:
            if parent is None or _norm(body) in ("", _norm(parent)):
                continue  # the parent echoed back: not a candidate, not a fallback
            kinds.append("ins_0_revision")
        found.append((k, body))
        out.notes += [(kind, k) for kind in kinds]
    out.candidates = [body for _, body in sorted(found, key=lambda p: p[0])]
    return out


def parse_candidates(text: str, *, parent: str | None = None, cut_off: bool = False) -> list[str]:
    """The candidate texts :func:`parse_answer` reads in ``text``, in block order.

    With the defaults, ``<ins_0>`` blocks are skipped and a block left open at the end of the
    text counts (the answer is taken as complete).
    """
    return parse_answer(text, parent=parent, cut_off=cut_off).candidates


def critique_of(text: str) -> str:
    """The analysis the optimizer wrote before its first ``<ins_k>`` candidate block (k >= 1),
    with any ``<ins_0>`` block (an echo or a revision) left out; empty when there is none."""
    tags = list(_INS_RE.finditer(text))
    parts: list[str] = []
    pos, end = 0, len(text)
    for i, m in enumerate(tags):
        if m.group(1):
            continue
        if int(m.group(2)) >= 1:
            end = m.start()
            break
        parts.append(text[pos : m.start()])  # block 0: drop it, with its closing tag
        nxt = tags[i + 1] if i + 1 < len(tags) else None
        pos = len(text) if nxt is None else (nxt.end() if nxt.group(1) else nxt.start())
    parts.append(text[pos:end])
    return "".join(parts).strip()
