"""Turn accounting of the rollout, as in Search-R1's ``run_llm_loop``: ``max_turns`` search
turns, then one final turn whose search is not executed; a turn without a valid action (no tag,
EOS, token cap) gets the invalid-action message and the episode goes on. Text-only scripted
policy (no model), so these run in milliseconds."""

from __future__ import annotations

import pytest

from agent_helpers import TurnScript
from inspo.envs.loop import FINISH_REASONS, AgentConfig, Episode, run_rollouts
from inspo.envs.search_r1 import SearchR1Env
from inspo.envs.search_r1.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    SEARCH_R1_INSTRUCTION,
    format_observation,
)
from inspo.records import Instruction, Passage, Question

SEED = Instruction("seed", SEARCH_R1_INSTRUCTION)


class Retriever:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def results(self, query: str, k: int) -> list[Passage]:
        return [Passage(f"{query}-{i}", f"T{i}", f"{query} text {i}") for i in range(k)]

    def search(self, queries, k=3):
        self.calls.append(list(queries))
        return [self.results(q, k) for q in queries]


def play(script, questions=("q0",), **config):
    engine, retriever = TurnScript(script), Retriever()
    episodes = [Episode(Question(q, q, ("yes",)), SEED) for q in questions]
    rollouts = run_rollouts(engine, SearchR1Env(retriever), AgentConfig(**config), episodes)
    return rollouts, engine, retriever


def test_max_turns_search_turns_then_one_final_turn_whose_search_is_not_executed():
    (r,), engine, retriever = play(lambda q, t: (f"<search>s{t}</search>", "stop"), max_turns=2)
    assert retriever.calls == [["s0"], ["s1"]]  # exactly max_turns executed searches
    assert (r.turns, r.calls_of("search"), r.finish_reason) == (3, ["s0", "s1"], "turn_limit")
    assert r.metrics["n_tool_calls"] == 2.0
    assert len(engine.contexts) == 3  # a third, final turn was generated
    obs = [format_observation(retriever.results(s, 3)) for s in ("s0", "s1")]
    assert r.response == f"<search>s0</search>{obs[0]}<search>s1</search>{obs[1]}<search>s2</search>"
    assert LAST_TURN_NUDGE not in r.response  # no nudge unless asked for
    assert r.answer is None and r.reward == 0.0


def test_answer_on_the_final_turn_counts():
    def script(q, t):
        return ("<search>x</search>", "stop") if t < 2 else ("<answer>yes</answer>", "stop")

    (r,), _, retriever = play(script, max_turns=2)
    assert (r.turns, r.finish_reason, r.answer, r.reward) == (3, "answer", "yes", 1.0)
    assert retriever.calls == [["x"], ["x"]]


def test_invalid_turns_get_the_invalid_action_message_and_the_episode_goes_on():
    # no tag, EOS without an answer, and the token cap: each is an invalid action, not an end
    script = {
        ("q0", 0): ("I am thinking", "stop"),
        ("q0", 1): ("I give up.", "eos"),
        ("q0", 2): ("word word word", "length"),
        ("q0", 3): ("<answer>yes</answer>", "stop"),
    }
    (r,), engine, retriever = play(lambda q, t: script[(q, t)], max_turns=3)
    assert (r.turns, r.finish_reason, r.answer) == (4, "answer", "yes")
    assert r.metrics["n_invalid"] == 3.0 and retriever.calls == []
    assert r.response == (
        "I am thinking" + INVALID_ACTION_MESSAGE + "I give up." + INVALID_ACTION_MESSAGE
        + "word word word" + INVALID_ACTION_MESSAGE + "<answer>yes</answer>"
    )
    # each turn was shown the corrective message written after the previous one
    assert engine.contexts[1][0].endswith("I am thinking" + INVALID_ACTION_MESSAGE)


@pytest.mark.parametrize(
    ("finish", "text", "reason"),
    [("eos", "no idea", "eos"), ("length", "word word", "length"),
     ("stop", "<search>more</search>", "turn_limit"), ("stop", "junk </answer>", "turn_limit")],
)
def test_finish_reason_without_an_answer_is_how_the_final_turn_ended(finish, text, reason):
    # turn 0 is invalid the same way; it does not end the episode, the final turn (1) does
    (r,), _, retriever = play(lambda q, t: (text, finish), max_turns=1)
    assert (r.turns, r.finish_reason, r.answer) == (2, reason, None)
    assert r.finish_reason in FINISH_REASONS
    assert r.calls_of("search") == (["more"] if text.startswith("<search>") else [])
    assert retriever.calls == ([["more"]] if text.startswith("<search>") else [])


def test_last_turn_nudge_is_an_option_written_before_the_final_turn():
    def script(q, t):
        if q == "q0":
            return ("<search>s</search>", "stop") if t == 0 else ("<answer>yes</answer>", "stop")
        return ("hmm", "stop") if t == 0 else ("<answer>no</answer>", "stop")

    default, _, _ = play(script, questions=("q0", "q1"), max_turns=1)
    assert all(LAST_TURN_NUDGE not in r.response for r in default)

    (searched, invalid), engine, retriever = play(
        script, questions=("q0", "q1"), max_turns=1, last_turn_nudge=True
    )
    obs = format_observation(retriever.results("s", 3))
    assert searched.response == "<search>s</search>" + obs + LAST_TURN_NUDGE + "<answer>yes</answer>"
    assert invalid.response == "hmm" + INVALID_ACTION_MESSAGE + LAST_TURN_NUDGE + "<answer>no</answer>"
    assert all(c.endswith(LAST_TURN_NUDGE) for c in engine.contexts[1])  # shown before the final turn
    assert (searched.answer, invalid.answer) == ("yes", "no")  # the nudge's tags never read as an answer

    # with more search turns, the nudge comes only after the last search turn
    (r,), _, _ = play(lambda q, t: ("<search>s</search>", "stop"), max_turns=3, last_turn_nudge=True)
    assert r.response.count(LAST_TURN_NUDGE) == 1
    assert r.response.endswith(LAST_TURN_NUDGE + "<search>s</search>")
