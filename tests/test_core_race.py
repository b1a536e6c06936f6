"""The paired race (``admission: paired``): its maths against a naive enumeration, its verdicts
against a stub policy whose per-question success rates are known, and D_B's draw."""

import itertools

import pytest

from core_helpers import GUARD, SEED, FunctionLLM
from inspo.core.admission import race
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.events import EventLog
from inspo.core.proposer import Proposer
from inspo.core.race import (
    RaceRule,
    Tally,
    admit_probability,
    admits,
    checkpoints,
    gap_rates,
    size_for_gap,
    stops,
)
from inspo.records import Candidate, Instruction, Question, Rollout
from inspo.rng import derived_rng


def naive_admit_probability(p_win, p_loss, n, rule):
    """Every sequence of n outcomes, played through the rule as the core plays it."""
    p_tie = 1 - p_win - p_loss
    admit = played = 0.0
    for seq in itertools.product((1, -1, 0), repeat=n):
        p = 1.0
        for o in seq:
            p *= {1: p_win, -1: p_loss, 0: p_tie}[o]
        tally, done, stopped = Tally(), 0, False
        for end in checkpoints(n, rule.chunk):
            part = seq[done:end]
            tally = Tally(tally.wins + part.count(1), tally.losses + part.count(-1), tally.ties + part.count(0))
            done = end
            if stops(tally, n - done, rule):
                stopped = True
                break
        played += p * done
        admit += p * (not stopped and admits(tally))
    return admit, played


@pytest.mark.parametrize("p_win,p_loss", [(0.3, 0.1), (0.2, 0.2), (0.05, 0.4), (0.5, 0.0)])
@pytest.mark.parametrize("rule", [RaceRule(0, 1), RaceRule(2, 1), RaceRule(2, 3), RaceRule(3, 2)])
def test_admit_probability_matches_a_naive_enumeration(p_win, p_loss, rule):
    rates = admit_probability(p_win, p_loss, 7, rule)
    admit, played = naive_admit_probability(p_win, p_loss, 7, rule)
    assert rates.admit == pytest.approx(admit, abs=1e-12)
    assert rates.expected_played == pytest.approx(played, abs=1e-12)


def test_tally_stops_and_verdict():
    t = Tally().add([1, 0, 1, 0, 0.5], [0, 0, 1, 1, 0.5])
    assert (t.wins, t.losses, t.ties, t.played, t.lead) == (1, 1, 3, 5, 0)
    assert not admits(t)  # a tie is not admitted
    assert admits(Tally(2, 1, 0))
    assert stops(Tally(0, 4, 0), 100, RaceRule(4, 1)) and not stops(Tally(0, 3, 0), 100, RaceRule(4, 1))
    assert not stops(Tally(0, 10, 0), 100, RaceRule(0, 1))  # futility 0: only curtailment stops
    assert stops(Tally(1, 3, 0), 2, RaceRule(0, 1))  # lead -2 with 2 left cannot end ahead
    assert not stops(Tally(1, 3, 0), 3, RaceRule(0, 1))
    with pytest.raises(ValueError, match="differ in length"):
        Tally().add([1], [1, 0])
    assert checkpoints(10, 4) == [4, 8, 10] and checkpoints(8, 4) == [4, 8] and checkpoints(0, 4) == []


def test_size_for_gap_meets_the_rates_it_promises():
    rule = RaceRule(4, 8)
    n = size_for_gap(0.1, 0.3, rule)
    better, equal, worse = gap_rates(0.1, 0.3, n, rule)
    assert better.admit >= 0.8 and worse.admit <= 0.05
    assert worse.expected_played < n  # the race saves rollouts on a worse candidate
    assert 40 <= n <= 100
    assert size_for_gap(0.1, 0.3, rule, n_max=10) is None
    with pytest.raises(ValueError):
        gap_rates(0.3, 0.2, 10, rule)


# ------------------------------------------------------------------------ a stub policy


