import json

import pytest

from core_helpers import GUARD, SEED, FunctionLLM, scripted_reflection
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.proposer import Proposer
from inspo.core.state import load_state, save_state
from inspo.synthetic import SyntheticEnv, make_questions, reflector_rules, run_synthetic

CFG = dict(evolve_until=40, validation_size=20, seed=3)


def fresh():
    return CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(FunctionLLM(scripted_reflection), guard_tags=GUARD))


@pytest.mark.parametrize("stop_at", [7, 15, 16])
def test_save_load_continue_equals_uninterrupted(tmp_path, stop_at):
    qs = make_questions(40)
    full = fresh()
    run_synthetic(full, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3)

    first = fresh()
    run_synthetic(first, SyntheticEnv(seed=3), qs, steps=stop_at, batch_size=6, group_size=3)
    path = save_state(first, tmp_path / "inspo_state.json")
    del first

    resumed = load_state(fresh(), path)
    assert resumed.last_step == stop_at
    run_synthetic(resumed, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3, start=stop_at + 1)
    assert resumed.state_dict() == full.state_dict()
    assert resumed.best() == full.best()


def test_state_file_has_schema_version_and_refuses_other_versions(tmp_path):
    coevo = fresh()
    path = save_state(coevo, tmp_path / "s.json")
    data = json.loads(path.read_text())
    assert data["schema_version"] == 2 and "rng_state" in data and "buffer" in data
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="schema_version 99"):
        load_state(fresh(), path)
    with pytest.raises(FileNotFoundError, match="no INSPO state"):
        load_state(fresh(), tmp_path / "missing.json")


def test_resume_with_rule_based_reflector_equals_uninterrupted(tmp_path):
    import random

    from inspo.llm.rule_based import RuleBasedReflector

    def build():
        return CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(RuleBasedReflector(rng=random.Random(1), rules=reflector_rules()), guard_tags=GUARD))

    qs = make_questions(40)
    full = build()
    run_synthetic(full, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3)
    first = build()
    run_synthetic(first, SyntheticEnv(seed=3), qs, steps=20, batch_size=6, group_size=3)
    path = save_state(first, tmp_path / "state.json")
    resumed = load_state(build(), path)
    run_synthetic(resumed, SyntheticEnv(seed=3), qs, steps=32, batch_size=6, group_size=3, start=21)
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
