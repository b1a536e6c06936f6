"""Paired comparisons of two instructions (or policies) scored on the same questions.

Pure functions, no numpy: a comparison is the per-question difference ``a_i - b_i`` of two
score lists in the same question order, summarised by its mean, standard error and a 95%
confidence interval from Student's t (``n - 1`` degrees of freedom).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom; 1.96 beyond.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError(f"t95 needs df >= 1, got {df}")
    return _T95[df - 1] if df <= len(_T95) else 1.96


@dataclass(frozen=True)
class PairedDifference:
    """``mean`` of ``a_i - b_i`` over ``n`` questions, its standard error ``se`` and the 95%
    interval [``low``, ``high``] (NaN when n < 2: one question says nothing about spread)."""

    n: int
    mean: float
    se: float
    low: float
    high: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        if self.n < 2:
            return f"{self.mean:+.3f} (n={self.n}, no interval)"
        return f"{self.mean:+.3f} [95% CI {self.low:+.3f}, {self.high:+.3f}] over {self.n} questions"


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference:
    """Compare ``a`` with ``b`` question by question (same length, same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired_difference needs scores on the same questions: {len(a)} vs {len(b)}")
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    n = len(diffs)
    if n == 0:
        raise ValueError("paired_difference needs at least one question")
    mean = statistics.fmean(diffs)
    if n < 2:
        return PairedDifference(n, mean, math.nan, math.nan, math.nan)
    se = statistics.stdev(diffs) / math.sqrt(n)
    half = t95(n - 1) * se
    return PairedDifference(n, mean, se, mean - half, mean + half)


def over_seeds(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Compare ``a`` with ``b`` over several seeds, each seed scored on the same questions.

    ``a[s]`` and ``b[s]`` are seed ``s``'s per-question scores, in one question order for all
    seeds. Returns ``per_seed`` (each seed's :class:`PairedDifference` as a dict), ``seed_mean``
    with its 95% interval across seeds ``seed_low``/``seed_high`` (Student's t, seeds - 1
    degrees of freedom), and ``pooled``: each question's difference averaged over the seeds,
    with a 95% interval over questions.
    """
    if len(a) != len(b) or len(a) < 2:
        raise ValueError(f"over_seeds needs the same number (at least 2) of seeds on each side: {len(a)} vs {len(b)}")
    if len({len(scores) for scores in (*a, *b)}) != 1:
        raise ValueError("over_seeds needs every seed scored on the same questions")
    per_seed = [paired_difference(x, y) for x, y in zip(a, b, strict=True)]
    means = [d.mean for d in per_seed]
    centre = statistics.fmean(means)
    half = t95(len(means) - 1) * statistics.stdev(means) / math.sqrt(len(means))
    pooled_a = [statistics.fmean(col) for col in zip(*a, strict=True)]
    pooled_b = [statistics.fmean(col) for col in zip(*b, strict=True)]
    return {"per_seed": [d.to_dict() for d in per_seed], "seed_mean": centre, "seed_low": centre - half,
            "seed_high": centre + half, "pooled": paired_difference(pooled_a, pooled_b).to_dict()}
