"""State per episode (issue 67 item 2): an instance a episode, its public methods the tools,
reset and close around it, and the final state seen by a rubric. Played by a scripted policy."""

from __future__ import annotations

import pytest

from agent_helpers import TurnScript
from inspo.envs import Rubric, TaggedToolEnv
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.records import Instruction, Question

SEED = "Add coins with <deposit> n </deposit>, read with <balance></balance>, answer in <answer> </answer>."


class Piggy:
    """A piggy bank per episode."""

    opened: list[Piggy] = []  # every instance made (class-level: the test reads it)

    def __init__(self):
        self.coins = 0
        self.closed = False
        self.question = None
        Piggy.opened.append(self)

    def reset(self, question):
        self.question = question.id
        self.coins = int(question.meta.get("start", 0))

    def deposit(self, n: int) -> str:
        """Put n coins in; says the new total."""
        self.coins += n
        return f"now {self.coins}"

    def balance(self) -> int:
        """How many coins are in."""
        return self.coins

    def close(self):
        self.closed = True


def reached_ten(ep):
    return float(ep.state.coins >= 10)


def _env(**kw):
    return TaggedToolEnv(name="piggy", tools=[], seed_instruction=SEED, **{"state": Piggy, **kw})


def _play(env, script, questions):
    agent = AgentConfig(max_turns=3, max_response_tokens=64, max_obs_tokens=64, temperature=0.0)
    episodes = [Episode(q, Instruction("i", SEED)) for q in questions]
    return run_rollouts(TurnScript(script), env, agent, episodes)


def test_each_episode_gets_its_own_instance_reset_for_its_question_and_closed():
    Piggy.opened.clear()
    env = _env(reward=Rubric(reached_ten))
    assert set(env.tools) == {"deposit", "balance"}  # the public methods, not reset or close

    def script(question, turn):
        return [("<deposit>4</deposit>", "stop"), ("<deposit>4</deposit>", "stop"),
                ("<balance></balance>", "stop"), ("<answer>done</answer>", "stop")][turn]

    qs = [Question("a", "Bank a?", ("x",), meta={"start": 0}), Question("b", "Bank b?", ("x",), meta={"start": 5})]
    a, b = _play(env, script, qs)
    assert [p.question for p in Piggy.opened] == ["a", "b"] and all(p.closed for p in Piggy.opened)
    assert "<result>now 8</result>" in a.response and "<result>8</result>" in a.response
    assert "<result>now 13</result>" in b.response  # b's own bank, started at 5: calls never shared
    assert (a.reward, b.reward) == (0.0, 1.0)  # the rubric read each bank's final state
    assert env.metrics(b) == {"reached_ten": 1.0} and b.metrics["rubric/reached_ten"] == 1.0


def test_instances_are_closed_when_the_engine_fails():
    Piggy.opened.clear()

    def boom(question, turn):
        raise RuntimeError("engine down")

    with pytest.raises(RuntimeError, match="engine down"):
        _play(_env(), boom, [Question("a", "?", ("x",))])
    assert Piggy.opened and all(p.closed for p in Piggy.opened)


def test_a_state_class_must_offer_tools_with_docstrings():
    class Empty:
        def reset(self):
            pass

    class Bare:
        def poke(self) -> str:
            return "ouch"

    with pytest.raises(ValueError, match="no public method"):
        _env(state=Empty)
    with pytest.raises(ValueError, match="has no docstring"):
        TaggedToolEnv(name="x", tools=[], state=Bare, seed_instruction=SEED)
    with pytest.raises(TypeError, match="give a class"):
        TaggedToolEnv(name="x", tools=[], state=Piggy(), seed_instruction=SEED)


def load_environment(**settings):
    """The factory ``env.name=tests/test_envs_state.py:load_environment`` names (the CLI test)."""
    questions = {split: [Question(f"{split[:2]}{i}", f"Bank {i}?", ("x",), meta={"start": 6 * i}) for i in range(n)]
                 for split, n in (("train", 4), ("dev", 2), ("test", 2))}
    return TaggedToolEnv(name="piggy", tools=[], seed_instruction=SEED, state=Piggy, questions=questions,
                         reward=Rubric(reached_ten), metric="reached_ten")


@pytest.mark.slow
def test_the_cli_evaluates_a_stateful_environment_named_by_file(tmp_path):
    pytest.importorskip("transformers")
    from pathlib import Path

    from inspo.cli import main

    spec = f"{Path(__file__).resolve()}:load_environment"  # loaded apart by the CLI: its own Piggy class
    assert main(["eval", "--env", spec, "--set", "model.dtype=float32", "--set", "rl.prefill=<deposit>4</deposit>",
                 "--policy", "tiny-qwen2", "--dataset", "env@test", "--limit", "2", "--max-turns", "1",
                 "--max-response-tokens", "4", "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    import json

    (cell,) = json.loads((tmp_path / "eval" / "eval.json").read_text())["cells"]
    assert cell["dataset"] == "piggy@test" and cell["tool_calls"] == {"deposit": 1.0, "balance": 0.0}
    # each episode's own bank, reset from its question (0 + 4, 6 + 4): only the second reaches ten
    assert cell["reward"] == 0.5 and cell["n"] == 2


@pytest.mark.slow
def test_a_stateful_environment_trains_evolves_and_is_asked_through_the_api(tmp_path):
    """Two GRPO steps on the tiny random Qwen2 with an instance an episode (the first turn forced to
    deposit 4), then evolve and ask: every episode's bank is its own, and the rubric reads it."""
    pytest.importorskip("trl")
    import json

    import inspo
    from test_envs_user import OVERRIDES

    overrides = [o for o in OVERRIDES if not o.startswith("rl.prefill=")] + ["rl.prefill=<deposit>4</deposit>",
                                                                             f"output_dir={tmp_path / 'run'}"]
    config = inspo.load_config("cpu-tiny", overrides=overrides)
    Piggy.opened.clear()
    inspo.train(config, env=load_environment(), progress=False)
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in lines] == [1, 2] and all(m["rollout/deposit_calls"] == 1.0 for m in lines)
    assert all("env/reached_ten" in m for m in lines)  # the rubric's function, reported apart
    assert Piggy.opened and all(p.closed for p in Piggy.opened)
    # each bank is its question's start (0, 6, 12, 18) plus the one forced deposit: never shared
    assert {p.coins for p in Piggy.opened if p.question and p.question.startswith("tr")} <= {4, 10, 16, 22}
    evolved = inspo.evolve(config, env=load_environment(), steps=2, out_dir=tmp_path / "evolve", progress=False)
    assert evolved.tool_calls_end == 1.0
    agent = inspo.load_agent(tmp_path / "run" / "agent", env=load_environment(), max_turns=1, max_response_tokens=4)
    answer = agent.ask("Bank 1?")
    assert answer.calls == [("deposit", "4")] and answer.turns[0].result == ["now 4"]  # a fresh bank
