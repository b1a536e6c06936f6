"""Word-level diffs of an instruction against its parent, as escaped HTML.

Rules: texts are split into words and the whitespace between them (so line breaks survive);
:class:`difflib.SequenceMatcher` aligns the two word lists; deleted words are wrapped in
``<del>``, inserted ones in ``<ins>``; a long unchanged stretch is shortened to its first and
last ``context`` words around a ``<span class="skip">`` note. All text is escaped.
"""

from __future__ import annotations

import difflib
import html
import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\s+|\S+")


@dataclass(frozen=True)
class DiffStats:
    inserted_words: int
    deleted_words: int


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def word_diff(old: str, new: str, *, context: int = 12) -> tuple[str, DiffStats]:
    """HTML of ``new`` against ``old`` (rules in the module docstring) and word counts."""
    a, b = tokens(old), tokens(new)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    out: list[str] = []
    inserted = deleted = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.append(_equal(a[i1:i2], context))
            continue
        if op in ("delete", "replace"):
            deleted += sum(1 for t in a[i1:i2] if not t.isspace())
            out.append(f"<del>{html.escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            inserted += sum(1 for t in b[j1:j2] if not t.isspace())
            out.append(f"<ins>{html.escape(''.join(b[j1:j2]))}</ins>")
    return "".join(out), DiffStats(inserted, deleted)


def _equal(words: list[str], context: int) -> str:
    n_words = sum(1 for t in words if not t.isspace())
    if n_words <= 3 * context:
        return html.escape("".join(words))
    head, tail, seen = [], [], 0
    for i, t in enumerate(words):
        seen += not t.isspace()
        if seen > context:
            head = words[:i]
            break
    seen = 0
    for i in range(len(words) - 1, -1, -1):
        seen += not words[i].isspace()
        if seen > context:
            tail = words[i + 1 :]
            break
    skipped = n_words - sum(1 for t in head + tail if not t.isspace())
    return (
        f"{html.escape(''.join(head))}"
        f'<span class="skip"> [… {skipped} unchanged words …] </span>'
        f"{html.escape(''.join(tail))}"
    )
