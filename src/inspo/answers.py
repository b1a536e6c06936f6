"""Answer normalisation (SQuAD's) and the two QA scores built on it, in one place for everything
that compares answers: environments' rewards (exact match, token F1: Search-R1's
:mod:`inspo.envs.search_r1.rewards`, :class:`~inspo.envs.tagged.TaggedToolEnv`'s default) and the
core's answer-leak guard (:func:`inspo.core.proposer.leaked_answer`). Pure, no imports beyond the
standard library, so every layer may use it.

- :func:`normalize_answer` is SQuAD's: lowercase, drop ASCII punctuation, drop the articles
  ``a``/``an``/``the`` as whole words, collapse whitespace;
- ``golds`` is one string or a sequence of strings; a prediction scores its best match over the
  golds. No golds -> 0.0;
- :func:`f1_score` is token-level F1 on normalised whitespace tokens (bag of words). When either
  side normalises to no tokens, F1 is 1.0 if both are empty and 0.0 otherwise (SQuAD v2's
  convention, which agrees with exact match).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower, strip punctuation, remove articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


Golds = str | Sequence[str]


def _gold_list(golds: Golds) -> list[str]:
    return [golds] if isinstance(golds, str) else list(golds)


def exact_match(prediction: str, golds: Golds) -> float:
    """1.0 if the normalised prediction equals any normalised gold, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _gold_list(golds)))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, golds: Golds) -> float:
    """Token-level F1 of the prediction against the best-matching gold (0.0 without golds)."""
    pred = normalize_answer(prediction).split()
    return max((_f1(pred, normalize_answer(g).split()) for g in _gold_list(golds)), default=0.0)
