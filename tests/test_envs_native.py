"""Native tool calls (issue 67 item 1): the tools' schemas go to the chat template, the policy
calls them in its own ``<tool_call>`` format, results come back framed as the template frames a
``tool`` message. Pure parts first (schemas, parsing, the framing probe), then the loop on the
tiny random Qwen2 with Qwen2.5's real template, checked against the template's own rendering of
the same conversation."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from inspo.envs import FinalAnswer, NativeToolEnv, ToolCall, tool
from inspo.envs.native import QWEN_FORMAT, call_text, probe_format
from inspo.envs.tool_schema import arg_descriptions, tool_schema
from inspo.records import Question

SEED = "Answer the question with the tools. Give the final number in <answer> </answer>."
CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


def add(a: int, b: int = 1) -> int:
    """Add two whole numbers.

    Args:
        a: the first number
        b (int): the second
            number, one by default

    Returns:
        their sum
    """
    return a + b


def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


async def slow_double(n: int) -> int:
    """Double a number, asynchronously."""
    return 2 * n


def _env(**kw):
    questions = {"train": [Question("q0", "q0", ("5",))], "test": [Question("q1", "q1", ("5",))]}  # Scripted reads ids
    return NativeToolEnv(name="adder", tools=[add, shout, slow_double], seed_instruction=SEED, questions=questions, **kw)


# ---------------------------------------------------------------------------------------------- schemas
def test_a_schema_takes_the_types_the_defaults_and_the_docstrings_args():
    def pick(items: list[int], mode: Literal["min", "max"], scale: float | None = None,
             tags: dict[str, str] | None = None, flag: bool = False) -> int:
        """Pick one item.

        Args:
            items: the numbers
            mode: which end
        """
        return 0

    schema = tool_schema(tool(pick))
    assert schema["type"] == "function" and schema["function"]["description"] == "Pick one item."
    params = schema["function"]["parameters"]
    assert params["required"] == ["items", "mode"]
    assert params["properties"] == {
        "items": {"type": "array", "items": {"type": "integer"}, "description": "the numbers"},
        "mode": {"type": "string", "enum": ["min", "max"], "description": "which end"},
        "scale": {"type": "number", "nullable": True, "default": None},
        "tags": {"type": "object", "additionalProperties": {"type": "string"}, "nullable": True, "default": None},
        "flag": {"type": "boolean", "default": False},
    }
    assert arg_descriptions(add) == {"a": "the first number", "b": "the second number, one by default"}
    assert tool_schema(tool(shout))["function"]["parameters"] == {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def test_the_environment_names_each_schema_as_the_policy_calls_it():
    env = NativeToolEnv(name="x", tools={"plus": tool(add)}, seed_instruction=SEED)
    assert [s["function"]["name"] for s in env.tool_schemas] == ["plus"]
    assert env.stop == ("</tool_call>", "</answer>") and env.required_tags == ("answer",)
    assert env.protocol.tags == ("answer",) and "<answer>" in env.protocol.block
    with pytest.raises(ValueError, match="takes no result_tag"):
        NativeToolEnv(name="x", tools=[add], seed_instruction=SEED, result_tag="r")


# ---------------------------------------------------------------------------------------------- parsing
def test_a_turn_is_its_first_complete_tool_call_or_answer():
    env = _env()
    assert env.parse(CALL) == ToolCall("add", '{"a": 2, "b": 3}')
    assert env.parse("thinking... <answer>5</answer>" + CALL) == FinalAnswer("5")
    assert env.parse(CALL + "<answer>5</answer>") == ToolCall("add", '{"a": 2, "b": 3}')
    assert env.parse('<tool_call>{"name": "shout", "arguments": {"text": "hi"}}</tool_call>') == ToolCall("shout", "hi")
    # arguments as a JSON string, or absent; a one-parameter tool takes a misnamed single key
    assert env.parse('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1}"}</tool_call>') == ToolCall("add", '{"a": 1}')
    assert env.parse('<tool_call>{"name": "shout", "arguments": {"words": "hi"}}</tool_call>') == ToolCall("shout", "hi")
    assert env.parse('<tool_call>{"name": "slow_double", "arguments": {"n": 4}}</tool_call>') == ToolCall("slow_double", "4")
    # not JSON, no name, an unclosed call: invalid turns
    for bad in ("<tool_call>add(2, 3)</tool_call>", '<tool_call>{"arguments": {}}</tool_call>',
                '<tool_call>{"name": "add"', "just text"):
        assert env.parse(bad) is None, bad
    assert env.parse('<tool_call>{"name": "nope", "arguments": {"x": 1}}</tool_call>') == ToolCall("nope", '{"x": 1}')


def test_call_text_gives_each_tool_the_text_its_arguments_read():
    one, two = tool(shout), tool(add)
    assert call_text(one, {"text": "a b"}) == "a b" and call_text(one, {}) == ""
    assert call_text(two, {"a": 2}) == '{"a": 2}' and two.arguments(call_text(two, {"a": 2})) == ([], {"a": 2})
    assert call_text(one, "plain words") == "plain words" and call_text(None, {"k": [1]}) == '{"k": [1]}'


# ---------------------------------------------------------------------------------------------- framing
def test_the_probe_reads_a_templates_framing_and_refuses_one_without_tool_calls():
    def chatml(messages, generation):
        out = ""
        for m in messages:
            if m["role"] == "tool":
                out += f"<|im_start|>user\n<tool_response>\n{m['content']}\n</tool_response><|im_end|>\n"
            elif m.get("tool_calls"):
                call = m["tool_calls"][0]["function"]
                out += f"<|im_start|>assistant\n<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>\n"
            else:
                out += f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
        return out + ("<|im_start|>assistant\n" if generation else "")

    def shown(text):
        return text.replace("<|im_end|>", "").replace("<|im_start|>", "")

    fmt = probe_format(chatml, shown)
    assert (fmt.after_call, fmt.after_result) == (QWEN_FORMAT.after_call, QWEN_FORMAT.after_result)
    assert (fmt.shown_after_call, fmt.shown_after_result) == (QWEN_FORMAT.shown_after_call, QWEN_FORMAT.shown_after_result)

    def plain(messages, generation):
        return "".join(f"{m['role']}: {m.get('content', '')}\n" for m in messages)

    with pytest.raises(ValueError, match="does not write tool calls as <tool_call>.*TaggedToolEnv"):
        probe_format(plain, shown, source="plain")


def test_results_are_read_back_from_raw_and_decoded_responses():
    env = _env()
    call = ToolCall("add", '{"a": 2, "b": 3}')
    observation = env.observe(call, " 5 ")
    assert observation == "<|im_end|>\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert observation.endswith(env.closing(call)) and env.result_of(call, observation) == "5"
    decoded = CALL + "\nuser\n<tool_response>\n5\n</tool_response>\nassistant\n<answer>5</answer>"
    for response in (CALL + observation + "<answer>5</answer>", decoded):
        assert env.answer(response) == "5"
        assert [p for p, _ in env.split_turns(response)] == [CALL, "<answer>5</answer>"]
        assert len(env.observations(response)) == 1
    # a tool result that spells an answer is the environment's text, never the policy's answer
    assert env.answer(CALL + env.observe(call, "<answer>9</answer>")) is None


def test_an_engine_without_a_chat_template_is_refused_when_bound():
    class TextOnly:
        keeps_token_ids = False
        tokenizer = None

    with pytest.raises(ValueError, match="native tool calls, which need a policy engine .*TextOnly has none"):
        _env().bind_engine(TextOnly())


# ---------------------------------------------------------------------------------------------- the loop
def tiny_with_tools():
    """tiny-qwen2 with Qwen2.5's template (it takes tools); a skip where only SmolLM2's tokenizer is."""
    pytest.importorskip("transformers")
    from inspo.models import ModelNotInstalledError, load_model

    try:
        loaded = load_model("tiny-qwen2")
    except ModelNotInstalledError as exc:
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    if "tools" not in (loaded.tokenizer.chat_template or ""):
        pytest.skip("tiny-qwen2 took SmolLM2's tokenizer here (Qwen2.5's chunks are not installed): no tools template")
    return loaded


@pytest.fixture(scope="module")
def tiny():
    return tiny_with_tools()


def test_an_episode_is_exactly_the_conversation_the_template_renders(tiny, monkeypatch):
    from agent_helpers import Scripted
    from inspo.engines.hf import HFEngine
    from inspo.envs.loop import AgentConfig, Episode, run_rollouts
    from inspo.records import Instruction

    def script(qid, turn):
        return [CALL, "<answer>5</answer>"][turn]

    env = _env()
    monkeypatch.setattr(tiny.model, "generate", Scripted(tiny, script))
    engine = HFEngine(tiny.model, tiny.tokenizer)
    agent = AgentConfig(max_turns=2, max_response_tokens=40, max_obs_tokens=32, temperature=0.0)
    question = env.questions("test")[0]
    (rollout,) = run_rollouts(engine, env, agent, [Episode(question, Instruction("seed", SEED))])
    assert rollout.finish_reason == "answer" and rollout.reward == 1.0 and rollout.answer == "5"
    assert rollout.tool_calls == [ToolCall("add", '{"a": 2, "b": 3}')]
    conversation = [
        {"role": "user", "content": f"{SEED}\n\nQuestion: {question.question}"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
        {"role": "tool", "name": "add", "content": "5"},
        {"role": "assistant", "content": "<answer>5</answer>"},
    ]
    rendered = tiny.tokenizer.apply_chat_template(conversation, tools=env.tool_schemas, tokenize=False)
    played = tiny.tokenizer.decode(rollout.prompt_ids + rollout.completion_ids, skip_special_tokens=False)
    assert rendered.startswith(played) and rendered[len(played):] == "<|im_end|>\n"  # the policy's own EOS is next
    env_text = tiny.tokenizer.decode([i for i, m in zip(rollout.completion_ids, rollout.env_mask, strict=True) if not m],
                                     skip_special_tokens=False)
    assert env_text == env.observe(ToolCall("add", ""), "5")  # the mask is 0 on the framing and the result alone
    assert env.format.after_call == QWEN_FORMAT.after_call and env.format.shown_after_call == QWEN_FORMAT.shown_after_call


def test_an_async_tool_is_awaited_and_a_bad_call_gets_the_corrective_message(tiny, monkeypatch):
    from agent_helpers import Scripted
    from inspo.engines.hf import HFEngine
    from inspo.envs.loop import AgentConfig, Episode, run_rollouts
    from inspo.records import Instruction

    def script(qid, turn):
        return ['<tool_call>\n{"name": "slow_double", "arguments": {"n": 21}}\n</tool_call>',
                "<tool_call>double(4)</tool_call>", "<answer>42</answer>"][turn]

    env = _env()
    monkeypatch.setattr(tiny.model, "generate", Scripted(tiny, script))
    agent = AgentConfig(max_turns=3, max_response_tokens=40, max_obs_tokens=32, temperature=0.0)
    (rollout,) = run_rollouts(HFEngine(tiny.model, tiny.tokenizer), env, agent,
                              [Episode(Question("q2", "q2", ("42",)), Instruction("seed", SEED))])
    assert "<tool_response>\n42\n</tool_response>" in rollout.response  # awaited, not a coroutine's repr
    assert rollout.metrics["n_invalid"] == 1.0 and rollout.reward == 1.0
