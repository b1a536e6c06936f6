"""inspo.engines.prefill: a repeated prompt prefilled once gives the very logits and tokens of the
full prefill (on the machine the tests run on), for a plain and a LoRA model, and the row
bookkeeping against a naive reference."""

from __future__ import annotations

import random

import pytest

from inspo.engines.base import GenerationInput
from inspo.engines.prefill import distinct_rows, shared_prefill


def naive_distinct(rows):
    first = [i for i, row in enumerate(rows) if row not in rows[:i]]
    inverse = [[rows[f] for f in first].index(row) for row in rows]
    return first, inverse


def test_distinct_rows_matches_a_naive_reference():
    rng = random.Random(0)
    for _ in range(200):
        rows = [[rng.randrange(3) for _ in range(rng.randrange(1, 4))] for _ in range(rng.randrange(0, 12))]
        first, inverse = distinct_rows(rows)
        assert (first, inverse) == naive_distinct(rows)
        assert all(rows[first[k]] == row for row, k in zip(rows, inverse, strict=True))
    assert distinct_rows([[1, 2], [1, 2], [2, 1], [1, 2]]) == ([0, 2], [0, 0, 1, 0])


def _batch(tokenizer, group=4):
    """Three prompts of different lengths, each repeated ``group`` times, interleaved."""
    texts = ["Question: where is Zarn?", "Answer the given question please. Question: who rules the north?",
             "Q: 12 * 7 ="]
    import torch

    ids = [tokenizer(t)["input_ids"] for t in texts] * group
    width = max(len(row) for row in ids)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in ids])
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in ids])
    return input_ids, mask


def _greedy_logits(model, input_ids, mask, *, shared):
    import contextlib

    import torch

    with torch.inference_mode(), shared_prefill(model) if shared else contextlib.nullcontext() as count:
        out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=6, do_sample=False,
                             output_logits=True, return_dict_in_generate=True, pad_token_id=0)
    return out.sequences, torch.stack(out.logits), count


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_shared_prefill_gives_every_step_the_same_logits_bit_for_bit(tiny, dtype):
    import copy

    import torch

    model = copy.deepcopy(tiny.model).to(getattr(torch, dtype)).eval()
    input_ids, mask = _batch(tiny.tokenizer)
    seq_full, logits_full, _ = _greedy_logits(model, input_ids, mask, shared=False)
    seq_shared, logits_shared, count = _greedy_logits(model, input_ids, mask, shared=True)
    assert (count.rows, count.distinct) == (12, 3)
    assert torch.equal(seq_shared, seq_full)
    assert torch.equal(logits_shared, logits_full)
    assert "_prefill" not in vars(model)  # switched back to the class's own


def test_a_lora_model_shares_its_prefill_through_the_wrapper(tiny):
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(copy.deepcopy(tiny.model), LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0,
                                                                 target_modules=["q_proj", "v_proj"]))
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:  # a trained adapter, not peft's zero start
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    model.eval()
    input_ids, mask = _batch(tiny.tokenizer, group=2)
    seq_full, logits_full, _ = _greedy_logits(model, input_ids, mask, shared=False)
    seq_shared, logits_shared, count = _greedy_logits(model, input_ids, mask, shared=True)
    assert (count.rows, count.distinct) == (6, 3)
    assert torch.equal(logits_shared, logits_full)
    base_logits = _greedy_logits(tiny.model.eval(), input_ids, mask, shared=False)[1]
    assert not torch.equal(base_logits[0], logits_full[0])  # the adapter counts, so the check can fail


def test_hf_engine_samples_the_same_tokens_with_and_without_sharing(tiny):
    from inspo.engines.hf import HFEngine

    tokenizer = tiny.tokenizer
    prompts = ["Compute 12 * 7 with the calculator.", "What is 345 + 9? Think, then answer."]
    rows = [GenerationInput(tokenizer(p)["input_ids"], [], p) for p in prompts for _ in range(5)]
    seeded = [GenerationInput(r.prompt_ids, [], r.text, seed=40 + i) for i, r in enumerate(rows)]
    kwargs = {"max_new_tokens": 10, "temperature": 1.0, "top_p": 0.9, "stop": []}
    for batch in (rows, seeded):
        runs = [HFEngine(tiny.model, tokenizer, rng=random.Random(7), share_prefill=share).generate(batch, **kwargs)
                for share in (True, False)]
        shared, full = ([g.token_ids for g in run] for run in runs)
        assert shared == full
        assert len({tuple(t) for t in shared}) > 2  # the repeated rows sampled apart
