"""A played episode turn by turn (inspo.envs.transcript) and Agent.ask on a scripted policy with
real BM25 over the built-in world: no model, so fast."""

from __future__ import annotations

import random

from agent_helpers import TurnScript
from inspo.envs.loop import AgentConfig
from inspo.envs.search_r1 import SearchR1Env
from inspo.envs.search_r1.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    format_observation,
)
from inspo.envs.transcript import transcript_lines, turns_of
from inspo.records import Instruction, Passage, Question, Rollout, ToolCall
from inspo.trained.play import Agent
from inspo.trained.settings import AgentSettings

P1 = [Passage("a", "Alpha Town", "Alpha Town was founded in 1901."), Passage("b", "Beta", "Beta is a river.")]
P2 = [Passage("c", "Gamma Prize", "The Gamma Prize went to Ada.")]
ENV = SearchR1Env(retriever=None)  # the transcript reads the response; the retriever is never asked


def _rollout(response: str, *, searches: list[str], turns: int, answer: str | None, finish: str = "answer") -> Rollout:
    return Rollout(question=Question("q", "When was Alpha Town founded?", ("1901",)), instruction_id="ins-1",
                   response=response, answer=answer, tool_calls=[ToolCall("search", q) for q in searches],
                   turns=turns, finish_reason=finish)


def test_turns_are_split_at_what_the_environment_wrote():
    response = ("<think>I need the town.</think><search> Alpha Town </search>" + format_observation(P1)
                + "I am not sure" + INVALID_ACTION_MESSAGE
                + "<search>Gamma Prize</search>" + format_observation(P2) + LAST_TURN_NUDGE
                + "<think>It says 1901.</think> <answer> 1901 </answer>")
    rollout = _rollout(response, searches=["Alpha Town", "Gamma Prize"], turns=4, answer="1901")
    turns = turns_of(ENV, rollout)
    assert [(t.index, t.action, t.tool, t.content) for t in turns] == [
        (1, "call", "search", "Alpha Town"), (2, "invalid", "", ""), (3, "call", "search", "Gamma Prize"),
        (4, "answer", "", "1901")]
    assert turns[0].reasoning == "I need the town." and turns[3].reasoning == "It says 1901."
    # each call's result is read from the observation that followed it: the retrieved titles
    assert turns[0].result == ["1. Alpha Town", "2. Beta"] and turns[2].result == ["1. Gamma Prize"]
    assert [t.executed for t in turns] == [True, False, True, False]
    # the environment's messages (both name <answer> and </answer>) never read as the policy's turn
    assert all("I have used all my searches" not in t.text and "previous action is invalid" not in t.text
               for t in turns)
    lines = transcript_lines(turns, rollout)
    assert lines == ["turn 1", "  I need the town.", "  search: Alpha Town", "    1. Alpha Town", "    2. Beta",
                     "turn 2", "  I am not sure", "  (no tool call and no answer in this turn)",
                     "turn 3", "  search: Gamma Prize", "    1. Gamma Prize",
                     "turn 4", "  It says 1901.", "  answer: 1901", "final answer: 1901"]
    detailed = transcript_lines(turns_of(ENV, rollout, detail=11), rollout)
    assert detailed[3] == "    1. Alpha Town - Alpha Town"
    assert detailed[4] == "    2. Beta - Beta is a r"


def test_the_final_turns_search_is_not_run_and_no_answer_says_how_it_ended():
    response = "<search>Alpha</search>" + format_observation(P1) + "<search>again</search>"
    rollout = _rollout(response, searches=["Alpha"], turns=2, answer=None, finish="turn_limit")
    turns = turns_of(ENV, rollout)
    assert [(t.action, t.executed, len(t.result)) for t in turns] == [("call", True, 2), ("call", False, 0)]
    lines = transcript_lines(turns, rollout)
    assert "    (not run: the final turn may only answer)" in lines
    assert lines[-1] == "final answer: (none; the episode ended by turn_limit)"


