"""The library API: ``from inspo import train, evolve, evaluate, load_config`` (inspo.api), each
run the way its example shows on the tiny model; and docs/library.md's core example (once the
README's "The core as a library"), run as written (it raised TypeError before: make_optimizer_llm
without its rng), with what it must show checked (tests/test_docs.py only checks it runs)."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

import inspo
from agent_helpers import ScriptedPolicy
from inspo.core.config import ConfigError
from train_run_script import TINY, scripted_reward

LIBRARY_DOC = Path(__file__).resolve().parents[1] / "docs" / "library.md"
OPTIMIZER_ENV = ("INSPO_OPTIMIZER_BASE_URL", "OPENAI_BASE_URL", "INSPO_OPTIMIZER_MODEL", "INSPO_OPTIMIZER_API_KEY",
                 "OPENAI_API_KEY")


def _first_python_block(path: Path) -> str:
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.DOTALL)
    assert blocks, f"no python block in {path}"
    return blocks[0]


def test_core_as_a_library_example_runs_and_evolves_past_the_seed(monkeypatch, capsys):
    for var in OPTIMIZER_ENV:  # the example's optimizer: rule-based when no endpoint is configured
        monkeypatch.delenv(var, raising=False)
    scope: dict = {}
    exec(compile(_first_python_block(LIBRARY_DOC), str(LIBRARY_DOC), "exec"), scope)
    coevo, env, best = scope["coevo"], scope["env"], scope["best"]
    assert coevo.last_step == scope["T"] and coevo.ledger.optimizer_calls > 0 and coevo.ledger.verification_rollouts > 0
    seed_quality, best_quality = env.quality(scope["SEARCH_R1_INSTRUCTION"]), env.quality(best.text)
    assert best.origin != "seed" and best_quality > seed_quality
    assert f"{seed_quality:.2f} -> {best_quality:.2f}" in capsys.readouterr().out


def test_load_config_takes_dotted_python_values_or_set_strings():
    config = inspo.load_config("cpu-tiny", overrides={"rl.steps": 3, "rl.report_to": ["tensorboard"],
                                                      "output_dir": "runs/x", "coevolution.population_size": 4})
    assert (config.rl.steps, config.rl.report_to, config.output_dir) == (3, ["tensorboard"], "runs/x")
    assert config.coevolution.population_size == 4
    assert inspo.load_config(overrides=["rl.steps=5"]).rl.steps == 5
    assert inspo.load_config().rl.steps == inspo.load_config("cpu-tiny").rl.steps
    with pytest.raises(ConfigError, match="rl.nope"):
        inspo.load_config(overrides={"rl.nope": 1})
    with pytest.raises(ConfigError, match="rl.steps must be a positive integer"):
        inspo.load_config(overrides={"rl.steps": 0})


def test_train_is_a_plain_function_whatever_was_imported_first():
    import inspo.config.train  # noqa: F401 - importing the training package must not hide the function
    from inspo import evaluate, evolve, load_config, train

    assert train is inspo.train is inspo.api.train and inspect.isfunction(train)
    assert (evaluate, evolve, load_config) == (inspo.api.evaluate, inspo.api.evolve, inspo.api.load_config)
    assert set(inspo.__all__) >= {"train", "evolve", "evaluate", "load_config"}


@pytest.mark.slow
def test_train_evaluate_and_evolve_from_python(tmp_path):
    pytest.importorskip("trl")
    import torch

    from inspo import evaluate, evolve, load_config, train

    config = load_config("cpu-tiny", overrides=[*TINY, f"output_dir={tmp_path / 'run'}", "rl.steps=1",
                                                "rl.save_steps=0"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = train(config, progress=False, reward_fn=scripted_reward)
        report = evaluate(config, policies=[summary.run_dir], instructions=["seed", summary.run_dir],
                          datasets=["world@test"], limit=2, progress=False, out=tmp_path / "eval")
    finally:
        torch.set_num_threads(threads)
    run = Path(summary.run_dir)
    assert summary.steps == 1 and (run / "model" / "config.json").is_file()
    assert summary.best_instruction == (run / "best_instruction.txt").read_text().strip()
    assert json.loads((run / "summary.json").read_text())["steps"] == 1
    assert (run / "report.html").is_file()  # the Python run writes its report as the CLI's does
    assert [(c.policy, c.instruction, c.dataset, c.n) for c in report.cells] == [
        ("trained(run)", "seed", "world@test", 2), ("trained(run)", "best(run)", "world@test", 2)]
    assert report.settings["agent"]["max_turns"] == 1  # the config's agent, not a default one
    assert (tmp_path / "eval" / "eval.json").is_file() and (tmp_path / "eval" / "eval.md").is_file()

    evolved = evolve(config, steps=2, engine=ScriptedPolicy(), out_dir=tmp_path / "evo", progress=False)
    assert evolved.steps == 2 and evolved.mode == "evolve" and (tmp_path / "evo" / "summary.json").is_file()
    assert (tmp_path / "evo" / "report.html").is_file()
