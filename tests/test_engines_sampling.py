"""inspo.engines.sampling: torch.multinomial's draw (same tokens, same generator state after) at
less cost, and HFEngine's sampling token for token equal to transformers' do_sample."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")

from inspo.engines.sampling import multinomial_draw  # noqa: E402

CASES = [(rows, vocab, scale, masked) for rows in (1, 3, 8, 32) for vocab in (2, 7, 1000, 151_936)
         for scale, masked in ((0.3, False), (3.0, True), (30.0, False)) if rows * vocab <= 1_300_000]


def _probs(rows, vocab, scale, masked, seed):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocab, generator=g) * scale
    if masked:  # a top-p cut: zero probabilities
        logits[:, : vocab // 2] = float("-inf")
    return torch.softmax(logits, -1)


@pytest.mark.parametrize(("rows", "vocab", "scale", "masked"), CASES)
def test_the_draw_is_torch_multinomials_and_leaves_the_generator_as_it_would(rows, vocab, scale, masked):
    for seed in range(3):
        probs = _probs(rows, vocab, scale, masked, seed)
        ours, theirs = torch.Generator().manual_seed(seed + 7), torch.Generator().manual_seed(seed + 7)
        got = multinomial_draw(probs, generator=ours)
        want = torch.multinomial(probs, 1, generator=theirs).squeeze(1)
        assert got.dtype == torch.long and got.shape == (rows,)
        assert torch.equal(got, want)
        assert torch.equal(torch.rand(5, generator=ours), torch.rand(5, generator=theirs))


def test_the_default_generator_is_torchs_global_one():
    probs = _probs(8, 5000, 2.0, False, 0)
    torch.manual_seed(3)
    got = multinomial_draw(probs)
    after = torch.rand(3)
    torch.manual_seed(3)
    assert torch.equal(got, torch.multinomial(probs, 1).squeeze(1)) and torch.equal(torch.rand(3), after)


def test_draws_follow_the_distribution():
    """Not only equal to torch's draw: 20,000 draws of a 5-way distribution fit it (chi-square,
    4 degrees of freedom, 0.1 % critical value 18.5), and a uniform one does not fit it."""
    p = torch.tensor([0.5, 0.25, 0.15, 0.07, 0.03])
    g = torch.Generator().manual_seed(0)
    draws = multinomial_draw(p.expand(20_000, 5).contiguous(), generator=g)
    counts = torch.bincount(draws, minlength=5).double()

    def chi2(q):
        expected = 20_000 * q.double()
        return float(((counts - expected) ** 2 / expected).sum())

    assert chi2(p) < 18.5 and chi2(torch.full((5,), 0.2)) > 18.5


def test_torch_draws_exponentials_from_the_uniforms_the_draw_replays():
    """What the draw relies on: exponential_ on float32 is float32(-log1p(-u)) for the float64
    uniforms uniform_ draws from the same state, in the same order. A torch that changes that
    fails here first."""
    g = torch.Generator().manual_seed(11)
    q = torch.empty(64, 3001).exponential_(generator=g)
    g.manual_seed(11)
    u = torch.empty(64, 3001, dtype=torch.float64).uniform_(generator=g)
    assert torch.equal(q, (-torch.log1p(-u)).to(torch.float32))


def test_other_dtypes_go_to_torch_and_bad_probabilities_fail_as_torch_does():
    probs = _probs(4, 50, 1.0, False, 1).double()
    ours, theirs = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(multinomial_draw(probs, ours), torch.multinomial(probs, 1, generator=theirs).squeeze(1))
    bad = _probs(2, 50, 1.0, False, 1)
    bad[1, 3] = float("nan")
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        multinomial_draw(bad)


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (0.7, 0.9), (1.3, 1.0)])
def test_hf_engine_samples_the_tokens_of_transformers_do_sample(temperature, top_p):
    from transformers import GenerationConfig

    from inspo.engines.hf import HFEngine
    from inspo.models import load_model

    loaded = load_model("tiny-qwen2", dtype=torch.float32)
    gen = random.Random(4)
    rows = [[gen.randrange(10, 500) for _ in range(n)] for n in (6, 11, 3, 9)]
    engine = HFEngine(loaded.model, loaded.tokenizer, rng=random.Random(7))
    got = engine._generate_ids(rows, max_new_tokens=16, temperature=temperature, top_p=top_p, stop=[])

    width = max(map(len, rows))
    ids = torch.tensor([[engine.pad_id] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    config = GenerationConfig(max_new_tokens=16, do_sample=True, temperature=temperature, top_p=top_p, top_k=0,
                              min_p=None, repetition_penalty=1.0, pad_token_id=engine.pad_id,
                              eos_token_id=sorted(engine.eos_ids))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(random.Random(7).getrandbits(63))
        want = loaded.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)[:, width:]
    assert got == want.tolist()
    assert len({tuple(r) for r in got}) == len(rows)  # sampled, distinct rows
