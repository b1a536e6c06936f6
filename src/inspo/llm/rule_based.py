"""The offline optimizer: a rule-based reflector that needs no LLM.

It is the default optimizer when no endpoint is configured, so INSPO runs end to end on a
laptop. It reads the prompts rendered by :mod:`inspo.core.templates` and answers in the same
shape an LLM optimizer would: a short critique, then ``<ins_1>…</ins_1>`` … ``<ins_N>…</ins_N>``.

Rules:

- **Reflection prompts** (``<example>`` blocks with ``Question:`` / ``Response:`` /
  ``Correct answer:`` lines): :func:`detect_failure_modes` finds what went wrong in each
  trajectory (never searched, malformed tags, no answer, answer too long, repeated queries,
  the whole question used as the query, ran out of turns, the answer was in the retrieved
  ``<information>`` but not given, no reasoning, or simply a wrong answer). Each candidate is the
  parent plus concrete guidance for the detected modes; the N candidates differ in which modes
  they address, in what order, in which wording and in layout.
- **Paraphrase prompts** (only ``<ins_0>``) get generic rewordings and strengthenings; **history
  prompts** (``<history>`` of ``<ins_i>``/``<score_i>``) start from the best-scored instruction
  and borrow sentences from the other good ones.
- Candidates always keep the parent's whole text, so every protocol tag it has (``<think>``,
  ``<search>``, ``<information>``, ``<answer>`` and their closing tags) survives; added guidance
  never mentions a tag the parent does not use.
- N comes from the prompt ("giving N different" / "Give N different"), 6 when absent.
- Deterministic: all choices come from the injected ``random.Random`` (``rng=`` or ``seed=``).
- ``usage`` counts one call per ``generate`` and zero tokens.
"""

from __future__ import annotations

import logging
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from inspo.agent.rewards import normalize_answer
from inspo.core.templates import PROTOCOL_TAGS
from inspo.llm.base import LLMError, LLMUsage, Message
from inspo.rng import derived_rng

logger = logging.getLogger("inspo.llm")

DEFAULT_N = 6
TRUNCATION_MARK = " …[truncated]"

# Failure-mode names (stable strings: they appear in critiques, logs and tests).
NEVER_SEARCHED = "never_searched"
MALFORMED_TAGS = "malformed_tags"
NO_ANSWER = "no_answer"
ANSWER_TOO_LONG = "answer_too_long"
REPEATED_QUERIES = "repeated_queries"
QUESTION_AS_QUERY = "question_as_query"
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


# ---------------------------------------------------------------------------- detection


