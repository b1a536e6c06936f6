"""Algorithm 1's schedule, pure: which steps prune (line 10) and evolve (line 16), and the plan a
dry run prints."""

from __future__ import annotations

from dataclasses import dataclass

from inspo.core.config import CoEvolutionConfig


def is_prune_step(t: int, cfg: CoEvolutionConfig) -> bool:
    """Line 10: prune at every K_p-th step (the size check is the caller's)."""
    return cfg.prune and t % cfg.prune_every == 0


def is_evolve_step(t: int, cfg: CoEvolutionConfig) -> bool:
    """Line 16: evolve at every K_e-th step while t < T_e."""
    return cfg.evolve and t % cfg.evolve_every == 0 and t < cfg.evolve_until


@dataclass(frozen=True)
class PlannedStep:
    step: int
    prune: bool
    evolve: bool
    size_after: int


def planned_schedule(total_steps: int, cfg: CoEvolutionConfig) -> list[PlannedStep]:
    """The steps that prune or evolve, with the population size after each, assuming every
    refill succeeds and the initial population is full. For dry runs and cost estimates."""
    size = cfg.population_size if cfg.init_population else 1
    plan = []
    for t in range(1, total_steps + 1):
        prune = is_prune_step(t, cfg) and size > cfg.n_parent
        if prune:
            size = max(size - size // 2, cfg.n_parent)
        evolve = is_evolve_step(t, cfg)
        if evolve:
            size = cfg.population_size
        if prune or evolve:
            plan.append(PlannedStep(t, prune, evolve, size))
    return plan
