"""Writing revisions: the critique and the candidate instructions the reflector answers with.

:func:`write_candidates` keeps the parent's whole text (so every protocol tag it has survives) and
adds guidance for the detected failure modes; the N candidates differ in which modes they
address, in what order, in which wording (:data:`GUIDANCE`) and in layout. A wording is used only
when every tag it mentions is one the parent uses. Paraphrase prompts get safe rewordings
(:data:`REWORDINGS`) and generic strengthenings; history prompts borrow sentences from the other
good instructions (:func:`history_sentences`). :func:`write_critique` is the analysis written
before the candidates. Every choice comes from the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from inspo.core.reflector import failures
from inspo.core.reflector.failures import FailureMode
from inspo.core.reflector.prompts import ParsedPrompt

# Several wordings per mode so candidates differ; a wording is used only when every tag it
# mentions is one the parent instruction uses.
GUIDANCE: dict[str, tuple[str, ...]] = {
    failures.NEVER_SEARCHED: (
        "Always search before you answer: call <search> query </search> at least once, even when you think you already know the answer.",
        "Do not answer from memory. First look the facts up with <search> query </search>, then answer from the retrieved <information>.",
        "Your own knowledge is often wrong or outdated: verify every fact with a <search> query </search> before writing the <answer>.",
    ),
    failures.MALFORMED_TAGS: (
        "Close every tag you open: each <search> needs its </search> and each <answer> needs its </answer>; never nest one tag inside another.",
        "Use the tags exactly as specified: write <search> query </search> on its own, give exactly one <answer> ... </answer> block, and write nothing after </answer>.",
        "Check your format before finishing: every opening tag such as <think> must be followed by its closing tag </think>, and tags must not overlap.",
    ),
    failures.NO_ANSWER: (
        "Always finish with a final answer inside <answer> and </answer>, even when you are unsure: a best guess is better than no answer.",
        "Never stop without writing <answer> your answer </answer>; if the evidence is incomplete, give the most likely answer.",
        "Your response must end with exactly one <answer> ... </answer> block.",
    ),
    failures.ANSWER_TOO_LONG: (
        "Inside <answer> and </answer> write only the short answer itself (a name, date, number or a few words), no sentence and no explanation.",
        "Keep the final answer minimal, e.g. <answer> Beijing </answer>: no full sentences, no reasoning, no extra words inside the tags.",
        "The answer is checked by exact match, so put only the answer entity inside <answer> and </answer>, at most a few words.",
    ),
    failures.REPEATED_QUERIES: (
        "Never repeat a query you already searched; if the results did not help, change the keywords (a more specific entity, a synonym, or the missing fact).",
        "Each <search> must ask for something new: rephrase a query that failed instead of sending it again.",
        "Keep track of what you already searched. Repeating the same <search> query returns the same <information>, so reformulate it instead.",
    ),
    failures.QUESTION_AS_QUERY: (
        "Do not paste the whole question into <search> query </search>: search for one key entity or fact at a time with a short keyword query (3 to 6 words).",
        "Write focused search queries: name the entity and the fact you need (e.g. the person and 'birthplace'), not the full question.",
        "Break the question into the single facts it needs and search each fact separately with a short query.",
    ),
    failures.QUERY_MISSES_QUESTION: (
        "Search for the name written in the question (the person, organisation or place), for example <search> Kanor Observatory </search>, not for a general word such as a year or 'city'.",
        "Each <search> query must contain the name the question is about; when the results name another person or place that the question asks about, search for that name next.",
        "Copy the entity's name from the question into <search> query </search>; a query without it (like 'birthplace' or a year) returns unrelated documents.",
    ),
    failures.RAN_OUT_OF_TURNS: (
        "You have only a few turns: as soon as the <information> contains what you need, stop searching and give the <answer>.",
        "Do not keep searching indefinitely: after at most three searches, answer with the best candidate you have inside <answer> and </answer>.",
        "Plan your searches so that you can answer within a few turns, then write the <answer> block.",
    ),
    failures.IGNORED_EVIDENCE: (
        "Read the retrieved <information> carefully: when it names the answer, copy it exactly as written there into <answer> and </answer>.",
        "Base your answer on the retrieved <information>, not on memory; prefer the entity the documents state for the question asked.",
        "Before answering, check each document in the <information> for the requested fact and use that wording in your answer.",
    ),
    failures.NO_REASONING: (
        "Reason inside <think> and </think> before every search and before the final answer.",
        "Start each turn with <think> ... </think>: say what you know so far and what fact is still missing.",
        "Every time you receive new <information>, first analyse it inside <think> and </think>.",
    ),
    failures.WRONG_ANSWER: (
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


def write_critique(parsed: ParsedPrompt, per_example: list[list[FailureMode]]) -> tuple[str, list[tuple[str, int]]]:
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


def history_sentences(parsed: ParsedPrompt) -> list[str]:
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
