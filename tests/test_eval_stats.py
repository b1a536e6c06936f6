import math
import random

import pytest

from inspo.eval.stats import paired_difference, t95


def test_paired_difference_matches_a_naive_reference():
    rng = random.Random(0)
    a = [rng.random() for _ in range(12)]
    b = [rng.random() for _ in range(12)]
    d = [x - y for x, y in zip(a, b, strict=True)]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    se = sd / math.sqrt(len(d))
    got = paired_difference(a, b)
    assert (got.n, got.mean, got.se) == (12, pytest.approx(mean), pytest.approx(se))
    assert got.low == pytest.approx(mean - 2.201 * se) and got.high == pytest.approx(mean + 2.201 * se)


def test_paired_difference_edges():
    one = paired_difference([1.0], [0.0])
    assert one.mean == 1.0 and math.isnan(one.low) and "no interval" in one.text()
    same = paired_difference([0.5, 0.5], [0.5, 0.5])
    assert same.mean == 0.0 and same.low == same.high == 0.0
    with pytest.raises(ValueError, match="same questions"):
        paired_difference([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="at least one"):
        paired_difference([], [])
    assert t95(1) == 12.706 and t95(500) == 1.96


def test_over_seeds_matches_a_naive_reference():
    from inspo.eval.stats import over_seeds

    rng = random.Random(1)
    a = [[rng.random() for _ in range(6)] for _ in range(3)]
    b = [[rng.random() for _ in range(6)] for _ in range(3)]
    seed_means = [sum(x - y for x, y in zip(sa, sb, strict=True)) / 6 for sa, sb in zip(a, b, strict=True)]
    centre = sum(seed_means) / 3
    sd = math.sqrt(sum((m - centre) ** 2 for m in seed_means) / 2)
    out = over_seeds(a, b)
    assert [d["mean"] for d in out["per_seed"]] == pytest.approx(seed_means)
    assert out["seed_mean"] == pytest.approx(centre)
    assert out["seed_high"] - out["seed_mean"] == pytest.approx(4.303 * sd / math.sqrt(3))  # t, 2 df
    per_question = [sum(a[s][q] - b[s][q] for s in range(3)) / 3 for q in range(6)]
    assert out["pooled"]["mean"] == pytest.approx(sum(per_question) / 6)
    assert out["pooled"]["n"] == 6
    with pytest.raises(ValueError, match="at least 2"):
        over_seeds(a[:1], b[:1])
    with pytest.raises(ValueError, match="same questions"):
        over_seeds([a[0], a[1][:5]], b[:2])
