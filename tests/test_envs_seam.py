"""The environment seam's rules for what a user brings: a tool that raises, hangs or floods; input a
tool refuses; an environment missing a part; an ``env.name`` that names nothing importable.

Episodes are played by a text-only scripted policy (no model), so these run in well under a
second each."""

from __future__ import annotations

import time
from typing import Literal, Optional

import pytest

from agent_helpers import TurnScript
from inspo.envs import TaggedToolEnv, make_env, tool
from inspo.envs.base import EnvError, check_environment
from inspo.envs.evaluate import make_evaluate
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.envs.registry import EnvNameError
from inspo.records import (
    EndpointDown,
    Instruction,
    Question,
    SetupError,
    ToolCall,
    TooManyErrors,
    scored,
)

SEED = "Look the word up with <lookup> word </lookup>; the result comes in <result> </result>. Answer in <answer> </answer>."
INS = Instruction("ins-0001", SEED)


def lookup(word: str) -> str:
    """The definition of a word."""
    return {"cat": "a small furry animal", "sun": "the star at the centre of the solar system"}.get(word, "unknown")


def _env(*tools, **kwargs) -> TaggedToolEnv:
    return TaggedToolEnv(name="dictionary", tools=list(tools) or [lookup], seed_instruction=SEED,
                         questions={"test": [Question("q1", "What is a cat?", ("animal",))]}, **kwargs)


def _play(env, script, questions=("What is a cat?",), **config):
    engine = TurnScript(script)
    agent = AgentConfig(**{"max_turns": 2, "max_response_tokens": 64, "max_obs_tokens": 64, "temperature": 0.0,
                           **config})
    episodes = [Episode(Question(f"q{i}", q, ("animal",)), INS) for i, q in enumerate(questions)]
    return run_rollouts(engine, env, agent, episodes), engine


def _call_then_answer(question, turn):
    return ("<lookup>cat</lookup>", "stop") if turn == 0 else ("<answer>animal</answer>", "stop")


def test_a_user_tool_runs_and_its_result_is_the_observation():
    [r], engine = _play(_env(), _call_then_answer)
    assert r.tool_calls == [ToolCall("lookup", "cat")] and r.calls_of("lookup") == ["cat"]
    assert "<result>a small furry animal</result>" in r.response
    assert engine.contexts[1][0].endswith("<result>a small furry animal</result>\n\n")  # what the policy read
    assert (r.finish_reason, r.answer, r.reward, r.error) == ("answer", "animal", 1.0, None)
    assert r.metrics["n_tool_calls"] == 1.0 and r.metrics["n_tool_errors"] == 0.0


def test_a_tool_that_raises_makes_an_error_rollout_never_scored():
    def broken(word: str) -> str:
        """Always fails."""
        raise RuntimeError("the dictionary file is gone")

    env = _env(tool(broken, name="lookup"))
    rollouts, _ = _play(env, _call_then_answer, questions=("What is a cat?", "What is the sun?"))
    for r in rollouts:
        assert r.finish_reason == "error" and r.reward == 0.0 and r.answer is None
        assert "tool 'lookup' raised RuntimeError: the dictionary file is gone" in r.error
    assert scored(rollouts) == []  # counted apart: never in a mean, a weight or the replay buffer
    evaluate = make_evaluate(TurnScript(_call_then_answer), env, AgentConfig(max_turns=2), max_error_rate=0.5)
    with pytest.raises(TooManyErrors, match="RuntimeError.*fix the tool \\(its traceback is in the log\\)"):
        evaluate(INS, [Question("q1", "What is a cat?", ("animal",))])


def test_a_tool_that_raises_leaves_its_traceback_in_the_log_once_a_turn(caplog):
    def broken(word: str) -> str:
        """Always fails."""
        raise RuntimeError("the dictionary file is gone")

    with caplog.at_level("WARNING", logger="inspo.envs"):
        _play(_env(tool(broken, name="lookup")), _call_then_answer, questions=("What is a cat?", "What is the sun?"))
    records = [r for r in caplog.records if "the dictionary file is gone" in r.getMessage()]
    assert len(records) == 1 and records[0].exc_info is not None
    assert "in broken" in caplog.text  # the traceback names the tool's own frame


def test_a_tool_that_hangs_is_cut_at_its_timeout():
    def slow(word: str) -> str:
        """Never answers in time."""
        time.sleep(5)
        return "late"

    env = _env(tool(slow, name="lookup", timeout_s=0.2))
    started = time.monotonic()
    [r], _ = _play(env, _call_then_answer)
    assert time.monotonic() - started < 3  # the episode did not wait for the tool
    assert r.finish_reason == "error" and "ran past its timeout of 0.2 s" in r.error


