"""Which problems an instruction names (``coevolution.leak_scope: held-out``).

An instruction may carry worked examples built from training problems: the hand-written worked
example lifts the frozen calculator policy from 0.31 to 0.69, and 32 of the campaign's 39 leak
refusals were exactly such examples built on a shown training problem. What must never happen is
that a score judging an instruction is inflated by a problem it spells out. So under
``held-out`` scope:

- an instruction that names a **held-out** problem (a dev or test question the run scores on) is
  refused as a leak;
- a training problem it names (one of the failures it was written from, or a D_B question) is
  left out of every paired comparison that judges it (the gate, the race), and so is one its
  parent names: the two are compared on the questions neither spells out.

"Names" is the environment's hook ``names_problem(text, question) -> bool``; this module has the
generic one (:func:`names_problem`): the question's own text and one of its gold answers, both
found in the instruction. A bare number is never enough: calculator answers are small numbers any
example can hit by chance (the calculator's hook asks for the problem's operands and its answer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from inspo.answers import normalize_answer
from inspo.records import Question

NamesFn = Callable[[str, Question], bool]
"""``names(instruction_text, question) -> bool``: whether the instruction spells the problem out."""

LEAK_SCOPES = ("shown", "held-out")


def leak_form(text: str) -> str:
    """``text`` as the leak checks compare it: ``<`` and ``>`` read as spaces (so a tag still
    separates the word next to it), then :func:`~inspo.answers.normalize_answer`, padded with
    one space each side so that a search for ``" x "`` finds whole tokens only."""
    return f" {normalize_answer(text.replace('<', ' ').replace('>', ' '))} "


def names_problem(text: str, question: Question) -> bool:
    """The generic hook: the question's text and one of its gold answers both occur in ``text``
    (after exact match's normalisation, on whole tokens)."""
    found = leak_form(text)
    if leak_form(question.question).strip() not in found:
        return False
    return any(f" {normalize_answer(a)} " in found for a in question.answers if normalize_answer(a))


def named_held_out(text: str, held_out: Iterable[Question], names: NamesFn) -> Question | None:
    """The first held-out question ``text`` names, or None."""
    return next((q for q in held_out if names(text, q)), None)


def named_ids(
    texts: Mapping[str, str], questions: Sequence[Question], names: NamesFn
) -> dict[str, set[str]]:
    """For each instruction id in ``texts``, the ids of the ``questions`` its text names (only the
    instructions that name one appear)."""
    out: dict[str, set[str]] = {}
    for iid, text in texts.items():
        ids = {q.id for q in questions if names(text, q)}
        if ids:
            out[iid] = ids
    return out
