"""Per-row sampling seeds: a row samples the same tokens whatever else shares its batch.

Paired comparisons (a candidate against its parent on D_B, instructions on dev questions) use
common random numbers: question q's rollout under instruction A and under instruction B draw
the same random numbers. With one seed per ``generate`` call that holds only when the two are
played in separate calls of the same shape, one instruction at a time. With a seed per row it
holds whatever the batch, so every candidate of a round can be played in one batch
(:meth:`inspo.envs.evaluate.Evaluate.many`), which on a GPU costs about as much as one of them.

- an :class:`~inspo.envs.loop.Episode` may carry a ``seed``;
- :func:`turn_seed` gives its seed for one turn (``GenerationInput.seed``);
- :func:`step_seed` gives that row's seed for one decoding step;
- :func:`gumbel_sample_processor` is a transformers ``LogitsProcessor`` that samples each row
  from softmax(logits / temperature) restricted to the top-p nucleus (what ``do_sample`` does)
  by the Gumbel-max trick with the row's own generator, for use with greedy decoding: argmax of
  the processed scores is the sample. vLLM takes the per-row seed as ``SamplingParams.seed``.

Pure functions except the processor; ``torch`` is imported only when it is built.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from inspo.rng import derived_rng

_MASK63 = (1 << 63) - 1


def seed_of(*keys: Hashable) -> int:
    """A 63-bit seed from ``keys``, the same in every process (:func:`inspo.rng.derived_rng`)."""
    return derived_rng(*keys).getrandbits(63)


def _mix(seed: int, n: int) -> int:
    """SplitMix64 of ``seed`` advanced ``n`` times: cheap, well spread, 63 bits."""
    z = (seed + (n + 1) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) & _MASK63


def turn_seed(seed: int, turn: int) -> int:
    """The seed of an episode's ``turn`` (1-based) from the episode's ``seed``."""
    return _mix(seed, 2 * turn)


def step_seed(seed: int, step: int) -> int:
    """The seed of decoding step ``step`` (0-based) of a row whose turn seed is ``seed``."""
    return _mix(seed, 2 * step + 1)


def gumbel_sample_processor(
    seeds: Sequence[int], start: int, temperature: float, top_p: float
) -> Any:
    """A ``LogitsProcessor`` for greedy ``generate`` that makes argmax a seeded sample per row.

    ``seeds``: one turn seed per row; ``start``: the input width (decoding step = current length
    minus ``start``). Scores are divided by ``temperature``, cut to the top-p nucleus (tokens
    outside get -inf, as transformers' ``TopPLogitsWarper`` does), and Gumbel noise
    ``-log(-log(u))`` from the row's generator is added; argmax of the result is distributed as
    softmax(scores / temperature) over the nucleus.
    """
    import torch
    from transformers import LogitsProcessor, TopPLogitsWarper

    if temperature <= 0:
        raise ValueError(f"gumbel_sample_processor: temperature must be > 0, got {temperature}")
    top = TopPLogitsWarper(top_p) if top_p < 1.0 else None
    rows = list(seeds)

    class GumbelSample(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            if input_ids.shape[0] != len(rows):
                raise RuntimeError(f"{input_ids.shape[0]} rows but {len(rows)} seeds")
            step = input_ids.shape[1] - start
            scores = scores.float() / temperature
            if top is not None:
                scores = top(input_ids, scores)
            # float64 uniforms: in float32 the largest Gumbel draw is about 16, so tokens more than
            # ~16 nats below the top could never be drawn; in float64 the cap is about 37
            noise = torch.empty(scores.shape, dtype=torch.float64, device=scores.device)
            generator = torch.Generator(device=scores.device)
            for i, seed in enumerate(rows):
                generator.manual_seed(step_seed(seed, step))
                noise[i].uniform_(generator=generator)
            noise = -torch.log(-torch.log(noise.clamp_(min=1e-300, max=1.0 - 2.0**-53)))
            return (scores.double() + noise).float()

    return GumbelSample()
