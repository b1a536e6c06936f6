import pytest

from core_helpers import GUARD, SEED, FunctionLLM, failing_llm, parent_of, scripted_reflection
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.events import EventLog
from inspo.core.proposer import Proposer
from inspo.core.schedule import PlannedStep, planned_schedule
from inspo.synthetic import SyntheticEnv, make_questions, run_synthetic, true_quality


def make(cfg, fn=scripted_reflection, events=None):
    return CoEvolution(cfg, SEED, Proposer(FunctionLLM(fn), n_candidates=cfg.candidates_per_call, guard_tags=GUARD),
                       events=events)


def test_planned_schedule_hand_worked_example():
    cfg = CoEvolutionConfig(evolve_until=30)
    assert planned_schedule(35, cfg) == [
        PlannedStep(5, True, False, 4),
        PlannedStep(10, True, False, 2),
        PlannedStep(15, True, True, 7),
        PlannedStep(20, True, False, 4),
        PlannedStep(25, True, False, 2),
        PlannedStep(30, True, False, 1),  # t = T_e: no evolution; 35: |P| = N_parent, no prune
    ]


def test_run_follows_the_schedule():
    cfg = CoEvolutionConfig(evolve_until=30, validation_size=20)
    coevo = make(cfg)
    env = SyntheticEnv(seed=1)
    reports = run_synthetic(coevo, env, make_questions(40), steps=35, batch_size=6, group_size=3)
    sizes = {r.step: len(r.population) for r in reports}
    pruned = [r.step for r in reports if r.pruned]
    evolved = [r.step for r in reports if r.evolved]
    assert pruned == [5, 10, 15, 20, 25, 30]
    assert evolved == [15]
    assert [sizes[t] for t in (1, 5, 10, 15, 20, 25, 30, 35)] == [7, 4, 2, 7, 4, 2, 1, 1]
    assert len(reports[14].pruned) == 1  # step 15 prunes 2 -> 1, then evolves back to 7


def test_evolution_resets_weights_and_refills_from_top_parent():
    cfg = CoEvolutionConfig(population_size=5, prune=False, evolve_every=3, evolve_until=10, validation_size=10)
    log = EventLog()
    coevo = make(cfg, events=log)
    env = SyntheticEnv(seed=2)
    reports = run_synthetic(coevo, env, make_questions(30), steps=3, batch_size=10, group_size=4)
    before = log.of_kind("weights")[-1].weights
    top = max(before, key=lambda k: (before[k], -int(k.split("-")[1])))
    assert reports[-1].evolved
    assert len(coevo.population) == 5
    assert coevo.population.instructions[0].id == top  # the parent survives, first
    assert all(w == 0.0 for w in coevo.population.weights)
    children = coevo.population.instructions[1:]
    assert all(c.parent_ids == (top,) and c.step_created == 3 for c in children)
    assert {e.kind for e in log.events} >= {"sampled", "attributed", "proposed", "rejected", "verified", "admitted"}


def test_initial_population_is_verified_top_candidates():
    cfg = CoEvolutionConfig(population_size=4, validation_size=30)
    coevo = make(cfg)
    env = SyntheticEnv(seed=3)
    coevo.initialize(env.evaluate, make_questions(30))
    pop = coevo.population.instructions
    assert len(pop) == 4 and pop[0].origin == "seed"
    assert coevo.ledger.warmup_rollouts == 30
    # 1 call, 5 guard-valid candidates, 3 slots: the three best by D_B score are admitted
    verified = {e.candidate_id: e.score for e in coevo.events.of_kind("verified")}
    admitted = [i.id for i in pop[1:]]
    assert len(verified) == 5
    assert sorted(verified.values(), reverse=True)[:3] == sorted((verified[a] for a in admitted), reverse=True)
    assert coevo.ledger.verification_rollouts == 5 * 30
    # every refusal names the check that made it: the guard's before verification, top-n's after
    proposed = sum(len(e.candidate_ids) for e in coevo.events.of_kind("proposed"))
    stages = sorted(e.stage for e in coevo.events.of_kind("rejected"))
    assert stages == ["guard"] * (proposed - 5) + ["top_n"] * 2 and proposed > 5


