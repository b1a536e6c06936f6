"""Failure detection, the part that holds for any tagged protocol: the records a failed trajectory
is read into, tag problems, and the answer-level failure modes every environment with an answer tag
shares (no answer, an answer too long, malformed tags, a wrong answer).

An environment's own modes (a search agent that never searched, a calculator refused its input)
come with the environment's :class:`~inspo.core.reflector.rules.ReflectorRules`. The mode names are
stable strings: they appear in critiques, logs and tests.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from inspo.answers import normalize_answer

NO_ANSWER = "no_answer"
ANSWER_TOO_LONG = "answer_too_long"
MALFORMED_TAGS = "malformed_tags"
WRONG_ANSWER = "wrong_answer"


@dataclass(frozen=True)
class FailureExample:
    """One failed trajectory as the reflection template shows it."""

    question: str
    response: str
    answers: tuple[str, ...]
    truncated: bool = False


@dataclass(frozen=True)
class FailureMode:
    """One detected failure: its ``name`` (a mode constant) and the evidence seen."""

    name: str
    evidence: str


def tags_of(text: str) -> set[str]:
    """The tag names used in ``text`` (``<think>`` and ``</think>`` both give ``think``)."""
    return set(re.findall(r"</?([A-Za-z_][A-Za-z0-9_]*)>", text))


def tag_problems(
    text: str, tags: Sequence[str], *, ignore_unclosed: bool = False, answer_tag: str = "answer"
) -> list[str]:
    """Human-readable problems with the protocol ``tags`` in ``text`` (empty when well formed).

    Finds closing tags without an opening one, tags opened again before being closed, tags
    left open (unless ``ignore_unclosed``, for responses cut short by truncation) and more than
    one ``answer_tag`` block.
    """
    problems = []
    for tag in tags:
        depth = stray = nested = 0
        for m in re.finditer(rf"<(/?){tag}>", text):
            if m.group(1):
                if depth == 0:
                    stray += 1
                else:
                    depth -= 1
            else:
                if depth > 0:
                    nested += 1
                depth += 1
        if stray:
            problems.append(f"</{tag}> without an opening <{tag}> ({stray}x)")
        if nested:
            problems.append(f"<{tag}> opened again before </{tag}> ({nested}x)")
        if depth and not ignore_unclosed:
            problems.append(f"<{tag}> never closed ({depth}x)")
    answers = re.findall(rf"<{answer_tag}>(.*?)</{answer_tag}>", text, re.DOTALL)
    if len(answers) > 1:
        problems.append(f"{len(answers)} <{answer_tag}> blocks")
    return problems


def answer_failures(
    example: FailureExample,
    tags: Sequence[str],
    *,
    answer_tag: str = "answer",
    max_answer_words: int = 8,
) -> list[FailureMode]:
    """The answer-level modes of one trajectory: malformed ``tags``, no answer, an answer too long
    (more than ``max_answer_words`` words, or more than twice the gold's + 3), else a wrong
    answer."""
    resp = example.response
    modes: list[FailureMode] = []
    problems = tag_problems(resp, tags, ignore_unclosed=example.truncated, answer_tag=answer_tag)
    if problems:
        modes.append(FailureMode(MALFORMED_TAGS, "; ".join(problems)))
    answers = re.findall(rf"<{answer_tag}>(.*?)</{answer_tag}>", resp, re.DOTALL)
    answer = answers[-1].strip() if answers else None
    if answer is None:
        if not example.truncated:
            modes.append(
                FailureMode(NO_ANSWER, f"no complete <{answer_tag}>...</{answer_tag}> block")
            )
        return modes
    golds = [g for g in example.answers if g.strip()]
    words, gold_words = len(answer.split()), min((len(g.split()) for g in golds), default=0)
    if words > max_answer_words or (gold_words and words > 2 * gold_words + 3):
        modes.append(
            FailureMode(
                ANSWER_TOO_LONG,
                f"answer has {words} words (gold has {gold_words}): {answer[:80]!r}",
            )
        )
    norm = normalize_answer(answer)
    right = any(
        g and (g == norm or f" {g} " in f" {norm} ") for g in (normalize_answer(x) for x in golds)
    )
    if not right and not modes:
        modes.append(
            FailureMode(
                WRONG_ANSWER, f"answered {answer[:60]!r}, gold is {' | '.join(golds)[:60]!r}"
            )
        )
    return modes
