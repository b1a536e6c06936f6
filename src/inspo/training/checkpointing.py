"""Gradient checkpointing on part of the decoder layers (``model.gradient_checkpointing_layers``).

transformers checkpoints every decoder layer or none: each checkpointed layer keeps only its input
through the forward and runs its forward again in the backward, and a layer that keeps its
activations costs memory instead (the 0.5B at the ``calculator`` micro-batch: about 0.33 GiB a
layer). :func:`limit_checkpointing` keeps checkpointing on the first layers only, so a run spends
the memory it has on skipping recompute. Measured (BENCHMARKS.md §2): 18 of 24 layers made the
calculator step's backward 1.06-1.11x faster and the step 1.01-1.04x, for 1.1-1.3 GiB.

Exact: a checkpointed layer's recompute replays its forward with the random state it had (LoRA
dropout draws the same masks), so the loss, the gradients and the random streams after the pass
are bitwise those of checkpointing every layer or none (``tests/test_training_checkpointing.py``).
"""

from __future__ import annotations

import math
from typing import Any


def checkpointed_count(layers: int, share: float) -> int:
    """How many of ``layers`` decoder layers a ``share`` (0 < share <= 1) checkpoints: the
    share rounded up, so any share above 0 keeps at least one."""
    if not 0 < share <= 1:
        raise ValueError(f"the checkpointed share must be in (0, 1]; got {share!r}")
    return min(layers, math.ceil(round(share * layers, 9)))


def checkpointing_layers(model: Any) -> list[Any]:
    """The model's checkpointable decoder layers (transformers' ``GradientCheckpointingLayer``),
    in module order."""
    try:
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError as exc:  # transformers 4.x before the per-layer flag
        raise RuntimeError(
            "model.gradient_checkpointing_layers below 1 needs transformers' per-layer "
            "checkpointing (transformers.modeling_layers.GradientCheckpointingLayer); upgrade "
            "transformers, or set model.gradient_checkpointing_layers=1.0"
        ) from exc
    return [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]


def limit_checkpointing(model: Any, share: float) -> int:
    """Leave gradient checkpointing on the first :func:`checkpointed_count` decoder layers of
    ``model`` and turn it off on the rest; returns how many layers are checkpointed.

    A model whose checkpointing is off (no layer has it) is left alone and 0 is returned.
    transformers' ``gradient_checkpointing_enable`` turns every layer back on (TRL calls it
    after each generation), so call this before each training forward.
    """
    layers = checkpointing_layers(model)
    if not any(getattr(layer, "gradient_checkpointing", False) for layer in layers):
        return 0
    keep = checkpointed_count(len(layers), share)
    for i, layer in enumerate(layers):
        layer.gradient_checkpointing = i < keep
    return keep
