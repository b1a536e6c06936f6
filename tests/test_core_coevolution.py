import pytest

from core_helpers import SEED, FunctionLLM, failing_llm, scripted_reflection
from inspo.core.coevolution import CoEvolution, PlannedStep, planned_schedule
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.events import EventLog
from inspo.core.proposer import Proposer
from inspo.synthetic import SyntheticEnv, make_questions, run_synthetic, true_quality


def make(cfg, fn=scripted_reflection, events=None):
    return CoEvolution(cfg, SEED, Proposer(FunctionLLM(fn), n_candidates=cfg.candidates_per_call), events=events)


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
    with pytest.raises(ConfigError, match="n_parent .* cannot exceed"):
        CoEvolutionConfig(population_size=2, n_parent=3)
    with pytest.raises(ConfigError, match="template must be one of"):
        CoEvolutionConfig(template="magic")
    with pytest.raises(ConfigError, match="unknown co-evolution setting"):
        CoEvolutionConfig.from_dict({"populaton_size": 3})
