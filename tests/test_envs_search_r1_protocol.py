"""The Search-R1 tag contract: prompt building, action parsing, answer extraction, observations."""

from __future__ import annotations

import pytest

from inspo.engines.base import render_messages
from inspo.envs.base import FinalAnswer
from inspo.envs.search_r1 import SearchR1Env
from inspo.envs.search_r1.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    SEARCH_R1_INSTRUCTION,
    extract_answer,
    format_observation,
    format_passages,
    parse_action,
    strip_environment_text,
)
from inspo.envs.tagged import build_prompt
from inspo.records import Passage, Question, ToolCall


def test_seed_instruction_is_app_f_text():
    assert SEARCH_R1_INSTRUCTION.startswith("Answer the given question. You must conduct reasoning")
    assert SEARCH_R1_INSTRUCTION.endswith("For example, <answer> Beijing </answer>.")
    for tag in ("<think>", "</think>", "<search>", "</search>", "<information>", "</information>"):
        assert tag in SEARCH_R1_INSTRUCTION
    assert "{question}" not in SEARCH_R1_INSTRUCTION


def test_build_prompt_appends_or_places_the_question():
    prompt = build_prompt(SEARCH_R1_INSTRUCTION, "  Who founded Citibank? ")
    assert prompt == SEARCH_R1_INSTRUCTION + "\n\nQuestion: Who founded Citibank?"
    placed = build_prompt("Q first: {question}. Use {braces} freely.", "Why?")
    assert placed == "Q first: Why?. Use {braces} freely."
    with pytest.raises(ValueError, match="instruction is empty"):
        build_prompt("  ", "Why?")


class _ChatTokenizer:
    chat_template = "fake"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        (msg,) = messages
        return f"<user>{msg['content']}</user><assistant>"


class _PlainTokenizer:
    chat_template = None


def _chat(tokenizer, instruction, question):
    env = SearchR1Env(retriever=None)
    return render_messages(tokenizer, env.messages(instruction, Question("q", question, ("a",))))


def test_build_chat_uses_the_template_when_there_is_one():
    assert _chat(_ChatTokenizer(), "Do it.", "Why?") == (
        "<user>Do it.\n\nQuestion: Why?</user><assistant>"
    )
    assert _chat(_PlainTokenizer(), "Do it.", "Why?") == "Do it.\n\nQuestion: Why?"
    assert _chat(None, "Do it.", "Why?") == "Do it.\n\nQuestion: Why?"


@pytest.mark.parametrize(
    "text, action",
    [
        (
            "<think>x</think>\n<search> capital of France </search>",
            ToolCall("search", "capital of France"),
        ),
        ("<answer> Paris </answer>", FinalAnswer("Paris")),
        ("<search>a\nb</search>", ToolCall("search", "a\nb")),
        ("<search>first</search> <answer>second</answer>", ToolCall("search", "first")),
        ("<answer>x</answer><search>y</search>", FinalAnswer("x")),
        ("I think the answer is Paris.", None),
        ("<search>unclosed", None),
        ("<search>mismatched</answer>", None),
        ("stray </search>", None),
        ("<answer></answer>", FinalAnswer("")),
    ],
)
def test_parse_action(text, action):
    assert parse_action(text) == action
    assert SearchR1Env(retriever=None).parse(text) == action  # the environment parses turns the same way


@pytest.mark.parametrize(
    "response, answer",
    [
        ("no tags here", None),
        ("<answer> Paris </answer>", "Paris"),
        ("<answer>a</answer> then <answer>b</answer>", "b"),  # several -> last
        ("<answer>a</answer> then <answer>b", "a"),  # trailing unclosed ignored
        ("<answer>unclosed", None),
        ("<answer>a<answer>b</answer></answer>", "b"),  # nested -> innermost pair
        ("</answer>x<answer>", None),  # reversed
        ("<answer></answer>", ""),
        ("<Answer>x</Answer>", None),  # case-sensitive
        ("<answer>multi\nline</answer>", "multi\nline"),
        ("<information><answer>doc</answer></information>", None),  # retrieved text ignored
        ("<information><answer>doc</answer></information><answer>mine</answer>", "mine"),
    ],
)
def test_extract_answer(response, answer):
    assert extract_answer(response) == answer
    assert SearchR1Env(retriever=None).answer(response) == answer


def test_extract_answer_ignores_the_environment_messages():
    # both fixed messages mention "<answer> and </answer>": that is not the answer "and"
    assert "<answer> and </answer>" in INVALID_ACTION_MESSAGE
    assert "<answer> and </answer>" in LAST_TURN_NUDGE
    response = "hmm" + INVALID_ACTION_MESSAGE + "<search>q</search>" + LAST_TURN_NUDGE + "<search>"
    assert extract_answer(response) is None
    assert (
        extract_answer(response + "x</search>" + LAST_TURN_NUDGE + "<answer>Rome</answer>")
        == "Rome"
    )
    assert strip_environment_text(response) == "hmm <search>q</search> <search>"


def test_extract_answer_ignores_the_instruction_example_when_given_the_response_only():
    prompt = build_prompt(SEARCH_R1_INSTRUCTION, "Capital of China?")
    response = "<think>I will guess.</think>"
    assert extract_answer(prompt) == "Beijing"  # the trap, if the prompt were scored
    assert extract_answer(response) is None


def test_observation_matches_search_r1_format():
    passages = [Passage("1", "Citibank", "founded in 1812."), Passage("2", "War of 1812", "x y")]
    assert format_passages(passages) == (
        "Doc 1(Title: Citibank) founded in 1812.\nDoc 2(Title: War of 1812) x y\n"
    )
    assert format_observation(passages) == (
        "\n\n<information>Doc 1(Title: Citibank) founded in 1812.\n"
        "Doc 2(Title: War of 1812) x y</information>\n\n"
    )
    assert format_observation([]) == "\n\n<information></information>\n\n"
    # what the environment writes after a search is that observation, ending with its closing text
    env = SearchR1Env(retriever=None)
    call = ToolCall("search", "q")
    assert env.observe(call, format_passages(passages)) == format_observation(passages)
    assert format_observation(passages).endswith(env.closing(call))


def test_invalid_action_message_names_both_tags():
    assert "<search> and </search>" in INVALID_ACTION_MESSAGE
    assert "<answer> and </answer>" in INVALID_ACTION_MESSAGE
