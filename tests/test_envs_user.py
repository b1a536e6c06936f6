"""A user's own agent, defined here and not in ``src/``: one tool as a typed function, a reward, a
dozen questions. Trained for two GRPO steps on the tiny random Qwen2, evolved, evaluated, exported
and asked, through the public API alone (``inspo.train/evolve/evaluate/load_agent``), and named by
``env.name=path/to/file.py:attr`` from the command line.

The tiny model writes noise, so every first turn is forced to call the tool with ``rl.prefill``
(forced text, env_mask 0): each episode then runs the user's tool exactly once, and the test can
check that the tool ran, where its result went and what every record says about it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

import inspo  # noqa: E402
from inspo.records import Question  # noqa: E402

pytestmark = pytest.mark.slow

CALLS: list[tuple[int, int]] = []


def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    CALLS.append((a, b))
    return a + b


SEED = ('Answer the question. Add numbers with <add> {"a": 1, "b": 2} </add>; the sum comes back in '
        "<result> </result>. Give the final number in <answer> </answer>.")
QUESTIONS = {
    split: [Question(f"{split}-{i}", f"What is {i} plus {i + 3}?", (str(2 * i + 3),)) for i in range(start, start + n)]
    for split, start, n in (("train", 0, 8), ("dev", 10, 2), ("test", 20, 2))
}
PREFILL = '<add> {"a": 2, "b": 3} </add>'


def within_ten(answer: str, question: Question) -> float:
    """1 for the exact sum, 0.5 within ten of it, else 0 (the reward reads the answer, never the prompt)."""
    try:
        value = int(answer.strip())
    except ValueError:
        return 0.0
    gold = int(question.answers[0])
    return 1.0 if value == gold else 0.5 if abs(value - gold) <= 10 else 0.0


def load_environment(**settings):
    """The factory ``env.name=tests/test_envs_user.py:load_environment`` names."""
    return inspo.TaggedToolEnv(name="adder", tools=[add], seed_instruction=SEED, questions=QUESTIONS,
                               reward=within_ten, metric="within_ten",
                               instructions={"terse": "Use <add> </add>, answer in <answer> </answer>."})


OVERRIDES = [
    "model.name_or_path=tiny-qwen2", "model.dtype=float32", "model.lora=false", "rl.bf16=false",
    "rl.steps=2", "rl.questions_per_step=2", "rl.group_size=2", "rl.micro_batch_size=4", "rl.max_turns=1",
    "rl.max_response_tokens=6", "rl.max_obs_tokens=32", "rl.learning_rate=0.01", "rl.save_steps=0",
    f"rl.prefill={PREFILL}", "rl.last_turn_nudge=false", "data.train=env", "data.eval=env",
    "data.max_eval_questions=2", "data.max_test_questions=2", "data.warmup_questions=2", "data.max_hops=0",
    "final_choice=dev", "offline_steps=2", "coevolution.population_size=2", "coevolution.prune_every=1",
    "coevolution.evolve_every=2", "coevolution.evolve_until=3", "coevolution.validation_size=2",
    "coevolution.candidates_per_call=2", "coevolution.max_rounds=1", "optimizer.kind=rule-based",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    CALLS.clear()
    out = tmp_path_factory.mktemp("user") / "run"
    config = inspo.load_config("cpu-tiny", overrides=[*OVERRIDES, f"output_dir={out}"])
    summary = inspo.train(config, env=load_environment(), progress=False)
    return config, summary, out


def test_training_plays_the_users_tool_and_records_its_environment(trained):
    config, summary, out = trained
    assert CALLS and set(CALLS) == {(2, 3)}  # the forced call ran the user's function
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2]
    for m in lines:
        assert m["rollout/add_calls"] == 1.0 and m["rollout/tool_calls"] == 1.0 and "rollout/search_calls" not in m
    recorded = (out / "config.yaml").read_text()
    assert "name: adder" in recorded and "python: true" in recorded
    assert summary.tool_calls_start == 1.0 and summary.evaluation["metric"] == "within_ten"
    buffer = json.loads((out / "inspo_state.json").read_text())["buffer"]["items"]
    observed = [item["rollout"]["response"] for item in buffer]
    assert observed and all("<result>5</result>" in r for r in observed)  # the tool's result, as env.observe wrote it
    assert all(item["rollout"]["tool_calls"] == [{"tool": "add", "args": '{"a": 2, "b": 3}'}] for item in buffer)


def test_the_exported_agent_records_the_environment_and_needs_it_back(trained):
    _, _, out = trained
    agent_dir = out / "agent"
    settings = json.loads((agent_dir / "agent.json").read_text())
    assert settings["schema_version"] == 2 and settings["env"] == {"name": "adder", "python": True}
    card = (agent_dir / "README.md").read_text()
    assert "`adder` (an object given in Python)" in card
    with pytest.raises(ValueError, match="given in Python .*pass it again"):
        inspo.load_agent(agent_dir)
    agent = inspo.load_agent(agent_dir, env=load_environment(), max_turns=1, max_response_tokens=4)
    answer = agent.ask("What is 2 plus 3?")
    assert answer.calls == [("add", '{"a": 2, "b": 3}')] and answer.turns[0].result == ["5"]
    assert "  add: {\"a\": 2, \"b\": 3}" in str(answer) and "    5" in str(answer).splitlines()
    assert answer.rollout.metrics["n_tool_calls"] == 1.0


def test_evolve_and_evaluate_take_the_environment_object(trained, tmp_path):
    config, _, out = trained
    evolved = inspo.evolve(config, env=load_environment(), steps=2, out_dir=tmp_path / "evolve", progress=False)
    events = [json.loads(line) for line in (tmp_path / "evolve" / "events.jsonl").read_text().splitlines()]
    assert {"warmed_up", "proposed", "verified"} <= {e["kind"] for e in events}
    assert evolved.tool_calls_end == 1.0
    written = [e["text"] for e in events if e["kind"] == "rejected"]
    written += [e["instruction"]["text"] for e in events if e["kind"] == "admitted"]
    assert written and all("<add>" in t and "</add>" in t and "<answer>" in t for t in written)  # the guard's tags
    # the offline reflector wrote the answer-level advice of a tagged environment, no search advice
    assert not any("search" in t.lower() for t in written)
    report = inspo.evaluate(config, env=load_environment(), policies=[str(out)], instructions=["seed", "@terse"],
                            datasets=["env@test"], limit=2, progress=False, out=tmp_path / "eval")
    assert [(c.instruction, c.dataset, c.n) for c in report.cells] == [("seed", "adder@test", 2), ("terse", "adder@test", 2)]
    assert all(c.tool_calls == {"add": 1.0} for c in report.cells)
    written = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert written["settings"]["env"] == {"name": "adder", "python": True}
    assert "| add calls |" in (tmp_path / "eval" / "eval.md").read_text()


def test_the_cli_names_the_users_environment_by_file(tmp_path, capsys):
    from inspo.cli import main

    spec = f"{Path(__file__).resolve()}:load_environment"
    assert main(["eval", "--env", spec, "--set", "model.dtype=float32", "--set", f"rl.prefill={PREFILL}",
                 "--policy", "tiny-qwen2", "--dataset", "env@test", "--instruction", "@terse", "--limit", "2",
                 "--max-turns", "1", "--max-response-tokens", "4", "--out", str(tmp_path / "eval"),
                 "--no-progress"]) == 0
    cells = json.loads((tmp_path / "eval" / "eval.json").read_text())["cells"]
    assert [(c["dataset"], c["instruction"], c["tool_calls"]) for c in cells] == [("adder@test", "terse", {"add": 1.0})]
    assert main(["eval", "--env", f"{tmp_path / 'nowhere.py'}:load_environment", "--policy", "tiny-qwen2"]) == 2
    assert "no file" in capsys.readouterr().err