_STOPWORDS = frozenset(
    ["a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "from", "and", "or", "is", "was", "were", "are", "be", "been", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "did", "does", "do", "that", "this", "these", "those", "it", "its", "as"]
)


def _content_tokens(text: str) -> set[str]:
    return {t for t in normalize_answer(text).split() if t not in _STOPWORDS}


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


# ---------------------------------------------------------------------------- prompt parsing

_N_RE = re.compile(r"\b(?:giving|give)\s+(\d+)\s+different", re.IGNORECASE)
_EXAMPLE_RE = re.compile(r"<example>\n(.*?)\n</example>", re.DOTALL)
_HISTORY_RE = re.compile(
    r"<ins_(\d+)>\n?(.*?)\n?</ins_\1>\s*<score_\1>\s*([-+0-9.eE]+)\s*</score_\1>", re.DOTALL
)


def _parse_example(block: str) -> FailureExample:
    question, _, rest = block.partition("\nResponse: ")
    question = question.removeprefix("Question: ").strip()
    response, sep, gold = rest.rpartition("\nCorrect answer: ")
    if not sep:
        response, gold = rest, ""
    truncated = response.endswith(TRUNCATION_MARK)
    if truncated:
        response = response[: -len(TRUNCATION_MARK)]
    answers = tuple(a.strip() for a in gold.split(" | ") if a.strip())
    return FailureExample(question=question, response=response, answers=answers, truncated=truncated)


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
            raise LLMError("rule-based reflector: the <history> block has no <ins_i>/<score_i> pairs")
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


# ---------------------------------------------------------------------------- guidance

# Several wordings per mode so candidates differ; a wording is used only when every tag it
# mentions is one the parent instruction uses.
GUIDANCE: dict[str, tuple[str, ...]] = {
    NEVER_SEARCHED: (
        "Always search before you answer: call <search> query </search> at least once, even when you think you already know the answer.",
        "Do not answer from memory. First look the facts up with <search> query </search>, then answer from the retrieved <information>.",
        "Your own knowledge is often wrong or outdated: verify every fact with a <search> query </search> before writing the <answer>.",
    ),
    MALFORMED_TAGS: (
        "Close every tag you open: each <search> needs its </search> and each <answer> needs its </answer>; never nest one tag inside another.",
        "Use the tags exactly as specified: write <search> query </search> on its own, give exactly one <answer> ... </answer> block, and write nothing after </answer>.",
        "Check your format before finishing: every opening tag such as <think> must be followed by its closing tag </think>, and tags must not overlap.",
    ),
    NO_ANSWER: (
        "Always finish with a final answer inside <answer> and </answer>, even when you are unsure: a best guess is better than no answer.",
        "Never stop without writing <answer> your answer </answer>; if the evidence is incomplete, give the most likely answer.",
        "Your response must end with exactly one <answer> ... </answer> block.",
    ),
    ANSWER_TOO_LONG: (
        "Inside <answer> and </answer> write only the short answer itself (a name, date, number or a few words), no sentence and no explanation.",
        "Keep the final answer minimal, e.g. <answer> Beijing </answer>: no full sentences, no reasoning, no extra words inside the tags.",
        "The answer is checked by exact match, so put only the answer entity inside <answer> and </answer>, at most a few words.",
    ),
    REPEATED_QUERIES: (
        "Never repeat a query you already searched; if the results did not help, change the keywords (a more specific entity, a synonym, or the missing fact).",
        "Each <search> must ask for something new: rephrase a query that failed instead of sending it again.",
        "Keep track of what you already searched. Repeating the same <search> query returns the same <information>, so reformulate it instead.",
    ),
    QUESTION_AS_QUERY: (
        "Do not paste the whole question into <search> query </search>: search for one key entity or fact at a time with a short keyword query (3 to 6 words).",
        "Write focused search queries: name the entity and the fact you need (e.g. the person and 'birthplace'), not the full question.",
        "Break the question into the single facts it needs and search each fact separately with a short query.",
    ),
    RAN_OUT_OF_TURNS: (
        "You have only a few turns: as soon as the <information> contains what you need, stop searching and give the <answer>.",
        "Do not keep searching indefinitely: after at most three searches, answer with the best candidate you have inside <answer> and </answer>.",
        "Plan your searches so that you can answer within a few turns, then write the <answer> block.",
    ),
    IGNORED_EVIDENCE: (
        "Read the retrieved <information> carefully: when it names the answer, copy it exactly as written there into <answer> and </answer>.",
        "Base your answer on the retrieved <information>, not on memory; prefer the entity the documents state for the question asked.",
        "Before answering, check each document in the <information> for the requested fact and use that wording in your answer.",
    ),
    NO_REASONING: (
        "Reason inside <think> and </think> before every search and before the final answer.",
        "Start each turn with <think> ... </think>: say what you know so far and what fact is still missing.",
        "Every time you receive new <information>, first analyse it inside <think> and </think>.",
    ),
    WRONG_ANSWER: (
        "Verify the answer before giving it: make sure it answers exactly what the question asks (the right person, date or place).",
        "For questions with several parts, find each intermediate fact with its own <search> query </search> before answering.",
        "If the retrieved documents do not settle the question, search again with a more specific query rather than guessing.",
    ),
}

GENERIC_STRENGTHENINGS: tuple[str, ...] = (
    "Reason step by step inside <think> and </think> before each action.",
    "Break a multi-part question into single facts and search each one with a short keyword query in <search> query </search>.",
    "Base the final answer on the retrieved <information>, not on memory.",
    "Keep the final answer short: only the entity, name, date or number inside <answer> and </answer>.",
    "If the results do not contain the answer, rephrase the query with different keywords instead of repeating it.",
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

_LAYOUTS = ("bullets", "numbered", "preface", "inline")
_HEADERS = {
    "bullets": "Rules learned from past mistakes:",
    "numbered": "Follow these rules:",
}


def tags_of(text: str) -> set[str]:
    """The tag names used in ``text`` (``<think>`` and ``</think>`` both give ``think``)."""
    return set(re.findall(r"</?([A-Za-z_][A-Za-z0-9_]*)>", text))


def _allowed(sentence: str, parent_tags: set[str]) -> bool:
    return tags_of(sentence) <= parent_tags


def _layout(parent: str, sentences: Sequence[str], style: str, *, learned: bool = True) -> str:
    """``parent`` plus ``sentences`` in one of :data:`_LAYOUTS`.

    A bullet or numbered list continues the parent's own list of that kind when the parent ends
    with one (so repeated revisions do not stack headers).
    """
    if style == "preface":
        return "Important: " + " ".join(sentences) + "\n\n" + parent
    if style == "inline":
        return parent.rstrip() + " " + " ".join(sentences)
    header = _HEADERS[style] if learned or style == "numbered" else "Additional guidance:"
    base = parent.rstrip()
    _head, sep, tail = base.rpartition(f"\n\n{header}\n")
    marker = r"- " if style == "bullets" else r"\d+\. "
    lines = tail.split("\n") if sep else []
    if sep and all(re.match(marker, line) for line in lines):
        start = len(lines) + 1
    else:
        base, start = f"{base}\n\n{header}", 1
    if style == "numbered":
        body = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences, start=start))
    else:
        body = "\n".join(f"- {s}" for s in sentences)
    return f"{base}\n{body}"


