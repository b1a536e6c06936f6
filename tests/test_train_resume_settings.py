"""``--resume`` with changed settings (issue 11): what a resume applies, what it refuses before any
work, and where the change is recorded. No model and no TRL: the checkpoints are written by hand
(train) or by a scripted frozen policy (evolve)."""

from __future__ import annotations

import json

import pytest

from agent_helpers import ScriptedPolicy
from inspo import artifacts
from inspo.cli import main
from inspo.config.schedule import core_config
from inspo.config.train import dump, resolve
from inspo.core.coevolution import CoEvolution
from inspo.core.proposer import Proposer
from inspo.core.reflector import RuleBasedReflector
from inspo.training.evolve import run_evolve
from inspo.training.resume import ResumeRefused, plan_resume

BASE = ["model.name_or_path=tiny-qwen2", "rl.steps=4", "coevolution.max_rounds=2"]


def _plan(old, new, *, static=False, saved=True):
    return plan_resume(new, saved_core=core_config(old.coevolution, static=static).to_dict(),
                       saved=old.to_dict() if saved else None, checkpoint="run/checkpoint-2", step=2,
                       compared_with="old.yaml", static=static)


def test_plan_applies_what_is_read_when_used_and_refuses_what_the_checkpoint_holds():
    old = resolve("cpu-tiny", overrides=BASE)
    plan = _plan(old, resolve("cpu-tiny", overrides=[*BASE, "rl.steps=6", "rl.max_turns=2", "coevolution.max_rounds=3",
                                                     "output_dir=elsewhere"]))
    assert [str(c) for c in plan.applied] == ["rl.steps: 4 -> 6", "rl.max_turns: 1 -> 2", "coevolution.max_rounds: 2 -> 3"]
    assert plan.refused == [] and "learning-rate schedule" in plan.applied[0].note
    plan.check()
    assert plan.lines()[0] == "resuming from run/checkpoint-2 (INSPO step 2) with 3 changed setting(s), applied from step 3 on:"
    assert plan.event().changes["coevolution.max_rounds"] == {"old": 2, "new": 3} and plan.event().step == 2

    refused = _plan(old, resolve("cpu-tiny", overrides=[*BASE, "rl.learning_rate=1e-4", "model.lora=false",
                                                        "coevolution.population_size=5", "rl.seed=7", "rl.max_turns=2"]))
    assert [c.key for c in refused.refused] == ["model.lora", "rl.learning_rate", "rl.seed", "coevolution.population_size",
                                                "coevolution.seed"]
    assert [c.key for c in refused.applied] == ["rl.max_turns"]
    with pytest.raises(ResumeRefused) as info:
        refused.check()
    message = str(info.value)
    assert "rl.learning_rate: 2e-05 -> 0.0001 (TRL restores the optimizer" in message
    assert "coevolution.population_size: 3 -> 5" in message and "--output-dir" in message and "old.yaml" in message


def test_plan_compares_the_core_as_it_ran():
    old = resolve("cpu-tiny", overrides=[*BASE, "mode=static"])
    # a static run's core is a population of one whatever coevolution.population_size says
    assert _plan(old, resolve("cpu-tiny", overrides=[*BASE, "mode=static", "coevolution.population_size=5"]),
                 static=True).refused == []
    # without the old run-level config, the saved core settings are still compared
    plan = _plan(old, resolve("cpu-tiny", overrides=[*BASE, "mode=static", "rl.max_turns=3", "coevolution.seed=9"]),
                 static=True, saved=False)
    assert [c.key for c in plan.refused] == ["coevolution.seed"] and plan.applied == []


def _checkpoint(run, config, step=2):
    """A checkpoint as inspo train leaves it (TRL's files reduced to trainer_state.json)."""
    ckpt = run / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text("{}")
    artifacts.write_json(ckpt / artifacts.STEP_FILE, {"inspo_step": step, "global_step": step, "mini_batches": 1,
                                                      "config": config.to_dict()})
    coevo = CoEvolution(core_config(config.coevolution, static=False), "Use <search> and <answer>.",
                        Proposer(RuleBasedReflector(seed=0)))
    coevo.last_step = step
    artifacts.write_json(ckpt / artifacts.STATE_FILE, coevo.state_dict())
    (run / "config.yaml").write_text(dump(config))
    return ckpt


