import json
from pathlib import Path

import pytest

from inspo.cli import main
from inspo.envs.search_r1 import SearchR1Env
from inspo.eval import (
    Dataset,
    EvalReport,
    NamedInstruction,
    parse_dataset,
    parse_instruction,
    run_eval,
    summarize,
)
from inspo.records import Instruction, Question, Rollout, ToolCall

Q = [Question("a", "Who?", ("Ann Lee",)), Question("b", "When?", ("1901",))]
#: Search-R1's environment, for its metrics (EM, F1, format failures) and its one tool.
ENV = SearchR1Env(retriever=None)


def ro(q, response, answer, searches=(), turns=1, reward=0.0):
    return Rollout(q, "i", response, answer=answer, tool_calls=[ToolCall("search", s) for s in searches], turns=turns,
                   reward=reward)


def test_summarize_hand_computed():
    rollouts = [
        ro(Q[0], "<search>x</search>\n\n<information>d</information>\n\n<answer>ann lee</answer>", "ann lee", ["x"], 2,
           reward=1.0),
        ro(Q[1], "I think 1901", None, [], 1),
    ]
    cell = summarize("p", "seed", "d", rollouts, env=ENV)
    assert (cell.n, cell.em, cell.tool_calls, cell.turns, cell.no_answer, cell.format_failures) == (
        2, 0.5, {"search": 0.5}, 1.5, 0.5, 0.5)
    assert cell.f1 == pytest.approx(0.5) and cell.reward == 0.5 and cell.calls == 0.5
    bare = summarize("p", "seed", "d", rollouts)  # without an environment: its reward and the calls made
    assert (bare.reward, bare.metrics, bare.tool_calls) == (0.5, {}, {"search": 0.5})


def test_run_eval_grid_and_outputs(tmp_path):
    def make_eval(bonus):
        def evaluate(instruction, questions):
            right = "good" in instruction.text or bonus
            return [ro(q, f"<answer>{q.answers[0] if right else 'x'}</answer>", q.answers[0] if right else "x",
                       reward=float(right)) for q in questions]
        return lambda: evaluate

    report = run_eval(
        [("base", make_eval(False)), ("trained", make_eval(True))],
        [NamedInstruction("seed", Instruction("s", "plain")), NamedInstruction("best", Instruction("b", "good"))],
        [Dataset("d1", tuple(Q)), Dataset("d2", tuple(Q[:1]))],
        env=ENV,
    )
    em = {(c.policy, c.instruction, c.dataset): c.em for c in report.cells}
    assert em[("base", "seed", "d1")] == 0.0 and em[("base", "best", "d1")] == 1.0 and em[("trained", "seed", "d2")] == 1.0
    assert len(report.cells) == 8 and len(report.averages()) == 4
    # one row per question and cell, in question order: what pairs two evaluations
    assert report.scores("trained", "seed", "d1") == [1.0, 1.0] and report.scores("base", "seed", "d1") == [0.0, 0.0]
    assert len(report.questions) == 12
    j, m = report.write(tmp_path)
    assert json.loads(j.read_text())["average"][0]["dataset"] == "average"
    rows = json.loads(j.read_text())["questions"]
    assert rows[0] == {"policy": "base", "instruction": "seed", "dataset": "d1", "question_id": "a", "reward": 0.0,
                       "metrics": {"em": 0.0, "f1": 0.0, "format_failures": 0.0}, "tool_calls": 0}
    assert report.scores("base", "best", "d1", metric="em") == [1.0, 1.0]
    assert "| base | seed | d1 | 2 | 0 | 0.000 |" in m.read_text()


def test_specs(tmp_path):
    assert parse_dataset("world@dev", limit=5).label == "world@dev" and len(parse_dataset("world@dev", limit=5).questions) == 5
    assert "Search" in parse_instruction("seed").instruction.text or "search" in parse_instruction("seed").instruction.text
    (tmp_path / "best_instruction.txt").write_text("Use <search> and <answer>.\n")
    assert parse_instruction(str(tmp_path)).instruction.text == "Use <search> and <answer>."
    exported = tmp_path / "agent"  # inspo export's folder: its instruction.txt
    exported.mkdir()
    (exported / "instruction.txt").write_text("Search first: <search> q </search>, then <answer>.\n")
    assert parse_instruction(str(exported)).instruction.text == "Search first: <search> q </search>, then <answer>."
    with pytest.raises(FileNotFoundError, match="expected 'seed'"):
        parse_instruction(str(tmp_path / "nope.txt"))
    assert isinstance(EvalReport().markdown(), str)


