"""Rollouts with real models and real BM25 retrieval.

- SmolLM2-135M never writes the tags on its own, so its first turn is PREFILLED with
  ``<think>…</think><search>`` (environment text, env_mask 0): the model writes a query and
  closes the tag, and a real BM25 search over a small corpus follows.
- Qwen2.5-Coder-0.5B-Instruct (slow) plays multi-turn episodes under the Search-R1 instruction
  (first turn prefilled with ``<search>`` so the multi-turn path is certain).

Both check the id/mask invariants on whatever the model wrote.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("bm25s")

from inspo.engines.hf import HFEngine  # noqa: E402
from inspo.envs.base import FinalAnswer  # noqa: E402
from inspo.envs.loop import AgentConfig, Episode, run_rollouts  # noqa: E402
from inspo.envs.search_r1 import SearchR1Env  # noqa: E402
from inspo.envs.search_r1.protocol import (  # noqa: E402
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    SEARCH_R1_INSTRUCTION,
    STOP_STRINGS,
    format_observation,
    parse_action,
)
from inspo.records import Instruction, Passage, Question, ToolCall  # noqa: E402

SEED = Instruction("seed", SEARCH_R1_INSTRUCTION)
# Greedy SmolLM2 after this prefill writes a short query ("Paris", "Hamlet" …) and closes the tag.
PREFILL = "<think>I need to search.</think>\n<search>"

CORPUS = [
    ("Paris", "Paris is the capital and most populous city of France."),
    ("Berlin", "Berlin is the capital and largest city of Germany."),
    ("Citibank", "The City Bank of New York was founded on June 16, 1812."),
    ("James Madison", "James Madison was the fourth president of the United States, 1809-1817."),
    ("Hamlet", "Hamlet is a tragedy written by William Shakespeare around 1600."),
    ("Mount Everest", "Mount Everest is Earth's highest mountain above sea level."),
    ("Python", "Python is a programming language created by Guido van Rossum."),
    ("Amazon River", "The Amazon River in South America is the largest river by discharge."),
    ("Marie Curie", "Marie Curie was a physicist and chemist who won two Nobel Prizes."),
    ("Tokyo", "Tokyo is the capital of Japan and its most populous city."),
]
QUESTIONS = [
    ("What is the capital of France?", "Paris"),
    ("When was Citibank founded?", "1812"),
    ("Who wrote Hamlet?", "William Shakespeare"),
    ("What is the highest mountain on Earth?", "Mount Everest"),
    ("Who created the Python programming language?", "Guido van Rossum"),
    ("What is the capital of Japan?", "Tokyo"),
    ("Who was the fourth president of the United States?", "James Madison"),
    ("Which scientist won two Nobel Prizes in physics and chemistry?", "Marie Curie"),
]


class Recording:
    """A real retriever that also records each batched call (queries and results)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[tuple[list[str], list[list[Passage]]]] = []

    def search(self, queries, k=3):
        results = self.inner.search(queries, k)
        self.calls.append((list(queries), results))
        return results


@pytest.fixture(scope="module")
def bm25():
    from inspo.retrieval.bm25 import BM25Retriever

    return BM25Retriever([Passage(str(i), t, x) for i, (t, x) in enumerate(CORPUS)])


def episodes() -> list[Episode]:
    return [Episode(Question(f"q{i}", q, (a,)), SEED) for i, (q, a) in enumerate(QUESTIONS)]


def load(name: str):
    from inspo.models import ModelNotInstalledError, load_model

    try:
        return load_model(name)
    except ModelNotInstalledError as exc:  # the packages that ship the model are not installed
        pytest.skip(f"{name} is not available here: {exc}")


def spans(rollout) -> list[tuple[int, list[int]]]:
    """(mask value, ids) for each maximal run of equal env_mask values."""
    out: list[tuple[int, list[int]]] = []
    for tok, m in zip(rollout.completion_ids, rollout.env_mask, strict=True):
        if out and out[-1][0] == m:
            out[-1][1].append(tok)
        else:
            out.append((m, [tok]))
    return out


