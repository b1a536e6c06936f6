"""Rewards as a rubric (issue 67 item 4): weighted functions that see the whole episode, each
reported under its name, played by a scripted policy (no model)."""

from __future__ import annotations

import pytest

from agent_helpers import TurnScript
from inspo.envs import Criterion, Rubric, TaggedToolEnv
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.envs.rubric import episode_of
from inspo.records import Instruction, Question

SEED = "Look it up with <lookup> word </lookup>; answer in <answer> </answer>."


def lookup(word: str) -> str:
    """The definition of a word."""
    return {"cat": "a small furry animal"}.get(word, "unknown")


def correct(ep):
    return float(ep.answer is not None and ep.answer.lower() in ep.question.answers)


def looked_up_the_word(ep):
    return float(any("cat" in a for a in ep.calls_of("lookup")))


def read_a_result(ep):
    return float(any(r != "unknown" for r in ep.results))


RUBRIC = Rubric(correct, (looked_up_the_word, 0.25), Criterion("used_a_result", read_a_result, 0.0))


def _env():
    return TaggedToolEnv(name="dictionary", tools=[lookup], seed_instruction=SEED, reward=RUBRIC,
                         questions={"test": [Question("q1", "What is a cat?", ("animal",))]})


def _play(script):
    env = _env()
    agent = AgentConfig(max_turns=2, max_response_tokens=64, max_obs_tokens=64, temperature=0.0)
    episodes = [Episode(Question("q1", "What is a cat?", ("animal",)), Instruction("i", SEED))]
    [r] = run_rollouts(TurnScript(script), env, agent, episodes)
    return env, r


def test_the_reward_is_the_weighted_sum_and_each_function_is_a_metric():
    env, r = _play(lambda q, t: ("<lookup>cat</lookup>", "stop") if t == 0 else ("<answer>animal</answer>", "stop"))
    assert r.reward == pytest.approx(1.0 + 0.25)  # correct, looked it up; used_a_result weighs 0
    assert env.metrics(r) == {"correct": 1.0, "looked_up_the_word": 1.0, "used_a_result": 1.0}
    ep = episode_of(env, r.response, r.question)
    assert ep.calls_of("lookup") == ["cat"] and ep.results == ["a small furry animal"] and ep.answer == "animal"


def test_a_rubric_scores_an_episode_without_an_answer_too():
    env, r = _play(lambda q, t: ("<lookup>dog</lookup>", "stop") if t == 0 else ("I give up", "stop"))
    assert r.reward == 0.0 and env.metrics(r) == {"correct": 0.0, "looked_up_the_word": 0.0, "used_a_result": 0.0}
    env, r = _play(lambda q, t: ("<lookup>cat</lookup>", "stop") if t == 0 else ("no idea", "stop"))
    assert r.reward == pytest.approx(0.25)  # rewarded for the lookup alone: a single reward would say 0


def test_bad_rubrics_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="appear twice"):
        Rubric(correct, (correct, 0.5))
    with pytest.raises(ValueError, match="finite number"):
        Rubric((correct, float("nan")))
    with pytest.raises(TypeError, match="is not a reward function"):
        Rubric("correct")
    with pytest.raises(ValueError, match="at least one"):
        Rubric()


def test_a_rubric_function_that_raises_is_not_scored_as_zero():
    def broken(ep):
        raise KeyError("no such field")

    env = TaggedToolEnv(name="d", tools=[lookup], seed_instruction=SEED, reward=Rubric(broken))
    with pytest.raises(KeyError):
        env.reward("<answer>x</answer>", Question("q", "?", ("x",)))


def test_the_step_metrics_carry_each_rubric_function():
    from inspo.training.metrics import env_means

    env, r = _play(lambda q, t: ("<lookup>cat</lookup>", "stop") if t == 0 else ("<answer>animal</answer>", "stop"))
    _, wrong = _play(lambda q, t: ("<lookup>dog</lookup>", "stop") if t == 0 else ("<answer>bird</answer>", "stop"))
    assert env_means([r, wrong], env.metrics) == {"env/correct": 0.5, "env/looked_up_the_word": 0.5,
                                                  "env/used_a_result": 0.5}
