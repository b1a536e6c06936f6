"""run_evolve (instruction-only INSPO with a frozen policy) with a scripted text-only policy
engine: no model, so it is fast. The scripted policy answers correctly only under an evolved
instruction, which the loop must discover, verify, admit and rank first; a resumed evolution
equals an uninterrupted one."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from agent_helpers import ScriptedPolicy
from inspo import artifacts
from inspo.config.train import resolve
from inspo.data.sources import load_qa_source
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
from inspo.training.evolve import run_evolve, step_questions
from inspo.training.preflight import SetupError


def _config(out, steps=4, *more):
    return resolve("cpu-tiny", overrides=[
        f"output_dir={out}", "model.name_or_path=tiny-qwen2", "offline_steps=" + str(steps),
        "rl.questions_per_step=2", "rl.group_size=2", "rl.prefill=", "env.reward=em",
        "data.warmup_questions=2", "coevolution.population_size=3", "coevolution.prune_every=1",
        "coevolution.evolve_every=2", "coevolution.evolve_until=4", "coevolution.validation_size=2",
        "coevolution.candidates_per_call=2", "coevolution.max_rounds=1", *more,
    ])


def test_evolution_finds_the_instruction_the_policy_needs(tmp_path):
    summary = run_evolve(_config(tmp_path / "evo"), engine=ScriptedPolicy(), progress=False)
    out = tmp_path / "evo"
    assert summary.best_instruction != SEARCH_R1_INSTRUCTION and summary.best_weight == 1.0
    assert summary.reward_end == 1.0 and summary.ledger["verification_rollouts"] > 0
    events = artifacts.read_jsonl(out / "events.jsonl")
    seed_rewards = [e["mean_reward"] for e in events if e["kind"] == "attributed" and e["instruction_id"] == "ins-0001"]
    evolved = [e["mean_reward"] for e in events if e["kind"] == "attributed" and e["instruction_id"] != "ins-0001"]
    assert set(seed_rewards) <= {0.0} and evolved and set(evolved) == {1.0}
    state = json.loads((out / "inspo_state.json").read_text())
    warmup = [i["rollout"] for i in state["buffer"]["items"] if i["step"] == 0]
    assert warmup and all(r["instruction_id"] == "ins-0001" and r["reward"] == 0.0 for r in warmup)
    for name in ("config.yaml", "metrics.jsonl", "inspo_state.json", "best_instruction.txt", "summary.json"):
        assert (out / name).is_file()
    assert not (out / "model").exists()
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3, 4]
    if sys.platform.startswith("linux"):  # freed memory returned, and what that gave back recorded
        assert all("system/released_gib" in m for m in artifacts.read_jsonl(out / "metrics.jsonl"))
    assert "policy (frozen):" in str(summary)
    # cpu-tiny's final choice: the population and the seed on 16 dev questions, then 50 test questions
    ev = summary.evaluation
    assert ev["rule"] == "dev" and ev["returned_id"] == summary.best_instruction_id != ev["seed_id"]
    assert ev["dev_scores"][ev["seed_id"]] == 0.0 and max(ev["dev_scores"].values()) == 1.0
    assert (ev["test_questions"], ev["test_returned"], ev["test_seed"]) == (50, 1.0, 0.0)
    assert summary.selection_rollouts == 16 * len(ev["dev_scores"])
    assert "held-out test:" in str(summary)


def test_resumed_evolution_equals_an_uninterrupted_one(tmp_path):
    run_evolve(_config(tmp_path / "straight"), engine=ScriptedPolicy(), progress=False)
    run_evolve(_config(tmp_path / "split", steps=2), engine=ScriptedPolicy(), progress=False)
    with (tmp_path / "split" / "events.jsonl").open("a") as fh:  # a line from a run killed after step 2
        fh.write(json.dumps({"kind": "sampled", "step": 3, "question_id": "x", "instruction_id": "y"}) + "\n")
    summary = run_evolve(_config(tmp_path / "split", steps=4), engine=ScriptedPolicy(), resume=True, progress=False)
    assert summary.resumed_from.endswith("inspo_state.json (INSPO step 2)")  # the summary says it is a resume
    a = json.loads((tmp_path / "straight" / "inspo_state.json").read_text())
    b = json.loads((tmp_path / "split" / "inspo_state.json").read_text())
    assert a["population"] == b["population"] and a["ledger"] == b["ledger"] and a["buffer"] == b["buffer"]
    resumed = artifacts.read_jsonl(tmp_path / "split" / "events.jsonl")
    changed = [e for e in resumed if e["kind"] == "settings_changed"]  # the extension is recorded, once
    assert [(e["step"], e["changes"]) for e in changed] == [(2, {"offline_steps": {"old": 2, "new": 4}})]
    assert [e for e in resumed if e not in changed] == artifacts.read_jsonl(tmp_path / "straight" / "events.jsonl")


def test_an_evolution_killed_inside_its_initial_population_continues_after_its_last_saved_round(
        tmp_path, monkeypatch, caplog):
    """The state is saved after the warm-up and after every initial round: a run killed in round 3,
    before that round's save, resumes after round 2 and ends as an uninterrupted run does."""
    import inspo.training.evolve as evolve

    grown = ("coevolution.population_size=5", "coevolution.max_rounds=4")
    straight = run_evolve(_config(tmp_path / "straight", 2, *grown), engine=ScriptedPolicy(), progress=False)
    init = [e for e in artifacts.read_jsonl(tmp_path / "straight" / "events.jsonl") if e["step"] == 0]
    assert [e for e in init if e["kind"] == "evolution_finished"][0]["rounds"] >= 3  # round 3 is played
    saves, save_state = [], evolve.save_state

    def die_at_the_fourth_save(coevo, path):  # saves: warm-up, round 1, round 2, then round 3's
        saves.append(coevo.init.rounds if coevo.init else None)
        if len(saves) == 4:
            raise Killed
        return save_state(coevo, path)

    with monkeypatch.context() as m:
        m.setattr(evolve, "save_state", die_at_the_fourth_save)
        with pytest.raises(Killed):
            run_evolve(_config(tmp_path / "split", 2, *grown), engine=ScriptedPolicy(), progress=False)
    assert saves == [0, 1, 2, 3]
    state = json.loads((tmp_path / "split" / "inspo_state.json").read_text())
    assert state["last_step"] == 0 and state["init"]["rounds"] == 2
    with pytest.raises(SetupError, match="saved after round 2 of its initial population\\); pass --resume"):
        run_evolve(_config(tmp_path / "split", 2, *grown), engine=ScriptedPolicy(), progress=False)
    with caplog.at_level("INFO", logger="inspo.training"):
        resumed = run_evolve(_config(tmp_path / "split", 2, *grown), engine=ScriptedPolicy(), resume=True,
                             progress=False)
    assert "initial population: resuming after round 2 with" in caplog.text
    assert resumed.best_instruction == straight.best_instruction
    a = json.loads((tmp_path / "straight" / "inspo_state.json").read_text())
    b = json.loads((tmp_path / "split" / "inspo_state.json").read_text())
    assert b["init"] is None and all(a[k] == b[k] for k in ("population", "ledger", "buffer", "rng_state"))
    assert (artifacts.read_jsonl(tmp_path / "split" / "events.jsonl")
            == artifacts.read_jsonl(tmp_path / "straight" / "events.jsonl"))  # round 3's first try dropped