def known_rates(rates, salt):
    """evaluate(instruction, questions): the instruction's last word names its success rate; a
    question's outcome is fixed by (salt, word, question id), so a replay gives the same reward
    (greedy), and two instructions' outcomes are independent."""

    def evaluate(instruction, questions):
        word = instruction.text.split()[-1]
        return [Rollout(question=q, instruction_id=instruction.id, response="", reward=float(
            derived_rng(salt, word, q.id).random() < rates[word])) for q in questions]

    return evaluate


def questions(n, prefix="q"):
    return [Question(id=f"{prefix}{i}", question=f"question {i}", answers=[str(i)]) for i in range(n)]


@pytest.mark.parametrize("p_cand,p_parent", [(0.6, 0.4), (0.4, 0.4), (0.3, 0.5)])
def test_the_race_admits_at_its_stated_rate_on_a_stub_policy(p_cand, p_parent):
    rule, n, trials = RaceRule(3, 4), 24, 400
    parent = Instruction(id="p", text="seed parent")
    admitted = 0
    for trial in range(trials):
        cand = Candidate(id="c", text="child cand", parent_id="p", origin="test")
        chosen, _ = race(1, parent, [cand], questions(n), known_rates({"parent": p_parent, "cand": p_cand}, trial),
                         1, rule, lambda e: None)
        admitted += bool(chosen)
    expected = admit_probability(p_cand * (1 - p_parent), p_parent * (1 - p_cand), n, rule).admit
    assert admitted / trials == pytest.approx(expected, abs=0.1)  # 4 standard errors at 400 trials


def test_a_clear_loser_stops_early_and_costs_few_rollouts():
    events = []
    parent = Instruction(id="p", text="seed parent")
    cands = [Candidate(id="bad", text="x bad", parent_id="p", origin="t"),
             Candidate(id="good", text="x good", parent_id="p", origin="t")]
    evaluate = known_rates({"parent": 0.5, "bad": 0.0, "good": 0.95}, "s")
    chosen, refused = race(1, parent, cands, questions(64), evaluate, 2, RaceRule(4, 8), events.append)
    assert [c.id for c in chosen] == ["good"]
    stage, why = refused["bad"]
    assert stage == "race" and "stopped after" in why
    verified = {e.candidate_id: e for e in events if e.kind == "verified"}
    assert verified["bad"].stopped and verified["bad"].n_questions <= 24 and verified["bad"].losses >= 4
    assert verified["good"].n_questions == 64 and not verified["good"].stopped
    assert verified["good"].wins > verified["good"].losses
    parent_events = [e for e in events if e.kind == "parent_verified"]
    assert len(parent_events) == 1 and parent_events[0].n_rollouts == 64  # the parent played once


def test_errors_are_left_out_of_the_tally_and_a_raising_candidate_is_refused():
    parent = Instruction(id="p", text="seed parent")
    base = known_rates({"parent": 0.5, "good": 1.0}, "s")

    def evaluate(instruction, qs):
        word = instruction.text.split()[-1]
        if word == "broken":
            raise RuntimeError("engine fell over")
        out = base(instruction, qs)
        if word == "good":  # the first question's rollout is an outage
            out = [Rollout(question=r.question, instruction_id=r.instruction_id, response="", reward=0.0,
                           error="EndpointDown: x") if r.question.id == "q0" else r for r in out]
        return out

    cands = [Candidate(id="g", text="x good", parent_id="p", origin="t"),
             Candidate(id="b", text="x broken", parent_id="p", origin="t")]
    events = []
    chosen, refused = race(1, parent, cands, questions(8), evaluate, 1, RaceRule(4, 4), events.append)
    assert [c.id for c in chosen] == ["g"] and refused["b"][0] == "verify" and "fell over" in refused["b"][1]
    verified = [e for e in events if e.kind == "verified"]
    assert len(verified) == 1 and verified[0].n_questions == 7 and verified[0].n_rollouts == 8


# ------------------------------------------------------------------------ in the core


