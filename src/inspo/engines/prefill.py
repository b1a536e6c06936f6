"""A repeated prompt prefilled once: GRPO's G rollouts of a question share their first turn.

A training step's first ``generate`` call holds each question's prompt G times (the calculator
preset: 4 prompts x 8 rows), and transformers prefills every row: 8 times the work the distinct
prompts need. While :func:`shared_prefill` is active, ``generate``'s prefill runs the decoder on
the distinct rows only (same ids and the same attention mask), copies each one's keys and values
to every row that repeats it, and gives the LM head every row's last hidden state (so the head's
product has the full prefill's shape); decoding then goes on over all rows as before.

The result is bitwise what the full prefill gives where the model's products do not depend on
how many rows share the call: true of torch's CPU matmuls over more than a handful of rows
(checked for bf16 and float32 at the 0.5B's shapes, 1 and 2 threads, on an AVX-512 EPYC; float32
over 1-5 rows takes another kernel, hence :data:`MIN_SHARED_TOKENS` and the head's full shape) and
of its attention, which works row by row; ``tests/test_engines_prefill.py`` checks every step's
logits on the machine it runs on. cuBLAS may choose another kernel for another row count, so
:class:`~inspo.engines.hf.HFEngine` shares the prefill on CPU only. Rows are compared whole (ids
and mask): rows that differ anywhere are prefilled separately, as before. A transformers whose
``generate`` has no separate prefill (``GenerationMixin._prefill``) or passes it other arguments
prefills as it always did.

torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

_ROW_KWARGS = ("attention_mask", "position_ids")
"""``generate``'s per-row prefill arguments that the distinct rows take their slice of."""
_SHARED_KWARGS = ("logits_to_keep", "cache", "use_cache")
"""Arguments passed as they are. A prefill with any other argument runs unshared."""
MIN_SHARED_TOKENS = 32
"""A prefill whose distinct rows hold fewer tokens runs unshared: torch's float32 products over
1-5 rows take other kernels than over many (measured here), and so small a prefill costs little."""


def distinct_rows(rows: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
    """``(first, inverse)``: the index of each distinct row's first occurrence, in order, and for
    every row the position in ``first`` of its distinct row (``rows[first[inverse[i]]] ==
    rows[i]``)."""
    seen: dict[tuple[int, ...], int] = {}
    first: list[int] = []
    inverse: list[int] = []
    for i, row in enumerate(rows):
        key = tuple(row)
        if key not in seen:
            seen[key] = len(first)
            first.append(i)
        inverse.append(seen[key])
    return first, inverse


@dataclass
class PrefillCount:
    """What a :func:`shared_prefill` block saved: ``rows`` prefilled as ``distinct`` rows."""

    rows: int = 0
    distinct: int = 0


@contextmanager
def shared_prefill(model: Any, count: PrefillCount | None = None) -> Iterator[PrefillCount]:
    """While the block runs, ``model.generate`` prefills each distinct input row once.

    ``model`` may wrap the generating model (a PEFT model): every transformers
    ``GenerationMixin`` among its modules is switched. Yields ``count`` (a new
    :class:`PrefillCount` where None), which adds up what the block's prefills shared.
    """
    from transformers import GenerationMixin

    count = count if count is not None else PrefillCount()
    generators = [
        m for m in model.modules() if isinstance(m, GenerationMixin) and hasattr(m, "_prefill")
    ]
    for module in generators:
        module._prefill = _SharedPrefill(module, count)
    try:
        yield count
    finally:
        for module in generators:
            del module._prefill


class _SharedPrefill:
    def __init__(self, module: Any, count: PrefillCount) -> None:
        self.module = module
        self.prefill = module._prefill
        self.count = count

    def __call__(
        self, input_ids: Any, generation_config: Any, model_kwargs: dict, *args: Any, **kwargs: Any
    ) -> Any:
        import torch

        mask = model_kwargs.get("attention_mask")
        keys = torch.cat([input_ids, mask], dim=1) if mask is not None else input_ids
        first, inverse = distinct_rows(keys.tolist())
        cache = model_kwargs.get("cache")
        head = self.module.get_output_embeddings()
        shareable = (
            len(first) < len(inverse)
            and len(first) * input_ids.shape[1] >= MIN_SHARED_TOKENS
            and generation_config.prefill_chunk_size is None
            and cache is not None
            and cache.get_seq_length() == 0
            and head is not None
            and set(model_kwargs) <= {*_ROW_KWARGS, *_SHARED_KWARGS}
        )
        if not shareable:
            return self.prefill(input_ids, generation_config, model_kwargs, *args, **kwargs)
        self.count.rows += len(inverse)
        self.count.distinct += len(first)
        pick = torch.tensor(first, device=input_ids.device)
        spread = torch.tensor(inverse, device=input_ids.device)
        distinct_kwargs = {
            key: value.index_select(0, pick) if key in _ROW_KWARGS and value is not None else value
            for key, value in model_kwargs.items()
        }
        hook = head.register_forward_pre_hook(
            lambda _, inputs: (_every_row(inputs[0], spread), *inputs[1:])
        )
        try:
            outputs = self.prefill(
                input_ids.index_select(0, pick), generation_config, distinct_kwargs, *args, **kwargs
            )
        finally:
            hook.remove()
        cache.batch_select_indices(spread)
        return outputs


def _every_row(hidden: Any, spread: Any) -> Any:
    """The head's input for every row, laid out as the full prefill's would be (the same strides:
    torch's float32 product over a strided slice and over a contiguous copy differ in the last
    bit, as do products over 1-5 rows and over many)."""
    import torch

    rows = torch.empty_strided(
        (spread.numel(), *hidden.shape[1:]),
        hidden.stride(),
        dtype=hidden.dtype,
        device=hidden.device,
    )
    return rows.copy_(hidden.index_select(0, spread))
