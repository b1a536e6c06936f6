"""inspo.models.head_logps: chunked log-probs and entropies through the LM head, against the naive
log-softmax of full logits, values and gradients."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from golden_compare import same_pass  # noqa: E402
from inspo.models.head_logps import head_logps  # noqa: E402


def _naive(hidden, weight, ids, temperature):
    z = (hidden @ weight.T) / temperature
    logp = torch.log_softmax(z, dim=-1)
    return logp.gather(-1, ids[..., None]).squeeze(-1), -(logp.exp() * logp).sum(-1)


def _inputs(dtype=torch.float64, rows=3, cols=5, hidden=6, vocab=11, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, cols, hidden, generator=g, dtype=dtype, requires_grad=True)
    w = torch.randn(vocab, hidden, generator=g, dtype=dtype, requires_grad=True)
    ids = torch.randint(0, vocab, (rows, cols), generator=g)
    return h, w, ids


@pytest.mark.parametrize("chunk", [1, 4, 15, 100])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_equal_the_naive_log_softmax_whatever_the_chunk(chunk, temperature):
    h, w, ids = _inputs()
    logps, ent = head_logps(h, w, ids, temperature=temperature, chunk=chunk)
    want_logps, want_ent = _naive(h, w, ids, temperature)
    assert logps.shape == ids.shape and ent.shape == ids.shape
    torch.testing.assert_close(logps, want_logps)
    torch.testing.assert_close(ent, want_ent)


@pytest.mark.parametrize("use", ["logps", "entropies", "both"])
def test_gradients_in_hidden_and_weight_equal_the_naive_ones(use):
    h, w, ids = _inputs()
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(ids.shape, generator=g, dtype=h.dtype), torch.randn(ids.shape, generator=g, dtype=h.dtype)

    def loss(logps, ent):
        return {"logps": (logps * a).sum(), "entropies": (ent * b).sum(), "both": (logps * a + ent * b).sum()}[use]

    got = torch.autograd.grad(loss(*head_logps(h, w, ids, temperature=0.8, chunk=4)), (h, w))
    want = torch.autograd.grad(loss(*_naive(h, w, ids, 0.8)), (h, w))
    for x, y in zip(got, want, strict=True):
        torch.testing.assert_close(x, y)


def test_gradcheck_in_float64():
    h, w, ids = _inputs(rows=2, cols=3, hidden=4, vocab=7)
    assert torch.autograd.gradcheck(lambda h, w: head_logps(h, w, ids, temperature=1.3, chunk=2), (h, w))


def test_a_frozen_weight_gets_no_gradient_and_the_hidden_one_still_does():
    h, w, ids = _inputs()
    w = w.detach()
    logps, _ = head_logps(h, w, ids, chunk=4)
    logps.sum().backward()
    assert w.grad is None and h.grad is not None and torch.isfinite(h.grad).all()


def test_bf16_product_under_bf16_is_close_to_float32_and_values_come_back_float32():
    h, w, ids = _inputs(dtype=torch.float32, hidden=64, vocab=300)
    logps, ent = head_logps(h.to(torch.bfloat16), w.to(torch.bfloat16), ids, chunk=7)
    want, want_ent = _naive(h, w, ids, 1.0)
    assert logps.dtype == torch.float32
    torch.testing.assert_close(logps, want, atol=0.3, rtol=0.05)
    torch.testing.assert_close(ent, want_ent, atol=0.3, rtol=0.05)


def test_bad_arguments_say_what_is_wrong():
    h, w, ids = _inputs()
    with pytest.raises(ValueError, match="temperature must be positive"):
        head_logps(h, w, ids, temperature=0.0)
    with pytest.raises(ValueError, match="chunk must be at least 1"):
        head_logps(h, w, ids, chunk=0)
    with pytest.raises(ValueError, match="does not match ids"):
        head_logps(h, w, ids[:, :2])


def test_plain_head_takes_a_bias_free_linear_head_and_refuses_what_it_would_compute_wrongly():
    from types import SimpleNamespace

    from inspo.models.head_logps import plain_head

    def model(head, **config):
        return SimpleNamespace(get_output_embeddings=lambda: head, config=SimpleNamespace(**config))

    linear = torch.nn.Linear(4, 9, bias=False)
    assert plain_head(model(linear)) is linear
    assert plain_head(model(torch.nn.Linear(4, 9))) is None  # a bias
    assert plain_head(model(linear, final_logit_softcapping=30.0)) is None  # Gemma 2's capped logits
    assert plain_head(model(linear, logit_scale=0.06)) is None  # Cohere's scaled logits
    assert plain_head(model(torch.nn.Embedding(9, 4))) is None  # not a linear layer
    assert plain_head(SimpleNamespace()) is None


def test_inside_head_passes_hidden_the_model_returns_the_heads_input_and_after_it_its_logits():
    from inspo.models.head_logps import head_passes_hidden

    head = torch.nn.Linear(4, 9, bias=False)
    body = torch.nn.Sequential(torch.nn.Linear(3, 4), head)
    x = torch.randn(2, 3)
    with head_passes_hidden(head):
        hidden = body(x)
    assert hidden.shape == (2, 4)
    torch.testing.assert_close(head(hidden), body(x))
    assert "forward" not in vars(head)  # the class's forward is back


def test_the_cpu_log_prob_pass_through_the_head_gives_the_logits_paths_values_and_lora_gradients():
    pytest.importorskip("peft")
    pytest.importorskip("trl")
    from contextlib import nullcontext
    from types import SimpleNamespace

    from peft import LoraConfig, get_peft_model

    from inspo.models import load_model
    from inspo.training.cpu_logps import cpu_logps_and_entropies

    trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext), temperature=0.7)
    ids = torch.randint(10, 5000, (3, 14), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[2, 11:] = 0  # a shorter completion, right-padded
    got = {}
    for chunked in (False, True):
        torch.manual_seed(0)
        model = get_peft_model(load_model("tiny-qwen2", dtype="float32").model,
                               LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                                          task_type="CAUSAL_LM"))
        for n, p in model.named_parameters():
            if "lora_B" in n:
                torch.nn.init.normal_(p, std=0.02, generator=torch.Generator().manual_seed(1))
        logps, entropies, _ = cpu_logps_and_entropies(trainer, model, ids, mask, 6, batch_size=2,
                                                      compute_entropy=True, chunked_head=chunked)
        (logps * mask[:, -6:]).sum().backward()
        grads = [p.grad for n, p in sorted(model.named_parameters()) if p.grad is not None]
        got[chunked] = (logps.detach(), entropies.detach(), grads)
    same_pass(got[True], got[False], entropy_atol=1e-4)


def test_without_entropy_the_log_probs_and_their_gradients_are_the_same_and_no_entropy_comes_back():
    h, w, ids = _inputs()
    logps, ent = head_logps(h, w, ids, chunk=4, entropy=False)
    assert ent is None
    want_logps, _ = _naive(h, w, ids, 1.0)
    torch.testing.assert_close(logps, want_logps)
    got = torch.autograd.grad(logps.sum(), (h, w))
    want = torch.autograd.grad(want_logps.sum(), (h, w))
    for x, y in zip(got, want, strict=True):
        torch.testing.assert_close(x, y)
