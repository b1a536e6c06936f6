"""Rewards: exact match and token F1 with SQuAD normalisation, plus a format check.

All functions are pure and read the RESPONSE only (what the policy and the environment wrote
after the prompt), never the prompt: an instruction that shows ``<answer> Beijing </answer>`` as
an example cannot earn a reward. The answer is taken with
:func:`inspo.envs.search_r1.protocol.extract_answer` (last complete ``<answer>``; ``None`` scores
0).

Rules:

- :func:`normalize_answer` (from :mod:`inspo.answers`, shared with the core's leak guard) is
  SQuAD's: lowercase, drop ASCII punctuation, drop the articles ``a``/``an``/``the`` as whole
  words, collapse whitespace.
- ``golds`` is one string or a sequence of strings; a prediction scores its best match over the
  golds. No golds -> 0.0.
- :func:`f1_score` is token-level F1 on normalised whitespace tokens (bag of words). When either
  side normalises to no tokens, F1 is 1.0 if both are empty and 0.0 otherwise (SQuAD v2's
  convention, which agrees with exact match).
- Rewards are floats in [0, 1] for ``em``/``f1``; :class:`RewardSpec` adds an optional format
  term, so its range is [0, 1 + format_weight].
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inspo.answers import Golds, exact_match, f1_score, normalize_answer
from inspo.envs.search_r1.protocol import INVALID_ACTION_MESSAGE, LAST_TURN_NUDGE, extract_answer

__all__ = [
    "Golds",
    "RewardSpec",
    "em_reward",
    "exact_match",
    "f1_reward",
    "f1_score",
    "format_ok",
    "normalize_answer",
]

_TAG_RE = re.compile(r"</?(think|search|information|answer)>")


def em_reward(response: str, golds: Golds) -> float:
    """Exact match of the response's final answer; 0.0 when it has no complete answer."""
    answer = extract_answer(response)
    return 0.0 if answer is None else exact_match(answer, golds)


def f1_reward(response: str, golds: Golds) -> float:
    """Token F1 of the response's final answer; 0.0 when it has no complete answer."""
    answer = extract_answer(response)
    return 0.0 if answer is None else f1_score(answer, golds)


def format_ok(response: str) -> bool:
    """True when the response's protocol tags are well formed and it ends with its answer.

    Rules (free text outside tags is allowed, the check is about the tags):

    - tags open and close in pairs and never nest (anything inside ``<information>`` is
      skipped: retrieved text is not the policy's);
    - an ``<information>`` block directly follows a ``</search>`` (only whitespace between);
    - exactly one ``<answer>…</answer>``, and nothing but whitespace after it;
    - no invalid turn: a response holding the corrective message is not well formed (the
      last-turn nudge, environment text, is ignored).
    """
    if INVALID_ACTION_MESSAGE in response:
        return False
    response = response.replace(LAST_TURN_NUDGE, "")
    pos, open_tag, answers, last_close, last_closed = 0, None, 0, -1, None
    while True:
        match = _TAG_RE.search(response, pos)
        if match is None:
            break
        tag, closing = match.group(1), match.group(0).startswith("</")
        if open_tag is None:
            if closing or answers:
                return False
            if tag == "information" and (
                last_closed != "search" or response[last_close : match.start()].strip()
            ):
                return False
            open_tag = tag
            if tag == "information":
                end = response.find("</information>", match.end())
                if end < 0:
                    return False
                open_tag, last_closed = None, "information"
                pos = last_close = end + len("</information>")
                continue
        else:
            if not closing or tag != open_tag:
                return False
            open_tag, last_closed, last_close = None, tag, match.end()
            answers += tag == "answer"
        pos = match.end()
    return open_tag is None and answers == 1 and not response[last_close:].strip()


@dataclass(frozen=True)
class RewardSpec:
    """How a response is scored: ``metric`` ("em" or "f1") plus ``format_weight`` * format_ok.

    ``format_weight`` = 0 (the paper's setting: EM only) gives the plain metric.
    """

    metric: str = "em"
    format_weight: float = 0.0

    def __post_init__(self) -> None:
        if self.metric not in ("em", "f1"):
            raise ValueError(f"RewardSpec.metric must be 'em' or 'f1', got {self.metric!r}")
        if self.format_weight < 0:
            raise ValueError(f"RewardSpec.format_weight must be >= 0, got {self.format_weight}")

    def __call__(self, response: str, golds: Golds) -> float:
        score = em_reward(response, golds) if self.metric == "em" else f1_reward(response, golds)
        if self.format_weight:
            score += self.format_weight * float(format_ok(response))
        return score