@pytest.mark.slow
def test_eval_command_with_a_real_model(tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(["eval", "--policy", "tiny-qwen2", "--instruction", "seed", "--dataset", "world@test",
                 "--limit", "3", "--max-turns", "2", "--max-response-tokens", "8", "--out", str(out), "--no-progress"])
    assert code == 0
    data = json.loads((out / "eval.json").read_text())
    assert data["cells"][0]["n"] == 3 and data["cells"][0]["policy"] == "tiny-qwen2"
    assert "| tiny-qwen2 | seed | world@test | 3 |" in capsys.readouterr().out


def test_grid_needs_a_finished_run(tmp_path, capsys):
    assert main(["eval", "--grid", str(tmp_path), "--no-progress"]) == 2
    assert "config.yaml" in capsys.readouterr().err


# ------------------------------------------- issue 11: eval measures the agent that was trained
class RecordingPolicy:
    """Text-only engine that searches every turn and never answers; records what it was asked."""

    keeps_token_ids = False

    def __init__(self, model):
        self.model = model
        self.calls = []  # (max_new_tokens, temperature, contexts)

    def prompt_text(self, messages):
        from inspo.engines.base import render_messages

        return render_messages(None, messages)

    def encode(self, text):
        return None

    def decode(self, ids):
        raise ValueError("text only")

    def generate(self, inputs, *, max_new_tokens, temperature, top_p, stop):
        from inspo.engines.base import Generation

        self.calls.append((max_new_tokens, temperature, [x.text for x in inputs]))
        return [Generation([], "who</search>" if x.text.endswith("<search>") else "<search>who</search>", "stop")
                for x in inputs]


@pytest.fixture
def engines(monkeypatch):
    """Every policy ``inspo eval`` loads becomes a RecordingPolicy (no model is loaded)."""
    from types import SimpleNamespace

    from inspo.engines.hf import HFEngine

    made = []

    def from_loaded(loaded, **kwargs):
        made.append(RecordingPolicy(loaded.name))
        return made[-1]

    monkeypatch.setattr("inspo.models.load_model", lambda name, **kwargs: SimpleNamespace(name=str(name)))
    monkeypatch.setattr("inspo.envs.build.resolve_model_dir", Path)  # any name is a model folder
    monkeypatch.setattr(HFEngine, "from_loaded", staticmethod(from_loaded))
    return made


def _trained_run(tmp_path):
    """A finished run directory whose config trains a short, prefilled, nudged agent."""
    from inspo.config.train import dump, resolve

    run = tmp_path / "run"
    (run / "model").mkdir(parents=True)
    (run / "best_instruction.txt").write_text("Search with <search> q </search>, answer with <answer> a </answer>.\n")
    config = resolve("cpu-tiny", overrides=["model.name_or_path=base-model", "rl.max_turns=1", "rl.max_response_tokens=7",
                                            "rl.prefill=<search>", "rl.last_turn_nudge=true", "env.topk=2"])
    (run / "config.yaml").write_text(dump(config))
    return run


def test_grid_evaluates_with_the_runs_agent_settings(tmp_path, engines):
    from inspo.envs.search_r1.protocol import LAST_TURN_NUDGE

    run, out = _trained_run(tmp_path), tmp_path / "eval"
    assert main(["eval", "--grid", str(run), "--limit", "3", "--out", str(out), "--no-progress"]) == 0
    assert [e.model for e in engines] == ["base-model", str(run / "model")]
    for engine in engines:
        assert {(tokens, temperature) for tokens, temperature, _ in engine.calls} == {(7, 0.0)}  # greedy
        first, final = engine.calls[0][2], engine.calls[-1][2]
        assert all(text.endswith("<search>") for text in first)  # the prefill opens the first turn
        assert all(text.endswith(LAST_TURN_NUDGE) for text in final)
    data = json.loads((out / "eval.json").read_text())
    # one search turn, then the final turn: max_turns 1 (the defaults would give 4 searches, 5 turns)
    assert {(c["turns"], c["tool_calls"]["search"], c["n"]) for c in data["cells"]} == {(2.0, 1.0, 3)}
    settings = data["settings"]
    assert settings["config"].startswith(f"{run}/config.yaml") and settings["overrides"] == []
    agent = settings["agent"]
    assert (agent["max_turns"], agent["max_response_tokens"], agent["prefill"], agent["last_turn_nudge"]) \
        == (1, 7, "<search>", True)
    assert (settings["env"]["name"], settings["env"]["topk"]) == ("search-r1", 2)  # the run's environment
    assert settings["questions"]["max_hops"] == 1  # cpu-tiny trains and tests on single-hop questions
    md = (out / "eval.md").read_text()
    assert "- overrides on top of it: none" in md and "prefill '<search>'" in md and "greedy" in md


def test_grid_plays_at_the_runs_dtype_unless_told(tmp_path, monkeypatch, engines):
    from types import SimpleNamespace

    from inspo.config.train import dump, resolve

    run = _trained_run(tmp_path)
    config = resolve("cpu-tiny", overrides=["model.name_or_path=base-model", "model.dtype=float32"])
    (run / "config.yaml").write_text(dump(config))  # a run trained in float32
    asked = []
    monkeypatch.setattr("inspo.models.load_model",
                        lambda name, **kw: asked.append(str(kw.get("dtype"))) or SimpleNamespace(name=str(name)))
    assert main(["eval", "--grid", str(run), "--limit", "1", "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert asked and all("float32" in d for d in asked)  # not --dtype auto's bfloat16
    asked.clear()
    assert main(["eval", "--grid", str(run), "--limit", "1", "--out", str(tmp_path / "b"), "--no-progress",
                 "--dtype", "bfloat16"]) == 0
    assert asked and all("bfloat16" in d for d in asked)


def test_eval_overrides_go_on_top_of_the_run_config_and_are_listed(tmp_path, engines):
    run, out = _trained_run(tmp_path), tmp_path / "eval"
    assert main(["eval", "--grid", str(run), "--limit", "2", "--out", str(out), "--no-progress",
                 "--set", "rl.max_turns=2", "--max-response-tokens", "9", "--set", "rl.prefill="]) == 0
    assert {tokens for e in engines for tokens, _, _ in e.calls} == {9}
    assert not any(text.endswith("<search>") for e in engines for text in e.calls[0][2])
    data = json.loads((out / "eval.json").read_text())
    assert {(c["turns"], c["tool_calls"]["search"]) for c in data["cells"]} == {(3.0, 2.0)}
    assert data["settings"]["overrides"] == [{"key": "rl.max_turns", "old": 1, "new": 2},
                                             {"key": "rl.max_response_tokens", "old": 7, "new": 9},
                                             {"key": "rl.prefill", "old": "<search>", "new": ""}]
    md = (out / "eval.md").read_text()
    assert "`rl.max_turns`: 1 -> 2; `rl.max_response_tokens`: 7 -> 9; `rl.prefill`: '<search>' -> ''" in md


def test_eval_without_a_run_uses_the_preset_and_refuses_preset_with_grid(tmp_path, engines, capsys, monkeypatch):
    from types import SimpleNamespace

    import inspo.models.precision as precision

    loads = []
    monkeypatch.setattr("inspo.models.load_model",
                        lambda name, **kwargs: loads.append(kwargs) or SimpleNamespace(name=str(name)))
    monkeypatch.setattr(precision, "probe_bf16", lambda device: precision.Bf16Support(False, "CPU AVX2: no fast bf16"))
    out = tmp_path / "eval"
    assert main(["eval", "--policy", "m", "--dataset", "world@dev", "--limit", "2", "--out", str(out),
                 "--no-progress"]) == 0
    written = json.loads((out / "eval.json").read_text())
    settings = written["settings"]
    assert settings["config"] == "preset cpu-tiny" and settings["agent"]["prefill"] == "<search>"  # what train trains
    assert written["provenance"]["versions"]["inspo"]
    assert written["provenance"]["command"].endswith(f"inspo eval --policy m --dataset world@dev --limit 2 --out {out} "
                                                     "--no-progress")  # what was run, not the test runner's argv
    assert f"(commit {str(written['provenance']['commit'])[:12]}" in (out / "eval.md").read_text()
    # --dtype auto (the default) is resolved once, recorded, and the model loads in what it names
    assert settings["precision"] == "weights float32, compute float32 (--dtype=auto; CPU AVX2: no fast bf16)"
    assert [load["dtype"] for load in loads] == ["float32"]
    assert main(["eval", "--grid", str(_trained_run(tmp_path)), "--preset", "paper", "--out", str(out)]) == 2
    assert "--grid evaluates with the run's config.yaml" in capsys.readouterr().err
