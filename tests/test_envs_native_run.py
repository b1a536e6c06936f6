"""A user's native-tool-call agent (issue 67 item 1), defined here: one typed tool whose schema
goes to Qwen2.5's chat template, trained two GRPO steps on the tiny random Qwen2, evolved,
evaluated, exported and asked through the public API, and named by file from the command line.

The tiny model writes noise, so each first turn is forced (``rl.prefill``, env_mask 0) to be the
native call ``<tool_call>{"name": "add", ...}</tool_call>``: each episode runs the tool once and
the test checks where its result went (a ``tool`` message of the template) and what the records say.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("trl")

import inspo  # noqa: E402
from inspo.records import Question  # noqa: E402
from test_envs_native import tiny_with_tools  # noqa: E402
from test_envs_user import OVERRIDES as USER_OVERRIDES  # noqa: E402

pytestmark = pytest.mark.slow

CALLS: list[tuple[int, int]] = []


def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: the first number
        b: the second number
    """
    CALLS.append((a, b))
    return a + b


SEED = "Answer the question; use the add tool for sums. Give the final number in <answer> </answer>."
QUESTIONS = {
    split: [Question(f"{split}-{i}", f"What is {i} plus {i + 3}?", (str(2 * i + 3),)) for i in range(start, start + n)]
    for split, start, n in (("train", 0, 8), ("dev", 10, 2), ("test", 20, 2))
}
PREFILL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
RESULT = "<tool_response>\n5\n</tool_response>"


def load_environment(**settings):
    """The factory ``env.name=tests/test_envs_native_run.py:load_environment`` names."""
    return inspo.NativeToolEnv(name="native-adder", tools=[add], seed_instruction=SEED, questions=QUESTIONS,
                               instructions={"terse": "Sum with the tool; answer in <answer> </answer>."})


#: test_envs_user's run, with the native call forced instead of the tag.
OVERRIDES = [o for o in USER_OVERRIDES if not o.startswith("rl.prefill=")] + [f"rl.prefill={PREFILL}"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import torch

    tiny_with_tools()
    torch.set_num_threads(1)
    CALLS.clear()
    out = tmp_path_factory.mktemp("native") / "run"
    config = inspo.load_config("cpu-tiny", overrides=[*OVERRIDES, f"output_dir={out}"])
    summary = inspo.train(config, env=load_environment(), progress=False)
    return config, summary, out


def test_training_calls_the_tool_natively_and_frames_its_result_as_the_template_does(trained):
    config, summary, out = trained
    assert CALLS and set(CALLS) == {(2, 3)}
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2] and all(m["rollout/add_calls"] == 1.0 for m in lines)
    buffer = json.loads((out / "inspo_state.json").read_text())["buffer"]["items"]
    assert buffer and all(RESULT in item["rollout"]["response"] for item in buffer)
    assert all(item["rollout"]["tool_calls"] == [{"tool": "add", "args": '{"a": 2, "b": 3}'}] for item in buffer)
    assert summary.tool_calls_start == 1.0


def test_the_exported_native_agent_asks_with_the_tools_in_its_prompt(trained):
    _, _, out = trained
    agent = inspo.load_agent(out / "agent", env=load_environment(), max_turns=1, max_response_tokens=4)
    answer = agent.ask("What is 2 plus 3?")
    assert answer.calls == [("add", '{"a": 2, "b": 3}')] and answer.turns[0].result == ["5"]
    assert '"name": "add"' in answer.rollout.response  # the call as the policy wrote it (forced)


def test_evolve_keeps_the_answer_tag_and_evaluate_plays_the_native_tool(trained, tmp_path):
    config, _, out = trained
    inspo.evolve(config, env=load_environment(), steps=2, out_dir=tmp_path / "evolve", progress=False)
    events = [json.loads(line) for line in (tmp_path / "evolve" / "events.jsonl").read_text().splitlines()]
    written = [e["text"] for e in events if e["kind"] == "rejected"]
    written += [e["instruction"]["text"] for e in events if e["kind"] == "admitted"]
    assert {"warmed_up", "proposed"} <= {e["kind"] for e in events}
    assert all("<answer>" in t for t in written)
    report = inspo.evaluate(config, env=load_environment(), policies=[str(out)], instructions=["seed"],
                            datasets=["env@test"], limit=2, progress=False, out=tmp_path / "eval")
    assert [(c.dataset, c.n, c.tool_calls) for c in report.cells] == [("native-adder@test", 2, {"add": 1.0})]


def test_the_cli_names_the_native_environment_by_file(tmp_path):
    from inspo.cli import main

    tiny_with_tools()
    spec = f"{Path(__file__).resolve()}:load_environment"
    assert main(["eval", "--env", spec, "--set", "model.dtype=float32", "--set", f"rl.prefill={PREFILL}",
                 "--policy", "tiny-qwen2", "--dataset", "env@test", "--instruction", "@terse", "--limit", "2",
                 "--max-turns", "1", "--max-response-tokens", "4", "--out", str(tmp_path / "eval"),
                 "--no-progress"]) == 0
    cells = json.loads((tmp_path / "eval" / "eval.json").read_text())["cells"]
    assert [(c["dataset"], c["tool_calls"]) for c in cells] == [("native-adder@test", {"add": 1.0})]
