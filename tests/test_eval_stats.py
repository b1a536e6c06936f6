import math
import random
import statistics

import pytest

from inspo.eval.stats import paired_difference, t95, t_cdf, t_quantile


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
    assert got.low == pytest.approx(mean - 2.201 * se, abs=1e-4) and got.high == pytest.approx(mean + 2.201 * se, abs=1e-4)


def test_paired_difference_edges():
    one = paired_difference([1.0], [0.0])
    assert one.mean == 1.0 and math.isnan(one.low) and "no interval" in one.text()
    same = paired_difference([0.5, 0.5], [0.5, 0.5])
    assert same.mean == 0.0 and same.low == same.high == 0.0
    with pytest.raises(ValueError, match="same questions"):
        paired_difference([1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="at least one"):
        paired_difference([], [])


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
    assert out["seed_high"] - out["seed_mean"] == pytest.approx(4.303 * sd / math.sqrt(3), rel=1e-4)  # t, 2 df
    per_question = [sum(a[s][q] - b[s][q] for s in range(3)) / 3 for q in range(6)]
    assert out["pooled"]["mean"] == pytest.approx(sum(per_question) / 6)
    assert out["pooled"]["n"] == 6
    with pytest.raises(ValueError, match="at least 2"):
        over_seeds(a[:1], b[:1])
    with pytest.raises(ValueError, match="same questions"):
        over_seeds([a[0], a[1][:5]], b[:2])


# The table stats.py used before it computed t exactly (two-sided 95%, df 1..30).
OLD_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
           2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
           2.052, 2.048, 2.045, 2.042)


def test_t95_agrees_with_the_printed_table_to_three_decimals():
    assert [round(t95(df), 3) for df in range(1, 31)] == list(OLD_T95)


def test_t95_past_30_is_student_t_not_the_normal_1_96():
    assert t95(31) == pytest.approx(2.0395, abs=1e-4)
    assert t95(60) == pytest.approx(2.0003, abs=1e-4)
    assert t95(120) == pytest.approx(1.9799, abs=1e-4)
    z = statistics.NormalDist().inv_cdf(0.975)  # 1.95996..., the limit as df grows
    assert z < t95(10**5) < t95(1000) < t95(200) < t95(31) and t95(10**5) == pytest.approx(z, abs=1e-4)


def test_t_quantile_matches_scipy():
    student = pytest.importorskip("scipy.stats").t  # a test-time reference only
    ps = (1e-12, 1e-6, 0.001, 0.01, 0.025, 0.1, 0.3, 0.49, 0.51, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999,
          1 - 1e-6, 1 - 1e-10)
    for df in (*range(1, 201), 1000, 10**4, 10**5, 10**6, 1.5, 2.5, 3.7):
        for p in ps:
            want = float(student.ppf(p, df))
            assert t_quantile(p, df) == pytest.approx(want, rel=1e-8, abs=1e-8), (p, df)
        assert t95(df) == pytest.approx(float(student.ppf(0.975, df)), rel=1e-9)


def test_t_quantile_inverts_t_cdf_and_is_odd():
    for df in (1, 2, 3, 7.5, 40, 10**5):
        for p in (0.02, 0.3, 0.7, 0.995):
            assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, rel=1e-10)
            assert t_quantile(1 - p, df) == pytest.approx(-t_quantile(p, df), rel=1e-12)
    assert t_quantile(0.5, 4) == 0.0
    assert t_quantile(0.975, 1) == pytest.approx(math.tan(math.pi * 0.475))  # Cauchy
    for p, df in ((0.0, 5), (1.0, 5), (0.5, 0.5), (0.5, math.nan)):
        with pytest.raises(ValueError):
            t_quantile(p, df)
    with pytest.raises(ValueError, match="df >= 1"):
        t95(0)
