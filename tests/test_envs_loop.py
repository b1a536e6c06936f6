"""The episode loop (run_rollouts) in the search-r1 environment on the tiny random Qwen2: token ids, env masks, stops, batching, turn limits.

The tiny model writes noise, so each test scripts what it writes: a LogitsProcessor (added by a
wrapper around ``model.generate``) forces, per row, the tokens of a text chosen from the row's
context (question and turn). Everything else is the real path: HFEngine's left-padded batched
``generate`` with stop strings, trimming, observation tokenisation and the rollout loop. The
wrapper also records what the model was fed and the raw ids it returned, so the tests compare
the rollout's ids with what the model really saw and generated.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from agent_helpers import Scripted  # noqa: E402
from inspo.engines.base import trim_generation
from inspo.engines.hf import HFEngine  # noqa: E402
from inspo.envs.evaluate import make_evaluate  # noqa: E402
from inspo.envs.loop import AgentConfig, Episode, run_rollouts  # noqa: E402
from inspo.envs.search_r1 import SearchR1Env, SearchR1Options  # noqa: E402
from inspo.envs.search_r1.protocol import (  # noqa: E402
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    SEARCH_R1_INSTRUCTION,
    format_observation,
)
from inspo.records import Instruction, Passage, Question  # noqa: E402

SEED = Instruction("seed", SEARCH_R1_INSTRUCTION)


@pytest.fixture(scope="module")
def tiny():
    from inspo.models import ModelNotInstalledError, load_model

    try:
        return load_model("tiny-qwen2")
    except ModelNotInstalledError as exc:  # no packaged tokenizer installed (a broken one fails)
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")


class CountingRetriever:
    """Deterministic passages per query; records every search call."""

    def __init__(self, text_words: int = 6) -> None:
        self.calls: list[list[str]] = []
        self.text_words = text_words

    def results(self, query: str, k: int) -> list[Passage]:
        words = " ".join(f"w{j}" for j in range(self.text_words))
        return [
            Passage(f"{query}-{i}", f"T {query} {i}", f"{query} says {words}") for i in range(k)
        ]

    def search(self, queries: list[str], k: int = 3) -> list[list[Passage]]:
        self.calls.append(list(queries))
        return [self.results(q, k) for q in queries]


@pytest.fixture
def scripted(tiny, monkeypatch):
    def make(script, **kwargs):
        wrapper = Scripted(tiny, script, **kwargs)
        monkeypatch.setattr(tiny.model, "generate", wrapper)
        return wrapper

    return make


def episodes(n: int) -> list[Episode]:
    return [Episode(Question(f"q{i}", f"q{i}", ("yes",)), SEED) for i in range(n)]


def spans(rollout, value: int) -> list[list[int]]:
    """Maximal runs of completion ids whose env_mask equals ``value``."""
    runs, current = [], None
    for tok, m in zip(rollout.completion_ids, rollout.env_mask, strict=True):
        if m == value:
            if current is None:
                current = []
                runs.append(current)
            current.append(tok)
        else:
            current = None
    return runs


# ------------------------------------------------------------------------ the main invariants


SCRIPT = {
    # q0: search, then answer
    ("q0", 0): "<think>need facts</think>\n<search>alpha</search>",
    ("q0", 1): "<answer>yes</answer>",
    # q1: answers at once
    ("q1", 0): "<answer>no</answer>",
    # q2: searches in the same turn as q0, then again, then answers
    ("q2", 0): "<search>gamma</search>",
    ("q2", 1): "<search>delta</search>",
    ("q2", 2): "<answer>yes</answer>",
    # q3: an invalid action (stray closing tag), then a search, then an answer
    ("q3", 0): "I am not sure </search>",
    ("q3", 1): "<search>beta</search>",
    ("q3", 2): "<answer>maybe</answer>",
}


def test_multi_turn_ids_masks_observations_and_batched_retrieval(tiny, scripted):
    wrapper = scripted(lambda qid, turn: SCRIPT.get((qid, turn)))
    retriever = CountingRetriever()
    engine = HFEngine(tiny.model, tiny.tokenizer, rng=random.Random(0))
    config = AgentConfig(max_turns=4, max_response_tokens=24, temperature=0)
    rollouts = run_rollouts(engine, SearchR1Env(retriever), config, episodes(4))

    # one retriever call per turn that had searches, all of that turn's queries batched
    assert retriever.calls == [["alpha", "gamma"], ["delta", "beta"]]
    # one generate call per turn, over the still-active rows only
    assert [len(c["inputs"]) for c in wrapper.calls] == [4, 3, 2]

    by_id = {r.question.id: r for r in rollouts}
    assert [r.question.id for r in rollouts] == ["q0", "q1", "q2", "q3"]
    assert {q: (r.finish_reason, r.turns, r.calls_of("search"), r.answer) for q, r in by_id.items()} == {
        "q0": ("answer", 2, ["alpha"], "yes"),
        "q1": ("answer", 1, [], "no"),
        "q2": ("answer", 3, ["gamma", "delta"], "yes"),
        "q3": ("answer", 3, ["beta"], "maybe"),
    }
    assert [by_id[q].reward for q in ("q0", "q1", "q2", "q3")] == [1.0, 0.0, 1.0, 0.0]

    decode = engine.decode
    expected_env = {
        "q0": [format_observation(retriever.results("alpha", 3))],
        "q1": [],
        "q2": [format_observation(retriever.results(q, 3)) for q in ("gamma", "delta")],
        "q3": [INVALID_ACTION_MESSAGE, format_observation(retriever.results("beta", 3))],
    }
    expected_policy = {q: [t for (qq, _), t in sorted(SCRIPT.items()) if qq == q] for q in by_id}
    for qid, r in by_id.items():
        assert len(r.env_mask) == len(r.completion_ids) == r.metrics["n_tokens"]
        assert set(r.env_mask) <= {0, 1}
        # mask-0 spans decode exactly to the observations the environment inserted
        assert [decode(s) for s in spans(r, 0)] == expected_env[qid]
        # mask-1 spans are the scripted policy turns, ending at their closing tag
        assert [decode(s) for s in spans(r, 1)] == expected_policy[qid]
        assert r.response == decode(r.completion_ids)
        assert r.response == "".join(
            x
            for pair in zip(expected_policy[qid], expected_env[qid] + [""], strict=True)
            for x in pair
        )
        assert r.metrics["n_policy_tokens"] == sum(r.env_mask)

    # the model saw exactly prompt_ids + completion_ids so far, and the kept policy ids are
    # exactly the ids it generated (a prefix of its raw output for that row)
    for call in wrapper.calls:
        for fed, raw in zip(call["inputs"], call["raw"], strict=True):
            owner = next(
                r for r in rollouts if (r.prompt_ids + r.completion_ids)[: len(fed)] == fed
            )
            assert fed[: len(owner.prompt_ids)] == owner.prompt_ids
            rest = owner.completion_ids[len(fed) - len(owner.prompt_ids) :]
            mask = owner.env_mask[len(fed) - len(owner.prompt_ids) :]
            n_policy = mask.index(0) if 0 in mask else len(mask)
            assert n_policy > 0 and rest[:n_policy] == raw[:n_policy]
            assert all(m == 1 for m in mask[:n_policy])


def test_prompt_is_the_chat_template_of_instruction_and_question(tiny, scripted):
    scripted(lambda qid, turn: "<answer>yes</answer>")
    engine = HFEngine(tiny.model, tiny.tokenizer)
    (r,) = run_rollouts(engine, SearchR1Env(CountingRetriever()), AgentConfig(max_turns=1), episodes(1))
    prompt = tiny.tokenizer.decode(r.prompt_ids)
    assert prompt.endswith("<|im_start|>assistant\n")
    assert SEARCH_R1_INSTRUCTION + "\n\nQuestion: q0" in prompt
    # the instruction's example answer is in the prompt but never in the response
    assert "Beijing" in prompt and "Beijing" not in r.response


def test_engine_trims_tokens_generated_after_the_stop_string(tiny, scripted):
    # generation is not stopped at the tag: the model writes on past </search>
    junk = " and then some more words <answer>no</answer>"
    wrapper = scripted(
        lambda qid, turn: "<search>alpha</search>" + junk if turn == 0 else "<answer>yes</answer>",
        keep_stop_strings=False,
    )
    retriever = CountingRetriever()
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=2, max_response_tokens=40, temperature=0)
    (r,) = run_rollouts(engine, SearchR1Env(retriever), config, episodes(1))
    first_policy = spans(r, 1)[0]
    raw = wrapper.calls[0]["raw"][0]
    assert len(raw) > len(first_policy)  # the model did write past the tag ...
    assert raw[: len(first_policy)] == first_policy  # ... and only the prefix was kept
    assert engine.decode(first_policy) == "<search>alpha</search>"
    assert retriever.calls == [["alpha"]]
    assert (r.finish_reason, r.answer, r.reward) == ("answer", "yes", 1.0)


def test_final_turn_after_max_turns_searches_is_not_executed(tiny, scripted):
    scripted(lambda qid, turn: f"<search>s{turn}</search>")
    retriever = CountingRetriever()
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=2, max_response_tokens=16, temperature=0)
    (r,) = run_rollouts(engine, SearchR1Env(retriever), config, episodes(1))
    assert (r.finish_reason, r.turns, r.calls_of("search")) == ("turn_limit", 3, ["s0", "s1"])
    assert retriever.calls == [["s0"], ["s1"]]
    env = [engine.decode(s) for s in spans(r, 0)]
    assert env == [format_observation(retriever.results(s, 3)) for s in ("s0", "s1")]
    assert engine.decode(spans(r, 1)[-1]) == "<search>s2</search>"
    assert r.answer is None and r.reward == 0.0


def test_last_turn_nudge_is_environment_text_before_the_final_turn(tiny, scripted):
    scripted(lambda qid, turn: f"<search>s{turn}</search>")
    retriever = CountingRetriever()
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=2, max_response_tokens=16, temperature=0, last_turn_nudge=True)
    (r,) = run_rollouts(engine, SearchR1Env(retriever), config, episodes(1))
    env = [engine.decode(s) for s in spans(r, 0)]
    assert env[0] == format_observation(retriever.results("s0", 3))
    assert env[1] == format_observation(retriever.results("s1", 3)) + LAST_TURN_NUDGE
    assert (r.finish_reason, r.turns, r.calls_of("search")) == ("turn_limit", 3, ["s0", "s1"])


def test_observation_is_truncated_to_its_cap_and_stays_closed(tiny, scripted):
    scripted(lambda qid, turn: "<search>long</search>" if turn == 0 else "<answer>yes</answer>")
    retriever = CountingRetriever(text_words=200)
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=3, max_response_tokens=16, max_obs_tokens=40, temperature=0)
    (r,) = run_rollouts(engine, SearchR1Env(retriever), config, episodes(1))
    (obs,) = spans(r, 0)
    assert len(obs) == 40
    text = engine.decode(obs)
    assert text.startswith("\n\n<information>Doc 1(Title: T long 0) long says w0 w1")
    assert text.endswith("</information>\n\n") and text.count("</information>") == 1
    assert r.metrics["n_obs_truncated"] == 1.0
    assert (r.finish_reason, r.answer) == ("answer", "yes")


def test_eos_and_length_turns_are_invalid_actions_until_the_final_turn(tiny, scripted):
    # q0 writes 30 tokens of prose (cap 8); q1 writes a sentence and ends its message (EOS).
    # Neither is a valid action: both get the corrective message and play the final turn.
    eos = tiny.tokenizer.eos_token_id
    wrapper = scripted(
        lambda qid, turn: " word" * 30 if qid == "q0" else "I give up.",
        eos=True,
    )
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=1, max_response_tokens=8, temperature=0)
    r0, r1 = run_rollouts(engine, SearchR1Env(CountingRetriever()), config, episodes(2))
    assert (r0.finish_reason, r0.turns, r0.metrics["n_invalid"]) == ("length", 2, 1.0)
    assert [len(s) for s in spans(r0, 1)] == [8, 8]
    assert [engine.decode(s) for s in spans(r0, 0)] == [INVALID_ACTION_MESSAGE]
    assert (r1.finish_reason, r1.turns, r1.metrics["n_invalid"]) == ("eos", 2, 1.0)
    # the EOS that ended turn 1 is dropped (the episode went on); the final turn's is kept
    first, final = spans(r1, 1)
    assert eos not in first and engine.decode(first) == "I give up."
    assert final[-1] == eos and r1.completion_ids[-1] == eos and r1.completion_ids.count(eos) == 1
    assert [engine.decode(s) for s in spans(r1, 0)] == [INVALID_ACTION_MESSAGE]
    assert r1.response == "I give up." + INVALID_ACTION_MESSAGE + "I give up."
    # the final turn was fed exactly prompt_ids + the recorded completion so far (no EOS in it)
    (fed0, fed1) = wrapper.calls[1]["inputs"]
    assert fed1 == r1.prompt_ids + r1.completion_ids[: len(fed1) - len(r1.prompt_ids)]
    assert fed1[-len(engine.encode(INVALID_ACTION_MESSAGE)) :] == engine.encode(INVALID_ACTION_MESSAGE)
    assert fed0 == r0.prompt_ids + r0.completion_ids[: len(fed0) - len(r0.prompt_ids)]


def test_prefill_is_response_text_with_mask_zero(tiny, scripted):
    scripted(lambda qid, turn: "alpha</search>" if turn == 0 else "<answer>yes</answer>")
    retriever = CountingRetriever()
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=2, max_response_tokens=16, temperature=0, prefill="<search>")
    (r,) = run_rollouts(engine, SearchR1Env(retriever), config, episodes(1))
    prefill_ids = engine.encode("<search>")
    assert r.completion_ids[: len(prefill_ids)] == prefill_ids
    assert r.env_mask[: len(prefill_ids)] == [0] * len(prefill_ids)
    assert r.response.startswith("<search>alpha</search>\n\n<information>Doc 1(Title: T alpha 0)")
    assert r.calls_of("search") == ["alpha"] and retriever.calls == [["alpha"]]


def test_sampling_is_reproducible_with_an_injected_rng(tiny):
    config = AgentConfig(max_turns=1, max_response_tokens=6, temperature=1.0)

    def run(seed):
        engine = HFEngine(tiny.model, tiny.tokenizer, rng=random.Random(seed))
        return [
            r.completion_ids for r in run_rollouts(engine, SearchR1Env(CountingRetriever()), config, episodes(2))
        ]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_batch_size_chunks_generation_without_changing_results(tiny, scripted):
    wrapper = scripted(lambda qid, turn: SCRIPT.get((qid, turn)))
    config = AgentConfig(max_turns=4, max_response_tokens=24, temperature=0)
    engine = HFEngine(tiny.model, tiny.tokenizer, batch_size=3)
    rollouts = run_rollouts(engine, SearchR1Env(CountingRetriever()), config, episodes(4))
    # turn 1: 4 rows in chunks of 3 + 1; turn 2: 3 rows; turn 3: 2 rows
    assert [len(c["inputs"]) for c in wrapper.calls] == [3, 1, 3, 2]
    assert [r.answer for r in rollouts] == ["yes", "no", "yes", "maybe"]


# ------------------------------------------------------------------------------- evaluate


class FailingRetriever(CountingRetriever):
    def search(self, queries, k=3):
        if "boom" in queries:
            raise ConnectionError("retriever down for 'boom'")
        return super().search(queries, k)


def test_evaluate_isolates_a_failing_example_and_keeps_order(tiny, scripted):
    script = {
        "q0": "<search>alpha</search>",
        "q1": "<search>boom</search>",
        "q2": "<answer>yes</answer>",
    }
    scripted(lambda qid, turn: script[qid] if turn == 0 else "<answer>yes</answer>")
    engine = HFEngine(tiny.model, tiny.tokenizer)
    evaluate = make_evaluate(
        engine, SearchR1Env(FailingRetriever()), AgentConfig(max_turns=2, temperature=0), group_size=2
    )
    questions = [e.question for e in episodes(3)]
    rollouts = evaluate(SEED, questions)
    assert [r.question.id for r in rollouts] == ["q0", "q0", "q1", "q1", "q2", "q2"]
    assert [r.finish_reason for r in rollouts] == [
        "answer",
        "answer",
        "error",
        "error",
        "answer",
        "answer",
    ]
    assert [r.reward for r in rollouts] == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    # the error names the exception and its message (the search tool's failure)
    assert "ConnectionError: retriever down for 'boom'" in rollouts[2].error
    assert all(r.instruction_id == "seed" for r in rollouts)


# ---------------------------------------------------------------------------- pure helpers


def test_trim_generation_rules():
    vocab = {1: "<search>", 2: "q", 3: "</search>", 4: " junk", 9: "<eos>", 0: "<pad>"}

    def decode(ids):
        return "".join(vocab[i] for i in ids if i not in (9, 0))

    common = {"stop": ["</search>", "</answer>"], "eos_ids": {9}, "decode": decode}
    assert trim_generation([1, 2, 3, 4, 4], pad_id=0, **common) == ([1, 2, 3], "stop")
    assert trim_generation([1, 2, 3, 0, 0], pad_id=0, **common) == ([1, 2, 3], "stop")
    assert trim_generation([2, 4, 9, 0, 0], pad_id=0, **common) == ([2, 4, 9], "eos")
    assert trim_generation([2, 4, 4], pad_id=0, **common) == ([2, 4, 4], "length")
    assert trim_generation([1, 2, 3, 9, 9], pad_id=9, **common) == ([1, 2, 3], "stop")
    assert trim_generation([2, 4, 0, 0], pad_id=0, **common) == ([2, 4], "length")


def test_agent_config_is_validated():
    AgentConfig()
    for bad in (
        {"max_turns": 0},
        {"max_response_tokens": 0},
        {"max_obs_tokens": 4},
        {"temperature": -0.1},
        {"top_p": 0},
    ):
        with pytest.raises(ValueError):
            AgentConfig(**bad)
    assert replace(AgentConfig(), max_turns=5).max_turns == 5


def test_search_r1_settings_are_validated():
    # topk, reward and format_weight moved from AgentConfig to the search-r1 environment
    SearchR1Options()
    for bad in ({"topk": 0}, {"reward": "bleu"}, {"format_weight": -1.0}):
        with pytest.raises(ValueError, match=f"env.{next(iter(bad))}"):
            SearchR1Options(**bad)
    for bad, match in (({"reward": "bleu"}, "metric"), ({"format_weight": -1.0}, "format_weight")):
        with pytest.raises(ValueError, match=match):
            SearchR1Env(CountingRetriever(), **bad)
    assert SearchR1Env(CountingRetriever(), reward="f1").reward_spec.metric == "f1"
    assert SearchR1Env(CountingRetriever(), topk=5).topk == 5
    assert replace(SearchR1Options(), topk=5).topk == 5
    # the environment built in Python refuses a top-k below 1 too (AgentConfig(topk=0) did)
    with pytest.raises(ValueError, match="topk"):
        SearchR1Env(CountingRetriever(), topk=0)


def test_real_bm25_results_become_the_observation(tiny, scripted):
    pytest.importorskip("bm25s")
    from inspo.retrieval.bm25 import BM25Retriever

    bm25 = BM25Retriever(
        [
            Passage("1", "Paris", "Paris is the capital of France."),
            Passage("2", "Berlin", "Berlin is the capital of Germany."),
            Passage("3", "Hamlet", "Hamlet is a play by Shakespeare."),
        ]
    )
    scripted(
        lambda qid, turn: (
            "<search>capital of France</search>" if turn == 0 else "<answer>Paris</answer>"
        )
    )
    engine = HFEngine(tiny.model, tiny.tokenizer)
    config = AgentConfig(max_turns=3, max_response_tokens=16, temperature=0)
    (r,) = run_rollouts(engine, SearchR1Env(bm25, topk=2), config, episodes(1))
    (obs,) = spans(r, 0)
    expected = format_observation(bm25.search(["capital of France"], 2)[0])
    assert engine.decode(obs) == expected
    assert expected.startswith(
        "\n\n<information>Doc 1(Title: Paris) Paris is the capital of France."
    )
    assert (r.calls_of("search"), r.answer, r.finish_reason) == (["capital of France"], "Paris", "answer")
