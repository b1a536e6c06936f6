"""The LM head's input made contiguous, so that a frozen bf16 head on CPU is not copied per row.

transformers computes the logits of the last positions only (``logits_to_keep``) by slicing the
hidden states, ``hidden[:, -k:, :]``: a view that is not contiguous when a row holds more than k
positions (every prefill of a generation; the completion columns of a log-prob pass). torch's
``matmul`` of that 3-D view by the head's 2-D weight cannot fold the rows into one matrix
product without copying the view; when neither operand requires a gradient it runs a batched
product instead, the weight expanded across the rows, and on CPU in bfloat16 that expansion is
materialised: one copy of the weight per row. Measured with torch 2.13 (CPU), Qwen2.5's
151,936 x 896 head (272 MB in bf16): ``linear`` of a 32-row non-contiguous slice took 8.3 GiB
more than it held (8 rows: 2.0 GiB); the same slice made contiguous, or the weight requiring a
gradient, or float32: 0.0-0.4 GiB. A LoRA policy's head is frozen, so every turn's prefill of a
32-episode calculator step paid it: one 32 x 150 prefill of the 0.5B, 8.16 GiB against 0.16 with
this module (``benchmarks/speed/head_memory.py``); a static calculator step's generation peaked at
10.2 GiB before, 2.6 after (BENCHMARKS.md, "A `calculator` step on CPU").

:func:`contiguous_head_input` copies the head's input instead (rows x k x hidden: kilobytes to a
few MB) while a block runs. Harmless where the input is contiguous already or the copy is not
needed (CUDA). torch is not imported here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def _contiguous_input(module: Any, args: tuple) -> tuple | None:
    first = args[0] if args else None
    if first is None or not hasattr(first, "is_contiguous") or first.is_contiguous():
        return None
    return (first.contiguous(), *args[1:])


@contextmanager
def contiguous_head_input(model: Any) -> Iterator[None]:
    """While the block runs, ``model``'s output embeddings (its LM head) see a contiguous input.

    ``model``: a transformers ``PreTrainedModel`` or a PEFT model around one; a model without
    ``get_output_embeddings`` (or whose head is ``None``) is left alone.
    """
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    if head is None:
        yield
        return
    handle = head.register_forward_pre_hook(_contiguous_input)
    try:
        yield
    finally:
        handle.remove()
