import json

import pytest

from inspo.cli import main

TINY = [
    "model.name_or_path=tiny-qwen2", "model.lora=false", "rl.steps=2", "rl.max_response_tokens=8",
    "rl.questions_per_step=2", "rl.group_size=2", "coevolution.evolve_every=2", "coevolution.prune_every=1",
    "coevolution.evolve_until=3", "coevolution.validation_size=2", "data.max_eval_questions=2",
    "data.max_test_questions=3",
]


def test_dry_run_prints_config_and_plan(capsys):
    assert main(["train", "--dry-run", "--set", "rl.steps=8"]) == 0
    out = capsys.readouterr().out
    assert "name_or_path: qwen2.5-coder-0.5b" in out and "training rollouts:" in out and "step    4: prune evolve" in out


def test_dry_run_says_which_engine_plays_the_rollouts_and_why(capsys):
    from inspo.config.train import resolve
    from inspo.training.dry_run import rollout_engine

    assert main(["train", "--dry-run", "--set", "rl.use_vllm=true", "--set", "model.lora=false"]) == 0
    assert "rollout engine:         vLLM (rl.use_vllm=true; all weights synced" in capsys.readouterr().out
    assert main(["train", "--dry-run"]) == 0
    assert "rollout engine:         transformers (rl.use_vllm=false" in capsys.readouterr().out
    assert main(["train", "--dry-run", "--set", "rl.use_vllm=maybe"]) == 2
    assert "rl.use_vllm must be true or false; got 'maybe' (or auto" in capsys.readouterr().err

    paper = resolve("paper")
    assert paper.rl.use_vllm == "auto" and not paper.model.lora  # full fine-tuning, as App. B
    yes, no = (lambda: True), (lambda: False)
    gpu = rollout_engine(paper, vllm=yes, cuda=yes)
    assert gpu.vllm and "all weights synced into vLLM" in gpu.why
    assert not rollout_engine(paper, vllm=no, cuda=yes).vllm
    assert "no 'vllm' module" in rollout_engine(paper, vllm=no, cuda=yes).why
    cpu = rollout_engine(paper, vllm=yes, cuda=no)
    assert not cpu.vllm and "no CUDA GPU" in cpu.why and "rl.use_vllm=true" in cpu.why
    assert rollout_engine(resolve("cpu-tiny", overrides=["rl.use_vllm=true"]), vllm=no, cuda=no).vllm  # as set


def test_dry_run_builds_the_environment_and_reads_the_data(tmp_path, capsys, monkeypatch):
    assert main(["train", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "checked:" in out and "environment 'search-r1' built (tools: search)" in out
    assert "training questions read" in out and "held-out:" in out
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dry_run_agent.py").write_text(  # a name no other test imports (sys.modules keeps it)
        "import inspo\n\n"
        "def add(a: int, b: int) -> int:\n    return a + b\n\n"  # no docstring: refused when the tool is made
        "def load_environment(**kw):\n"
        "    return inspo.TaggedToolEnv(name='adder', tools=[add], seed_instruction='Use <add> </add>.')\n")
    assert main(["train", "--dry-run", "--env", "dry_run_agent:load_environment", "--set", "rl.prefill="]) == 2
    err = capsys.readouterr().err
    assert "the run would stop here" in err and "has no docstring" in err
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"question": "2 + 2?", "answers": ["4"]}\nnot json\n')
    assert main(["train", "--dry-run", "--set", f"data.train={broken}"]) == 2
    assert "data.train=" in capsys.readouterr().err
    assert main(["train", "--dry-run", "--set", "env.topk=0"]) == 2  # a misspelt or bad env setting
    assert "topk" in capsys.readouterr().err


def test_bad_override_is_a_clear_error(capsys):
    assert main(["train", "--set", "rl.group_size=1"]) == 2
    assert "group_size must be an integer >= 2" in capsys.readouterr().err


@pytest.mark.slow
def test_train_command_runs_and_writes_the_report(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--output-dir", str(out), "--no-progress"]
    for o in TINY:
        args += ["--set", o]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "returned instruction" in printed and f"report: {out / 'report.html'}" in printed
    assert f"agent: {out / 'agent'}" in printed and (out / "agent" / "agent.json").is_file()  # the shareable agent
    assert not (out / "README.md").exists()  # no TRL card ("a fine-tuned version of [None]") in the run directory
    assert "choice of I*:" in printed and "held-out test:" in printed and "3 test questions" in printed
    html = (out / "report.html").read_text()
    assert (out / "best_instruction.txt").read_text().strip()[:40] in html
    assert "How it was chosen" in html and "Held-out test" in html and "3 test questions" in html
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["evaluation"]["rule"] == "dev"  # cpu-tiny chooses on dev
    assert summary["evaluation"]["returned_id"] == summary["best_instruction_id"]
    assert summary["evaluation"]["test_vs_seed"]["n"] == 3
    # the dev choice's own rollouts are counted, as in `inspo evolve`
    assert summary["selection_rollouts"] == summary["evaluation"]["dev_questions"] * len(summary["evaluation"]["dev_scores"]) > 0
    assert main(args) == 2  # the run directory now holds checkpoints: refused without --resume
    assert "resume" in capsys.readouterr().err.lower()
