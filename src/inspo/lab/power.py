"""How many seeds a comparison needs, and what a number of seeds could have detected.

A comparison across seeds is a one-sample t-test on the per-seed paired differences d_1..d_n
(each seed's mean over the same held-out questions). With seed-to-seed standard deviation ``sd``,
the smallest true effect that n seeds detect with probability ``power`` at two-sided level
``alpha`` is (t_{1-alpha/2, n-1} + t_{power, n-1}) * sd / sqrt(n) (the usual approximation, the
non-central t replaced by a shifted central one). Pure functions; ``sd`` comes from a pilot.
"""

from __future__ import annotations

import math

from inspo.eval.stats import t_quantile


def detectable_effect(sd: float, seeds: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest effect ``seeds`` seeds detect (two-sided ``alpha``, probability ``power``),
    in the units of ``sd`` (EM when ``sd`` is the SD of per-seed EM differences)."""
    if seeds < 2:
        raise ValueError(f"detectable_effect needs at least 2 seeds, got {seeds}")
    if sd < 0 or not math.isfinite(sd):
        raise ValueError(f"detectable_effect needs a finite sd >= 0, got {sd}")
    df = seeds - 1
    return (t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) * sd / math.sqrt(seeds)


def seeds_needed(
    sd: float, effect: float, *, alpha: float = 0.05, power: float = 0.8, most: int = 10_000
) -> int | None:
    """The fewest seeds (>= 2) whose :func:`detectable_effect` is at most ``effect``; None when
    more than ``most`` would be needed."""
    if effect <= 0:
        raise ValueError(f"seeds_needed needs an effect > 0, got {effect}")
    for n in range(2, most + 1):
        if detectable_effect(sd, n, alpha=alpha, power=power) <= effect:
            return n
    return None
