"""Search-R1's rules for the rule-based reflector: what went wrong in a failed search trajectory,
and the advice against each failure (:class:`~inspo.core.reflector.rules.ReflectorRules`).

:func:`detect_failure_modes` reads one Search-R1 response (``<think>``, ``<search>``,
``<information>``, ``<answer>``) with its question and gold answers and names the failure modes
visible in it, each with the evidence seen: never searched, malformed tags, no answer, answer
too long, repeated queries, the whole question used as the query, a query that names nothing the
question names (``birthplace``, ``2010`` for "In which city was the founder of the X
Observatory born?": measured as the 0.5B policy's commonest two-hop failure), ran out of turns,
the answer was in the retrieved ``<information>`` but not given, no reasoning, or simply a wrong
answer. :data:`GUIDANCE` holds several wordings of the advice against each mode. The mode names are
stable strings: they appear in critiques, logs and tests. :data:`RULES` is what the Search-R1
environment hands the reflector.

These rules are written by hand for the search agent: what the reflector writes with them is an
offline stand-in for an optimizer LLM, never evidence about INSPO's instructions.
"""

from __future__ import annotations

import re
from collections import Counter

from inspo.answers import normalize_answer
from inspo.core.reflector.failures import (
    ANSWER_TOO_LONG,
    MALFORMED_TAGS,
    NO_ANSWER,
    WRONG_ANSWER,
    FailureExample,
    FailureMode,
    tag_problems,
    tags_of,
)
from inspo.core.reflector.rules import ReflectorRules

#: The Search-R1 tags an instruction may teach.
PROTOCOL_TAGS = ("search", "information", "answer", "think")

NEVER_SEARCHED = "never_searched"
REPEATED_QUERIES = "repeated_queries"
QUESTION_AS_QUERY = "question_as_query"
QUERY_MISSES_QUESTION = "query_misses_question"
RAN_OUT_OF_TURNS = "ran_out_of_turns"
IGNORED_EVIDENCE = "answer_in_information_ignored"
NO_REASONING = "no_reasoning"


_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "from",
        "and",
        "or",
        "is",
        "was",
        "were",
        "are",
        "be",
        "been",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "did",
        "does",
        "do",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "as",
    ]
)


def _content_tokens(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in _STOPWORDS}


def _names(question: str) -> set[str]:
    """The normalised tokens of the capitalised words of ``question`` after its first word (the
    names it is about), stopwords left out."""
    words = re.findall(r"[A-Za-z][\w'-]*", question)[1:]
    return {
        t
        for w in words
        if w[0].isupper()
        for t in normalize_answer(w).split()
        if t not in _STOPWORDS
    }


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
    queries = [q.strip() for q in re.findall(r"<search>(.*?)</search>", resp, re.DOTALL)]
    answers = re.findall(r"<answer>(.*?)</answer>", resp, re.DOTALL)
    answer = answers[-1].strip() if answers else None
    modes = _protocol_modes(example, queries, answer, max_answer_words, many_searches)
    modes += _query_modes(example.question, queries, query_coverage)
    modes += _answer_modes(example, answer, modes, expect_think)
    return modes


def _protocol_modes(
    example: FailureExample,
    queries: list[str],
    answer: str | None,
    max_answer_words: int,
    many_searches: int,
) -> list[FailureMode]:
    """How the response kept the protocol: never searched, malformed tags, no answer (or out of
    turns), an answer too long."""
    resp, modes = example.response, []
    golds = [g for g in example.answers if g.strip()]
    if "<search>" not in resp:
        said = f"; it answered {answer!r} without looking anything up" if answer else ""
        modes.append(FailureMode(NEVER_SEARCHED, f"no <search> call in the response{said}"))

    problems = tag_problems(resp, PROTOCOL_TAGS, ignore_unclosed=example.truncated)
    if problems:
        modes.append(FailureMode(MALFORMED_TAGS, "; ".join(problems)))

    if answer is None and not example.truncated:
        if len(queries) >= many_searches:
            modes.append(
                FailureMode(RAN_OUT_OF_TURNS, f"{len(queries)} searches and no <answer> block")
            )
        else:
            modes.append(FailureMode(NO_ANSWER, "no complete <answer>...</answer> block"))

    if answer is not None:
        words = len(answer.split())
        gold_words = min((len(g.split()) for g in golds), default=0)
        if words > max_answer_words or (gold_words and words > 2 * gold_words + 3):
            modes.append(
                FailureMode(
                    ANSWER_TOO_LONG,
                    f"answer has {words} words (gold has {gold_words}): {answer[:80]!r}",
                )
            )
    return modes


