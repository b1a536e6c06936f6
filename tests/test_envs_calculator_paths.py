"""``env.name=calculator`` through every command: ``inspo data``, ``inspo eval --limit 4`` (the
environment's own problems and a user's JSONL of word problems), ``inspo train --dry-run``, a
two-step ``tiny-qwen2`` training run, the exported agent and ``inspo ask``."""

from __future__ import annotations

import json

import pytest

from inspo.cli import main


def test_data_writes_the_splits_as_question_jsonl(tmp_path, capsys):
    from inspo.data.sources import load_qa_source
    from inspo.envs import make_env

    assert main(["data", "calculator", "--out", str(tmp_path), "--seed", "3", "--set", "env.test_size=7"]) == 0
    assert "test: " in capsys.readouterr().out
    written = load_qa_source(str(tmp_path / "test.jsonl"))
    assert [q.to_dict() for q in written] == [q.to_dict() for q in make_env("calculator", {"seed": 3, "test_size": 7})
                                              .questions("test")]
    assert main(["data", "calculator", "--out", str(tmp_path), "--set", "env.steps=9"]) == 2
    assert "env.steps" in capsys.readouterr().err
    assert main(["data", "calculator", "--out", str(tmp_path), "--set", "rl.steps=2"]) == 2
    assert "takes only the environment's settings" in capsys.readouterr().err


def test_train_dry_run_shows_the_calculator_preset(capsys):
    assert main(["train", "--preset", "calculator", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "name: calculator" in out and "seed_instruction: '@weak'" in out and "prefill: ''" in out
    assert main(["train", "--env", "calculator", "--dry-run"]) == 0  # cpu-tiny's <search> prefill is dropped
    assert "prefill: ''" in capsys.readouterr().out


@pytest.mark.slow
def test_eval_limit_4_on_the_environments_problems_and_on_a_users_jsonl(tmp_path, capsys):
    from inspo.envs import make_env

    own = [q.to_dict() for q in make_env("calculator").questions("dev")[:4]]
    users = tmp_path / "mine.jsonl"
    users.write_text("".join(json.dumps({"id": f"u{i}", "question": f"Tom has {i} apples and buys {i + 2} more. "
                                                                 "How many apples does he have?",
                                         "answers": [str(2 * i + 2)]}) + "\n" for i in range(5)))
    assert main(["eval", "--env", "calculator", "--policy", "tiny-qwen2", "--dataset", "env@dev", "--dataset",
                 str(users), "--instruction", "@worked", "--limit", "4", "--max-response-tokens", "6",
                 "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    data = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert [(c["dataset"], c["n"], c["instruction"]) for c in data["cells"]] == [
        ("calculator@dev", 4, "worked"), (f"{users}@test", 4, "worked")]
    assert set(data["cells"][0]["metrics"]) == {"correct", "answered", "calc_calls", "calc_errors"}
    assert [q["question_id"] for q in data["questions"][:4]] == [q["id"] for q in own]
    assert "| calc calls |" in (tmp_path / "eval" / "eval.md").read_text()


@pytest.mark.slow
def test_a_two_step_training_run_exports_and_asks_the_calculator_agent(tmp_path, capsys):
    import torch

    from inspo.config.train import resolve
    from inspo.training.run import run_training

    torch.set_num_threads(1)
    out = tmp_path / "run"
    config = resolve("calculator", overrides=[
        "model.name_or_path=tiny-qwen2", "model.dtype=float32", "model.lora=false", "rl.bf16=false", "rl.steps=2",
        "rl.questions_per_step=2", "rl.group_size=2", "rl.micro_batch_size=4", "rl.max_turns=1",
        "rl.max_response_tokens=6", "rl.save_steps=0", "rl.prefill=<calc> 6 * 23 </calc>",
        "data.warmup_questions=2", "data.max_eval_questions=2", "data.max_test_questions=2",
        "coevolution.population_size=2", "coevolution.prune_every=1", "coevolution.evolve_every=2",
        "coevolution.evolve_until=3", "coevolution.validation_size=2", "coevolution.candidates_per_call=2",
        "coevolution.max_rounds=1", "optimizer.kind=rule-based", f"output_dir={out}"])
    summary = run_training(config, progress=False)
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["rollout/calc_calls"] for m in lines] == [1.0, 1.0] and "rollout/search_calls" not in lines[0]
    assert summary.evaluation["metric"] == "correct" and summary.tool_calls_start == 1.0
    buffer = json.loads((out / "inspo_state.json").read_text())["buffer"]["items"]
    assert buffer and all("<result>138</result>" in item["rollout"]["response"] for item in buffer)
    settings = json.loads((out / "agent" / "agent.json").read_text())
    assert settings["env"]["name"] == "calculator" and settings["env"]["accept_equals"] is False
    assert "`calculator`: arithmetic word problems" in (out / "agent" / "README.md").read_text()
    assert main(["ask", str(out / "agent"), "Ana buys 6 boxes of 23 pens. How many pens?", "--max-turns", "1"]) == 0
    printed = capsys.readouterr().out
    assert "environment: calculator" in printed and "  calc: 6 * 23" in printed and "    138" in printed