def test_a_tool_that_floods_is_capped_and_the_observation_stays_closed():
    def flood(word: str) -> str:
        """Returns a megabyte."""
        return "x" * 1_000_000

    env = _env(tool(flood, name="lookup", max_result_chars=5000))
    [r], engine = _play(env, _call_then_answer, max_obs_tokens=40)
    observation = env.observations(r.response)[0]
    assert observation.endswith("</result>") and len(observation) <= 40 * 4 + 20  # ~4 characters a token, no tokenizer
    assert r.metrics["n_obs_truncated"] == 1.0 and r.finish_reason == "answer"
    assert len(engine.contexts[1][0]) < 2000  # the policy was never shown the megabyte


def test_input_a_tool_refuses_is_an_observation_and_counted():
    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    env = TaggedToolEnv(name="adder", tools=[add], seed_instruction="Use <add> {\"a\": 1, \"b\": 2} </add>; "
                        "answer in <answer> </answer>.")

    def script(question, turn):
        return [("<add>two and three</add>", "stop"), ('<add>{"a": 2, "b": 3}</add>', "stop"),
                ("<answer>5</answer>", "stop")][turn]

    [r], _ = _play(env, script, max_turns=3)
    first, second = env.observations(r.response)
    assert 'add takes a JSON object {"a": an integer, "b": an integer}' in first  # says what it takes
    assert second == "<result>5</result>"
    assert r.error is None and r.answer == "5" and r.metrics["n_tool_errors"] == 1.0


def test_an_endpoint_down_in_a_tool_fails_the_batch_as_an_outage():
    def down(word: str) -> str:
        """A server that does not answer."""
        raise EndpointDown("dictionary server at http://127.0.0.1:9 did not answer")

    env = _env(tool(down, name="lookup"))
    evaluate = make_evaluate(TurnScript(_call_then_answer), env, AgentConfig(max_turns=2), batch_size=4)
    rollouts = evaluate(INS, [Question(f"q{i}", f"What is word {i}?", ("x",)) for i in range(3)])
    assert [r.finish_reason for r in rollouts] == ["error"] * 3
    assert all("EndpointDown" in r.error for r in rollouts)


def test_an_environment_missing_a_part_is_named():
    class Half:
        name = "half"
        seed_instruction = "Answer."
        tools = {}

        def parse(self, turn):
            return None

    with pytest.raises(EnvError) as info:
        check_environment(Half(), where="my_env:Half")
    message = str(info.value)
    assert "my_env:Half is missing" in message and "reward (reward(response, question) -> float)" in message
    assert "messages (" in message and "TaggedToolEnv" in message


def test_a_tool_without_a_docstring_or_with_varargs_is_refused():
    def bare(x: str) -> str:
        return x

    def many(*words: str) -> str:
        """Joins words."""
        return " ".join(words)

    with pytest.raises(ValueError, match="has no docstring"):
        tool(bare)
    with pytest.raises(ValueError, match=r"\*args and \*\*kwargs"):
        tool(many)


def test_tools_as_people_write_them_lists_dicts_literals_optionals_defaults_and_async():
    from inspo.envs.tools import Refusal, run_calls

    def convert(value: float, unit: Literal["km", "mi"], digits: int = 2,
                tags: Optional[list[int]] = None) -> str:  # noqa: UP045 - Optional as people write it
        """Convert a distance."""
        return f"{round(value * (1.609 if unit == 'mi' else 1.0), digits)} {tags}"

    t = tool(convert)
    assert run_calls(t, ['{"value": 2, "unit": "mi"}'])[0] == "3.22 None"  # defaults left out
    assert run_calls(t, ['{"value": 2, "unit": "km", "digits": 0, "tags": [1, "2"]}'])[0] == "2.0 [1, 2]"
    assert run_calls(t, ['{"value": 2, "unit": "km", "tags": null}'])[0] == "2.0 None"
    refused = run_calls(t, ['{"value": 2, "unit": "miles"}'])[0]
    assert isinstance(refused, Refusal) and '"unit": one of "km", "mi"' in refused
    assert '"digits": an integer (optional)' in refused and '"tags": a JSON list of an integer or null (optional)' in refused
    assert isinstance(run_calls(t, ['{"unit": "km"}'])[0], Refusal)  # a required one missing
    assert isinstance(run_calls(t, ['{"value": 2, "unit": "km", "tags": ["x"]}'])[0], Refusal)

    def total(numbers: list[float]) -> float:
        """Add numbers."""
        return sum(numbers)

    def greet(name: str = "world", times: int | None = None) -> str:
        """Say hello."""
        return f"hello {name}" * (times or 1)

    assert run_calls(tool(total), ["[1, 2.5]"]) == ["3.5"]
    assert isinstance(run_calls(tool(total), ["1, 2"])[0], Refusal)
    assert run_calls(tool(greet), ["", '{"name": "cat"}', '{"times": 2}']) == ["hello world", "hello cat",
                                                                              "hello worldhello world"]

    async def fetch(word: str) -> str:
        """Look a word up, asynchronously."""
        import asyncio

        await asyncio.sleep(0)
        return f"looked up {word}"

    assert run_calls(tool(fetch), ["cat"]) == ["looked up cat"]  # awaited, not '<coroutine object ...>'
    assert run_calls(tool(fetch, timeout_s=None), ["sun"]) == ["looked up sun"]
    [r], _ = _play(_env(tool(fetch, name="lookup")), _call_then_answer)
    assert "<result>looked up cat</result>" in r.response