def test_a_stop_file_stops_the_run_right_after_a_save_and_resume_goes_on_as_if_unbroken(tmp_path, monkeypatch):
    """STOP in the run directory, found at a save, stops the run there (RunStopped, the file
    removed, nothing after the save played); --resume then ends as an uninterrupted run does.
    Asked before the run starts, the stop comes at its first save, after the warm-up."""
    import inspo.training.evolve as evolve
    from inspo.records import RunStopped

    straight = run_evolve(_config(tmp_path / "straight"), engine=ScriptedPolicy(), progress=False)
    out, save_state = tmp_path / "split", evolve.save_state
    out.mkdir()
    (out / "STOP").write_text("")
    with pytest.raises(RunStopped, match="after round 0 of its initial population"):
        run_evolve(_config(out), engine=ScriptedPolicy(), progress=False)
    assert not (out / "STOP").exists() and json.loads((out / "inspo_state.json").read_text())["init"]["rounds"] == 0

    def stop_asked_during_step_2(coevo, path):  # the file appears while step 2 plays, before its save
        if coevo.last_step == 2:
            (out / "STOP").write_text("")
        return save_state(coevo, path)

    with monkeypatch.context() as m:
        m.setattr(evolve, "save_state", stop_asked_during_step_2)
        with pytest.raises(RunStopped, match=r"after step 2 \(saved in .*inspo_state.json\); the same command with "
                                             "--resume continues"):
            run_evolve(_config(out), engine=ScriptedPolicy(), resume=True, progress=False)
    assert not (out / "STOP").exists()
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2]
    resumed = run_evolve(_config(out), engine=ScriptedPolicy(), resume=True, progress=False)
    assert resumed.best_instruction == straight.best_instruction
    a = json.loads((tmp_path / "straight" / "inspo_state.json").read_text())
    b = json.loads((out / "inspo_state.json").read_text())
    assert all(a[k] == b[k] for k in ("population", "ledger", "buffer", "rng_state"))
    assert artifacts.read_jsonl(out / "events.jsonl") == artifacts.read_jsonl(tmp_path / "straight" / "events.jsonl")


