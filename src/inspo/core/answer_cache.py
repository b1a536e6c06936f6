"""The optimizer answers a run has paid for, so a resumed run replays them instead of paying again.

A run saves its state after each step (and each round of the initial population); one stopped in
the middle of an evolution replays that step on ``--resume``, and with it the optimizer calls it
had already made: 50-100 s each for a local 1.5B on two cores, real money on an API. The
:class:`~inspo.core.proposer.Proposer` writes every answer it receives to an append-only JSONL file
in the run directory as soon as it arrives, keyed by (the proposer's call number, a hash of the
prompt and the sampling settings); on a resume the call number restarts from the saved state, so
the replayed calls find their answers. A call whose prompt differs (a setting changed) misses and is
made anew. The entry also keeps the client's sampling stream after the call (a local model's
``sampling_rng``), restored on a hit, so the calls after it sample as the uninterrupted run did.
A failed call is not kept (it was not paid for, and is retried).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


def answer_key(call: int, prompt: str, *, n: int, temperature: float, max_tokens: int) -> str:
    """The key of optimizer call number ``call`` with this prompt and these sampling settings."""
    digest = hashlib.sha256(
        json.dumps([prompt, n, temperature, max_tokens]).encode("utf-8")
    ).hexdigest()
    return f"{call}:{digest[:32]}"


@dataclass
class PaidAnswer:
    """One optimizer call's answers, what it cost, why each completion stopped, and the client's
    sampling stream after it (None for a client without one)."""

    answers: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reasons: list[str | None] = field(default_factory=list)
    rng_after: Any = None


class AnswerCache:
    """The answers of one run directory's optimizer calls (``optimizer_answers.jsonl``); ``path``
    None keeps them in memory only."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        self._answers: dict[str, PaidAnswer] = {}
        if self.path is not None and self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a killed run: that answer is asked again
                key = row.pop("key")
                self._answers[key] = PaidAnswer(**row)
        self.hits = 0

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: str) -> PaidAnswer | None:
        paid = self._answers.get(key)
        self.hits += paid is not None
        return paid

    def put(self, key: str, paid: PaidAnswer) -> None:
        self._answers[key] = paid
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"key": key, **asdict(paid)}, ensure_ascii=False) + "\n")