def test_optimizer_failure_never_crashes_and_is_recorded():
    cfg = CoEvolutionConfig(population_size=3, max_rounds=2, evolve_every=2, evolve_until=10)
    coevo = make(cfg, fn=failing_llm)
    env = SyntheticEnv()
    reports = run_synthetic(coevo, env, make_questions(10), steps=2, batch_size=4, group_size=2)
    assert reports[-1].evolved and len(coevo.population) == 1
    fails = coevo.events.of_kind("optimizer_failed")
    assert len(fails) == 4 and "timed out" in fails[0].reason  # 2 rounds at init + 2 at step 2
    finished = coevo.events.of_kind("evolution_finished")[-1]
    assert finished.short_by == 2 and "timed out" in finished.reason
    assert coevo.ledger.optimizer_failures == 4


def test_same_seed_same_run_and_different_seed_differs():
    def run(seed):
        cfg = CoEvolutionConfig(seed=seed, evolve_until=40, validation_size=20)
        coevo = make(cfg)
        run_synthetic(coevo, SyntheticEnv(seed=seed), make_questions(40), steps=20, batch_size=6, group_size=3)
        return coevo.state_dict()

    assert run(5) == run(5)
    assert run(5)["population"] != run(6)["population"]


def test_choice_is_deterministic_per_group_and_version():
    coevo = make(CoEvolutionConfig())
    coevo.initialize(SyntheticEnv().evaluate, make_questions(10))
    a = [coevo.choose(3, f"q{i}").id for i in range(50)]
    b = [coevo.choose(3, f"q{i}").id for i in range(50)]
    assert a == b and len(set(a)) > 1


def test_quality_of_best_instruction_rises_over_evolution_rounds():
    cfg = CoEvolutionConfig(evolve_until=61, validation_size=40)
    coevo = make(cfg)
    env = SyntheticEnv(seed=11)
    best_quality = {}

    def on_step(t, report):
        if report.evolved or t == 1:
            best_quality[t] = max(env.quality(i.text) for i in coevo.population.instructions)

    run_synthetic(coevo, env, make_questions(80), steps=60, batch_size=16, group_size=5, on_step=on_step)
    seed_quality = true_quality(SEED)
    qualities = [best_quality[t] for t in sorted(best_quality)]
    assert qualities[-1] > qualities[0] > seed_quality
    assert true_quality(coevo.best().text) > seed_quality + 0.3


def test_bad_config_values_say_what_is_wrong():
    with pytest.raises(ConfigError, match="tau_s must be > 0"):
        CoEvolutionConfig(tau_s=0)
    with pytest.raises(ConfigError, match="min_evidence is 0 .* set coevolution.min_evidence > 0"):
        CoEvolutionConfig(fair_share=True)
    with pytest.raises(ConfigError, match="fair_share must be true or false"):
        CoEvolutionConfig(fair_share="yes", min_evidence=4)
    with pytest.raises(ConfigError, match="n_parent .* cannot exceed"):
        CoEvolutionConfig(population_size=2, n_parent=3)
    with pytest.raises(ConfigError, match="template must be one of"):
        CoEvolutionConfig(template="magic")
    with pytest.raises(ConfigError, match="unknown co-evolution setting"):
        CoEvolutionConfig.from_dict({"populaton_size": 3})


# ------------------------------------------------------------------ verification and evidence


def scored_by_text(scores, default=0.0):
    """An evaluate whose reward is looked up by a marker word in the instruction text."""
    from inspo.records import Rollout

    def evaluate(instruction, questions):
        reward = next((v for k, v in scores.items() if k in instruction.text), default)
        return [Rollout(question=q, instruction_id=instruction.id, response="", reward=reward) for q in questions]

    return evaluate


def six_markers(prompt):
    parent = parent_of(prompt)
    return "".join(f"<ins_{i}>\n{parent} marker{i}\n</ins_{i}>\n" for i in range(1, 7))


