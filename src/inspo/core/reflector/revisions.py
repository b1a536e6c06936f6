"""Writing revisions: the critique and the candidate instructions the reflector answers with.

:func:`write_candidates` keeps the parent's whole text (so every protocol tag it has survives) and
adds guidance for the detected failure modes; the N candidates differ in which modes they
address, in what order, in which wording (the environment's ``rules.guidance``) and in layout. A
wording is used only when every tag it mentions is one the parent uses. Paraphrase prompts get the
rules' safe rewordings and generic strengthenings; history prompts borrow sentences from the other
good instructions (:func:`history_sentences`). :func:`write_critique` is the analysis written
before the candidates. Every choice comes from the ``random.Random`` passed in.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from inspo.core.reflector.failures import FailureMode, tags_of
from inspo.core.reflector.prompts import ParsedPrompt
from inspo.core.reflector.rules import ReflectorRules

_LAYOUTS = ("bullets", "numbered", "preface", "inline")
_HEADERS = {
    "bullets": "Rules learned from past mistakes:",
    "numbered": "Follow these rules:",
}


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


def covered(mode: str, parent: str, rules: ReflectorRules) -> bool:
    """Whether ``parent`` already carries one of the wordings for ``mode``."""
    return any(s in parent for s in rules.guidance.get(mode, ()))


def _reword(parent: str, rng: random.Random, rules: ReflectorRules) -> str:
    """Apply a random subset of the rules' rewordings to the parent (tags are never touched)."""
    out = parent
    for old, new in rules.rewordings:
        if old in out and rng.random() < 0.6:
            out = out.replace(old, new)
    return out


def write_candidates(
    parent: str,
    modes: Sequence[tuple[str, int]],
    n: int,
    rng: random.Random,
    *,
    rules: ReflectorRules,
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
        if covered(
            name, parent, rules
        ):  # already addressed: adding more wordings would only bloat it
            continue
        usable = [s for s in rules.guidance.get(name, ()) if _allowed(s, parent_tags)]
        if usable:
            pools.append(usable)
    generic = [
        s
        for s in (*extra_sentences, *rules.generic)
        if _allowed(s, parent_tags) and s not in parent
    ]
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
            base = _reword(parent, rng, rules) if reword and not first else parent
            text = _layout(base, list(dict.fromkeys(chosen)), style, learned=learned)
            if text.strip() not in seen:
                break
        else:
            text = _layout(
                parent, [f"(Revision {i + 1}.) Follow the instruction above exactly."], "inline"
            )
        seen.add(text.strip())
        candidates.append(text)
    return candidates


def write_critique(
    parsed: ParsedPrompt, per_example: list[list[FailureMode]], rules: ReflectorRules
) -> tuple[str, list[tuple[str, int]]]:
    """The critique text and the (mode, count) ranking, most frequent first."""
    counts: Counter[str] = Counter()
    first_evidence: dict[str, str] = {}
    for ex, found in zip(parsed.examples, per_example, strict=True):
        for mode in {m.name: m for m in found}.values():
            counts[mode.name] += 1
            first_evidence.setdefault(mode.name, f"{ex.question[:70]!r}: {mode.evidence}")
    order = list(rules.guidance)
    ranked = sorted(
        counts.items(), key=lambda p: (-p[1], order.index(p[0]) if p[0] in order else 99)
    )
    total = len(parsed.examples)
    lines = [
        f"Rule-based offline reflection (no LLM) over {total} failed example(s). Detected failure "
        "modes:"
    ]
    for name, count in ranked:
        note = (
            " [the instruction already addresses this]"
            if covered(name, parsed.parent, rules)
            else ""
        )
        lines.append(
            f"- {name.replace('_', ' ')}: {count}/{total}{note} (e.g. {first_evidence[name]})"
        )
    if not ranked:
        lines.append("- none recognised; the candidates strengthen the instruction generically")
    lines.append(
        "Each candidate keeps the original instruction and its tags and adds guidance against "
        "these modes."
    )
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