def test_train_refuses_a_change_the_checkpoint_cannot_honour_before_any_work(tmp_path, monkeypatch, capsys):
    import inspo.training.grpo_stage as grpo_stage

    run = tmp_path / "run"
    _checkpoint(run, resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}"]))
    before = (run / "config.yaml").read_text()

    def no_work(*args, **kwargs):
        raise AssertionError("the run prepared its inputs before refusing the resume")

    monkeypatch.setattr(grpo_stage, "prepare", no_work)
    args = ["train", "--output-dir", str(run), "--resume", "--no-progress"]
    for o in [*BASE, "rl.learning_rate=1e-4", "coevolution.population_size=5", "rl.max_turns=2"]:
        args += ["--set", o]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "cannot resume from" in err and "rl.learning_rate: 2e-05 -> 0.0001" in err
    assert "coevolution.population_size: 3 -> 5" in err and "rl.max_turns" not in err  # applicable: not blamed
    assert (run / "config.yaml").read_text() == before and not (run / "resume.json").exists()


def test_train_falls_back_to_the_run_config_for_old_checkpoints(tmp_path, monkeypatch):
    import inspo.training.grpo_stage as grpo_stage
    import inspo.training.run as run_module

    run = tmp_path / "run"
    config = resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}"])
    ckpt = _checkpoint(run, config)
    info = artifacts.read_step(ckpt)
    del info["config"]  # written before checkpoints recorded their config
    artifacts.write_json(ckpt / artifacts.STEP_FILE, info)
    monkeypatch.setattr(grpo_stage, "prepare", lambda *a, **k: pytest.fail("prepared before refusing"))
    with pytest.raises(ResumeRefused, match=r"(?s)model.name_or_path: 'tiny-qwen2' -> 'smollm2-135m'.*settings are in .*config.yaml"):
        run_module.run_training(resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}",
                                                               "model.name_or_path=smollm2-135m"]),
                                resume=True, progress=False)


def _evolve_config(out, *extra):
    return resolve("cpu-tiny", overrides=[
        f"output_dir={out}", "model.name_or_path=tiny-qwen2", "offline_steps=2", "rl.questions_per_step=2",
        "rl.group_size=2", "rl.prefill=", "env.reward=em", "data.warmup_questions=2", "data.max_test_questions=4",
        "data.max_eval_questions=4", "coevolution.population_size=3", "coevolution.prune_every=1",
        "coevolution.evolve_every=2", "coevolution.evolve_until=3", "coevolution.validation_size=2",
        "coevolution.candidates_per_call=2", "coevolution.max_rounds=1", *extra,
    ])


def test_evolve_resume_applies_and_records_new_settings(tmp_path, capsys):
    out = tmp_path / "evo"
    run_evolve(_evolve_config(out), engine=ScriptedPolicy(), progress=False)
    assert [e["step"] for e in artifacts.read_jsonl(out / "events.jsonl") if e["kind"] == "evolution_started"] == [0, 2]
    # resume with two more steps and evolution until step 5: the saved T_e (3) would not evolve at 4
    run_evolve(_evolve_config(out, "offline_steps=4", "coevolution.evolve_until=5"), engine=ScriptedPolicy(),
               resume=True, progress=True)
    events = artifacts.read_jsonl(out / "events.jsonl")
    assert [e["step"] for e in events if e["kind"] == "evolution_started"] == [0, 2, 4]
    (changed,) = [e for e in events if e["kind"] == "settings_changed"]
    assert changed["step"] == 2 and changed["changes"] == {"offline_steps": {"old": 2, "new": 4},
                                                           "coevolution.evolve_until": {"old": 3, "new": 5}}
    (entry,) = json.loads((out / "resume.json").read_text())["resumes"]
    assert entry["step"] == 2 and [c["key"] for c in entry["changes"]] == ["offline_steps", "coevolution.evolve_until"]
    head = (out / "config.yaml").read_text().splitlines()[:3]
    assert head[0].startswith("# resumed from") and head[2] == "#   coevolution.evolve_until: 3 -> 5"
    assert "coevolution.evolve_until: 3 -> 5" in capsys.readouterr().out  # told, not only recorded
    assert json.loads((out / "inspo_state.json").read_text())["config"]["evolve_until"] == 5

    with pytest.raises(ResumeRefused, match="seed_instruction"):
        run_evolve(_evolve_config(out, "offline_steps=5", "seed_instruction=Use <search> and <answer> only."),
                   engine=ScriptedPolicy(), resume=True, progress=False)