def _query_modes(question: str, queries: list[str], query_coverage: float) -> list[FailureMode]:
    """What the search queries got wrong: repeated, the question pasted whole, or naming nothing
    the question names."""
    modes = []
    normalized_queries = [normalize_answer(q) for q in queries]
    repeats = {q: c for q, c in Counter(normalized_queries).items() if c > 1 and q}
    if repeats:
        shown = ", ".join(f"{q!r} x{c}" for q, c in sorted(repeats.items(), key=lambda p: -p[1]))
        modes.append(FailureMode(REPEATED_QUERIES, f"repeated queries: {shown}"))

    question_tokens = _content_tokens(question)
    if len(question_tokens) >= 4:
        for q in queries:
            coverage = len(_content_tokens(q) & question_tokens) / len(question_tokens)
            if coverage >= query_coverage:
                modes.append(
                    FailureMode(
                        QUESTION_AS_QUERY,
                        f"query {q[:80]!r} repeats {coverage:.0%} of the question",
                    )
                )
                break

    names = _names(question)
    if names and queries and not any(_content_tokens(q) & names for q in queries):
        modes.append(
            FailureMode(
                QUERY_MISSES_QUESTION,
                f"no query names what the question names ({', '.join(sorted(names)[:4])}): "
                + ", ".join(repr(q[:40]) for q in queries[:3]),
            )
        )
    return modes


def _answer_modes(
    example: FailureExample, answer: str | None, found: list[FailureMode], expect_think: bool
) -> list[FailureMode]:
    """What the answer made of the evidence: the gold retrieved and ignored, no reasoning, and a
    plain wrong answer when nothing in ``found`` (the modes so far) or here explains it better."""
    resp, modes = example.response, []
    golds = [g for g in example.answers if g.strip()]
    norm_answer = normalize_answer(answer) if answer is not None else None
    norm_golds = [normalize_answer(g) for g in golds]
    information = " ".join(re.findall(r"<information>(.*?)</information>", resp, re.DOTALL))
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
    named = {m.name for m in found + modes}
    if answer is not None and not answer_has_gold and not answer_mistake & named:
        gold_text = " | ".join(golds)
        modes.append(
            FailureMode(WRONG_ANSWER, f"answered {answer[:60]!r}, gold is {gold_text[:60]!r}")
        )
    return modes


