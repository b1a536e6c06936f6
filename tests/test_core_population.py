import math
import random
from collections import Counter

import pytest

from inspo.core.population import (
    Observation,
    Population,
    evidence,
    fair_share_probabilities,
    in_window,
    posterior_mean,
    rank,
    selection_probabilities,
    survivors_after_halving,
    windowed_mean,
)
from inspo.records import Instruction
from inspo.rng import derived_rng


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


def _pop(weights_obs, tau=0.2, window=5, **rules):
    """Member i observes ``weights_obs[i][k]`` at step k + 1 (one rollout each)."""
    pop = Population(max_size=len(weights_obs), window=window, tau=tau, **rules)
    for i, obs in enumerate(weights_obs):
        pop.add(Instruction(id=f"i{i}", text=f"text {i}"))
        for k, o in enumerate(obs):
            pop.observe(f"i{i}", o, step=k + 1)
    return pop


def test_weights_equal_windowed_mean_of_observations():
    pop = _pop([[1, 0, 1, 1, 0, 0, 1], [0.5], []], window=5)
    # now = step 7: the window is steps 3..7; i1's one observation (step 1) has expired
    assert pop.weights == pytest.approx([(1 + 1 + 0 + 0 + 1) / 5, 0.0, 0.0])
    assert pop.evidence == [5, 0, 0]


def test_window_ages_by_steps_against_a_naive_reference():
    rng = random.Random(3)
    for window in (1, 3, 5):
        pop = Population(4, window, 0.2)
        log = {f"i{j}": [] for j in range(4)}
        for j in range(4):
            pop.add(Instruction(id=f"i{j}", text=str(j)))
        for step in range(1, 30):
            pop.advance(step)
            for j in range(4):
                if rng.random() < 0.3:  # sampled this step or not
                    n, m = rng.randint(1, 4), rng.random()
                    pop.observe(f"i{j}", m, step=step, n_rollouts=n)
                    log[f"i{j}"].append((step, n, m))
            for j in range(4):
                recent = [(s, n, m) for s, n, m in log[f"i{j}"] if step - window < s <= step]
                naive = sum(m for _, _, m in recent) / len(recent) if recent else 0.0
                assert pop.weight_of(f"i{j}") == pytest.approx(naive)
                assert pop.evidence_of(f"i{j}") == sum(n for _, n, _ in recent)


def test_stale_evidence_expires_issue_example():
    """Sampled once at reward 1.0 vs 0.6 on each of 19 steps: the stale 1.0 must not win."""
    pop = Population(2, 5, 0.2)
    pop.add(Instruction(id="lucky", text="a"))
    pop.add(Instruction(id="steady", text="b"))
    pop.observe("lucky", 1.0, step=1)
    for step in range(1, 20):
        pop.observe("steady", 0.6, step=step)
    assert pop.weight_of("lucky") == 0.0 and pop.evidence_of("lucky") == 0
    assert pop.best().id == "steady"
    assert [i.id for i in pop.prune(n_parent=1)] == ["lucky"]


def test_posterior_mean_matches_naive_reference():
    obs = [Observation(1, 3, 0.5), Observation(2, 1, 1.0), Observation(4, 2, 0.0)]
    rewards = [0.5] * 3 + [1.0] + [0.0] * 2
    for k, prior in ((0.0, 0.3), (2.0, 0.3), (10.0, 0.9)):
        naive = (k * prior + sum(rewards)) / (k + len(rewards))
        assert posterior_mean(obs, prior, k) == pytest.approx(naive)
    assert posterior_mean([], 0.42, 4.0) == 0.42  # no evidence: the prior itself
    assert evidence(obs) == 6 and in_window(obs, 4, 2) == [obs[2]]


