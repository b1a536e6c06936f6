"""Log-probs and entropies of chosen tokens through the LM head, a chunk of positions at a time.

A log-prob pass that asks the model for logits materialises ``positions x vocabulary`` of them
(Qwen2.5's vocabulary is 151,936: 0.3 MB a position in bf16), keeps a log-softmax of the same size
for the backward, and peaks at two or three such tensors while it computes. :func:`head_logps`
takes the head's INPUT (the hidden states, ``positions x hidden``) and the head's weight instead,
and for each chunk of positions computes the chunk's logits, their log-sum-exp, the chosen
token's log-prob and the entropy, then drops the chunk: only the hidden states and one number a
position are kept for the backward, which recomputes each chunk's logits (one extra head product)
to form the gradient. The peak is one chunk's logits and softmax (``chunk x vocabulary`` in
float32) instead of every position's.

Numerics: the head's product runs in ``dtype`` (the autocast dtype of the forward, so bf16 under
bf16 autocast, as the model's own head would), then everything else in float32, from one
``exp(z - max z)`` a chunk: the log-sum-exp, the log-prob ``z_i - logsumexp(z)`` of
``z = logits / temperature`` and the entropy ``logsumexp(z) - sum(softmax(z) * z)``. The
gradients are the closed forms ``d logp_i / dz = onehot(i) - softmax(z)`` and
``d H / dz_k = -p_k (log p_k + H)``.

torch is imported when a function here runs (the autograd class is built on first use).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

DEFAULT_CHUNK = 256
"""Positions a chunk: 256 x 151,936 float32 logits are 156 MB."""


def head_logps(
    hidden: Any,
    weight: Any,
    ids: Any,
    *,
    temperature: float = 1.0,
    dtype: Any = None,
    chunk: int = DEFAULT_CHUNK,
    entropy: bool = True,
) -> tuple[Any, Any]:
    """``(logps, entropies)``, float32, of shape ``ids.shape``, for ``hidden`` of shape
    ``ids.shape + (hidden_size,)`` through a bias-free head of ``weight`` (``vocab x hidden``).

    ``dtype``: what the head's product runs in (None: ``hidden``'s dtype). Differentiable in
    ``hidden`` and ``weight`` (a tied or trained head), for both outputs. ``entropy=False``: the
    entropies are not computed and come back as None (a reference or old-policy pass).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1 position, got {chunk}")
    if hidden.shape[:-1] != ids.shape:
        raise ValueError(f"hidden {tuple(hidden.shape)} does not match ids {tuple(ids.shape)}")
    flat = hidden.reshape(-1, hidden.size(-1))
    logps, entropies = _function().apply(
        flat,
        weight,
        ids.reshape(-1),
        float(temperature),
        dtype or hidden.dtype,
        int(chunk),
        entropy,
    )
    return logps.view(ids.shape), entropies.view(ids.shape) if entropy else None


def plain_head(model: Any) -> Any:
    """``model``'s LM head where :func:`head_logps` computes exactly what it does: a bias-free
    linear layer whose output the model returns as its logits (no soft-capping or scaling of them
    in the config); else None (use the model's own logits)."""
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    weight = getattr(head, "weight", None)
    if weight is None or getattr(head, "bias", None) is not None or weight.dim() != 2:
        return None
    if type(head).__name__ != "Linear":
        return None
    config = getattr(model, "config", None)
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return None
    return head


@contextmanager
def head_passes_hidden(head: Any) -> Iterator[None]:
    """While the block runs, ``head`` returns its input: the model's "logits" are the hidden states
    the head would have read (``logits_to_keep`` still picks the positions). Its weight, hooks and
    tying are untouched; the forward goes through the model (and any wrapper) as usual."""
    own = vars(head).get("forward")  # a wrapper's (accelerate's hooks) or None: the class's
    head.forward = _identity
    try:
        yield
    finally:
        if own is None:
            del head.forward
        else:
            head.forward = own


def _identity(x: Any) -> Any:
    return x


def _logits(hidden: Any, weight: Any, temperature: float) -> Any:
    """``hidden @ weight.T / temperature`` in float32 (float64 for float64 weights), the product
    in ``weight``'s dtype."""
    import torch

    with torch.autocast(hidden.device.type, enabled=False):
        z = (hidden.to(weight.dtype) @ weight.T).to(
            torch.promote_types(weight.dtype, torch.float32)
        )
    return z.div_(temperature) if temperature != 1.0 else z


@cache
def _function() -> Any:
    import torch

    class HeadLogps(torch.autograd.Function):
        @staticmethod
        def forward(ctx, hidden, weight, ids, temperature, dtype, chunk, entropy):
            n, w = hidden.size(0), weight.to(dtype)  # cast once, not per chunk
            logps = hidden.new_empty(n, dtype=torch.promote_types(w.dtype, torch.float32))
            entropies = torch.zeros_like(logps)
            lse = torch.empty_like(logps)
            for s in range(0, n, chunk):
                rows = slice(s, s + chunk)
                z = _logits(hidden[rows], w, temperature)
                top = z.amax(dim=-1)
                z.sub_(top[:, None])  # z - max: one exp serves every output
                e = z.exp()
                total = e.sum(-1)
                log_total = total.log()
                lse[rows] = top + log_total
                logps[rows] = z.gather(1, ids[rows, None]).squeeze(1) - log_total
                if entropy:  # H = log sum e - sum(e (z - max)) / sum e
                    entropies[rows] = log_total - (e * z).sum(-1) / total
            ctx.set_materialize_grads(False)  # an unused output's gradient is None, not zeros
            if not entropy:
                ctx.mark_non_differentiable(entropies)
            ctx.save_for_backward(hidden, weight, ids, lse, entropies)
            ctx.temperature, ctx.dtype, ctx.chunk = temperature, dtype, chunk
            return logps, entropies

        @staticmethod
        def backward(ctx, g_logps, g_entropies):
            hidden, weight, ids, lse, entropies = ctx.saved_tensors
            if g_logps is None and g_entropies is None:
                return None, None, None, None, None, None, None
            need_hidden, need_weight = ctx.needs_input_grad[:2]
            grad_hidden = torch.empty_like(hidden) if need_hidden else None
            acc = lse.dtype
            grad_weight = (
                torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_weight else None
            )
            t, chunk, w = ctx.temperature, ctx.chunk, weight.to(ctx.dtype)
            for s in range(0, hidden.size(0), chunk):
                h, rows = hidden[s : s + chunk], slice(s, s + chunk)
                logp = _logits(h, w, t).sub_(lse[rows, None])
                p = logp.exp()
                # dL/dz = p * c + onehot(i) * g_logps, c = -g_logps - g_entropies * (log p + H)
                if g_entropies is not None:
                    c = logp.add_(entropies[rows, None]).mul_(-g_entropies[rows, None].to(acc))
                    if g_logps is not None:
                        c.sub_(g_logps[rows, None].to(acc))
                else:
                    c = -g_logps[rows, None].to(acc)
                del logp
                grad_z = p.mul_(c)
                del c
                if g_logps is not None:
                    grad_z.scatter_add_(1, ids[rows, None], g_logps[rows, None].to(acc))
                if t != 1.0:
                    grad_z.div_(t)
                with torch.autocast(hidden.device.type, enabled=False):
                    if need_hidden:
                        grad_hidden[rows] = grad_z.to(w.dtype) @ w
                    if need_weight:
                        grad_weight.add_(grad_z.T @ h.to(acc))
            if need_weight:
                grad_weight = grad_weight.to(weight.dtype)
            return grad_hidden, grad_weight, None, None, None, None, None

    return HeadLogps
