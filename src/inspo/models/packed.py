"""bf16 linear layers multiplied with weights packed once for oneDNN (CPU generation).

On CPU, torch's bfloat16 ``linear`` hands oneDNN the weight in torch's row-major layout, and the
kernel re-blocks it as it multiplies. Packed once in oneDNN's own layout
(``torch.ops.mkldnn._reorder_linear_weight``, what inductor's CPU freezing pass does), the same
product (``torch.ops.mkldnn._linear_pointwise``) reads the weight as it is stored. Measured on
this project's Sapphire Rapids machine (torch 2.13, 2 cores, nothing else running,
``benchmarks/speed/roofline.py``): a decoding step of the 0.5B 1.11-1.16x faster at 8 rows and
1.01-1.06x at 32 (one product alone, its weight in cache, gains 1.3-1.5x; a decoding step streams
the whole model from memory). At a prefill's thousands of rows one product was no faster
(0.91-0.96x), so those rows take torch's ``linear``. The results were bitwise equal to ``linear``
for every row count tried, 1 to 512 (``tests/test_models_packed.py`` checks it on the machine it
runs on).

Packing a weight costs about ten of its products (0.26 s for the head), so a packed weight is
kept for as long as the weight does not change: :class:`PackedLinears` holds one per layer,
keyed on the weight's storage and version counter. A LoRA policy's base layers and head never
change, so they are packed once per run; a weight the optimizer updates (full fine-tuning) bumps
its version counter and is packed again at the next generation. Code that rewrites a weight in
place through ``.data`` bypasses the version counter and must call :meth:`PackedLinears.clear`.
The packed copies cost the weights' size again in memory (about 1 GB for the 0.5B).

Used only where it pays and changes nothing: CPU, bf16 weights and input, no autograd (the
packed product has no backward: a call under autograd takes torch's ``linear``), oneDNN with
bf16 support. Elsewhere every layer runs as before. torch is imported inside the functions.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PACKED_MAX_ROWS = 256
"""Inputs with more rows than this (a prefill) take torch's ``linear``: packing does not pay
there (measured above)."""

_ROWS_HINT = 32
"""The row count oneDNN is told to expect when packing (a decoding step's batch)."""


def packing_supported() -> bool:
    """Whether this torch can pack bf16 linear weights for oneDNN on CPU."""
    import torch

    ops = torch.ops.mkldnn
    try:
        return bool(
            torch.backends.mkldnn.is_available()
            and hasattr(ops, "_reorder_linear_weight")
            and hasattr(ops, "_linear_pointwise")
            and ops._is_mkldnn_bf16_supported()
        )
    except (AttributeError, RuntimeError):
        return False


class PackedLinears:
    """Packed weights of a model's bf16 ``nn.Linear`` layers, reused across calls while the
    weights stay the same."""

    def __init__(self, max_rows: int = PACKED_MAX_ROWS, *, enabled: bool = True):
        self.max_rows = max_rows
        self.enabled = enabled
        self._packed: weakref.WeakKeyDictionary[Any, tuple[tuple, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def clear(self) -> None:
        """Drop every packed weight (they are rebuilt on the next call that needs them)."""
        self._packed.clear()

    def __len__(self) -> int:
        return len(self._packed)

    @contextmanager
    def active(self, model: Any) -> Iterator[int]:
        """While the block runs, ``model``'s CPU bf16 linear layers multiply with packed
        weights where the call allows it; yields how many layers were switched (0 where packing
        is off or not supported: the block runs unchanged)."""
        layers = self._layers(model) if self.enabled and packing_supported() else []
        for layer in layers:
            layer.forward = _PackedForward(self, layer)
        try:
            yield len(layers)
        finally:
            for layer in layers:
                del layer.forward

    def _layers(self, model: Any) -> list[Any]:
        import torch

        return [
            m
            for m in model.modules()
            if type(m) is torch.nn.Linear
            and "forward" not in vars(m)  # an instance-level forward (a hook wrapper) is kept
            and m.weight.device.type == "cpu"
            and m.weight.dtype == torch.bfloat16
        ]

    def weight(self, layer: Any) -> Any:
        """``layer``'s packed weight, packed again if the weight changed since."""
        import torch

        w = layer.weight
        key = (w.data_ptr(), w._version, tuple(w.shape))
        held = self._packed.get(layer)
        if held is None or held[0] != key:
            with torch.no_grad():
                held = (key, torch.ops.mkldnn._reorder_linear_weight(w.detach(), _ROWS_HINT))
            self._packed[layer] = held
        return held[1]


class _PackedForward:
    """A layer's forward while packing is active: the packed product where it applies."""

    def __init__(self, owner: PackedLinears, layer: Any):
        self.owner = owner
        self.layer = weakref.ref(layer)

    def __call__(self, x: Any) -> Any:
        import torch
        import torch.nn.functional as F

        layer = self.layer()
        rows = x.numel() // max(x.shape[-1], 1)
        if (
            torch.is_grad_enabled()
            or x.dtype != torch.bfloat16
            or x.device.type != "cpu"
            or not 0 < rows <= self.owner.max_rows
        ):
            return F.linear(x, layer.weight, layer.bias)
        packed = self.owner.weight(layer)
        return torch.ops.mkldnn._linear_pointwise(x, packed, layer.bias, "none", [], "")
