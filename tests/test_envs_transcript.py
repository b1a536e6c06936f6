"""A played episode turn by turn (inspo.agent.transcript) and Agent.ask on a scripted policy with
real BM25 over the built-in world: no model, so fast."""

from __future__ import annotations

import random

from agent_helpers import TurnScript
from inspo.agent.protocol import INVALID_ACTION_MESSAGE, LAST_TURN_NUDGE, format_observation
from inspo.agent.rollout import AgentConfig
from inspo.agent.transcript import RecordingRetriever, transcript_lines, turns_of
from inspo.records import Instruction, Passage, Question, Rollout
from inspo.trained.play import Agent
from inspo.trained.settings import AgentSettings, RetrieverSettings

P1 = [Passage("a", "Alpha Town", "Alpha Town was founded in 1901."), Passage("b", "Beta", "Beta is a river.")]
P2 = [Passage("c", "Gamma Prize", "The Gamma Prize went to Ada.")]


def _rollout(response: str, *, searches: list[str], turns: int, answer: str | None, finish: str = "answer") -> Rollout:
    return Rollout(question=Question("q", "When was Alpha Town founded?", ("1901",)), instruction_id="ins-1",
                   response=response, answer=answer, searches=searches, turns=turns, finish_reason=finish)


def test_turns_are_split_at_what_the_environment_wrote():
    response = ("<think>I need the town.</think><search> Alpha Town </search>" + format_observation(P1)
                + "I am not sure" + INVALID_ACTION_MESSAGE
                + "<search>Gamma Prize</search>" + format_observation(P2) + LAST_TURN_NUDGE
                + "<think>It says 1901.</think> <answer> 1901 </answer>")
    rollout = _rollout(response, searches=["Alpha Town", "Gamma Prize"], turns=4, answer="1901")
    turns = turns_of(rollout, [P1, P2])
    assert [(t.index, t.action, t.content) for t in turns] == [
        (1, "search", "Alpha Town"), (2, "invalid", ""), (3, "search", "Gamma Prize"), (4, "answer", "1901")]
    assert turns[0].reasoning == "I need the town." and turns[3].reasoning == "It says 1901."
    assert [p.title for p in turns[0].passages] == ["Alpha Town", "Beta"] and turns[2].passages == P2
    # the environment's messages (both name <answer> and </answer>) never read as the policy's turn
    assert all("I have used all my searches" not in t.text and "previous action is invalid" not in t.text
               for t in turns)
    lines = transcript_lines(turns, rollout)
    assert lines == ["turn 1", "  I need the town.", "  search: Alpha Town", "    1. Alpha Town", "    2. Beta",
                     "turn 2", "  I am not sure", "  (no <search> or <answer> in this turn)",
                     "turn 3", "  search: Gamma Prize", "    1. Gamma Prize",
                     "turn 4", "  It says 1901.", "  answer: 1901", "final answer: 1901"]
    assert transcript_lines(turns, rollout, passage_chars=11)[3] == "    1. Alpha Town - Alpha Town"


def test_the_final_turns_search_is_not_run_and_no_answer_says_how_it_ended():
    response = "<search>Alpha</search>" + format_observation(P1) + "<search>again</search>"
    rollout = _rollout(response, searches=["Alpha"], turns=2, answer=None, finish="turn_limit")
    turns = turns_of(rollout, [P1])
    assert [(t.action, t.executed, len(t.passages)) for t in turns] == [("search", True, 2), ("search", False, 0)]
    lines = transcript_lines(turns, rollout)
    assert "    (not run: the final turn may only answer)" in lines
    assert lines[-1] == "final answer: (none; the episode ended by turn_limit)"


def test_recording_retriever_keeps_each_query_and_its_passages():
    class Fixed:
        def search(self, queries, k=3):
            return [P1 if "Alpha" in q else P2 for q in queries]

    rec = RecordingRetriever(Fixed())
    assert rec.search(["Alpha", "Gamma"], 1) == [P1, P2]  # the inner results, as they are
    assert rec.take() == [("Alpha", P1[:1]), ("Gamma", P2)] and rec.take() == []


def test_agent_ask_plays_the_rollout_engine_with_real_bm25_and_prints_every_turn():
    from inspo.retrieval.factory import load_retriever

    def script(question, turn):
        return [("<think>Look it up.</think><search>Venven Miselgol</search>", "stop"),
                ("<think>Found it.</think><answer>1950</answer>", "stop")][turn]

    retriever = load_retriever("bm25", corpus="world")
    settings = AgentSettings(agent=AgentConfig(max_turns=2, temperature=0.0, topk=3), retriever=RetrieverSettings())
    agent = Agent(TurnScript(script), retriever, Instruction("ins-7", "Search, then <answer> it </answer>."),
                  settings, rng=random.Random(0), notes=["policy:      scripted"])
    answer = agent.ask("  In which year was Venven Miselgol born?  ", answers=("1950",))
    titles = [p.title for p in retriever.search(["Venven Miselgol"], 3)[0]]
    assert titles and answer.answer == "1950" and answer.rollout.reward == 1.0
    assert answer.searches == ["Venven Miselgol"] and [p.title for p in answer.turns[0].passages] == titles
    printed = str(answer)
    assert printed.splitlines() == ["question: In which year was Venven Miselgol born?", "turn 1", "  Look it up.",
                                    "  search: Venven Miselgol", *[f"    {i}. {t}" for i, t in enumerate(titles, 1)],
                                    "turn 2", "  Found it.", "  answer: 1950", "final answer: 1950"]
    assert agent.describe()[0] == "policy:      scripted" and any(line.startswith("retriever:   bm25 over world")
                                                                    for line in agent.describe())
    second = agent.ask("Who founded Alpha Town?")  # the recorder starts afresh for every question
    assert [p.title for p in second.turns[0].passages] == titles and second.rollout.question.id == "ask-2"