def test_a_stop_file_arriving_after_the_last_save_is_removed_and_the_run_finishes(tmp_path, monkeypatch):
    import inspo.training.evolve as evolve

    out, choose = tmp_path / "run", evolve.final_choice

    def asked_during_the_final_choice(*args, **kwargs):
        (out / "STOP").write_text("")
        return choose(*args, **kwargs)

    monkeypatch.setattr(evolve, "final_choice", asked_during_the_final_choice)
    summary = run_evolve(_config(out), engine=ScriptedPolicy(), progress=False)
    assert summary.evaluation is not None and (out / "summary.json").is_file() and not (out / "STOP").exists()
    # a stop file the caller names is the caller's to clear: the run leaves it
    theirs = tmp_path / "theirs"
    out = tmp_path / "run2"
    monkeypatch.setattr(evolve, "final_choice", lambda *a, **k: (theirs.write_text(""), choose(*a, **k))[1])
    run_evolve(_config(out), engine=ScriptedPolicy(), progress=False, stop_file=theirs)
    assert theirs.exists()


def test_the_evolve_command_exits_3_when_a_run_stops_as_asked(tmp_path, capsys, monkeypatch):
    import inspo.training.evolve as evolve
    from inspo.cli import main
    from inspo.records import RunStopped

    def stopped(*args, **kwargs):
        raise RunStopped("stopped as asked (STOP was there, now removed) after step 2")

    monkeypatch.setattr(evolve, "run_evolve", stopped)
    code = main(["evolve", "--output-dir", str(tmp_path / "run"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 3 and err == "inspo: stopped as asked (STOP was there, now removed) after step 2\n"


def test_step_questions_cover_each_pass_once():
    qs = load_qa_source("world", split="train")[:10]
    first_pass = [q.id for t in range(1, 6) for q in step_questions(qs, t, 2, seed=0)]
    assert sorted(first_pass) == sorted(q.id for q in qs)
    second_pass = [q.id for t in range(6, 11) for q in step_questions(qs, t, 2, seed=0)]
    assert sorted(second_pass) == sorted(first_pass) and second_pass != first_pass  # reshuffled
    with pytest.raises(Exception, match="fewer than"):
        step_questions(qs[:1], 1, 2, seed=0)


# ------------------------------------------------- the pre-/post-policy stages evolve (issue 12)

PAPER_SCHEDULE = ["coevolution.prune_every=5", "coevolution.evolve_every=15", "coevolution.evolve_until=150"]


def _offline_config(out, mode):
    """App. B's schedule (K_p 5, K_e 15, T_e 150: 9 evolution rounds online) on tiny batches."""
    return resolve("cpu-tiny", overrides=[
        f"output_dir={out}", f"mode={mode}", "model.name_or_path=tiny-qwen2", "offline_steps=30",
        "rl.questions_per_step=2", "rl.group_size=2", "rl.prefill=", "env.reward=em", "rl.steps=300",
        "data.warmup_questions=2", "coevolution.population_size=3", "coevolution.validation_size=2",
        "coevolution.candidates_per_call=2", "coevolution.max_rounds=1", *PAPER_SCHEDULE,
    ])


@pytest.fixture
def scripted_engine(monkeypatch):
    """The stages build HFEngine(model, tokenizer): hand them the scripted policy instead."""
    import inspo.engines.hf

    monkeypatch.setattr(inspo.engines.hf, "HFEngine", lambda *args, **kwargs: ScriptedPolicy())
    for name in ("INSPO_OPTIMIZER_BASE_URL", "OPENAI_BASE_URL", "INSPO_OPTIMIZER_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _evolution_steps(stage_dir):
    return [e["step"] for e in artifacts.read_jsonl(stage_dir / "events.jsonl") if e["kind"] == "evolution_started"]


class StubGrpo:
    """The GRPO stage without a model: records the instruction it is handed, returns a summary."""

    name = "grpo"
    handed: list[str | None] = []

    def __init__(self, *, static):
        self.static = static

    def check(self, run, *, first, last):
        Path(run.config.output_dir).mkdir(parents=True, exist_ok=True)

    def run(self, run, handoff):
        from dataclasses import replace

        from inspo.training.grpo_stage import Policy
        from inspo.training.summary import RunSummary

        assert self.static  # both offline modes train a population of one
        StubGrpo.handed.append(handoff.instruction)
        config = run.config
        summary = RunSummary(
            run_dir=str(config.output_dir), mode=config.mode, steps=config.rl.steps, reward_start=0.0,
            reward_end=0.0, tool_calls_start=0.0, tool_calls_end=0.0, window=0, best_instruction_id="ins-0001",
            best_instruction=handoff.instruction or SEARCH_R1_INSTRUCTION, best_weight=0.0, population=["ins-0001"],
            optimizer="none", ledger={}, wall_seconds=0.0, peak_memory_gb=0.0)
        return replace(handoff, summary=summary, policy=Policy(None, None))


@pytest.fixture
def stub_grpo(monkeypatch):
    from inspo.training import run

    monkeypatch.setattr(run, "GrpoStage", StubGrpo)
    StubGrpo.handed = []
    return StubGrpo


def test_post_policy_stage_makes_the_online_runs_evolution_rounds(tmp_path, scripted_engine, stub_grpo):
    """The GRPO stage is stubbed (no model); the offline stage after it is the real one."""
    from inspo.training import run

    summary = run.run_training(_offline_config(tmp_path / "post", "post-policy"), progress=False)
    stage = tmp_path / "post" / "post-policy"
    # P_0, then 9 rounds as online (K_e 15 before T_e 150), compressed into 30 steps: every 3rd step
    assert _evolution_steps(stage) == [0, *range(3, 28, 3)]
    assert summary.stages["post-policy"]["ledger"]["optimizer_calls"] == 10  # App. C: 10 with P_0's (1 round each)
    assert len(artifacts.read_jsonl(stage / "metrics.jsonl")) == 30
    assert stub_grpo.handed == [None]  # GRPO starts from the config's seed
    # the evolved instruction is what the run returns, and summary.json says so
    evolved = (stage / "best_instruction.txt").read_text().strip()
    assert summary.best_instruction.strip() == evolved != SEARCH_R1_INSTRUCTION
    assert (tmp_path / "post" / "best_instruction.txt").read_text().strip() == evolved
    saved = artifacts.read_json(tmp_path / "post" / "summary.json")
    assert saved["stages"]["post-policy"]["best_instruction"] == summary.best_instruction


def test_pre_policy_stage_makes_the_online_runs_evolution_rounds(tmp_path, monkeypatch, scripted_engine, stub_grpo):
    from inspo.training import run

    monkeypatch.setattr(run, "base_policy", lambda run, handoff, rng: ScriptedPolicy())
    summary = run.run_training(_offline_config(tmp_path / "pre", "pre-policy"), progress=False)
    stage = summary.stages["pre-policy"]
    assert _evolution_steps(tmp_path / "pre" / "pre-policy") == [0, *range(3, 28, 3)]
    assert stage["ledger"]["optimizer_calls"] == 10 and stage["best_instruction"] != SEARCH_R1_INSTRUCTION
    assert stub_grpo.handed == [stage["best_instruction"]]  # GRPO is seeded with the evolved best
    # a resume picks the finished offline stage up instead of evolving again
    monkeypatch.setattr(run, "base_policy", lambda *args: pytest.fail("evolved again on resume"))
    resumed = run.run_training(_offline_config(tmp_path / "pre", "pre-policy"), resume=True, progress=False)
    assert resumed.stages["pre-policy"] == stage and stub_grpo.handed[-1] == stage["best_instruction"]


def test_a_pre_policy_run_killed_in_its_offline_stage_continues_after_the_last_saved_step(
        tmp_path, monkeypatch, scripted_engine, stub_grpo):
    """A kill in the offline stage (issue 33: 80 minutes of the 1.5B's calls lost) costs only the
    step it interrupted: the resume plays the rest and ends where an uninterrupted run does."""
    import inspo.training.evolve as evolve
    from inspo.training import run

    played, real_step_questions = [], evolve.step_questions

    def step_questions_noted(questions, step, *args):
        played.append(step)
        return real_step_questions(questions, step, *args)

    monkeypatch.setattr(run, "base_policy", lambda *args: ScriptedPolicy())
    monkeypatch.setattr(evolve, "step_questions", step_questions_noted)
    straight = run.run_training(_offline_config(tmp_path / "straight", "pre-policy"), progress=False)
    real_save, saves = evolve.save_state, []

    def killed_after_step_12(coevo, path):
        real_save(coevo, path)
        saves.append(coevo.last_step)
        if coevo.last_step == 12:
            raise Killed

    with monkeypatch.context() as m:
        m.setattr(evolve, "save_state", killed_after_step_12)
        with pytest.raises(Killed):
            run.run_training(_offline_config(tmp_path / "split", "pre-policy"), progress=False)
    stage = tmp_path / "split" / "pre-policy"
    assert saves[-1] == 12 and not (stage / "summary.json").exists()
    played.clear()
    resumed = run.run_training(_offline_config(tmp_path / "split", "pre-policy"), resume=True, progress=False)
    metrics = [m["step"] for m in artifacts.read_jsonl(stage / "metrics.jsonl")]
    assert metrics == list(range(1, 31))  # steps 1-12 kept, none played twice
    assert played == list(range(13, 31))  # the resume rolled out none of the saved steps
    events = artifacts.read_jsonl(stage / "events.jsonl")
    assert events == artifacts.read_jsonl(tmp_path / "straight" / "pre-policy" / "events.jsonl")
    assert resumed.stages["pre-policy"]["best_instruction"] == straight.stages["pre-policy"]["best_instruction"]
    assert stub_grpo.handed[-1] == stub_grpo.handed[0] == straight.stages["pre-policy"]["best_instruction"]


def test_an_offline_stage_resume_the_saved_state_cannot_honour_is_refused_before_any_model_loads(
        tmp_path, monkeypatch, scripted_engine, stub_grpo):
    import inspo.training.evolve as evolve
    from inspo.training import run

    real_save = evolve.save_state

    def killed_after_step_12(coevo, path):
        real_save(coevo, path)
        if coevo.last_step == 12:
            raise Killed

    monkeypatch.setattr(run, "base_policy", lambda *args: ScriptedPolicy())
    with monkeypatch.context() as m:
        m.setattr(evolve, "save_state", killed_after_step_12)
        with pytest.raises(Killed):
            run.run_training(_offline_config(tmp_path / "pre", "pre-policy"), progress=False)
    monkeypatch.setattr(run, "base_policy", lambda *args: pytest.fail("a model loaded before the refusal"))
    config = _offline_config(tmp_path / "pre", "pre-policy")
    with pytest.raises(SetupError, match="seed_instruction"):
        run.run_training(replace(config, seed_instruction="Another seed."), resume=True, progress=False)
    with pytest.raises(SetupError, match="holds step 12, past the 10 step"):
        run.run_training(replace(config, offline_steps=10), resume=True, progress=False)


# ------------------------------------------- resume without a saved state (issue 21)
class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs."""


def _killed_before_its_first_state(out, monkeypatch):
    import inspo.training.evolve as evolve

    def die(*args, **kwargs):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(evolve, "save_state", die)
        with pytest.raises(Killed):
            run_evolve(_config(out), engine=ScriptedPolicy(), progress=False)
    assert artifacts.read_jsonl(out / "events.jsonl") and not (out / "inspo_state.json").exists()


def test_resume_is_refused_when_the_run_stopped_before_saving_a_state(tmp_path, monkeypatch):
    out = tmp_path / "evo"
    _killed_before_its_first_state(out, monkeypatch)
    events = (out / "events.jsonl").read_text()
    with pytest.raises(SetupError) as refused:
        run_evolve(_config(out), engine=ScriptedPolicy(), resume=True, progress=False)
    message = str(refused.value)
    assert f"nothing to resume in {out}: inspo_state.json is missing" in message
    assert "stopped before it saved its first state" in message and "run without --resume to start over" in message
    assert (out / "events.jsonl").read_text() == events  # refused before anything was written
    # starting over is what the message says to do: the unfinished run's logs are replaced, not appended to
    run_evolve(_config(out), engine=ScriptedPolicy(), progress=False)
    run_evolve(_config(tmp_path / "clean"), engine=ScriptedPolicy(), progress=False)
    events = artifacts.read_jsonl(out / "events.jsonl")
    assert events == artifacts.read_jsonl(tmp_path / "clean" / "events.jsonl")  # no event twice
    assert [e["kind"] for e in events].count("warmed_up") == 1
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3, 4]


def test_resume_is_refused_for_a_missing_folder_or_a_lost_state(tmp_path):
    with pytest.raises(SetupError, match=f"nothing to resume: {tmp_path / 'typo'} does not exist .*--output-dir"):
        run_evolve(_config(tmp_path / "typo"), engine=ScriptedPolicy(), resume=True, progress=False)
    assert not (tmp_path / "typo").exists()
    out = tmp_path / "evo"
    run_evolve(_config(out, steps=2), engine=ScriptedPolicy(), progress=False)
    (out / "inspo_state.json").unlink()
    with pytest.raises(SetupError, match=r"inspo_state.json is missing \(found events.jsonl .* reaching step 2: "
                                         r"the state saved with them is gone"):
        run_evolve(_config(out), engine=ScriptedPolicy(), resume=True, progress=False)
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2]  # untouched
    (out / "checkpoint-3").mkdir()
    with pytest.raises(SetupError, match="it is an inspo train run .*inspo train --resume"):
        run_evolve(_config(out), engine=ScriptedPolicy(), resume=True, progress=False)


def test_a_new_run_does_not_write_over_a_saved_one(tmp_path):
    out = tmp_path / "evo"
    run_evolve(_config(out, steps=2), engine=ScriptedPolicy(), progress=False)
    before = (out / "metrics.jsonl").read_text()
    with pytest.raises(SetupError, match=f"{out} already holds an inspo evolve run \\(inspo_state.json, saved after "
                                         "step 2\\); pass --resume"):
        run_evolve(_config(out, steps=2), engine=ScriptedPolicy(), progress=False)
    assert (out / "metrics.jsonl").read_text() == before
    run_evolve(_config(out, steps=3), engine=ScriptedPolicy(), overwrite=True, progress=False)
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]


def test_evolve_command_refuses_resume_without_state(tmp_path, capsys):
    from inspo.cli import main

    code = main(["evolve", "--resume", "--output-dir", str(tmp_path / "nope"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.startswith(f"inspo: error: nothing to resume: {tmp_path / 'nope'} does not exist")


class TemperatureLog(ScriptedPolicy):
    """The scripted policy, recording the temperature of every generate call."""

    def __init__(self):
        super().__init__()
        self.temperatures: list[float] = []

    def generate(self, inputs, *, max_new_tokens, temperature, top_p, stop):
        self.temperatures.append(temperature)
        return super().generate(inputs, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, stop=stop)


EVIDENCE = ("coevolution.admission=paired", "coevolution.verify_greedy=true", "coevolution.validation_from=train",
            "coevolution.validation_unseen=true", "coevolution.validation_size=8", "coevolution.race_chunk=4",
            "coevolution.race_futility=2")


def test_paired_greedy_verification_on_training_questions_finds_the_instruction_and_resumes_exactly(tmp_path):
    policy = TemperatureLog()
    summary = run_evolve(_config(tmp_path / "straight", 4, *EVIDENCE), engine=policy, progress=False)
    assert summary.best_instruction != SEARCH_R1_INSTRUCTION and summary.reward_end == 1.0
    events = artifacts.read_jsonl(tmp_path / "straight" / "events.jsonl")
    verified = [e for e in events if e["kind"] == "verified"]
    assert verified and all(e["wins"] is not None for e in verified)
    assert any(e["wins"] > e["losses"] for e in verified)
    parents = [e for e in events if e["kind"] == "parent_verified"]
    assert parents and all(e["n_questions"] == 8 for e in parents)  # D_B of 8 from step 0: the training questions
    assert 0.0 in policy.temperatures and 0.7 in policy.temperatures  # greedy verification, sampled training
    train_ids = {q.id for q in load_qa_source("world", split="train")}
    shown = [set(e["failures"]) for e in events if e["kind"] == "proposed"]
    assert shown and all(ids <= train_ids for ids in shown)
    run_evolve(_config(tmp_path / "split", 2, *EVIDENCE), engine=TemperatureLog(), progress=False)
    run_evolve(_config(tmp_path / "split", 4, *EVIDENCE), engine=TemperatureLog(), resume=True, progress=False)
    a = json.loads((tmp_path / "straight" / "inspo_state.json").read_text())
    b = json.loads((tmp_path / "split" / "inspo_state.json").read_text())
    assert a["population"] == b["population"] and a["ledger"] == b["ledger"] and a["buffer"] == b["buffer"]


def test_the_summary_counts_every_candidates_fate(tmp_path):
    summary = run_evolve(_config(tmp_path / "fates", 4, *EVIDENCE, "coevolution.gate=true"), engine=ScriptedPolicy(),
                         progress=False)
    events = artifacts.read_jsonl(tmp_path / "fates" / "events.jsonl")
    fates = summary.fates
    assert fates["proposed"] == sum(len(e["candidate_ids"]) for e in events if e["kind"] == "proposed") > 0
    assert fates["admitted"] == len([e for e in events if e["kind"] == "admitted"]) > 0
    refused = sum(v for k, v in fates.items() if k not in ("proposed", "admitted"))
    assert refused == len([e for e in events if e["kind"] == "rejected"])
    assert fates["admitted"] + refused <= fates["proposed"]
    assert "candidates:" in str(summary) and json.loads((tmp_path / "fates" / "summary.json").read_text())["fates"]


def test_a_resumed_evolution_replays_the_optimizer_answers_it_paid_for(tmp_path):
    run_evolve(_config(tmp_path / "run", 2), engine=ScriptedPolicy(), progress=False)
    answers = tmp_path / "run" / artifacts.OPTIMIZER_ANSWERS_FILE
    paid = len(artifacts.read_jsonl(answers))
    assert paid > 0
    state = json.loads((tmp_path / "run" / artifacts.STATE_FILE).read_text())
    assert state["proposer"]["calls"] == paid
    # the run is resumed with a longer schedule (one more evolution, at step 4): its calls are
    # appended, none is asked twice (the replay of a killed step: tests/test_core_answer_cache.py)
    more = ("coevolution.evolve_until=6",)
    run_evolve(_config(tmp_path / "run", 4, *more), engine=ScriptedPolicy(), resume=True, progress=False)
    keys = [row["key"] for row in artifacts.read_jsonl(answers)]
    assert len(keys) == len(set(keys)) > paid
    # a new run over the directory starts without the earlier run's answers
    run_evolve(_config(tmp_path / "run", 2), engine=ScriptedPolicy(), overwrite=True, progress=False)
    assert len(artifacts.read_jsonl(answers)) == paid
