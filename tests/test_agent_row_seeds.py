"""Per-row sampling seeds (inspo.engines.row_seeds): the Gumbel-max sampler draws from the same
distribution transformers' do_sample does, a seeded row samples the same tokens whatever shares
its batch (in the processor and in HFEngine on a real model), and ``Evaluate.many`` plays several
instructions in shared batches with the same per-question noise as one call per instruction."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from agent_helpers import CoinPolicy
from inspo.data.sources import load_corpus_source, load_qa_source
from inspo.engines.base import GenerationInput
from inspo.engines.row_seeds import seed_of, step_seed, turn_seed
from inspo.envs.evaluate import make_evaluate
from inspo.envs.loop import AgentConfig
from inspo.envs.search_r1 import SearchR1Env
from inspo.records import Instruction
from inspo.retrieval.bm25 import BM25Retriever
from inspo.rng import derived_rng


def test_seeds_are_stable_and_spread():
    assert seed_of("verify", 3, "q1", 0) == derived_rng("verify", 3, "q1", 0).getrandbits(63)
    seeds = {turn_seed(s, t) for s in range(50) for t in range(1, 5)}
    seeds |= {step_seed(s, k) for s in range(50) for k in range(40)}
    assert len(seeds) == 50 * 4 + 50 * 40  # no collisions between turns, steps and rows
    assert all(0 <= s < 2**63 for s in seeds)
    assert turn_seed(7, 2) == turn_seed(7, 2) and turn_seed(7, 2) != turn_seed(8, 2)


def _nucleus_probs(logits: list[float], temperature: float, top_p: float) -> list[float]:
    """Naive reference: softmax(logits / T), keep the smallest top set whose mass reaches top_p
    (transformers' rule: drop tokens whose cumulative mass from the bottom is <= 1 - top_p)."""
    z = [v / temperature for v in logits]
    m = max(z)
    e = [math.exp(v - m) for v in z]
    total = sum(e)
    p = [v / total for v in e]
    order = sorted(range(len(p)), key=lambda i: p[i])  # ascending
    keep, below = set(), 0.0
    for i in order:
        below += p[i]
        if below > 1 - top_p:
            keep.add(i)
    kept = sum(p[i] for i in keep)
    return [p[i] / kept if i in keep else 0.0 for i in range(len(p))]


def test_gumbel_processor_samples_softmax_over_the_nucleus():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from inspo.engines.row_seeds import gumbel_sample_processor

    logits = [2.0, 1.5, 1.0, 0.2, -1.0, -3.0]
    temperature, top_p, n = 0.7, 0.9, 6000
    expected = _nucleus_probs(logits, temperature, top_p)
    assert 0 in [v for v in expected] and sum(v > 0 for v in expected) >= 3  # the cut and the rest matter
    seeds = [seed_of("gumbel", i) for i in range(n)]
    process = gumbel_sample_processor(seeds, start=4, temperature=temperature, top_p=top_p)
    scores = torch.tensor([logits] * n)
    picks = process(torch.zeros((n, 4), dtype=torch.long), scores).argmax(dim=-1).tolist()
    counts = Counter(picks)
    for token, p in enumerate(expected):
        if p == 0:
            assert counts[token] == 0, f"token {token} is outside the nucleus but was sampled"
        else:
            sd = math.sqrt(n * p * (1 - p))
            assert abs(counts[token] - n * p) < 5 * sd, (token, counts[token], n * p)


def test_a_seeded_row_draws_the_same_noise_in_any_batch():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from inspo.engines.row_seeds import gumbel_sample_processor

    scores = torch.zeros((3, 50))
    together = gumbel_sample_processor([11, 22, 33], start=2, temperature=1.0, top_p=1.0)(
        torch.zeros((3, 5), dtype=torch.long), scores.clone())
    alone = gumbel_sample_processor([22], start=2, temperature=1.0, top_p=1.0)(
        torch.zeros((1, 5), dtype=torch.long), scores[:1].clone())
    assert torch.equal(together[1], alone[0])
    assert not torch.equal(together[0], together[1])
    later = gumbel_sample_processor([22], start=2, temperature=1.0, top_p=1.0)(
        torch.zeros((1, 6), dtype=torch.long), scores[:1].clone())
    assert not torch.equal(later[0], alone[0])  # the next decoding step draws new noise


@pytest.fixture(scope="module")
def tiny_engine():
    from inspo.engines.hf import HFEngine
    from inspo.models import ModelNotInstalledError, load_model

    try:
        loaded = load_model("tiny-qwen2", dtype="float32")
    except ModelNotInstalledError as exc:
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    return HFEngine.from_loaded(loaded, rng=random.Random(0))


def test_hf_engine_samples_a_seeded_row_the_same_alone_or_in_a_batch(tiny_engine):
    engine = tiny_engine
    prompts = ["Question: where is Zarn?", "Answer the given question please. Question: who rules the north?",
               "Q: x"]

    def row(text, seed):
        return GenerationInput(engine.encode(text), [], text, seed=seed)

    kwargs = {"max_new_tokens": 12, "temperature": 1.0, "top_p": 0.95, "stop": []}
    batch = engine.generate([row(p, 100 + i) for i, p in enumerate(prompts)], **kwargs)
    alone = engine.generate([row(prompts[1], 101)], **kwargs)
    assert alone[0].token_ids == batch[1].token_ids
    again = engine.generate([row(prompts[1], 101), row(prompts[0], 100)], **kwargs)  # other order, other width
    assert again[0].token_ids == batch[1].token_ids and again[1].token_ids == batch[0].token_ids
    other = engine.generate([row(prompts[1], 999)], **kwargs)
    assert other[0].token_ids != alone[0].token_ids  # the seed, not the prompt, decides the draw
    greedy = engine.generate([row(prompts[1], 101)], **{**kwargs, "temperature": 0.0})
    assert greedy[0].token_ids == engine.generate([row(prompts[1], 5)], **{**kwargs, "temperature": 0.0})[0].token_ids


def test_many_plays_instructions_in_shared_batches_with_the_same_noise():
    env = SearchR1Env(BM25Retriever(load_corpus_source("world")))
    questions = load_qa_source("world", split="train")[:12]
    instructions = [Instruction(id=k, text=f"Answer {k}.") for k in ("a", "b", "c")]
    config = AgentConfig(max_turns=2, max_response_tokens=32)
    policy = CoinPolicy(row_seeds=True)
    evaluate = make_evaluate(policy, env, config, batch_size=64, paired_seed=("verify", 3))

    together = evaluate.many(instructions, questions)
    assert policy.batches[0] == 36  # all three instructions' episodes in one generate call
    assert [len(rs) for rs in together] == [12, 12, 12]
    assert [[r.instruction_id for r in rs] for rs in together] == [[k] * 12 for k in "abc"]
    rewards = [[r.reward for r in rs] for rs in together]
    assert rewards[0] == rewards[1] == rewards[2]  # paired: the same coin per question
    assert 0 < sum(rewards[0]) < len(questions)
    assert [r.reward for r in evaluate(instructions[1], questions)] == rewards[1]  # alone: the same
    assert [r.reward for r in evaluate(instructions[0], questions[5:])] == rewards[0][5:]  # any subset


def test_many_keeps_the_pairing_with_an_engine_that_ignores_row_seeds():
    env = SearchR1Env(BM25Retriever(load_corpus_source("world")))
    questions = load_qa_source("world", split="train")[:12]
    instructions = [Instruction(id=k, text=f"Answer {k}.") for k in ("a", "b")]
    policy = CoinPolicy()  # its coin is the engine's rng; no row_seeds attribute set to True
    evaluate = make_evaluate(policy, env, AgentConfig(max_turns=2, max_response_tokens=32), batch_size=64,
                             paired_seed=("verify", 3))
    together = evaluate.many(instructions, questions)
    assert policy.batches[0] == 12  # one instruction per call: the rng restarts for each
    rewards = [[r.reward for r in rs] for rs in together]
    assert rewards[0] == rewards[1] and 0 < sum(rewards[0]) < len(questions)
