import math
import random
from collections import Counter

import pytest

from inspo.core.population import (
    Population,
    derived_rng,
    rank,
    selection_probabilities,
    survivors_after_halving,
    windowed_mean,
)
from inspo.records import Instruction


def naive_softmax(ws, tau):
    exps = [math.exp(w / tau) for w in ws]
    return [e / sum(exps) for e in exps]


def test_windowed_mean_matches_naive_reference():
    obs = [0.1, 0.9, 0.3, 0.5, 0.7, 0.2, 0.4]
    for window in range(1, 9):
        tail = obs[-window:]
        assert windowed_mean(obs, window) == pytest.approx(sum(tail) / len(tail))
    assert windowed_mean([], 5) == 0.0


def test_selection_probabilities_match_naive_softmax_and_are_stable():
    ws = [0.0, 0.2, 0.5, 0.1]
    assert selection_probabilities(ws, 0.2) == pytest.approx(naive_softmax(ws, 0.2))
    big = selection_probabilities([1000.0, 999.0], 0.2)  # naive exp would overflow
    assert sum(big) == pytest.approx(1.0) and big[0] > big[1]


def test_halving_keeps_top_half_and_at_least_n_parent():
    ws = [0.3, 0.9, 0.1, 0.5, 0.7, 0.2, 0.8]
    kept = survivors_after_halving(ws, 1)
    assert sorted(kept) == sorted(rank(ws)[:4])  # 7 -> 4, the best four
    assert set(kept) == {1, 3, 4, 6}
    assert survivors_after_halving([0.1, 0.2], 1) == [1]
    assert survivors_after_halving([0.1, 0.2, 0.3], 3) == [0, 1, 2]  # never below N_parent
    assert survivors_after_halving([0.5, 0.5, 0.5, 0.5], 1) == [0, 1]  # ties: older first


def _pop(weights_obs, tau=0.2, window=5):
    pop = Population(max_size=len(weights_obs), window=window, tau=tau)
    for i, obs in enumerate(weights_obs):
        pop.add(Instruction(id=f"i{i}", text=f"text {i}"))
        for o in obs:
            pop.observe(f"i{i}", o)
    return pop


def test_weights_equal_windowed_mean_of_observations():
    pop = _pop([[1, 0, 1, 1, 0, 0, 1], [0.5], []], window=5)
    assert pop.weights == pytest.approx([(1 + 1 + 0 + 0 + 1) / 5, 0.5, 0.0])


def test_sampled_frequencies_match_softmax():
    pop = _pop([[0.1], [0.3], [0.5], [0.0]])
    expected = naive_softmax(pop.weights, 0.2)
    rng = random.Random(7)
    n = 20000
    counts = Counter(pop.sample(rng).id for _ in range(n))
    for i, p in enumerate(expected):
        assert counts[f"i{i}"] / n == pytest.approx(p, abs=0.015)


def test_prune_reset_and_best():
    pop = _pop([[0.2], [0.9], [0.4], [0.1], [0.6]])
    v = pop.version
    removed = pop.prune(n_parent=1)
    assert [i.id for i in removed] == ["i0", "i3"]
    assert [i.id for i in pop.instructions] == ["i1", "i2", "i4"]
    assert pop.best().id == "i1" and pop.version > v
    pop.reset_weights()
    assert pop.weights == [0.0, 0.0, 0.0]
    assert pop.top(2)[0].id == "i1"  # all tied at 0: oldest first


def test_population_rejects_overflow_and_duplicates():
    pop = _pop([[0.1]])
    with pytest.raises(RuntimeError, match="full"):
        pop.add(Instruction(id="x", text="t"))
    pop2 = Population(3, 5, 0.2)
    pop2.add(Instruction(id="a", text="t"))
    with pytest.raises(ValueError, match="already"):
        pop2.add(Instruction(id="a", text="u"))


def test_derived_rng_is_stable_and_key_sensitive():
    a = [derived_rng(1, 2, "q").random() for _ in range(2)]
    assert a[0] == a[1]
    assert derived_rng(1, 2, "q").random() != derived_rng(1, 3, "q").random()


def test_population_round_trips_through_dict():
    pop = _pop([[0.2, 0.4], [0.9]])
    again = Population.from_dict(pop.to_dict())
    assert again.weights == pop.weights and again.version == pop.version
    assert [i.to_dict() for i in again.instructions] == [i.to_dict() for i in pop.instructions]