def six(prompt):
    body = "".join(f"<ins_{i}>\n{SEED} {w}\n</ins_{i}>\n" for i, w in enumerate(["bad", "good", "same"], 1))
    return "critique\n" + body


def core(pool=(), **overrides):
    cfg = CoEvolutionConfig(**{"population_size": 3, "candidates_per_call": 3, "max_rounds": 1,
                               "admission": "paired", "validation_size": 40, "admit_per_round": 2,
                               "n_failures": 2, **overrides})
    return CoEvolution(cfg, SEED, Proposer(FunctionLLM(six), n_candidates=3, guard_tags=GUARD), events=EventLog(),
                       validation_pool=list(pool) or questions(60, "t"))


def test_paired_admission_in_the_core_admits_the_better_and_counts_its_rollouts():
    coevo = core(validation_from="train", validation_unseen=True)
    evaluate = known_rates({"</answer>.": 0.4, "bad": 0.0, "good": 0.9, "same": 0.4}, "core")
    coevo.initialize(evaluate, questions(8, "w"))
    admitted = [e.instruction["text"].split()[-1] for e in coevo.events.of_kind("admitted")]
    assert admitted == ["good"]
    stages = {e.text.split()[-1]: e.stage for e in coevo.events.of_kind("rejected")}
    assert stages["bad"] == "race"
    verified = coevo.events.of_kind("verified")
    assert coevo.ledger.verification_rollouts == 40 + sum(e.n_rollouts for e in verified) < 4 * 40


class recording(list):
    """An evaluate function that records the question ids of each call."""

    def __init__(self, evaluate):
        super().__init__()
        self.evaluate = evaluate

    def __call__(self, instruction, questions):
        self.append({q.id for q in questions})
        return self.evaluate(instruction, questions)


def test_d_b_never_holds_a_question_shown_to_the_optimizer():
    never = known_rates({"</answer>.": 0.0, "bad": 0.0, "good": 0.0, "same": 0.0}, "x")
    warmup = questions(12, "w")
    for source in ("buffer", "train"):
        coevo = core(pool=warmup + questions(20, "t"), validation_from=source, validation_unseen=True,
                     validation_size=100)
        seen = recording(never)
        coevo.initialize(seen, warmup)
        shown = set(coevo.events.of_kind("proposed")[0].failures)
        assert len(shown) == 2 and all(not shown & ids for ids in seen[1:])  # seen[0] is the warm-up
        expected = {q.id for q in warmup} if source == "buffer" else {q.id for q in warmup + questions(20, "t")}
        assert seen[1] == expected - shown  # the parent plays all of D_B
    coevo = core(validation_from="buffer", validation_unseen=False, validation_size=100)
    seen = recording(never)
    coevo.initialize(seen, warmup)
    assert seen[1] == {q.id for q in warmup}  # App. B: D_B may hold the failures shown


def test_config_checks_of_the_new_evidence_settings():
    with pytest.raises(ConfigError, match="validation_from"):
        CoEvolutionConfig(validation_from="dev")
    with pytest.raises(ConfigError, match="race_chunk"):
        CoEvolutionConfig(race_chunk=0)
    with pytest.raises(ConfigError, match="verify_greedy"):
        CoEvolutionConfig(verify_greedy="yes")
    with pytest.raises(ValueError, match="validation_pool"):
        CoEvolution(CoEvolutionConfig(validation_from="train"), SEED, Proposer(FunctionLLM(six)))