def covered(mode: str, parent: str) -> bool:
    """Whether ``parent`` already carries one of the wordings for ``mode``."""
    return any(s in parent for s in GUIDANCE.get(mode, ()))


def _reword(parent: str, rng: random.Random) -> str:
    """Apply a random subset of :data:`REWORDINGS` to the parent (tags are never touched)."""
    out = parent
    for old, new in REWORDINGS:
        if old in out and rng.random() < 0.6:
            out = out.replace(old, new)
    return out


def write_candidates(
    parent: str,
    modes: Sequence[tuple[str, int]],
    n: int,
    rng: random.Random,
    *,
    extra_sentences: Sequence[str] = (),
    reword: bool = False,
) -> list[str]:
    """``n`` distinct revisions of ``parent`` adding guidance for ``modes``.

    Args:
        modes: (mode name, count) pairs, most frequent first; empty for generic strengthening.
        extra_sentences: more sentences to draw from (history crossover).
        reword: apply safe rewordings to the parent's own text too (paraphrase prompts).

    The first candidate addresses every mode in order of frequency with the first usable
    wording; the others draw a subset, an order, wordings and a layout from ``rng``. Each keeps
    the parent text (reworded only outside its tags), so every parent tag survives. Modes the
    parent already has guidance for are skipped; with nothing left, generic advice is added.
    """
    parent_tags = tags_of(parent)
    pools: list[list[str]] = []
    for name, _count in modes:
        if covered(name, parent):  # already addressed: adding more wordings would only bloat it
            continue
        usable = [s for s in GUIDANCE.get(name, ()) if _allowed(s, parent_tags)]
        if usable:
            pools.append(usable)
    generic = [s for s in (*extra_sentences, *GENERIC_STRENGTHENINGS) if _allowed(s, parent_tags) and s not in parent]
    most = len(pools)
    learned = bool(pools)
    if not pools:  # generic strengthening: a few sentences per candidate
        pools = [[s] for s in generic] or [["Read the question carefully and answer it precisely."]]
        most = min(3, len(pools))

    candidates: list[str] = []
    seen = {parent.strip()}
    for i in range(n):
        text = None
        for attempt in range(40):
            first = i == 0 and attempt == 0
            if first:
                chosen = [pool[0] for pool in pools[:most]]
                style = "bullets"
            else:
                k = rng.randint(1, most)
                if modes:  # the most frequent mode is always addressed
                    picked = [0, *sorted(rng.sample(range(1, len(pools)), k - 1))]
                else:
                    picked = sorted(rng.sample(range(len(pools)), k))
                if rng.random() < 0.5:
                    rng.shuffle(picked)
                chosen = [rng.choice(pools[j]) for j in picked]
                if attempt >= 20 and generic:  # small pools: widen with generic advice
                    chosen.append(rng.choice(generic))
                style = rng.choice(_LAYOUTS)
            base = _reword(parent, rng) if reword and not first else parent
            text = _layout(base, list(dict.fromkeys(chosen)), style, learned=learned)
            if text.strip() not in seen:
                break
        else:
            text = _layout(parent, [f"(Revision {i + 1}.) Follow the instruction above exactly."], "inline")
        seen.add(text.strip())
        candidates.append(text)
    return candidates


# ---------------------------------------------------------------------------- the client