def test_default_verification_selects_top_half_of_the_candidates():
    # Issue 12.1: with N_P 7, N_parent 1 and 6 candidates, plain top-n used to admit all 6
    cfg = CoEvolutionConfig(validation_size=5)
    coevo = make(cfg, fn=six_markers)
    scores = {f"marker{i}": i / 10 for i in range(1, 7)}
    coevo.initialize(scored_by_text(scores), make_questions(5))
    first_round = [e for e in coevo.events.of_kind("admitted") if e.step == 0][:3]
    assert sorted(e.score for e in first_round) == [0.4, 0.5, 0.6]
    turned_away = [e for e in coevo.events.of_kind("rejected") if e.stage == "top_n"]
    assert len(turned_away) >= 3 and all("not in the top 3" in e.reason for e in turned_away)
    assert coevo.ledger.optimizer_calls >= 2  # the other slots need further rounds


def test_beat_parent_refuses_a_candidate_worse_than_its_parent_on_the_same_questions():
    cfg = CoEvolutionConfig(population_size=4, validation_size=5, admission="beat-parent", admit_per_round=3,
                            max_rounds=1)
    coevo = make(cfg, fn=six_markers)
    # the seed (no marker) scores 0.5; marker1 0.0, marker2 0.5 (tie: admitted), marker3 0.9
    evaluate = scored_by_text({"marker1": 0.0, "marker2": 0.5, "marker3": 0.9, "marker4": 0.2}, default=0.5)
    coevo.initialize(evaluate, make_questions(5))
    admitted = {e.instruction["text"].split()[-1] for e in coevo.events.of_kind("admitted")}
    assert admitted == {"marker3", "marker2", "marker5"}  # >= 0.5; marker5/6 score the default 0.5
    parent = coevo.events.of_kind("parent_verified")
    assert len(parent) == 1 and parent[0].score == 0.5 and parent[0].n_questions == 5
    below = [e for e in coevo.events.of_kind("rejected") if e.stage == "parent"]
    assert {e.text.split()[-1] for e in below} == {"marker1", "marker4"}
    assert all("below its parent's 0.500" in e.reason for e in below)
    assert coevo.ledger.verification_rollouts == 7 * 5  # 6 candidates + the parent
    plain = make(CoEvolutionConfig(population_size=4, validation_size=5, admit_per_round=3, max_rounds=1),
                 fn=six_markers)
    plain.initialize(scored_by_text({"marker1": 0.0, "marker2": 0.0, "marker3": 0.0, "marker4": 0.0,
                                     "marker5": 0.0, "marker6": 0.0}, default=0.5), make_questions(5))
    assert len(plain.population) == 4  # Algorithm 1's top-n admits zero-scored candidates


def test_no_verify_ablation_admits_unverified():
    cfg = CoEvolutionConfig(population_size=4, validation_size=5, verify=False, max_rounds=1, admit_per_round=3)
    coevo = make(cfg, fn=six_markers)
    coevo.initialize(scored_by_text({}), make_questions(5))
    assert len(coevo.population) == 4 and coevo.ledger.verification_rollouts == 0
    assert not coevo.events.of_kind("verified")


def _floor_run(min_evidence, play):
    """Three members (no evolution) through steps 1-2 and the prune after step 2; ``play(step, k,
    ids)`` gives the instruction id and reward of question ``k``'s one rollout."""
    from inspo.records import Rollout

    qs = make_questions(4)
    coevo = make(CoEvolutionConfig(population_size=3, prune_every=2, evolve=False, validation_size=4,
                                   min_evidence=min_evidence, admit_per_round=2))
    coevo.initialize(SyntheticEnv(seed=1).evaluate, qs)
    ids = [i.id for i in coevo.population.instructions]
    assert len(ids) == 3
    for step in (1, 2):
        played = [play(step, k, ids) for k in range(len(qs))]
        report = coevo.update(step, [Rollout(question=q, instruction_id=i, response="", reward=r)
                                     for q, (i, r) in zip(qs, played, strict=True)], None)
    return coevo, ids, report


def _never_the_seed(step, k, ids):
    return ids[1 + k % 2], 0.2 + 0.5 * (k % 2)  # ids[1] scores 0.2, ids[2] 0.7; the seed ids[0] is never played