def test_the_gate_lets_on_only_candidates_that_fix_more_of_their_failures_than_they_break():
    coevo = core(validation_from="train", validation_unseen=True, gate=True)
    # the seed fails every problem; "good" solves them all, "same" none, "bad" none
    evaluate = known_rates({"</answer>.": 0.0, "bad": 0.0, "good": 1.0, "same": 0.0}, "gate")
    coevo.initialize(evaluate, questions(8, "w"))
    gated = coevo.events.of_kind("gated")
    parent = [e for e in gated if e.parent]
    assert len(parent) == 1 and parent[0].n_questions == 2  # the parent plays the round's 2 failures once
    verdicts = {e.candidate_id: e.passed for e in gated if not e.parent}
    assert sorted(verdicts.values()) == [False, False, True]
    stages = {e.text.split()[-1]: e.stage for e in coevo.events.of_kind("rejected")}
    assert stages == {"bad": "gate", "same": "gate"}
    verified = coevo.events.of_kind("verified")
    assert len(verified) == 1  # only the gated-through candidate plays D_B
    admitted = [e.instruction["text"].split()[-1] for e in coevo.events.of_kind("admitted")]
    assert admitted == ["good"]
    gate_cost = sum(e.n_rollouts for e in gated)
    assert gate_cost == 4 * 2
    assert coevo.ledger.verification_rollouts == gate_cost + 40 + verified[0].n_rollouts


def test_an_evolution_stops_asking_once_its_rollout_budget_or_the_runs_tokens_are_spent():
    evaluate = known_rates({"</answer>.": 0.0, "bad": 0.0, "good": 0.0, "same": 0.0}, "budget")
    free = core(max_rounds=4, validation_size=8, validation_from="train")
    free.initialize(evaluate, questions(8, "w"))
    assert free.ledger.optimizer_calls == 4  # nothing admitted: every round is played
    capped = core(max_rounds=4, validation_size=8, validation_from="train", evolve_rollouts=40)
    capped.initialize(evaluate, questions(8, "w"))
    assert capped.ledger.optimizer_calls == 2  # the first round spends 32 (the parent and 3 candidates on 8)
    # the second has 8 left: its first candidate races the parent's kept results, the other two go unplayed
    assert capped.ledger.verification_rollouts == 40
    budget = [e for e in capped.events.of_kind("rejected") if e.stage == "budget"]
    assert len(budget) == 2 and all("not verified past 0 of 8" in e.reason for e in budget)
    finished = capped.events.of_kind("evolution_finished")[0]
    assert "verification budget is spent" in finished.reason
    short = core(max_rounds=4, validation_size=8, validation_from="train", evolve_rollouts=36)
    short.initialize(evaluate, questions(8, "w"))  # 4 left after the first round: less than a race chunk
    assert short.ledger.optimizer_calls == 1 and short.ledger.verification_rollouts == 32
    assert not [e for e in short.events.of_kind("rejected") if e.stage == "budget"]  # no call made for nothing
    assert "cannot pay for another candidate (4 of evolve_rollouts 36 left; one costs at least 8)" in \
        short.events.of_kind("evolution_finished")[0].reason
    tokens = core(max_rounds=4, validation_size=8, validation_from="train", max_optimizer_tokens=1)
    tokens.initialize(evaluate, questions(8, "w"))
    assert tokens.ledger.optimizer_calls == 1 and "optimizer tokens are spent" in \
        tokens.events.of_kind("evolution_finished")[0].reason


def test_no_optimizer_call_is_made_for_candidates_the_budget_could_not_play_under_top_n():
    evaluate = known_rates({"</answer>.": 0.0, "bad": 0.0, "good": 0.0, "same": 0.0}, "top-n")
    coevo = core(max_rounds=4, validation_size=100, validation_from="train", evolve_rollouts=250, admission="top-n",
                 population_size=6)  # D_B holds the pool's 60 questions, not 100: a candidate costs 60
    coevo.initialize(evaluate, questions(8, "w"))
    # round 1: 3 candidates x 60; round 2 (70 left): one candidate plays, two are refused; round 3: 10 left
    assert coevo.ledger.optimizer_calls == 2 and coevo.ledger.verification_rollouts == 240
    assert "10 of evolve_rollouts 250 left; one costs at least 60" in coevo.events.of_kind("evolution_finished")[0].reason


