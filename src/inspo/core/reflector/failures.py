"""Failure detection: what went wrong in one failed trajectory the reflection prompt shows.

:func:`detect_failure_modes` reads one Search-R1 response (``<think>``, ``<search>``,
``<information>``, ``<answer>``) with its question and gold answers and names the failure modes
visible in it, each with the evidence seen: never searched, malformed tags, no answer, answer
too long, repeated queries, the whole question used as the query, a query that names nothing the
question names (``birthplace``, ``2010`` for "In which city was the founder of the Kanor
Observatory born?": measured as the 0.5B policy's commonest two-hop failure), ran out of turns, the answer
was in the retrieved ``<information>`` but not given, no reasoning, or simply a wrong answer.
The mode names are stable strings: they appear in critiques, logs and tests.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from inspo.answers import normalize_answer
from inspo.core.templates import PROTOCOL_TAGS

NEVER_SEARCHED = "never_searched"
MALFORMED_TAGS = "malformed_tags"
NO_ANSWER = "no_answer"
ANSWER_TOO_LONG = "answer_too_long"
REPEATED_QUERIES = "repeated_queries"
QUESTION_AS_QUERY = "question_as_query"
QUERY_MISSES_QUESTION = "query_misses_question"
RAN_OUT_OF_TURNS = "ran_out_of_turns"
IGNORED_EVIDENCE = "answer_in_information_ignored"
NO_REASONING = "no_reasoning"
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
    """One detected failure: its ``name`` (a constant of this module) and the evidence seen."""

    name: str
    evidence: str


_STOPWORDS = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "was", "were", "are", "be", "been", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "does", "do", "that", "this", "these", "those", "it", "its", "as"]
)


def _content_tokens(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in _STOPWORDS}


def _names(question: str) -> set[str]:
    """The normalised tokens of the capitalised words of ``question`` after its first word (the
    names it is about: ``Kanor``, ``Observatory``), stopwords left out."""
    words = re.findall(r"[A-Za-z][\w'-]*", question)[1:]
    return {t for w in words if w[0].isupper() for t in normalize_answer(w).split() if t not in _STOPWORDS}


def tag_problems(text: str, tags: Sequence[str] = PROTOCOL_TAGS, *, ignore_unclosed: bool = False) -> list[str]:
    """Human-readable problems with the protocol tags in ``text`` (empty when well formed).

    Finds closing tags without an opening one, tags opened again before being closed, tags
    left open (unless ``ignore_unclosed``, for responses cut short by truncation) and more than
    one ``<answer>`` block.
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
    answers = re.findall(r"<answer>(.*?)</answer>", text, re.DOTALL)
    if len(answers) > 1:
        problems.append(f"{len(answers)} <answer> blocks")
    return problems


def detect_failure_modes(
    example: FailureExample,
    *,
    max_answer_words: int = 8,
    many_searches: int = 3,
    query_coverage: float = 0.8,
    expect_think: bool = True,
) -> list[FailureMode]:
    """The failure modes visible in one trajectory, each with its evidence.

    Args:
        max_answer_words: an answer with more words (or more than twice the gold's + 3) is too long.
        many_searches: this many searches and no answer counts as running out of turns
            (``ran_out_of_turns`` replaces ``no_answer`` then).
        query_coverage: a query containing this share of the question's content words (for
            questions of at least 4 content words) is the whole question pasted as a query.
        expect_think: report ``no_reasoning`` when the response has no ``<think>``.

    ``wrong_answer`` is reported only when nothing more specific explains a wrong answer. A
    truncated response (its end was cut) is not judged on its missing end.
    """
    resp = example.response
    modes: list[FailureMode] = []
    queries = [q.strip() for q in re.findall(r"<search>(.*?)</search>", resp, re.DOTALL)]
    answers = re.findall(r"<answer>(.*?)</answer>", resp, re.DOTALL)
    answer = answers[-1].strip() if answers else None
    information = " ".join(re.findall(r"<information>(.*?)</information>", resp, re.DOTALL))
    golds = [g for g in example.answers if g.strip()]
    norm_answer = normalize_answer(answer) if answer is not None else None
    norm_golds = [normalize_answer(g) for g in golds]

    if "<search>" not in resp:
        said = f"; it answered {answer!r} without looking anything up" if answer else ""
        modes.append(FailureMode(NEVER_SEARCHED, f"no <search> call in the response{said}"))

    problems = tag_problems(resp, ignore_unclosed=example.truncated)
    if problems:
        modes.append(FailureMode(MALFORMED_TAGS, "; ".join(problems)))

    if answer is None and not example.truncated:
        if len(queries) >= many_searches:
            modes.append(FailureMode(RAN_OUT_OF_TURNS, f"{len(queries)} searches and no <answer> block"))
        else:
            modes.append(FailureMode(NO_ANSWER, "no complete <answer>...</answer> block"))

    if answer is not None:
        words = len(answer.split())
        gold_words = min((len(g.split()) for g in golds), default=0)
        if words > max_answer_words or (gold_words and words > 2 * gold_words + 3):
            modes.append(
                FailureMode(ANSWER_TOO_LONG, f"answer has {words} words (gold has {gold_words}): {answer[:80]!r}")
            )

    normalized_queries = [normalize_answer(q) for q in queries]
    repeats = {q: c for q, c in Counter(normalized_queries).items() if c > 1 and q}
    if repeats:
        shown = ", ".join(f"{q!r} x{c}" for q, c in sorted(repeats.items(), key=lambda p: -p[1]))
        modes.append(FailureMode(REPEATED_QUERIES, f"repeated queries: {shown}"))

    question_tokens = _content_tokens(example.question)
    if len(question_tokens) >= 4:
        for q in queries:
            coverage = len(_content_tokens(q) & question_tokens) / len(question_tokens)
            if coverage >= query_coverage:
                modes.append(
                    FailureMode(QUESTION_AS_QUERY, f"query {q[:80]!r} repeats {coverage:.0%} of the question")
                )
                break

    names = _names(example.question)
    if names and queries and not any(_content_tokens(q) & names for q in queries):
        modes.append(FailureMode(
            QUERY_MISSES_QUESTION,
            f"no query names what the question names ({', '.join(sorted(names)[:4])}): "
            + ", ".join(repr(q[:40]) for q in queries[:3])))

    answer_has_gold = norm_answer is not None and any(
        g and (g == norm_answer or f" {g} " in f" {norm_answer} ") for g in norm_golds
    )
    norm_info = f" {normalize_answer(information)} "
    seen = [g for g, ng in zip(golds, norm_golds, strict=True) if ng and f" {ng} " in norm_info]
    if seen and not answer_has_gold:
        modes.append(
            FailureMode(
                IGNORED_EVIDENCE,
                f"{seen[0]!r} was in the retrieved <information> but the answer was "
                f"{answer[:60] if answer is not None else None!r}",
            )
        )

    if expect_think and "<think>" not in resp:
        modes.append(FailureMode(NO_REASONING, "no <think> reasoning in the response"))

    answer_mistake = {ANSWER_TOO_LONG, IGNORED_EVIDENCE, NEVER_SEARCHED, MALFORMED_TAGS}
    if answer is not None and not answer_has_gold and not answer_mistake & {m.name for m in modes}:
        gold_text = " | ".join(golds)
        modes.append(FailureMode(WRONG_ANSWER, f"answered {answer[:60]!r}, gold is {gold_text[:60]!r}"))
    return modes
