"""The replay buffer B: every (instruction, question, trajectory, reward) the policy produced.

It feeds the optimizer with failures — the latest step's first — and draws the validation
subset D_B on which new candidates are verified.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any

from inspo.records import Question, Rollout, scored


@dataclass
class Experience:
    """One stored trajectory and the training step that produced it."""

    step: int
    rollout: Rollout

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "rollout": self.rollout.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Experience:
        return cls(int(data["step"]), Rollout.from_dict(data["rollout"]))


class ReplayBuffer:
    """A bounded FIFO of :class:`Experience` (token ids are not kept: text is what reflects)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: deque[Experience] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def add(self, step: int, rollouts: Iterable[Rollout]) -> None:
        """Keep ``rollouts`` (without token ids); error rollouts (``error`` set: an outage, not
        the policy's work) are left out, so they are never reflected on nor drawn into D_B."""
        for r in scored(list(rollouts)):
            light = replace(r, prompt_ids=[], completion_ids=[], env_mask=[], logprobs=None)
            self._items.append(Experience(step, light))

    def sample_failures(self, k: int, rng: random.Random, threshold: float = 1.0) -> list[Rollout]:
        """Up to ``k`` failures (reward < ``threshold``), latest step first.

        Within a step the draw is uniform (via ``rng``); older steps fill what the latest could
        not. When the buffer holds no failure at all, the lowest-reward trajectories stand in
        (latest first), so the optimizer always sees the policy's weakest work.
        """
        failures = [e for e in self._items if e.rollout.reward < threshold]
        pool = failures or sorted(self._items, key=lambda e: e.rollout.reward)[:k]
        by_step: dict[int, list[Experience]] = {}
        for e in pool:
            by_step.setdefault(e.step, []).append(e)
        chosen: list[Rollout] = []
        for step in sorted(by_step, reverse=True):
            need = k - len(chosen)
            if need <= 0:
                break
            group = by_step[step]
            picked = rng.sample(group, min(need, len(group)))
            chosen.extend(e.rollout for e in picked)
        return chosen

    def validation_questions(
        self, size: int, rng: random.Random, exclude: Collection[str] = ()
    ) -> list[Question]:
        """D_B: up to ``size`` distinct questions (by id) drawn uniformly from the buffer, none of
        whose id is in ``exclude``."""
        seen: dict[str, Question] = {}
        for e in self._items:
            if e.rollout.question.id not in exclude:
                seen.setdefault(e.rollout.question.id, e.rollout.question)
        questions = list(seen.values())
        if len(questions) <= size:
            return questions
        return rng.sample(questions, size)

    def to_dict(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "items": [e.to_dict() for e in self._items]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReplayBuffer:
        buf = cls(int(data["capacity"]))
        buf._items.extend(Experience.from_dict(d) for d in data["items"])
        return buf