def test_a_race_stops_where_its_allowance_runs_out_and_counts_what_it_played():
    from inspo.core.verifier import Allowance

    events = []
    parent = Instruction(id="p", text="seed parent")
    cands = [Candidate(id=f"c{i}", text="x good", parent_id="p", origin="t") for i in range(2)]
    qs = questions(16)
    bar = {q.id: 0.0 for q in qs}  # the parent's results are kept: the race pays for candidates only
    allowance = Allowance(20)
    chosen, refused = race(1, parent, cands, qs, known_rates({"good": 1.0}, "cut"), 1, RaceRule(0, 4),
                           events.append, bar=bar, allowance=allowance)
    assert chosen == [] and allowance.left == 0  # ahead on every question, but D_B was not finished
    assert refused["c1"] == ("budget", refused["c1"][1]) and "past 8 of 16" in refused["c1"][1]
    assert "past 12 of 16" in refused["c0"][1]  # the first proposed plays on while one fits
    played = {e.candidate_id: e.n_rollouts for e in events if e.kind == "verified"}
    assert played == {"c0": 12, "c1": 8}  # what they played is counted (the ledger reads these)


def test_top_n_and_the_gate_play_only_the_candidates_their_allowance_pays_for():
    from inspo.core.admission import gate, score_and_rank
    from inspo.core.verifier import Allowance

    parent = Instruction(id="p", text="seed parent")
    cands = [Candidate(id=f"c{i}", text="x good", parent_id="p", origin="t") for i in range(3)]
    evaluate = known_rates({"parent": 0.0, "good": 1.0}, "paid")
    chosen, refused = score_and_rank(1, parent, list(cands), questions(4), evaluate, 3, lambda e: None,
                                     Allowance(13))  # the parent and two candidates
    assert [c.id for c in chosen] == ["c0", "c1"] and refused["c2"][0] == "budget"
    allowance = Allowance(7)  # the parent and two candidates on 2 failure problems, 1 to spare
    passed, refused = gate(1, parent, list(cands), questions(2), evaluate, lambda e: None, allowance=allowance)
    assert [c.id for c in passed] == ["c0", "c1"] and set(refused) == {"c2"} and allowance.left == 1
    assert score_and_rank(1, parent, list(cands), questions(4), evaluate, 3, lambda e: None,
                          Allowance(3))[0] == []  # not even the parent fits


# ------------------------------------------------------------------------ leak scope


def test_names_problem_needs_the_problem_text_and_its_answer():
    from inspo.core.leak_scope import names_problem

    q = Question(id="t1", question="Who founded Velmor?", answers=("Ada Quist",))
    assert names_problem("Example: Who founded Velmor? <answer> Ada Quist </answer>", q)
    assert not names_problem("Example: <answer> Ada Quist </answer>", q)  # the answer alone is no name
    assert not names_problem("Example: who founded velmor? <answer> Bo </answer>", q)


def worked(prompt):
    """Candidates: a worked example of shown failure 'w0' or of test problem 'x0', and a plain one."""
    body = "".join(f"<ins_{i}>\n{SEED} {text}\n</ins_{i}>\n" for i, text in enumerate(
        ["Example: question 0 gives 0. good", "Example: held 0 gives 0. good", "Be precise. same"], 1))
    return "critique\n" + body


