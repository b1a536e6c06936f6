import json
import random

import pytest

from core_helpers import GUARD, SEED, FunctionLLM, scripted_reflection
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.proposer import Proposer
from inspo.core.state import load_state, save_state
from inspo.rng import rng_from_json
from inspo.synthetic import SyntheticEnv, make_questions, reflector_rules, run_synthetic

CFG = dict(evolve_until=40, validation_size=20, seed=3)


def fresh():
    return CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(FunctionLLM(scripted_reflection), guard_tags=GUARD))


def straight_and_resumed(build, path, stop_at, on_load=lambda resumed: None):
    """32 synthetic steps played straight, and the same stopped after ``stop_at``, saved to
    ``path``, dropped, loaded into a fresh ``build()`` (``on_load(resumed)`` looks at it then) and
    played to 32: (straight, resumed)."""
    qs = make_questions(40)
    full = build()
    run_synthetic(full, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3)

    first = build()
    run_synthetic(first, SyntheticEnv(seed=3), qs, steps=stop_at, batch_size=6, group_size=3)
    save_state(first, path)
    del first

    resumed = load_state(build(), path)
    on_load(resumed)
    run_synthetic(resumed, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3, start=stop_at + 1)
    return full, resumed


@pytest.mark.parametrize("stop_at", [7, 15, 16])
def test_save_load_continue_equals_uninterrupted(tmp_path, stop_at):
    def saved_there(resumed):
        assert resumed.last_step == stop_at

    full, resumed = straight_and_resumed(fresh, tmp_path / "inspo_state.json", stop_at, saved_there)
    assert resumed.state_dict() == full.state_dict()
    assert resumed.best() == full.best()


def test_state_file_has_schema_version_and_refuses_other_versions(tmp_path):
    coevo = fresh()
    path = save_state(coevo, tmp_path / "s.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 3 and "rng_state" in data and "buffer" in data
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="schema_version 99"):
        load_state(fresh(), path)
    with pytest.raises(FileNotFoundError, match="no INSPO state"):
        load_state(fresh(), tmp_path / "missing.json")


class SamplingLLM(FunctionLLM):
    """A sampling optimizer: what it answers depends on draws from its own ``sampling_rng``."""

    def __init__(self):
        super().__init__(lambda prompt: scripted_reflection(f"{prompt}\n{self.sampling_rng.random()}"))
        self.sampling_rng = random.Random(11)


def test_a_sampling_optimizers_stream_is_saved_so_the_resume_draws_what_the_uninterrupted_run_does(tmp_path):
    def build():
        return CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(SamplingLLM(), guard_tags=GUARD))

    path = tmp_path / "state.json"

    def same_stream(resumed):  # the stopped run's stream, as saved
        saved = json.loads(path.read_text())["proposer"]["sampling_rng"]
        assert resumed.proposer.llm.sampling_rng.getstate() == rng_from_json(saved)

    full, resumed = straight_and_resumed(build, path, 20, same_stream)
    assert resumed.state_dict() == full.state_dict()
    assert len(resumed.proposer.llm.prompts) > 0  # the optimizer was called after the resume
    plain = load_state(CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(FunctionLLM(scripted_reflection))), path)
    proposer_state = plain.state_dict()["proposer"]  # a client without a stream: no stream saved, none set
    assert "sampling_rng" not in proposer_state
    assert proposer_state["calls"] == json.loads(path.read_text())["proposer"]["calls"] > 0


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


@pytest.mark.parametrize("saved_round", [0, 1, 2])
def test_an_initial_population_stopped_after_a_saved_round_continues_as_the_uninterrupted_one(tmp_path, saved_round):
    """initialize's after_round saves after the warm-up (round 0) and each round; a run killed in
    the next round, before its save, continues from the saved round to the uninterrupted run's
    state and, with its event log cut to the saved count, the same events."""
    from inspo import artifacts
    from inspo.core.events import EventLog

    cfg = CoEvolutionConfig(**dict(CFG, population_size=8, candidates_per_call=2, max_rounds=6))

    def build(folder):
        return CoEvolution(cfg, SEED, Proposer(FunctionLLM(scripted_reflection), n_candidates=2, guard_tags=GUARD),
                           events=EventLog(folder / artifacts.EVENTS_FILE))

    env, qs = SyntheticEnv(seed=3), make_questions(20)
    full = build(tmp_path / "straight")
    full.initialize(env.evaluate, qs)
    rounds = full.events.of_kind("evolution_finished")[0].rounds
    assert rounds > saved_round + 1 and full.init is None  # the kill lands inside the initial population
    split, path = build(tmp_path / "split"), tmp_path / "split" / artifacts.STATE_FILE

    def save_or_die():
        if split.init.rounds > saved_round:
            raise Killed  # round saved_round + 1 ran, its events are logged, its state never saved
        save_state(split, path)

    with pytest.raises(Killed):
        split.initialize(env.evaluate, qs, after_round=save_or_die)
    saved = json.loads(path.read_text())
    assert saved["schema_version"] == 3 and saved["init"]["rounds"] == saved_round
    assert artifacts.truncate_events(tmp_path / "split", saved["init"]["events"]) > 0  # the lost round's
    resumed = load_state(build(tmp_path / "split"), path)
    with pytest.raises(ValueError, match="initial population is unfinished .* call continue_initialize first"):
        resumed.update(1, [], None)
    resumed.continue_initialize(env.evaluate)
    assert resumed.init is None and resumed.state_dict() == full.state_dict()
    assert (artifacts.read_jsonl(tmp_path / "split" / artifacts.EVENTS_FILE)
            == artifacts.read_jsonl(tmp_path / "straight" / artifacts.EVENTS_FILE))
    with pytest.raises(ValueError, match="nothing to continue"):
        resumed.continue_initialize(env.evaluate)


