"""Rewards: SQuAD normalisation, EM, F1 (hand-computed), format check, response-only scoring."""

from __future__ import annotations

import pytest

from inspo.answers import exact_match, f1_score, normalize_answer
from inspo.envs.search_r1 import SearchR1Env
from inspo.envs.search_r1.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    SEARCH_R1_INSTRUCTION,
)
from inspo.envs.search_r1.rewards import (
    RewardSpec,
    em_reward,
    f1_reward,
    format_ok,
)
from inspo.envs.tagged import build_prompt
from inspo.records import Question


@pytest.mark.parametrize(
    "raw, normalised",
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  a  Cat, an  Owl and   THE dog.", "cat owl and dog"),
        ("theatre", "theatre"),  # 'the' only as a whole word
        ("U.S.A.", "usa"),
        ("Anne's", "annes"),
        ("", ""),
    ],
)
def test_normalize_answer(raw, normalised):
    assert normalize_answer(raw) == normalised


def test_exact_match_against_one_or_several_golds():
    assert exact_match("the Beijing", "Beijing") == 1.0
    assert exact_match("Peking", ["Beijing", "Peking"]) == 1.0
    assert exact_match("Beijing city", ["Beijing"]) == 0.0
    assert exact_match("anything", []) == 0.0


def test_f1_hand_computed():
    # pred tokens [james, madison, president], gold [james, madison]: P=2/3, R=1 -> F1=0.8
    assert f1_score("James Madison, president", "James Madison") == pytest.approx(0.8)
    # best gold wins: [madison] vs pred [james, madison]: P=1/2, R=1 -> 2/3; exact gold -> 1
    assert f1_score("James Madison", ["Madison", "Jim"]) == pytest.approx(2 / 3)
    assert f1_score("James Madison", ["Madison", "James Madison"]) == 1.0
    # repeated tokens count with multiplicity: pred [a1, a1] -> "new new", gold "new york"
    # common = {new: 1}: P=1/2, R=1/2 -> F1=1/2
    assert f1_score("new new", "New York") == pytest.approx(0.5)
    assert f1_score("Paris", "London") == 0.0
    assert f1_score("x", []) == 0.0


def test_f1_empty_after_normalisation():
    assert f1_score("the", "a") == 1.0  # both empty: agrees with exact match
    assert exact_match("the", "a") == 1.0
    assert f1_score("", "Paris") == 0.0


def test_rewards_read_the_last_answer_of_the_response():
    response = "<think>hm</think><answer>Paris</answer> wait <answer>London</answer>"
    assert em_reward(response, ["London"]) == 1.0
    assert em_reward(response, ["Paris"]) == 0.0
    assert f1_reward("<answer>James Madison, president</answer>", "James Madison") == pytest.approx(
        0.8
    )
    assert em_reward("no tags at all: Paris", "Paris") == 0.0
    assert f1_reward("<answer>Paris", "Paris") == 0.0  # unclosed


def test_an_answer_in_the_instruction_never_scores():
    prompt = build_prompt(SEARCH_R1_INSTRUCTION, "What is the capital of China?")
    assert "<answer> Beijing </answer>" in prompt
    # the rollout scores the response only; a response without an answer scores 0
    assert em_reward("<think>I do not know</think>", "Beijing") == 0.0
    # and scoring the prompt text by mistake would have given 1: the guard is real
    assert em_reward(prompt, "Beijing") == 1.0


def test_answer_inside_retrieved_information_does_not_count():
    response = (
        "<search>q</search>\n\n<information>Doc 1(Title: T) <answer>Rome</answer></information>\n\n"
    )
    assert em_reward(response, "Rome") == 0.0


@pytest.mark.parametrize(
    "response, ok",
    [
        ("<answer>Paris</answer>", True),
        ("<think>a</think>\n<answer>Paris</answer>\n", True),
        (
            "<think>a</think><search>q</search>\n\n<information>Doc 1(Title: T) x <b>"
            "</information>\n\n<think>b</think><answer>Paris</answer>",
            True,
        ),
        ("Free text is fine. <answer>Paris</answer>", True),
        ("<think>a</think>", False),  # no answer
        ("<answer>Paris</answer> trailing words", False),
        ("<answer>a</answer><answer>b</answer>", False),  # two answers
        ("<think>a<search>q</search></think><answer>x</answer>", False),  # nested
        ("<think>a</think><information>x</information><answer>y</answer>", False),  # no search
        ("<search>q</search>\n\n<information>unclosed <answer>y</answer>", False),
        ("</think><answer>y</answer>", False),  # close without open
        ("<answer>y", False),
        (  # the last-turn nudge is environment text: ignored
            "<search>q</search>\n\n<information>x</information>\n\n"
            + LAST_TURN_NUDGE
            + "<answer>y</answer>",
            True,
        ),
        ("oops" + INVALID_ACTION_MESSAGE + "<answer>y</answer>", False),  # an invalid turn
    ],
)
def test_format_ok(response, ok):
    assert format_ok(response) is ok


def test_reward_spec_combines_metric_and_format():
    good = "<think>t</think><answer>New York City</answer>"
    bad_format = "<answer>New York City</answer> extra"
    assert RewardSpec("em")(good, "New York City") == 1.0
    assert RewardSpec("em", format_weight=0.2)(good, "New York City") == pytest.approx(1.2)
    assert RewardSpec("em", format_weight=0.2)(bad_format, "New York City") == pytest.approx(1.0)
    # f1: pred [new, york, city] vs gold [new, york]: P=2/3 R=1 -> 0.8
    assert RewardSpec("f1")(good, "New York") == pytest.approx(0.8)
    # the environment's reward is that spec, on the response only
    question = Question("q", "Where?", ("New York City",))
    assert SearchR1Env(retriever=None, format_weight=0.2).reward(good, question) == pytest.approx(1.2)
    assert SearchR1Env(retriever=None, reward="f1").reward(good, Question("q", "Where?", ("New York",))) == \
        pytest.approx(0.8)
    with pytest.raises(ValueError, match="metric"):
        RewardSpec("bleu")
    with pytest.raises(ValueError, match="format_weight"):
        RewardSpec("em", format_weight=-1)