def test_halving_with_protection_matches_naive_reference():
    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(1, 8)
        ws = [round(rng.random(), 1) for _ in range(n)]
        guard = [rng.random() < 0.4 for _ in range(n)]
        n_parent = rng.randint(1, n)
        free = [i for i in range(n) if not guard[i]]
        worst_first = sorted(free, key=lambda i: (ws[i], -i))
        drop = set(worst_first[: max(0, min(len(free) // 2, n - n_parent))])
        assert survivors_after_halving(ws, n_parent, guard) == [i for i in range(n) if i not in drop]


def test_unobserved_member_is_not_pruned_under_min_evidence():
    # i2 was never sampled: weight 0 says "unknown", not "bad"
    pop = _pop([[0.2, 0.3], [0.9, 0.8], [], [0.1, 0.0]], min_evidence=2)
    removed = [i.id for i in pop.prune(n_parent=1)]
    assert "i2" not in removed and removed == ["i3"]  # halving among the 3 observed: drop 1
    plain = _pop([[0.2, 0.3], [0.9, 0.8], [], [0.1, 0.0]])
    assert sorted(i.id for i in plain.prune(n_parent=1)) == ["i2", "i3"]  # Algorithm 1: weight 0 goes


def test_best_needs_evidence_and_posterior_ranks_by_prior():
    pop = _pop([[0.4, 0.5], [1.0]], min_evidence=2)  # i1: one lucky rollout at step 1
    assert pop.best().id == "i0"
    assert _pop([[0.4, 0.5], [1.0]]).best().id == "i1"  # Algorithm 1 alone: the lucky one wins
    post = Population(3, 5, 0.2, prior_rollouts=4)
    for j, prior in enumerate((0.5, 0.2, None)):
        post.add(Instruction(id=f"p{j}", text=str(j)), prior=prior)
    post.observe("p0", 1.0, step=1, n_rollouts=4)
    assert post.scores == pytest.approx([(4 * 0.5 + 4) / 8, 0.2, (0.5 + 0.2) / 2])
    probs = post.probabilities()
    assert probs[2] > probs[1]  # an unobserved member is sampled at its prior, not at 0
    post.reset_weights()
    assert post.weights == [0.0, 0.0, 0.0] and post.scores[0] == pytest.approx(0.75)  # evidence kept as prior


def naive_fair_share(ws, tau, short):
    n = len(ws)
    known = {i: math.exp(ws[i] / tau) for i in range(n) if not short[i]}
    mass = sum(known.values())
    return [1 / n if short[i] else (1 - sum(short) / n) * known[i] / mass for i in range(n)]


def test_fair_share_probabilities_match_naive_reference():
    ws = [0.5, 0.0, 0.3, 0.9]
    for short in ([False, True, False, False], [True, True, False, False], [False, False, True, True]):
        got = fair_share_probabilities(ws, 0.2, short)
        assert got == pytest.approx(naive_fair_share(ws, 0.2, short)) and sum(got) == pytest.approx(1.0)
    assert fair_share_probabilities(ws, 0.2, [False] * 4) == pytest.approx(naive_softmax(ws, 0.2))  # Eq. 4
    assert fair_share_probabilities(ws, 0.2, [True] * 4) == pytest.approx([0.25] * 4)
    with pytest.raises(ValueError, match="4 weights but 3 evidence flags"):
        fair_share_probabilities(ws, 0.2, [True] * 3)


def test_fair_share_samples_a_member_below_the_floor_whatever_its_prior():
    # p2's prior is 0 against the others' 0.5: softmax at tau 0.2 gives it ~4%; fair share 1/3
    pops = {}
    for fair in (False, True):
        pop = Population(3, 5, 0.2, min_evidence=4, prior_rollouts=4, fair_share=fair)
        for j, prior in enumerate((0.5, 0.5, 0.0)):
            pop.add(Instruction(id=f"p{j}", text=str(j)), prior=prior)
        pop.observe("p0", 0.5, step=1, n_rollouts=4)
        pop.observe("p1", 0.5, step=1, n_rollouts=4)
        pops[fair] = pop
    assert pops[False].probabilities()[2] < 0.05
    assert pops[True].probabilities() == pytest.approx([1 / 3, 1 / 3, 1 / 3])
    pops[True].observe("p2", 0.0, step=2, n_rollouts=4)  # evidence reached: back to the softmax of scores
    assert pops[True].probabilities() == pytest.approx(naive_softmax(pops[True].scores, 0.2))
    again = Population.from_dict(pops[True].to_dict())
    assert again.fair_share and again.probabilities() == pytest.approx(pops[True].probabilities())


def test_sampled_frequencies_match_softmax():
    pop = _pop([[0.1], [0.3], [0.5], [0.0]])
    expected = naive_softmax(pop.weights, 0.2)
    rng = random.Random(7)
    n = 20000
    counts = Counter(pop.sample(rng).id for _ in range(n))
    for i, p in enumerate(expected):
        assert counts[f"i{i}"] / n == pytest.approx(p, abs=0.015)


def test_prune_reset_and_best():
    pop = _pop([[0.2], [0.9], [0.4], [0.1], [0.6]])  # all observed at step 1
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
    pop.set_prior("i1", 0.7)
    again = Population.from_dict(pop.to_dict())
    assert again.weights == pop.weights and again.version == pop.version
    assert again.now == pop.now and again.evidence == pop.evidence and again.members[1].prior == 0.7
    assert [i.to_dict() for i in again.instructions] == [i.to_dict() for i in pop.instructions]