def test_a_version_2_state_reads_as_one_saved_after_the_initial_population(tmp_path):
    coevo = fresh()
    coevo.initialize(SyntheticEnv(seed=3).evaluate, make_questions(10))
    data = coevo.state_dict()
    data["schema_version"] = 2
    del data["init"]
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    resumed = load_state(fresh(), path)
    assert resumed.init is None and resumed.state_dict() == coevo.state_dict()
    for damaged in ({"rounds": 1, "wrong": 2}, {"rounds": "2", "reason": "", "events": 1}):
        data["init"] = damaged
        path.write_text(json.dumps(data))
        with pytest.raises(ValueError, match="its init section is damaged"):
            load_state(fresh(), path)


def test_resume_with_rule_based_reflector_equals_uninterrupted(tmp_path):
    from inspo.core.reflector import RuleBasedReflector

    def build():
        return CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(RuleBasedReflector(rng=random.Random(1), rules=reflector_rules()), guard_tags=GUARD))

    full, resumed = straight_and_resumed(build, tmp_path / "state.json", 20)
    assert resumed.state_dict() == full.state_dict()
    assert full.ledger.candidates_admitted > 6  # evolution really happened after the resume point


def test_resume_applies_changed_settings_and_records_them(tmp_path):
    # issue 11: load_state_dict replaced the resuming config by the state's, so new settings were dropped
    from inspo.core.config import SettingChange

    qs = make_questions(40)
    first = fresh()
    run_synthetic(first, SyntheticEnv(seed=3), qs, steps=10, batch_size=6, group_size=3)
    path = save_state(first, tmp_path / "inspo_state.json")

    changed = CoEvolution(CoEvolutionConfig(**{**CFG, "evolve_until": 20, "max_rounds": 2, "optimizer_temperature": 0.5}),
                          SEED, Proposer(FunctionLLM(scripted_reflection), guard_tags=GUARD))
    changes = changed.load_state_dict(json.loads(path.read_text()))
    assert changes == [SettingChange("evolve_until", 40, 20), SettingChange("max_rounds", 5, 2),
                       SettingChange("optimizer_temperature", 1.0, 0.5)]
    assert (changed.config.evolve_until, changed.config.max_rounds, changed.config.optimizer_temperature) == (20, 2, 0.5)
    assert changed.state_dict()["config"]["evolve_until"] == 20
    (event,) = changed.events.of_kind("settings_changed")
    assert event.step == 10 and event.changes["max_rounds"] == {"old": 5, "new": 2}
    quiet = CoEvolution(CoEvolutionConfig(**{**CFG, "max_rounds": 2}), SEED, Proposer(FunctionLLM(scripted_reflection), guard_tags=GUARD))
    assert quiet.load_state_dict(json.loads(path.read_text()), emit=False) == [SettingChange("max_rounds", 5, 2)]
    assert quiet.events.of_kind("settings_changed") == []  # the caller reports them (inspo train)

    run_synthetic(changed, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3, start=11)
    evolved = [e.step for e in changed.events.of_kind("evolution_started")]
    assert evolved == [15]  # K_e 15: step 30 would evolve under the saved T_e 40, not under the new 20


def test_resume_refuses_settings_the_state_was_built_with(tmp_path):
    from inspo.core.config import ResumeConfigError

    path = save_state(fresh(), tmp_path / "inspo_state.json")
    other = CoEvolution(CoEvolutionConfig(**{**CFG, "population_size": 5, "seed": 4, "max_rounds": 2}), SEED,
                        Proposer(FunctionLLM(scripted_reflection), guard_tags=GUARD))
    with pytest.raises(ResumeConfigError, match=r"population_size: 7 -> 5, seed: 3 -> 4") as info:
        other.load_state_dict(json.loads(path.read_text()))
    assert [c.key for c in info.value.changes] == ["population_size", "seed"]  # the applicable one is not blamed
    assert other.events.of_kind("settings_changed") == [] and other.config.population_size == 5
    # unchanged settings: nothing to report
    assert fresh().load_state_dict(json.loads(path.read_text())) == []