def test_unobserved_instruction_survives_the_prune_under_min_evidence():
    coevo, ids, report = _floor_run(2, _never_the_seed)
    assert ids[0] not in report.pruned and report.pruned == [ids[1]]
    pruned = coevo.events.of_kind("pruned")[-1]
    assert pruned.protected == (ids[0],) and pruned.evidence[ids[0]] == 0
    assert pruned.saved == (ids[0],)  # without the floor this prune drops it (as the paper run below does)
    assert coevo.best().id == ids[2]  # ranked among members with evidence first
    paper, pids, report = _floor_run(0, _never_the_seed)
    assert report.pruned == [pids[0]]  # Algorithm 1: the never-sampled seed goes at weight 0
    assert paper.events.of_kind("pruned")[-1].saved == ()  # nothing is below a floor of 0


def test_a_protected_member_the_prune_would_keep_anyway_is_not_counted_as_saved():
    def lucky_seed(step, k, ids):  # the seed plays once (below the floor of 2), at reward 1
        return (ids[0], 1.0) if (step, k) == (1, 0) else _never_the_seed(step, k, ids)

    coevo, ids, _ = _floor_run(2, lucky_seed)
    pruned = coevo.events.of_kind("pruned")[-1]
    assert pruned.evidence[ids[0]] == 1 and pruned.protected == (ids[0],)
    assert pruned.saved == () and pruned.removed == (ids[1],)  # the worst by score goes either way


def test_truncated_and_overlong_candidates_are_recorded_as_rejected():
    def cut_off(prompt):
        parent = parent_of(prompt)
        return f"<ins_1>\n{parent} short\n</ins_1>\n<ins_2>\n{parent} a very long one\n</ins_2>\n<ins_3>\n{parent} cut"

    too_long = lambda text: "prompt too long: 9999 tokens > rl.max_prompt_tokens 4096" if "long" in text else None  # noqa: E731
    from inspo.llm.scripted import ScriptedLLM
    from inspo.records import Instruction

    # the optimizer reports that its completion stopped at max_tokens: the open <ins_3> was cut off
    llm = ScriptedLLM(lambda messages, n: cut_off(messages[-1]["content"]), finish_reason="length")
    proposer = Proposer(llm, n_candidates=3, fits=too_long, guard_tags=GUARD)

    ids = iter(range(100))
    proposal = proposer.propose(Instruction(id="p", text=SEED), [], new_id=lambda: f"c{next(ids)}")
    assert [c.text.split()[-1] for c in proposal.candidates] == ["short"]
    reasons = sorted(c.rejected for c in proposal.rejected)
    assert reasons[0].startswith("prompt too long") and reasons[1].startswith("truncated: ")
    assert "<ins_3>" in reasons[1] and "optimizer_max_tokens" in reasons[1]


def test_beat_parent_round_plays_the_parent_and_its_candidates_in_one_call():
    cfg = CoEvolutionConfig(population_size=4, validation_size=5, admission="beat-parent", admit_per_round=3,
                            max_rounds=1)
    coevo = make(cfg, fn=six_markers)
    scores = scored_by_text({"marker1": 0.0, "marker2": 0.5, "marker3": 0.9, "marker4": 0.2}, default=0.5)

    class Together:
        def __init__(self):
            self.calls = []

        def __call__(self, instruction, questions):
            self.calls.append(("one", instruction.id))
            return scores(instruction, questions)

        def many(self, instructions, questions):
            self.calls.append(("many", [i.id for i in instructions]))
            return [scores(i, questions) for i in instructions]

    together = Together()
    coevo.initialize(together, make_questions(5))
    assert [kind for kind, _ in together.calls] == ["one", "many"]  # the warm-up, then the whole round
    round_ = together.calls[1][1]
    parent = coevo.events.of_kind("parent_verified")[0]
    assert round_[0] == parent.parent_id and len(round_) == 7  # the parent first, then its 6 candidates
    assert parent.score == 0.5
    admitted = {e.instruction["text"].split()[-1] for e in coevo.events.of_kind("admitted")}
    assert admitted == {"marker3", "marker2", "marker5"}  # as when each is played on its own
