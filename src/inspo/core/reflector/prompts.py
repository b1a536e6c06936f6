"""Reading INSPO's optimizer prompts: the inverse of :mod:`inspo.core.templates`.

:func:`parse_prompt` takes a prompt the templates rendered and returns what the reflector needs:
the kind (``reflection``: ``<example>`` blocks with ``Question:`` / ``Response:`` /
``Correct answer:`` lines; ``paraphrase``: only ``<ins_0>``; ``history``: ``<ins_i>``/``<score_i>``
pairs in a ``<history>`` block), the instruction to revise (for history prompts: the best-scored
one), the failure examples, and N ("giving N different" / "Give N different"; 6 when absent).
A change to a template's shape must be mirrored here (tests/test_llm_rule_based.py parses every
template).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inspo.core.optimizer_llm import LLMError
from inspo.core.reflector.failures import FailureExample
from inspo.core.templates import TRUNCATION_MARK

DEFAULT_N = 6


@dataclass(frozen=True)
class ParsedPrompt:
    """What the reflector read from an optimizer prompt.

    ``kind`` is ``reflection``, ``paraphrase`` or ``history``; ``parent`` the instruction to
    revise (for history prompts: the best-scored one); ``history`` the (text, score) entries.
    """

    kind: str
    parent: str
    n: int
    examples: tuple[FailureExample, ...] = ()
    history: tuple[tuple[str, float], ...] = ()


_N_RE = re.compile(r"\b(?:giving|give)\s+(\d+)\s+different", re.IGNORECASE)
_EXAMPLE_RE = re.compile(r"<example>\n(.*?)\n</example>", re.DOTALL)
_HISTORY_RE = re.compile(
    r"<ins_(\d+)>\n?(.*?)\n?</ins_\1>\s*<score_\1>\s*([-+0-9.eE]+)\s*</score_\1>", re.DOTALL
)


def _parse_example(block: str) -> FailureExample:
    feedback_at = block.rfind("\nFeedback: ")
    if (
        feedback_at > block.rfind("\nCorrect answer: ") >= 0
    ):  # the optional feedback line: not the gold
        block = block[:feedback_at]
    question, _, rest = block.partition("\nResponse: ")
    question = question.removeprefix("Question: ").strip()
    response, sep, gold = rest.rpartition("\nCorrect answer: ")
    if not sep:
        response, gold = rest, ""
    truncated = response.endswith(TRUNCATION_MARK)
    if truncated:
        response = response[: -len(TRUNCATION_MARK)]
    answers = tuple(a.strip() for a in gold.split(" | ") if a.strip())
    return FailureExample(
        question=question, response=response, answers=answers, truncated=truncated
    )


def parse_prompt(text: str) -> ParsedPrompt:
    """Read an :mod:`inspo.core.templates` prompt (reflection, paraphrase or history).

    Raises:
        LLMError: when the prompt has neither ``<ins_0>`` nor a scored ``<history>``.
    """
    m = _N_RE.search(text)
    n = int(m.group(1)) if m else DEFAULT_N
    if "<history>" in text:
        entries = tuple((t.strip(), float(s)) for _, t, s in _HISTORY_RE.findall(text))
        if not entries:
            raise LLMError(
                "rule-based reflector: the <history> block has no <ins_i>/<score_i> pairs"
            )
        best = max(entries, key=lambda e: e[1])
        return ParsedPrompt(kind="history", parent=best[0], n=n, history=entries)
    m = re.search(r"<ins_0>\n?(.*?)\n?</ins_0>", text, re.DOTALL)
    if not m:
        raise LLMError(
            "rule-based reflector: no parent instruction <ins_0>...</ins_0> and no <history> in "
            "the prompt; it only understands prompts rendered by inspo.core.templates"
        )
    examples = tuple(_parse_example(b) for b in _EXAMPLE_RE.findall(text))
    kind = "reflection" if examples else "paraphrase"
    return ParsedPrompt(kind=kind, parent=m.group(1), n=n, examples=examples)
