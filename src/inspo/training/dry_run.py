"""The planned schedule and cost of a run, for ``inspo train --dry-run`` (no model loaded)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from inspo.config.schedule import offline_coevolution
from inspo.config.train import TrainConfig
from inspo.core.schedule import PlannedStep, planned_schedule


@dataclass
class RunPlan:
    schedule: list[PlannedStep]
    training_rollouts: int
    warmup_rollouts: int
    verification_rollouts_min: int
    verification_rollouts_max: int
    optimizer_calls_min: int
    optimizer_calls_max: int
    offline_schedule: list[PlannedStep] = field(default_factory=list)
    """pre-/post-policy: the offline stage's steps that prune or evolve."""
    offline_rollouts: int = 0
    """pre-/post-policy: rollouts of the offline stage's steps (frozen policy, not trained on)."""
    offline_title: str = ""

    @property
    def extra_share_max(self) -> float:
        extra = self.verification_rollouts_max + self.warmup_rollouts + self.offline_rollouts
        return extra / self.training_rollouts if self.training_rollouts else 0.0

    def lines(self) -> list[str]:
        out = ["schedule (steps that prune or evolve; population size after the step):"]
        out += _steps(self.schedule)
        if self.offline_title:
            out += [self.offline_title, *_steps(self.offline_schedule)]
        out += [
            f"training rollouts:      {self.training_rollouts}",
            *([f"offline rollouts:       {self.offline_rollouts}"] if self.offline_title else []),
            f"warm-up rollouts:       {self.warmup_rollouts}",
            f"verification rollouts: {self.verification_rollouts_min} to "
            f"{self.verification_rollouts_max}",
            f"optimizer calls:        {self.optimizer_calls_min} to {self.optimizer_calls_max}",
            f"extra inference:        at most {100 * self.extra_share_max:.1f}% of training "
            "rollouts",
        ]
        return out


@dataclass(frozen=True)
class RolloutEngine:
    """Which engine plays a run's training rollouts, and why."""

    vllm: bool
    why: str

    def line(self) -> str:
        return f"rollout engine:         {'vLLM' if self.vllm else 'transformers'} ({self.why})"


def _vllm_importable() -> bool:
    from inspo.engines.vllm_engine import vllm_available

    return vllm_available()


def _cuda_visible() -> bool:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def rollout_engine(
    config: TrainConfig,
    *,
    vllm: Callable[[], bool] = _vllm_importable,
    cuda: Callable[[], bool] = _cuda_visible,
) -> RolloutEngine:
    """The engine of ``config``'s training rollouts: ``rl.use_vllm`` true or false as set; ``auto``
    (the paper presets) picks vLLM when the vllm module is installed (``vllm``) and a CUDA GPU is
    visible (``cuda``), else transformers. On CPU vLLM can run too (``rl.use_vllm=true``), but
    is not picked by ``auto``: BENCHMARKS.md section 2 measures whether it pays there."""
    rl = config.rl
    sync = "the LoRA adapter" if config.model.lora else "all weights"
    if rl.use_vllm is True:
        return RolloutEngine(
            True, f"rl.use_vllm=true; {sync} synced into vLLM in each training process every step"
        )
    if rl.use_vllm is False:
        return RolloutEngine(
            False, "rl.use_vllm=false: the training model generates through transformers"
        )
    if not vllm():
        return RolloutEngine(False, "rl.use_vllm=auto and no 'vllm' module is installed")
    if not cuda():
        return RolloutEngine(
            False,
            "rl.use_vllm=auto and no CUDA GPU is visible (vLLM's CPU build is not picked "
            "by auto; set rl.use_vllm=true to use it)",
        )
    return RolloutEngine(
        True,
        f"rl.use_vllm=auto, the vllm module and a CUDA GPU are here; {sync} synced into "
        "vLLM in each training process every step",
    )


def _steps(schedule: list[PlannedStep]) -> list[str]:
    return [
        f"  step {p.step:>4}: {'prune ' if p.prune else ''}{'evolve ' if p.evolve else ''}-> "
        f"{p.size_after}"
        for p in schedule
    ] or ["  (none)"]


def plan_run(config: TrainConfig) -> RunPlan:
    """Rollout and optimizer-call budget of ``config``.

    Each refill needs ``ceil(slots / n)`` rounds at best, with ``n`` the top-n a round may admit
    (``coevolution.admit_n``), and ``max_rounds`` at worst; each round verifies
    ``candidates_per_call`` candidates (plus the parent under ``admission=beat-parent``) on
    ``validation_size`` questions, or none under ``verify=false``. Static mode has no population
    work; the GRPO stage of the pre-/post-policy modes is static, and their population work is the
    offline stage's (its own schedule, see :func:`inspo.config.schedule.offline_coevolution`).
    """
    rl, co = config.rl, config.coevolution
    training = rl.steps * rl.trajectories_per_step
    if config.mode == "static":
        return RunPlan([], training, 0, 0, 0, 0, 0)
    schedule = planned_schedule(rl.steps, co) if config.mode == "inspo" else []
    offline, offline_title = [], ""
    if config.mode in ("pre-policy", "post-policy"):
        off = offline_coevolution(config)
        offline = planned_schedule(config.offline_steps, off)
        offline_title = (
            f"{config.mode} stage, frozen policy ({config.offline_steps} steps, offline_schedule "
            f"{config.offline_schedule}: K_p {off.prune_every}, K_e {off.evolve_every}, "
            f"T_e {off.evolve_until}):"
        )
    refills = [co.population_size - 1] if co.init_population else []
    refills += [co.population_size - co.n_parent for p in schedule + offline if p.evolve]
    per_call = max(1, co.admit_n(co.candidates_per_call))
    best_rounds = sum(-(-slots // min(per_call, slots)) for slots in refills if slots)
    worst_rounds = co.max_rounds * len([slots for slots in refills if slots])
    scored = co.candidates_per_call + (co.admission == "beat-parent")
    per_round = scored * co.validation_size if co.verify else 0
    return RunPlan(
        schedule=schedule,
        training_rollouts=training,
        warmup_rollouts=config.data.warmup_questions,
        verification_rollouts_min=best_rounds * per_round,
        verification_rollouts_max=worst_rounds * per_round,
        optimizer_calls_min=best_rounds,
        optimizer_calls_max=worst_rounds,
        offline_schedule=offline,
        offline_rollouts=config.offline_steps * rl.trajectories_per_step if offline_title else 0,
        offline_title=offline_title,
    )