# Several wordings per mode so candidates differ; a wording is used only when every tag it
# mentions is one the parent instruction uses.
GUIDANCE: dict[str, tuple[str, ...]] = {
    NEVER_SEARCHED: (
        "Always search before you answer: call <search> query </search> at least once, even when "
        "you think you already know the answer.",
        "Do not answer from memory. First look the facts up with <search> query </search>, then "
        "answer from the retrieved <information>.",
        "Your own knowledge is often wrong or outdated: verify every fact with a <search> query "
        "</search> before writing the <answer>.",
    ),
    MALFORMED_TAGS: (
        "Close every tag you open: each <search> needs its </search> and each <answer> needs its "
        "</answer>; never nest one tag inside another.",
        "Use the tags exactly as specified: write <search> query </search> on its own, give "
        "exactly one <answer> ... </answer> block, and write nothing after </answer>.",
        "Check your format before finishing: every opening tag such as <think> must be followed by "
        "its closing tag </think>, and tags must not overlap.",
    ),
    NO_ANSWER: (
        "Always finish with a final answer inside <answer> and </answer>, even when you are "
        "unsure: a best guess is better than no answer.",
        "Never stop without writing <answer> your answer </answer>; if the evidence is incomplete, "
        "give the most likely answer.",
        "Your response must end with exactly one <answer> ... </answer> block.",
    ),
    ANSWER_TOO_LONG: (
        "Inside <answer> and </answer> write only the short answer itself (a name, date, number or "
        "a few words), no sentence and no explanation.",
        "Keep the final answer minimal, e.g. <answer> Beijing </answer>: no full sentences, no "
        "reasoning, no extra words inside the tags.",
        "The answer is checked by exact match, so put only the answer entity inside <answer> and "
        "</answer>, at most a few words.",
    ),
    REPEATED_QUERIES: (
        "Never repeat a query you already searched; if the results did not help, change the "
        "keywords (a more specific entity, a synonym, or the missing fact).",
        "Each <search> must ask for something new: rephrase a query that failed instead of sending "
        "it again.",
        "Keep track of what you already searched. Repeating the same <search> query returns the "
        "same <information>, so reformulate it instead.",
    ),
    QUESTION_AS_QUERY: (
        "Do not paste the whole question into <search> query </search>: search for one key entity "
        "or fact at a time with a short keyword query (3 to 6 words).",
        "Write focused search queries: name the entity and the fact you need (e.g. the person and "
        "'birthplace'), not the full question.",
        "Break the question into the single facts it needs and search each fact separately with a "
        "short query.",
    ),
    QUERY_MISSES_QUESTION: (
        "Search for the name written in the question (the person, organisation or place), copied "
        "as the question writes it, not for a general word such as a year or 'city'.",
        "Each <search> query must contain the name the question is about; when the results name "
        "another person or place that the question asks about, search for that name next.",
        "Copy the entity's name from the question into <search> query </search>; a query without "
        "it (like 'birthplace' or a year) returns unrelated documents.",
    ),
    RAN_OUT_OF_TURNS: (
        "You have only a few turns: as soon as the <information> contains what you need, stop "
        "searching and give the <answer>.",
        "Do not keep searching indefinitely: after at most three searches, answer with the best "
        "candidate you have inside <answer> and </answer>.",
        "Plan your searches so that you can answer within a few turns, then write the <answer> "
        "block.",
    ),
    IGNORED_EVIDENCE: (
        "Read the retrieved <information> carefully: when it names the answer, copy it exactly as "
        "written there into <answer> and </answer>.",
        "Base your answer on the retrieved <information>, not on memory; prefer the entity the "
        "documents state for the question asked.",
        "Before answering, check each document in the <information> for the requested fact and use "
        "that wording in your answer.",
    ),
    NO_REASONING: (
        "Reason inside <think> and </think> before every search and before the final answer.",
        "Start each turn with <think> ... </think>: say what you know so far and what fact is "
        "still missing.",
        "Every time you receive new <information>, first analyse it inside <think> and </think>.",
    ),
    WRONG_ANSWER: (
        "Verify the answer before giving it: make sure it answers exactly what the question asks "
        "(the right person, date or place).",
        "For questions with several parts, find each intermediate fact with its own <search> query "
        "</search> before answering.",
        "If the retrieved documents do not settle the question, search again with a more specific "
        "query rather than guessing.",
    ),
}

GENERIC_STRENGTHENINGS: tuple[str, ...] = (
    "Reason step by step inside <think> and </think> before each action.",
    "Break a multi-part question into single facts and search each one with a short keyword query "
    "in <search> query </search>.",
    "Base the final answer on the retrieved <information>, not on memory.",
    "Keep the final answer short: only the entity, name, date or number inside <answer> and "
    "</answer>.",
    "If the results do not contain the answer, rephrase the query with different keywords instead "
    "of repeating it.",
    "Always finish with exactly one <answer> ... </answer> block.",
    "Verify that the answer matches exactly what the question asks before you write it.",
)

# Safe rewordings for paraphrase candidates (applied to the text outside tags).
REWORDINGS: tuple[tuple[str, str], ...] = (
    ("You can", "You may"),
    ("you can", "you may"),
    ("as many times as your want", "as many times as you want"),
    ("If you find no further external knowledge needed", "Once you have enough information"),
    ("without detailed illustrations", "without any explanation"),
    ("Answer the given question.", "Your task is to answer the given question."),
    ("if you find you lack some knowledge", "whenever some knowledge is missing"),
)


def _detect(example: FailureExample, parent: str) -> list[FailureMode]:
    """:func:`detect_failure_modes` with Search-R1's thresholds; ``<think>`` expected when the
    parent asks for it."""
    return detect_failure_modes(example, expect_think="think" in tags_of(parent))


#: Search-R1's rules for the rule-based reflector.
RULES = ReflectorRules(
    detect=_detect, guidance=GUIDANCE, generic=GENERIC_STRENGTHENINGS, rewordings=REWORDINGS
)
