"""Paired comparisons of two instructions (or policies) scored on the same questions.

Pure functions, no numpy: a comparison is the per-question difference ``a_i - b_i`` of two
score lists in the same question order, summarised by its mean, standard error and a 95%
confidence interval from Student's t (``n - 1`` degrees of freedom). The t quantile is computed,
not looked up (:func:`t_quantile`), so every df gets Student's t, never the normal 1.96.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def t95(df: int) -> float:
    """The two-sided 95% quantile of Student's t with ``df`` degrees of freedom (df >= 1):
    12.706 at 1, 2.042 at 30, 1.984 at 100, approaching 1.960 as ``df`` grows."""
    return t_quantile(0.975, df)


def t_quantile(p: float, df: float) -> float:
    """The ``p``-quantile of Student's t with ``df`` degrees of freedom: the ``t`` with
    ``P(T <= t) = p``, for 0 < p < 1 and any real df >= 1.

    Closed forms for df 1 and 2; otherwise the root of the exact tail probability (the
    regularized incomplete beta function, by its continued fraction), found by Newton's method
    inside a bracket, so it cannot diverge. Matches ``scipy.stats.t.ppf`` to 1e-8 relative for
    df up to 10^7 and 1e-12 <= p <= 1 - 1e-12 (tests/test_eval_stats.py).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p}")
    if not df >= 1:  # also rejects NaN
        raise ValueError(f"t_quantile needs df >= 1, got {df}")
    if p == 0.5:
        return 0.0
    # By symmetry solve P(T > t) = tail for t > 0; the smaller of p and 1 - p is the tail as
    # given, so a p near 0 keeps its precision (1 - (1 - p) would not).
    return _t_upper_quantile(1.0 - p, df) if p > 0.5 else -_t_upper_quantile(p, df)


def _t_upper_quantile(tail: float, df: float) -> float:
    """The t > 0 with ``P(T > t) = tail`` (0 < tail < 1/2)."""
    if df == 1:
        return 1.0 / math.tan(math.pi * tail)  # the Cauchy quantile, cot(pi * tail)
    if df == 2:
        return (1.0 - 2.0 * tail) / math.sqrt(2.0 * tail * (1.0 - tail))
    # Start from the Cornish-Fisher expansion around the normal quantile (a start only: the
    # answer is the root of the exact tail below), then Newton's method inside a bracket that
    # shrinks with every step and is bisected whenever a Newton step would leave it.
    z = statistics.NormalDist().inv_cdf(1.0 - tail)
    t = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    low, high = 0.0, math.inf
    for _ in range(500):
        excess = _t_upper_tail(t, df) - tail  # > 0: t is still below the quantile
        if excess > 0:
            low = t
        else:
            high = t
        nxt = t + excess / _t_pdf(t, df)  # Newton: d P(T > t) / dt = -pdf(t)
        if not low < nxt < high:
            nxt = 2.0 * t if high == math.inf else 0.5 * (low + high)
        if abs(nxt - t) <= 1e-13 * max(1.0, t) or high - low <= 1e-13 * max(1.0, low):
            return nxt
        t = nxt
    return t


def t_cdf(t: float, df: float) -> float:
    """``P(T <= t)`` for Student's t with ``df`` > 0 degrees of freedom."""
    upper = _t_upper_tail(abs(t), df)
    return 1.0 - upper if t >= 0 else upper


def _t_upper_tail(t: float, df: float) -> float:
    """``P(T > t)`` for t >= 0: half the regularized incomplete beta I_x(df/2, 1/2) at
    x = df / (df + t^2)."""
    t2 = t * t
    return 0.5 * _betainc(0.5 * df, 0.5, df / (df + t2), t2 / (df + t2))


def _t_pdf(t: float, df: float) -> float:
    """The density of Student's t with ``df`` degrees of freedom at ``t``."""
    log_norm = math.lgamma(0.5 * (df + 1)) - math.lgamma(0.5 * df) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - 0.5 * (df + 1) * math.log1p(t * t / df))


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """The regularized incomplete beta function I_x(a, b), with ``y = 1 - x`` passed separately
    so that x near 1 keeps its precision. Uses the continued fraction (Numerical Recipes 6.4)
    on whichever of I_x(a, b) and 1 - I_y(b, a) converges fast."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, y) / b


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function, by the modified Lentz method
    (Numerical Recipes 6.4); converges in O(sqrt(max(a, b))) terms where it is used."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for num in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            return h
    raise ArithmeticError(
        f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})"
    )


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
        return (
            f"{self.mean:+.3f} [95% CI {self.low:+.3f}, {self.high:+.3f}] over {self.n} questions"
        )


def paired_difference(a: Sequence[float], b: Sequence[float]) -> PairedDifference:
    """Compare ``a`` with ``b`` question by question (same length, same order)."""
    if len(a) != len(b):
        raise ValueError(
            f"paired_difference needs scores on the same questions: {len(a)} vs {len(b)}"
        )
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
        raise ValueError(
            f"over_seeds needs the same number (at least 2) of seeds on each side: {len(a)} vs "
            f"{len(b)}"
        )
    if len({len(scores) for scores in (*a, *b)}) != 1:
        raise ValueError("over_seeds needs every seed scored on the same questions")
    per_seed = [paired_difference(x, y) for x, y in zip(a, b, strict=True)]
    means = [d.mean for d in per_seed]
    centre = statistics.fmean(means)
    half = t95(len(means) - 1) * statistics.stdev(means) / math.sqrt(len(means))
    pooled_a = [statistics.fmean(col) for col in zip(*a, strict=True)]
    pooled_b = [statistics.fmean(col) for col in zip(*b, strict=True)]
    return {
        "per_seed": [d.to_dict() for d in per_seed],
        "seed_mean": centre,
        "seed_low": centre - half,
        "seed_high": centre + half,
        "pooled": paired_difference(pooled_a, pooled_b).to_dict(),
    }
