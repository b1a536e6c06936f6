"""Answer normalisation (SQuAD's), in one place for everything that compares answers: the
exact-match and F1 rewards (:mod:`inspo.agent.rewards`) and the core's answer-leak guard
(:func:`inspo.core.proposer.leaked_answer`). Pure, no imports beyond the standard library, so
every layer may use it.
"""

from __future__ import annotations

import re
import string

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower, strip punctuation, remove articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())
