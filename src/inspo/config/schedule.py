"""The co-evolution schedule a run's core gets: static runs, and the pre-/post-policy offline stage.

Pure functions of a :class:`~inspo.core.config.CoEvolutionConfig` (and, for the offline stage,
the train config's ``offline_steps`` / ``offline_schedule`` / ``mode``), tested against the
hand-worked App. B numbers in ``tests/test_train_paper.py``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from inspo.core.config import CoEvolutionConfig
from inspo.core.schedule import is_evolve_step

if TYPE_CHECKING:
    from inspo.config.train import TrainConfig


def core_config(co: CoEvolutionConfig, *, static: bool) -> CoEvolutionConfig:
    """The co-evolution config the core of a run gets: ``static`` (the static mode and the GRPO
    stage of pre-/post-policy) is a population of one, the seed, that never changes."""
    if static:
        return replace(
            co, population_size=1, n_parent=1, prune=False, evolve=False, init_population=False
        )
    return co


def online_rounds(co: CoEvolutionConfig) -> int:
    """Evolution rounds Algorithm 1 makes before T_e (every K_e-th step t < T_e; P_0 not
    counted)."""
    return sum(is_evolve_step(t, co) for t in range(1, co.evolve_until))


def offline_schedule(
    co: CoEvolutionConfig, offline_steps: int, schedule: str = "compressed"
) -> CoEvolutionConfig:
    """The co-evolution schedule of a pre-/post-policy stage of ``offline_steps`` steps.

    ``compressed``: the R = :func:`online_rounds` evolution rounds of the online schedule, spread
    over the stage with a step after the last one for the new candidates to be weighed:
    K_e' = offline_steps // (R + 1), T_e' = R * K_e' + 1, and K_p' = K_p * K_e' / K_e rounded
    (halves up, at least 1) so that pruning halves the population as often between refills as
    online. With App. B (K_p 5, K_e 15, T_e 150: R = 9) and 30 offline steps: K_p' 1, K_e' 3,
    T_e' 28. Idempotent. ``unchanged``: ``co`` as it is (it evolves only if offline_steps >= K_e).
    """
    if schedule == "unchanged" or not co.evolve:
        return co
    rounds = online_rounds(co)
    every = max(1, offline_steps // (rounds + 1))
    return replace(
        co,
        evolve_every=every,
        evolve_until=rounds * every + 1,
        prune_every=max(1, (2 * co.prune_every * every + co.evolve_every) // (2 * co.evolve_every)),
    )


def offline_round_problem(
    co: CoEvolutionConfig, steps: int, schedule: str, mode: str
) -> str | None:
    """Why a ``mode`` stage of ``steps`` offline steps would make no evolution round (None: it makes
    some)."""
    rounds = online_rounds(co)
    if rounds == 0 and schedule != "unchanged":
        return (
            f"the {mode} stage would make no evolution round: coevolution makes none before T_e "
            f"(K_e={co.evolve_every}, T_e={co.evolve_until})"
        )
    if schedule == "compressed" and steps < rounds + 1:
        return (
            f"offline_steps={steps} is too short for the {rounds} evolution rounds of the online "
            f"schedule (one step each, plus one after the last): use offline_steps >= {rounds + 1}"
        )
    off = offline_schedule(co, steps, schedule)
    if not any(is_evolve_step(t, off) for t in range(1, steps + 1)):
        return (
            f"the {mode} stage would make no evolution round in offline_steps={steps} "
            f"(K_e={off.evolve_every}, T_e={off.evolve_until}): raise offline_steps, or use "
            "offline_schedule=compressed"
        )
    return None


def offline_coevolution(config: TrainConfig) -> CoEvolutionConfig:
    """``config``'s offline stage schedule (:func:`offline_schedule` of its ``offline_*``
    settings)."""
    return offline_schedule(config.coevolution, config.offline_steps, config.offline_schedule)


def offline_config(config: TrainConfig) -> TrainConfig:
    """``config`` with the offline stage's schedule (what the pre-/post-policy stage runs)."""
    return replace(config, coevolution=offline_coevolution(config))
