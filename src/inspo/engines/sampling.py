"""``torch.multinomial``'s draw, the same token from the same random numbers, without its cost.

transformers samples a token with ``torch.multinomial(probs, 1)``. On CPU that draws one
exponential variate for every vocabulary entry of every row, serially, and takes the argmax of
``probs / q``: for Qwen's 151,936 tokens at 32 rows, 84 ms a decoding step
(``benchmarks/speed/sampling.py``, 2 threads); the exponentials alone were 17-18 % of a 32-row
``generate`` call of the 0.5B on one core.

:func:`multinomial_draw` returns the very token ``torch.multinomial`` would, and leaves the
generator where it would:

- torch draws ``q = float32(-log1p(-u))`` with ``u`` the same 53-bit uniforms, in the same order,
  that ``uniform_`` draws into a float64 tensor; drawing ``u`` that way costs a quarter of
  ``exponential_`` (no logarithm per entry);
- ``q >= u`` (``-log(1-u) >= u``), so ``probs / u`` bounds every entry's ``probs / q`` from above
  (within float32 rounding, allowed for by a relative slack of 2^-16); the argmax can only be an
  entry whose bound reaches the exact ratio of the entry where the bound peaks. Those few
  candidates get the exact ``float32(-log1p(-u))`` and ratio, and the largest wins, the first on a
  tie as ``argmax`` picks;
- a row with a zero uniform (probability about 2^-53 an entry) takes the exact ratio everywhere.

Tested against ``torch.multinomial`` token for token and for the generator's state after
(``tests/test_engines_sampling.py``). :func:`multinomial_sampler` is the transformers
``LogitsProcessor`` that :class:`~inspo.engines.hf.HFEngine` samples with.
"""

from __future__ import annotations

from typing import Any

#: Relative slack on the bound (float32 rounding of u, q and the ratio is under 2^-21).
SLACK = 2.0**-16


def _check_probs(probs: Any) -> None:
    import torch

    if not bool(torch.isfinite(probs).all()) or bool((probs < 0).any()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if bool((probs.sum(-1) == 0).any()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")


def multinomial_draw(probs: Any, generator: Any = None) -> Any:
    """``torch.multinomial(probs, 1).squeeze(1)`` for a 2-D float32 CPU ``probs``: the same
    indices, the generator (``None``: torch's default) left in the same state. Other dtypes and
    devices go to ``torch.multinomial`` itself."""
    import torch

    if probs.dim() != 2 or probs.dtype != torch.float32 or probs.device.type != "cpu":
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)
    rows = probs.shape[0]
    u = torch.empty(probs.shape, dtype=torch.float64).uniform_(generator=generator)
    bound = probs / u.to(torch.float32)  # >= the exact ratio, up to the slack
    peak, at = bound.max(-1)
    if not bool(torch.isfinite(peak).all()):  # a zero uniform (or bad probabilities)
        _check_probs(probs)
        return (probs / (-torch.log1p(-u)).to(torch.float32)).argmax(-1)
    # a lower bound on each row's largest exact ratio: the exact ratio where the bound peaks
    floor = _exact(probs, u, (torch.arange(rows), at))
    row, col = (bound >= (floor / (1 + SLACK))[:, None]).nonzero(as_tuple=True)
    exact = _exact(probs, u, (row, col))
    best = torch.full((rows,), float("-inf")).scatter_reduce(0, row, exact, "amax")
    winner = exact == best[row]
    first = torch.full((rows,), probs.shape[1], dtype=torch.long)
    return first.scatter_reduce(0, row[winner], col[winner], "amin")


def _exact(probs: Any, u: Any, at: tuple[Any, Any]) -> Any:
    """``probs / q`` at the entries ``at``, computed as ``torch.multinomial`` does."""
    import torch

    return probs[at] / (-torch.log1p(-u[at])).to(torch.float32)


def multinomial_sampler(temperature: float, top_p: float) -> Any:
    """A transformers ``LogitsProcessor`` for greedy ``generate`` that samples as ``do_sample``
    does: temperature, then the top-p nucleus (transformers' own warpers), softmax, then
    :func:`multinomial_draw` from torch's default generator; the returned scores are -inf but 0
    at the drawn token, so greedy's argmax takes it. Same tokens as ``do_sample=True`` with
    ``top_k=0`` from the same seed."""
    import torch
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

    if temperature <= 0:
        raise ValueError(f"multinomial_sampler: temperature must be > 0, got {temperature}")
    warpers = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))

    class MultinomialSample(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            for warper in warpers:
                scores = warper(input_ids, scores)
            tokens = multinomial_draw(torch.softmax(scores, dim=-1))
            chosen = torch.full_like(scores, float("-inf"))
            chosen[torch.arange(scores.shape[0]), tokens] = 0.0
            return chosen

    return MultinomialSample()