def _critique(parsed: ParsedPrompt, per_example: list[list[FailureMode]]) -> tuple[str, list[tuple[str, int]]]:
    """The critique text and the (mode, count) ranking, most frequent first."""
    counts: Counter[str] = Counter()
    first_evidence: dict[str, str] = {}
    for ex, found in zip(parsed.examples, per_example, strict=True):
        for mode in {m.name: m for m in found}.values():
            counts[mode.name] += 1
            first_evidence.setdefault(mode.name, f"{ex.question[:70]!r}: {mode.evidence}")
    order = list(GUIDANCE)
    ranked = sorted(counts.items(), key=lambda p: (-p[1], order.index(p[0]) if p[0] in order else 99))
    total = len(parsed.examples)
    lines = [f"Rule-based offline reflection (no LLM) over {total} failed example(s). Detected failure modes:"]
    for name, count in ranked:
        note = " [the instruction already addresses this]" if covered(name, parsed.parent) else ""
        lines.append(f"- {name.replace('_', ' ')}: {count}/{total}{note} (e.g. {first_evidence[name]})")
    if not ranked:
        lines.append("- none recognised; the candidates strengthen the instruction generically")
    lines.append("Each candidate keeps the original instruction and its tags and adds guidance against these modes.")
    return "\n".join(lines), ranked


class RuleBasedReflector:
    """The offline optimizer LLM (see the module docstring).

    Args:
        rng: the source of every choice; ``random.Random(seed)`` when omitted.
        seed: used only when ``rng`` is omitted.
        max_answer_words, many_searches: thresholds passed to :func:`detect_failure_modes`.
    """

    name = "rule-based"

    def __init__(
        self,
        rng: random.Random | None = None,
        *,
        seed: int = 0,
        max_answer_words: int = 8,
        many_searches: int = 3,
    ) -> None:
        # One draw from the injected RNG; every call then derives its own stream from
        # (that draw, the prompt), so the reflector is stateless between calls: a run resumed
        # from a checkpoint gets exactly the answers an uninterrupted run would.
        self._seed = (rng if rng is not None else random.Random(seed)).getrandbits(64)
        self.max_answer_words = max_answer_words
        self.many_searches = many_searches
        self.usage = LLMUsage()
        logger.info("optimizer: rule-based offline reflector (no LLM; deterministic heuristics)")

    def __repr__(self) -> str:
        return f"RuleBasedReflector(calls={self.usage.calls})"

    def check(self) -> None:
        """Nothing to reach: always fine."""

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        """``n`` responses, each a critique plus N candidates; temperature and max_tokens are ignored."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        users = [m.get("content", "") for m in messages if m.get("role") == "user"]
        text = users[-1] if users else "\n".join(m.get("content", "") for m in messages)
        try:
            parsed = parse_prompt(text)
        except LLMError:
            self.usage.failures += 1
            raise
        outputs = [self.respond(parsed, derived_rng(self._seed, text, i)) for i in range(n)]
        self.usage.add(0, 0)
        return outputs

    def respond(self, parsed: ParsedPrompt, rng: random.Random) -> str:
        """One full answer (critique + ``<ins_i>`` candidates) to a parsed prompt."""
        if parsed.kind == "reflection":
            expect_think = "think" in tags_of(parsed.parent)
            per_example = [
                detect_failure_modes(
                    ex,
                    max_answer_words=self.max_answer_words,
                    many_searches=self.many_searches,
                    expect_think=expect_think,
                )
                for ex in parsed.examples
            ]
            critique, ranked = _critique(parsed, per_example)
            logger.debug("rule-based reflector: modes %s", ranked)
            candidates = write_candidates(parsed.parent, ranked, parsed.n, rng)
        elif parsed.kind == "history":
            extra = _history_sentences(parsed)
            critique = (
                f"Rule-based offline revision (no LLM) of the best of {len(parsed.history)} scored "
                "instruction(s), borrowing sentences from the other good ones and adding generic "
                "strengthenings."
            )
            candidates = write_candidates(parsed.parent, [], parsed.n, rng, extra_sentences=extra)
        else:
            critique = "Rule-based offline paraphrase (no LLM): rewordings plus generic strengthenings."
            candidates = write_candidates(parsed.parent, [], parsed.n, rng, reword=True)
        body = "\n".join(f"<ins_{i}>\n{c}\n</ins_{i}>" for i, c in enumerate(candidates, start=1))
        return f"{critique}\n\n{body}"


def _history_sentences(parsed: ParsedPrompt) -> list[str]:
    """Sentences of the other above-median instructions that the best one lacks."""
    scores = sorted(s for _, s in parsed.history)
    median = scores[len(scores) // 2]
    out: list[str] = []
    for text, score in sorted(parsed.history, key=lambda e: -e[1]):
        if text == parsed.parent or score < median:
            continue
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            sentence = sentence.strip()
            if len(sentence) > 20 and sentence not in parsed.parent and sentence not in out:
                out.append(sentence)
    return out