def test_an_annotation_a_text_call_cannot_give_is_refused_when_the_tool_is_made():
    def odd(when: complex) -> str:
        """Takes a complex number."""
        return str(when)

    with pytest.raises(ValueError, match="parameter 'when' is annotated .*complex"):
        tool(odd)

    def unresolved(word: NoSuchType) -> str:  # noqa: F821 - the point: a name the module lacks
        """Takes a type nobody imported."""
        return word

    with pytest.raises(ValueError, match="annotations do not resolve .*NoSuchType"):
        tool(unresolved)


@pytest.mark.parametrize(("name", "says"), [
    ("calculatr", "the built-in environments are: search-r1, calculator"),
    ("no_such_module_xyz:load_environment", "importing 'no_such_module_xyz' failed: ModuleNotFoundError"),
    ("inspo.envs:no_such_factory", "module 'inspo.envs' has no attribute 'no_such_factory'"),
    ("missing/file.py:load", "no file missing/file.py"),
])
def test_an_env_name_that_names_nothing_is_refused_when_the_config_is_read(name, says):
    from inspo.config.train import resolve
    from inspo.core.config import ConfigError

    with pytest.raises(ConfigError) as info:
        resolve("cpu-tiny", overrides=[f"env.name={name}"])
    assert says in str(info.value)


def test_a_module_that_raises_on_import_shows_its_error(tmp_path):
    (tmp_path / "bad_env.py").write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(EnvNameError, match="importing .*bad_env.py.* failed: RuntimeError: boom at import"):
        make_env(f"{tmp_path / 'bad_env.py'}:load_environment")


def test_a_factory_that_fails_or_returns_no_environment_is_a_setup_error(tmp_path):
    from inspo.config.train import resolve
    from inspo.envs.build import build_env

    (tmp_path / "user_env.py").write_text(
        "def broken(**kw):\n    raise OSError('corpus missing: /data/x.jsonl')\n\n"
        "def nothing(**kw):\n    return object()\n")
    config = resolve("cpu-tiny", overrides=[f"env.name={tmp_path / 'user_env.py'}:broken", "env.corpus=/data/x.jsonl"])
    with pytest.raises(SetupError, match=r"cannot be built: OSError: corpus missing.*") as info:
        build_env(config)
    assert "env.corpus='/data/x.jsonl'" in str(info.value)
    config = resolve("cpu-tiny", overrides=[f"env.name={tmp_path / 'user_env.py'}:nothing"])
    with pytest.raises(SetupError, match="is missing: name"):
        build_env(config)


def test_a_factory_returning_none_says_so_and_a_bare_module_name_gets_a_suggestion(tmp_path, monkeypatch):
    import sys

    (tmp_path / "myagent.py").write_text(
        "def load_environment(**kw):\n    return None\n\n"
        "def helper():\n    pass\n")
    (tmp_path / "otheragent.py").write_text("def make_it(**kw):\n    return None\n")
    monkeypatch.chdir(tmp_path)
    for name in ("myagent", "otheragent"):  # these files, not a module another test imported by that name
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(EnvNameError, match=r"the factory returned None; it must return the environment"):
        make_env("myagent:load_environment")
    with pytest.raises(EnvNameError, match=r"did you mean myagent:load_environment\?"):
        make_env("myagent")
    with pytest.raises(EnvNameError, match=r"did you mean otheragent:make_it\?"):
        make_env("otheragent")
    with pytest.raises(EnvNameError, match=r"did you mean otheragent.py:make_it\?"):
        make_env("otheragent.py")
    with pytest.raises(EnvNameError) as info:
        make_env("nothing_here_xyz")
    assert "did you mean" not in str(info.value)