def test_held_out_scope_refuses_test_problems_and_leaves_named_training_problems_out_of_the_gate():
    held_out = [Question(id="x0", question="held 0", answers=("0",))]
    cfg = CoEvolutionConfig(population_size=2, candidates_per_call=3, max_rounds=1, admission="paired",
                            validation_size=8, admit_per_round=1, n_failures=2, gate=True,
                            validation_from="train", validation_unseen=True, leak_scope="held-out")
    coevo = CoEvolution(cfg, SEED, Proposer(FunctionLLM(worked), n_candidates=3, guard_tags=GUARD),
                        events=EventLog(), validation_pool=questions(30, "t"), held_out=held_out)
    failures = [Question(id="w0", question="question 0", answers=("0",)), Question(id="w1", question="question 1",
                                                                                  answers=("1",))]

    def evaluate(ins, qs):  # "good" solves every problem; the seed and "same" none
        good = ins.text.endswith("good")
        return [Rollout(question=q, instruction_id=ins.id, response="", reward=float(good)) for q in qs]

    coevo.initialize(evaluate, failures)
    rejected = {e.text.split("Example: ")[-1][:6] if "Example" in e.text else "plain": e
                for e in coevo.events.of_kind("rejected")}
    assert rejected["held 0"].stage == "leak" and "x0" in rejected["held 0"].reason
    gated = {e.candidate_id: e for e in coevo.events.of_kind("gated") if not e.parent}
    assert len(gated) == 2  # the worked example of a shown training problem passed the leak check
    wins = sorted((e.wins, e.losses, e.n_questions) for e in gated.values())
    assert wins == [(0, 0, 2), (1, 0, 1)]  # the worked example is judged on w1 alone: w0 is its own example
    with pytest.raises(ConfigError, match="admission paired"):
        CoEvolutionConfig(leak_scope="held-out")


# ------------------------------------------------------------------------ paired credit


def rollout(qid, iid, reward):
    return Rollout(question=Question(id=qid, question=qid, answers=("x",)), instruction_id=iid, response="",
                   reward=reward)


def test_split_outcomes_pair_two_instructions_on_one_question():
    from inspo.core.paired_credit import PairedRecord, split_outcomes

    rs = [rollout("q1", "a", 1), rollout("q1", "a", 0), rollout("q1", "b", 0), rollout("q1", "b", 0),  # a 0.5 > b 0
          rollout("q2", "a", 1), rollout("q2", "b", 1),  # a tie: no evidence
          rollout("q3", "a", 0), rollout("q3", "b", 1),
          rollout("q4", "a", 1)]  # one instruction alone: no pair
    assert split_outcomes(rs) == [("a", "b"), ("b", "a")]
    record = PairedRecord(race_winners={"a", "b", "c"})
    record.observe(rs + [rollout("q5", "a", 0), rollout("q5", "b", 1)])
    assert (record.wins, record.losses) == ({"a": 1, "b": 2}, {"b": 1, "a": 2})
    assert record.protected(["a", "b", "c", "d"]) == {"b", "c"}  # a lost more than it won; d never raced
    assert PairedRecord.from_dict(record.to_dict()) == record


def test_split_groups_give_the_champion_and_a_challenger_the_same_question():
    coevo = core(validation_from="train", split_groups=True, population_size=3)
    evaluate = known_rates({"</answer>.": 0.4, "bad": 0.0, "good": 0.9, "same": 0.4}, "core")
    coevo.initialize(evaluate, questions(8, "w"))
    assert len(coevo.population) == 2
    pair = coevo.choose_split(1, "t5")
    assert len(pair) == 2 and pair[0].id == coevo.best().id and pair[1].id != pair[0].id
    assert [i.id for i in coevo.choose_split(1, "t5")] == [i.id for i in pair]  # the same on every process
    plain = core(validation_from="train", population_size=3)
    plain.initialize(evaluate, questions(8, "w"))
    assert len(plain.choose_split(1, "t5")) == 1  # off: Algorithm 1's one instruction a group


def test_a_race_winner_is_not_pruned_without_paired_evidence_that_it_is_worse():
    coevo = core(validation_from="train", split_groups=True, population_size=3, prune_every=1, evolve=False)
    evaluate = known_rates({"</answer>.": 0.4, "bad": 0.0, "good": 0.9, "same": 0.4}, "core")
    coevo.initialize(evaluate, questions(8, "w"))
    seed, winner = (i.id for i in coevo.population.instructions)
    assert coevo.paired.race_winners == {winner}
    # step 1: the winner earns less on its own questions (different questions: not paired evidence)
    report = coevo.update(1, [rollout("t1", seed, 1.0), rollout("t2", winner, 0.0)], None)
    assert report.pruned == [] and winner in [i.id for i in coevo.population.instructions]
    pruned = coevo.events.of_kind("pruned")[-1]
    assert winner in pruned.protected and winner in pruned.saved
    # step 2: a split group where the winner loses to the seed on the same question: now it may go
    report = coevo.update(2, [rollout("t3", seed, 1.0), rollout("t3", winner, 0.0)], None)
    assert report.pruned == [winner]