def env_pieces(text: str, observations: set[str], truncated_ok: bool) -> list[str]:
    """Split a run of environment text into what was written after each turn: an observation
    or the corrective message, each maybe followed by the nudge. (Two pieces share a run when
    the turn between them left no ids: a bare EOS, which is dropped before a non-final turn.)"""
    pieces = []
    while text:
        if text.startswith(INVALID_ACTION_MESSAGE):
            piece = INVALID_ACTION_MESSAGE
        else:
            assert text.startswith("\n\n<information>"), text
            piece = text[: text.index("</information>\n\n") + len("</information>\n\n")]
            assert piece in observations or truncated_ok, piece
        if text[len(piece) :].startswith(LAST_TURN_NUDGE):
            piece += LAST_TURN_NUDGE
        pieces.append(piece)
        text = text[len(piece) :]
    return pieces


def check_invariants(rollout, engine, retriever, config) -> None:
    """Ids/mask invariants that hold whatever the model wrote."""
    assert len(rollout.env_mask) == len(rollout.completion_ids) > 0
    assert rollout.response == engine.decode(rollout.completion_ids)
    results = {q: r for queries, rs in retriever.calls for q, r in zip(queries, rs, strict=True)}
    observations = {format_observation(results[q]) for q in rollout.calls_of("search")}
    truncated_ok = rollout.metrics["n_obs_truncated"] > 0
    runs = spans(rollout)
    current = ""
    if config.prefill:  # the prefill is the first run, mask 0, and opens the first turn
        mask, ids = runs.pop(0)
        assert (mask, ids) == (0, engine.encode(config.prefill))
        current = config.prefill
    policy_turns: list[str] = []  # each turn's text, prefill included
    for mask, ids in runs:
        if mask == 1:
            assert len(ids) <= config.max_response_tokens
            current += engine.decode(ids)
            continue
        for piece in env_pieces(engine.decode(ids), observations, truncated_ok):
            policy_turns.append(current)  # every turn before the last ends with environment text
            current = ""
            assert piece.endswith(LAST_TURN_NUDGE) == (
                config.last_turn_nudge and len(policy_turns) == config.max_turns
            )
    assert runs[-1][0] == 1  # the last turn (an answer or the final turn) always leaves ids
    policy_turns.append(current)
    assert len(policy_turns) == rollout.turns <= config.max_turns + 1
    actions = [parse_action(t) for t in policy_turns]
    # searches of the first max_turns turns are executed; the final turn's is not
    executed = [a.args for a in actions[: config.max_turns] if isinstance(a, ToolCall) and a.tool == "search"]
    assert executed == rollout.calls_of("search")
    assert rollout.tool_calls == [ToolCall("search", q) for q in executed]
    if rollout.finish_reason == "answer":
        assert isinstance(actions[-1], FinalAnswer)
        assert any(s in policy_turns[-1] for s in STOP_STRINGS)
    else:
        assert rollout.finish_reason in {"eos", "length", "turn_limit"}
        assert rollout.turns == config.max_turns + 1 and not isinstance(actions[-1], FinalAnswer)