def test_a_preset_switched_to_another_environment_drops_the_old_ones_settings():
    from inspo.config.train import resolve

    config = resolve("cpu-tiny", overrides=["env.name=calculator", "env.steps=3"])
    assert config.env.name == "calculator" and config.env.options["steps"] == 3
    assert "corpus" not in config.env.options  # the preset's search-r1 corpus went with it


def test_a_config_files_prefill_survives_an_env_switch_but_one_for_a_named_env_does_not(tmp_path):
    import inspo
    from inspo.config.train import resolve

    mine = tmp_path / "mine.yaml"
    mine.write_text("rl:\n  prefill: <calc>\n  steps: 3\n")  # written for whichever env --env names
    config = resolve("cpu-tiny", mine, ["env.name=calculator"])
    assert config.rl.prefill == "<calc>" and config.rl.steps == 3
    assert resolve("cpu-tiny", None, ["rl.prefill=<calc>", "env.name=calculator"]).rl.prefill == "<calc>"
    assert inspo.load_config(overrides={"rl.prefill": "<calc>", "env.name": "calculator"}).rl.prefill == "<calc>"
    assert inspo.load_config(file=mine, overrides={"env.name": "calculator"}).rl.prefill == "<calc>"
    theirs = tmp_path / "theirs.yaml"
    theirs.write_text("env:\n  name: search-r1\nrl:\n  prefill: <search>\n")  # bound to search-r1
    assert resolve("cpu-tiny", theirs, ["env.name=calculator"]).rl.prefill == ""
    assert resolve("cpu-tiny", None, ["env.name=calculator"]).rl.prefill == ""  # the preset's <search> goes


def test_a_file_env_name_is_recorded_absolute_and_a_missing_module_says_where_to_run(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from inspo.config.train import resolve
    from inspo.trained.play import _build_env

    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "shop.py").write_text(
        "from inspo.envs.calculator.env import load_environment as calc\n\n"
        "def load_environment(**kw):\n    return calc(**kw)\n")
    monkeypatch.chdir(tmp_path)
    config = resolve("cpu-tiny", overrides=["env.name=agents/shop.py:load_environment", "rl.prefill="])
    assert config.env.name == f"{tmp_path / 'agents' / 'shop.py'}:load_environment"  # not relative to here
    settings = SimpleNamespace(env={"name": "no_such_shop:load_environment"}, env_name="no_such_shop:load_environment",
                               env_options={})
    with pytest.raises(ValueError, match="the module 'no_such_shop' must be importable here: run from the folder "
                                         "that holds no_such_shop.py, or add that folder to PYTHONPATH"):
        _build_env(settings, None)
    (tmp_path / "broken_dep.py").write_text("import no_such_dependency_xyz\n\ndef load_environment():\n    pass\n")
    with pytest.raises(EnvNameError) as info:  # a module that imports but lacks a dependency: no folder hint
        make_env("broken_dep:load_environment")
    assert "no_such_dependency_xyz" in str(info.value) and "must be importable here" not in str(info.value)


def test_a_prefill_that_opens_a_tag_the_environment_lacks_is_refused():
    from inspo.envs.build import check_prefill

    calculator = make_env("calculator")
    with pytest.raises(SetupError, match=r"rl.prefill='<search>' opens <search>, which the calculator"):
        check_prefill(calculator, "<search>")
    check_prefill(calculator, "<calc>")
    check_prefill(calculator, "<think>")
    check_prefill(calculator, "")


def test_switching_environment_resets_the_presets_prefill_unless_it_is_given():
    from inspo.config.train import resolve

    assert resolve("cpu-tiny").rl.prefill == "<search>"  # cpu-tiny is Search-R1's, its first search forced
    assert resolve("cpu-tiny", overrides=["env.name=calculator"]).rl.prefill == ""
    assert resolve("cpu-tiny", overrides=["env.name=calculator", "rl.prefill=<calc>"]).rl.prefill == "<calc>"
    assert resolve("cpu-tiny", overrides=["env.name=search-r1"]).rl.prefill == "<search>"  # the same environment


def test_an_observation_cap_that_leaves_no_room_for_the_result_is_warned_about(caplog):
    env = _env()
    [r], _ = _play(env, _call_then_answer, max_obs_tokens=20)  # no tokenizer: ~4 characters a token
    assert not [m for m in caplog.messages if "max_obs_tokens" in m]
    [r], _ = _play(env, _call_then_answer, max_obs_tokens=16, max_turns=1, last_turn_nudge=True)
    warned = [m for m in caplog.messages if "rl.max_obs_tokens=16 leaves" in m]
    assert len(warned) == 1 and "last-turn nudge" in warned[0]
