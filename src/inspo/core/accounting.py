"""The cost ledger: what INSPO spends on top of RL (the numbers of the paper's App. C).

The ledger is a consumer of the core's events (:mod:`inspo.core.events`): every count is the sum
of a field of the events the loop emitted, so Algorithm 1's code holds no accounting lines and
:meth:`CostLedger.from_events` rebuilds a ledger from a run's ``events.jsonl``. The core keeps a
running ledger (fed through :meth:`CostLedger.observe` as it emits) and saves it in its state, so
a resume restores it without replaying the events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from inspo.core.events import (
    Admitted,
    Event,
    Gated,
    ParentVerified,
    Proposed,
    Rejected,
    Verified,
    WarmedUp,
    Weights,
)


@dataclass
class CostLedger:
    """Running totals, each counted from one kind of event.

    - ``optimizer_*``: calls to the optimizer LLM, its tokens and failed calls (``Proposed``).
    - ``training_rollouts``: trajectories generated for policy updates (``Weights.n_rollouts``).
    - ``verification_rollouts``: trajectories generated to verify candidates on D_B, and their
      parents under ``beat-parent`` and ``paired`` (``Verified`` / ``ParentVerified``), and to gate
      them on their failure problems first under ``gate`` (``Gated``).
    - ``warmup_rollouts``: trajectories of the seed generated before step 1 to fill the buffer
      (``WarmedUp``).
    - ``candidates_*``: proposed (``Proposed.candidate_ids``), rejected by the guard or the
      verifier (``Rejected``), admitted (``Admitted``).
    """

    optimizer_calls: int = 0
    optimizer_prompt_tokens: int = 0
    optimizer_completion_tokens: int = 0
    optimizer_failures: int = 0
    training_rollouts: int = 0
    verification_rollouts: int = 0
    warmup_rollouts: int = 0
    candidates_proposed: int = 0
    candidates_rejected: int = 0
    candidates_admitted: int = 0

    def observe(self, event: Event) -> None:
        """Count ``event`` (an event that costs nothing is ignored)."""
        if isinstance(event, Weights):
            self.training_rollouts += event.n_rollouts
        elif isinstance(event, (Verified, ParentVerified, Gated)):
            self.verification_rollouts += event.n_rollouts
        elif isinstance(event, WarmedUp):
            self.warmup_rollouts += event.n_rollouts
        elif isinstance(event, Proposed):
            self.optimizer_calls += 1
            self.optimizer_prompt_tokens += event.prompt_tokens
            self.optimizer_completion_tokens += event.completion_tokens
            self.optimizer_failures += bool(event.error)
            self.candidates_proposed += len(event.candidate_ids)
        elif isinstance(event, Rejected):
            self.candidates_rejected += 1
        elif isinstance(event, Admitted):
            self.candidates_admitted += 1

    @classmethod
    def from_events(cls, events: Iterable[Event | None]) -> CostLedger:
        """The ledger of a stream of events (``None`` entries, unknown kinds read back, are
        skipped)."""
        ledger = cls()
        for event in events:
            if event is not None:
                ledger.observe(event)
        return ledger

    @property
    def extra_inference_share(self) -> float:
        """Verification + warm-up rollouts as a share of training rollouts (App. C: 1.4–7%)."""
        if self.training_rollouts == 0:
            return 0.0
        return (self.verification_rollouts + self.warmup_rollouts) / self.training_rollouts

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "extra_inference_share": self.extra_inference_share}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostLedger:
        data = {k: v for k, v in data.items() if k != "extra_inference_share"}
        return cls(**data)
