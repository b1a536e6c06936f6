"""inspo.engines.turn_cache: a turn's keys and values kept for the next. The prefix match against a
naive reference; a continued batch (rows reordered, lengths changed, a row with nothing kept)
gives the full prefill's logits to rounding and its greedy tokens; the engine reuses the cache only
inside one ``episode_cache`` block, for a plain and a LoRA model."""

from __future__ import annotations

import random

import pytest

from inspo.engines.base import GenerationInput
from inspo.engines.turn_cache import (
    MIN_CACHED_POSITIONS,
    TurnCache,
    best_prefixes,
    cache_argument,
    returned_cache,
)


def naive_best(sequences, kept):
    out = []
    for s in sequences:
        best, length = 0, 0
        for j, k in enumerate(kept):
            n = 0
            while n < min(len(s), len(k)) and s[n] == k[n]:
                n += 1
            if n > length:
                best, length = j, n
        out.append((best, min(length, max(len(s) - 1, 0))))
    return out


def test_best_prefixes_matches_a_naive_reference():
    rng = random.Random(0)
    for _ in range(300):
        kept = [[rng.randrange(3) for _ in range(rng.randrange(0, 8))] for _ in range(rng.randrange(0, 5))]
        seqs = [[rng.randrange(3) for _ in range(rng.randrange(1, 9))] for _ in range(rng.randrange(1, 20))]
        got = best_prefixes(seqs, kept)
        want = naive_best(seqs, kept)
        # ties may pick another row: the length is what must agree, and the row must hold it
        assert [n for _, n in got] == [n for _, n in want]
        for s, (row, n) in zip(seqs, got, strict=True):
            assert n == 0 or kept[row][:n] == s[:n]
    assert best_prefixes([[1, 2, 3]], []) == [(0, 0)]
    assert best_prefixes([[1, 2, 3], [1, 9]], [[1, 2, 3, 4], [1, 9, 9]]) == [(0, 2), (1, 1)]


def _left_padded(rows, pad):
    import torch

    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (width - len(r)) + list(r) for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def _greedy(model, rows, pad, steps, cache=None):
    import torch
    from transformers import GenerationConfig

    ids, mask = _left_padded(rows, pad)
    config = GenerationConfig(max_new_tokens=steps, min_new_tokens=steps, do_sample=False, pad_token_id=pad,
                              eos_token_id=None, return_dict_in_generate=True, output_logits=True)
    extra = {cache_argument(model): cache} if cache is not None else {}
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config, **extra)
    return out, ids.shape[1]


def test_a_continued_batch_gives_the_full_prefills_logits(tiny):
    import torch

    model, tok = tiny.model, tiny.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    rng = random.Random(1)
    first = [[rng.randrange(5, 400) for _ in range(n)] for n in (40, 55, 33, 61)]
    out, width = _greedy(model, first, pad, steps=6)
    turns = TurnCache()
    turns.keep(returned_cache(out), first, out.sequences[:, width:])
    turns.start_call()
    played = [row + out.sequences[i, width:].tolist() for i, row in enumerate(first)]
    # the next call: rows reordered, answers of different lengths appended, one row never played
    # and one cut back to before its last tokens (it reuses all but what differs)
    nxt = [played[2] + [7, 8, 9], played[0] + [11] * 9, played[3][:50] + [13, 14],
           [rng.randrange(5, 400) for _ in range(20)], played[1] + [15]]
    cache = turns.prefix(nxt, model.config)
    assert cache is not None and cache.get_seq_length() >= MIN_CACHED_POSITIONS
    assert turns.reused > 0
    cached, _ = _greedy(model, nxt, pad, steps=5, cache=cache)
    full, _ = _greedy(model, nxt, pad, steps=5)
    assert torch.equal(cached.sequences, full.sequences)
    for a, b in zip(cached.logits, full.logits, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_a_call_that_would_reuse_little_prefills_in_full(tiny):
    model, tok = tiny.model, tiny.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    first = [[5 + i for i in range(40)]]
    out, width = _greedy(model, first, pad, steps=3)
    turns = TurnCache()
    turns.keep(returned_cache(out), first, out.sequences[:, width:])
    turns.start_call()
    # the longest row matches nothing: every row would prefill the whole width
    assert turns.prefix([first[0] + [1], [9] * 60], model.config) is None
    assert turns.reused == 0


def _episode(engine, tok, keep_turns):
    """Three turns over rows of different lengths; each turn appends a made-up tool answer."""
    texts = ["Question: where is Zarn? Think step by step, then answer.",
             "Answer the given question please. Question: who rules the north of the old kingdom?",
             "Q: 12 * 7 = ? Use the calculator."] * 2
    ctx = [tok(t)["input_ids"] for t in texts]
    outs = []
    with engine.episode_cache() as turns:
        for turn in range(3):
            gens = engine.generate([GenerationInput(c, [], "") for c in ctx], max_new_tokens=12,
                                   temperature=0.0, top_p=1.0, stop=[])
            outs.append([g.token_ids for g in gens])
            ctx = [c + g.token_ids + tok(f" Result {turn}: {turn * 7} apples.")["input_ids"]
                   for c, g in zip(ctx, gens, strict=True)]
        reused = turns.reused if keep_turns else 0
    assert engine.turn_cache is None  # closed with the block: the next block starts empty
    return outs, reused


@pytest.mark.parametrize("lora", [False, True], ids=["plain", "lora"])
def test_the_engine_reuses_turns_inside_a_block_with_the_same_tokens(tiny, lora):
    from inspo.engines.hf import HFEngine

    model = tiny.model
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))
    try:
        off, _ = _episode(HFEngine(model, tiny.tokenizer, keep_turns=False), tiny.tokenizer, False)
        on, reused = _episode(HFEngine(model, tiny.tokenizer), tiny.tokenizer, True)
    finally:
        if lora:
            model.unload()
    assert reused > 0
    assert on == off


def test_outside_a_block_nothing_is_kept(tiny):
    from inspo.engines.hf import HFEngine

    engine = HFEngine(tiny.model, tiny.tokenizer)
    ids = tiny.tokenizer("Question: where is Zarn? Think step by step, then answer it.")["input_ids"]
    engine.generate([GenerationInput(ids, [], "")], max_new_tokens=4, temperature=0.0, top_p=1.0, stop=[])
    assert engine.turn_cache is None
    with engine.episode_cache() as outer, engine.episode_cache() as inner:
        assert outer is inner is engine.turn_cache
    with HFEngine(tiny.model, tiny.tokenizer, keep_turns=False).episode_cache() as off:
        assert off is None