def test_each_query_gets_its_own_passages_cut_to_topk():
    # what RecordingRetriever pinned before the environment seam (each query kept with its own
    # passages, top-k of the retriever's results, in order) now lives in the search tool and in
    # env.show, which reads them back from the observation the environment wrote
    class Fixed:
        def __init__(self):
            self.calls = []

        def search(self, queries, k=3):
            self.calls.append((list(queries), k))
            return [P1 if "Alpha" in q else P2 for q in queries]

    retriever = Fixed()
    env = SearchR1Env(retriever, topk=1)
    calls = [ToolCall("search", "Alpha"), ToolCall("search", "Gamma")]
    results = env.tools["search"].fn([c.args for c in calls])
    assert retriever.calls == [(["Alpha", "Gamma"], 1)]  # one batched call, asked for the top 1
    observations = [env.observe(c, r) for c, r in zip(calls, results, strict=True)]
    assert observations == [format_observation(P1[:1]), format_observation(P2)]
    assert [env.show(c, o) for c, o in zip(calls, observations, strict=True)] == [["1. Alpha Town"],
                                                                                  ["1. Gamma Prize"]]


def test_agent_ask_plays_the_rollout_engine_with_real_bm25_and_prints_every_turn():
    from inspo.retrieval.factory import load_retriever

    def script(question, turn):
        return [("<think>Look it up.</think><search>Venven Miselgol</search>", "stop"),
                ("<think>Found it.</think><answer>1950</answer>", "stop")][turn]

    retriever = load_retriever("bm25", corpus="world")
    env = SearchR1Env(retriever, topk=3)
    settings = AgentSettings(agent=AgentConfig(max_turns=2, temperature=0.0),
                             env={"name": "search-r1", "corpus": "world", "retriever": "bm25", "topk": 3})
    agent = Agent(TurnScript(script), env, Instruction("ins-7", "Search, then <answer> it </answer>."),
                  settings, rng=random.Random(0), notes=["policy:      scripted"])
    answer = agent.ask("  In which year was Venven Miselgol born?  ", answers=("1950",))
    titles = [p.title for p in retriever.search(["Venven Miselgol"], 3)[0]]
    shown = [f"{i}. {t}" for i, t in enumerate(titles, 1)]
    assert titles and answer.answer == "1950" and answer.rollout.reward == 1.0
    assert answer.searches == ["Venven Miselgol"] and answer.calls == [("search", "Venven Miselgol")]
    assert answer.turns[0].result == shown
    printed = str(answer)
    assert printed.splitlines() == ["question: In which year was Venven Miselgol born?", "turn 1", "  Look it up.",
                                    "  search: Venven Miselgol", *[f"    {line}" for line in shown],
                                    "turn 2", "  Found it.", "  answer: 1950", "final answer: 1950"]
    described = agent.describe()
    assert described[0] == "policy:      scripted"
    assert any(line.startswith("environment: search-r1") and "corpus='world'" in line and "retriever='bm25'" in line
               for line in described)
    second = agent.ask("Who founded Alpha Town?")  # each question's transcript is its own episode's
    assert second.turns[0].result == shown and second.rollout.question.id == "ask-2"
    assert second.rollout.calls_of("search") == ["Venven Miselgol"]


def test_a_title_holding_a_parenthesis_is_shown_whole():
    """``Doc 1(Title: Queen (band) members) ...`` cannot be read back from the text alone: the
    environment keeps the passages of the results it returned and names them exactly."""

    class One:
        def search(self, queries, k):
            return [[Passage("p1", "Queen (band) members", "They sang."), Passage("p2", "Other", "More.")]
                    for _ in queries]

    env = SearchR1Env(One(), topk=2)
    [observation] = env.tools["search"].fn(["queen"])
    shown = env.show(ToolCall("search", "queen"), env.observe(ToolCall("search", "queen"), observation), detail=10)
    assert shown == ["1. Queen (band) members - They sang.", "2. Other - More."]
    stranger = SearchR1Env(One(), topk=2)  # a result it never returned: read back from the text
    assert stranger.show(ToolCall("search", "x"), env.observe(ToolCall("search", "x"), observation))[1] == "2. Other"