@pytest.mark.slow
def test_smollm2_prefilled_search_hits_real_bm25(bm25):
    loaded = load("smollm2-135m")
    retriever = Recording(bm25)
    engine = HFEngine(loaded.model, loaded.tokenizer, rng=random.Random(0))
    config = AgentConfig(
        max_turns=1, max_response_tokens=12, max_obs_tokens=200, temperature=0, prefill=PREFILL
    )
    rollouts = run_rollouts(engine, SearchR1Env(retriever), config, episodes())

    searched = [r for r in rollouts if r.calls_of("search")]
    assert searched, [r.response for r in rollouts]  # a real model ran a real search ...
    assert any(passages for _, results in retriever.calls for passages in results)  # ... with hits
    # every search of the first turn went to BM25 in one batched call
    assert retriever.calls[0][0] == [r.calls_of("search")[0] for r in searched]
    for r in rollouts:
        prefill_ids = engine.encode(PREFILL)
        assert r.completion_ids[: len(prefill_ids)] == prefill_ids
        assert r.env_mask[: len(prefill_ids)] == [0] * len(prefill_ids)
        check_invariants(r, engine, retriever, config)
    # the observation inserted after a search is BM25's answer to the model's own query
    r = searched[0]
    queries, results = retriever.calls[0]
    expected = format_observation(results[queries.index(r.calls_of("search")[0])])
    assert expected in r.response


@pytest.mark.slow
def test_qwen_coder_multi_turn_rollout_invariants(bm25):
    loaded = load("qwen2.5-coder-0.5b")
    retriever = Recording(bm25)
    engine = HFEngine(loaded.model, loaded.tokenizer, rng=random.Random(0))
    # Unprompted, Qwen searches in ~1 of 4 samples under this instruction; the "<search>" prefill
    # makes the multi-turn path (query, observation, next turn) certain rather than lucky.
    config = AgentConfig(
        max_turns=2, max_response_tokens=48, max_obs_tokens=200, temperature=1.0, prefill="<search>"
    )
    rollouts = run_rollouts(engine, SearchR1Env(retriever), config, episodes()[:4])
    assert len(rollouts) == 4
    for r in rollouts:
        check_invariants(r, engine, retriever, config)
        assert 1 <= r.turns <= config.max_turns + 1
        assert r.finish_reason in {"answer", "eos", "length", "turn_limit"}
    # the model searched on its own and went on after the observation (seeded sampling)
    assert any(r.calls_of("search") and r.turns >= 2 for r in rollouts), [r.response for r in rollouts]
    # one batched retriever call per turn that had searches
    assert 1 <= len(retriever.calls) <= config.max_turns


def test_attention_kernels_leave_cpu_alone():
    import contextlib

    import torch

    from inspo.engines.hf import attention_kernels

    assert isinstance(attention_kernels(torch.device("cpu")), contextlib.nullcontext)


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_generation_on_cuda_runs_without_cudnn_attention():
    """On CUDA, generation excludes cuDNN's attention (a plan per new shape, seconds each on an
    H100), restores the flags afterwards, and greedy output is what the default kernels give."""
    import torch

    from inspo.engines.base import GenerationInput
    from inspo.engines.hf import attention_kernels
    from inspo.models import load_model

    before = torch.backends.cuda.cudnn_sdp_enabled()
    with attention_kernels(torch.device("cuda")):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before

    loaded = load_model("tiny-qwen2", dtype="float32", device="cuda")
    engine = HFEngine(loaded.model, loaded.tokenizer)
    ids = loaded.tokenizer("Answer the question about the river", add_special_tokens=False)["input_ids"]
    rows = [GenerationInput(prompt_ids=ids[: len(ids) - i], completion_ids=[], text="") for i in range(3)]
    ours = engine.generate(rows, max_new_tokens=12, temperature=0.0, top_p=1.0, stop=[])
    padded = torch.tensor([[engine.pad_id] * i + ids[: len(ids) - i] for i in range(3)], device="cuda")
    mask = (torch.arange(len(ids), device="cuda")[None, :] >= torch.tensor([[0], [1], [2]], device="cuda")).long()
    with torch.inference_mode():
        ref = loaded.model.generate(input_ids=padded, attention_mask=mask, max_new_tokens=12, do_sample=False,
                                    pad_token_id=engine.pad_id, eos_token_id=sorted(engine.eos_ids))
    for gen, row in zip(ours, ref[:, len(ids):].tolist(), strict=True):
        assert gen.token_ids == row[: len(gen.token_ids)]
