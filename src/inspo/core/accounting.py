"""The cost ledger: what INSPO spends on top of RL (the numbers of the paper's App. C)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class CostLedger:
    """Running totals.

    - ``optimizer_*``: calls to the optimizer LLM, its tokens and failed calls.
    - ``training_rollouts``: trajectories generated for policy updates.
    - ``verification_rollouts``: trajectories generated to verify candidates on D_B.
    - ``warmup_rollouts``: trajectories of the seed generated before step 1 to fill the buffer.
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