def test_the_paired_record_survives_a_save_and_load():
    coevo = core(validation_from="train", split_groups=True)
    coevo.initialize(known_rates({"</answer>.": 0.4, "bad": 0.0, "good": 0.9, "same": 0.4}, "core"), questions(8, "w"))
    coevo.paired.observe([rollout("t3", "ins-0001", 1.0), rollout("t3", "ins-0003", 0.0)])
    again = core(validation_from="train", split_groups=True)
    again.load_state_dict(coevo.state_dict())
    assert again.paired == coevo.paired and again.paired.race_winners


def test_the_calculators_names_problem_needs_every_operand_and_the_answer():
    from inspo.envs.calculator import load_environment

    env = load_environment()
    q = env.questions("test")[0]
    operands = " and ".join(__import__("re").findall(r"\d+", q.question))
    assert env.names_problem(f"Example: {operands} gives {q.answers[0]}.", q)
    assert not env.names_problem(f"Example: {operands} gives nothing.", q)
    assert not env.names_problem(f"The answer is {q.answers[0]}.", q)  # a bare number names nothing


def test_the_parent_plays_d_b_once_an_evolution_and_a_resumed_build_keeps_its_results():
    """Under admission: paired D_B is drawn once an evolution: three rounds race their candidates
    against one play of the parent; a build saved after round 1 and continued ends where the
    uninterrupted one did (same D_B, same parent results, same rollouts counted)."""
    evaluate = known_rates({"</answer>.": 0.5, "bad": 0.0, "good": 0.5, "same": 0.5}, "once")
    straight = core(validation_from="train", validation_unseen=True, max_rounds=3, validation_size=16,
                    race_chunk=4)
    states = []
    straight.initialize(evaluate, questions(8, "w"), after_round=lambda: states.append(straight.state_dict()))
    assert len(straight.events.of_kind("proposed")) == 3 and not straight.events.of_kind("admitted")
    parents = straight.events.of_kind("parent_verified")  # one a round, the first one played
    assert [e.n_rollouts for e in parents] == [16, 0, 0] and {e.n_questions for e in parents} == {16}
    raced = sum(e.n_rollouts for e in straight.events.of_kind("verified"))
    assert straight.ledger.verification_rollouts == 16 + raced
    dbs = [set(e.failures) for e in straight.events.of_kind("proposed")]
    bar = straight.state_dict()["bar"]
    assert len(bar["questions"]) == 16 and not {q["id"] for q in bar["questions"]} & dbs[0]
    assert set(bar["parents"]) == {"ins-0001"} and len(bar["parents"]["ins-0001"]) == 16
    resumed = core(validation_from="train", validation_unseen=True, max_rounds=3, validation_size=16, race_chunk=4)
    resumed.load_state_dict(states[1])  # saved after round 1
    resumed.continue_initialize(evaluate)
    assert resumed.state_dict() == straight.state_dict()
    assert [e.n_rollouts for e in resumed.events.of_kind("parent_verified")] == [0, 0]  # kept in the state


def test_a_race_given_the_parents_results_plays_only_the_questions_it_lacks():
    parent = Instruction(id="p", text="seed parent")
    cand = Candidate(id="c", text="child cand", parent_id="p", origin="test")
    seen = recording(known_rates({"parent": 0.5, "cand": 0.5}, "bar"))
    qs = questions(8)
    bar = {q.id: 1.0 for q in qs[:6]}
    race(1, parent, [cand], qs, seen, 1, RaceRule(4, 8), lambda e: None, None, bar)
    assert seen[0] == {"q6", "q7"} and set(bar) == {q.id for q in qs}  # the parent's call, then filled in
    assert seen[1] == {q.id for q in qs}  # the candidate plays all of D_B
