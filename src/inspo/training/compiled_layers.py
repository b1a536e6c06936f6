"""The decoder layers' training passes through ``torch.compile`` (``model.compile_layers``; issue 64).

On CPU the training pass of the ``calculator`` step ran at 0.07-0.12 of its matmul roofline: most
of its time went to bf16 elementwise products (SiLU times up, RMSNorm, rotary, LoRA dropout's
masks), dtype copies and attention's backward, each a separate pass over memory. Inductor fuses the
elementwise work of a decoder layer into a few C++ loops (a C++ compiler is needed: ``g++``).

What is compiled, and what is not:

- the layer's own forward (the function transformers' checkpointing wraps), once for every layer
  (the layers share its code; their weights are the graph's inputs) and for every sequence length
  (``dynamic=True``); gradient checkpointing stays outside it, eager, and replays the compiled
  forward in the backward;
- only where gradients are recorded (``torch.is_grad_enabled()`` and the layer in training mode):
  generation, the held-out test and any pass under ``no_grad`` run the eager layer, so the
  rollouts are the eager model's, token for token;
- random draws (LoRA dropout's masks) go through eager's generator (inductor's ``fallback_random``):
  the same masks as the eager pass, in the same order.

Not bitwise: fused kernels round differently. On ``tiny-qwen2`` in float32 the LoRA gradients of a
micro-batch were 2.8e-7 (relative L2) from the eager pass's and the loss equal to 9 digits
(``tests/test_training_compiled_layers.py`` bounds them). The first call compiles (tens of
seconds to minutes on 2 cores; inductor caches the result on disk for later processes).
"""

from __future__ import annotations

import functools
import types
from typing import Any

from inspo.training.checkpointing import checkpointing_layers

#: Marks a layer whose forward this module replaced (so a second call leaves it alone).
COMPILED = "_inspo_compiled_forward"


def require_cpp_compiler() -> None:
    """Refuse, with the fix, where inductor has no C++ compiler to build its CPU kernels."""
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # InvalidCxxCompiler and whatever the search raises on odd systems
        raise RuntimeError(
            "model.compile_layers needs a C++ compiler for torch.compile's CPU kernels and none "
            f"was found ({exc}); install one (e.g. apt-get install g++, or set CXX), or set "
            "model.compile_layers=false"
        ) from exc


def compile_decoder_layers(model: Any) -> int:
    """Route ``model``'s decoder layers' training passes through one compiled forward; returns
    how many layers. A layer already routed is left as it is; a model without transformers'
    checkpointable decoder layers is refused."""
    import torch

    layers = checkpointing_layers(model)
    if not layers:
        raise ValueError(
            "model.compile_layers found no decoder layers to compile (transformers' "
            "GradientCheckpointingLayer); set model.compile_layers=false for this model"
        )
    if next(model.parameters()).device.type == "cpu":
        require_cpp_compiler()
    compiled: dict[Any, Any] = {}
    for layer in layers:
        if getattr(layer, COMPILED, None) is not None:
            continue
        cls = type(layer)
        inner = getattr(cls.forward, "__wrapped__", cls.forward)  # under transformers' checkpointing
        if cls not in compiled:
            compiled[cls] = torch.compile(inner, dynamic=True, options={"fallback_random": True})
        setattr(layer, COMPILED, compiled[cls])
        layer.forward = types.MethodType(_routed_forward, layer)  # a deepcopy routes the copy
    return len(layers)


def _routed_forward(layer: Any, *args: Any, **kwargs: Any) -> Any:
    """A routed layer's forward: the compiled one where gradients are recorded (checkpointed as
    transformers would), the class's eager one elsewhere and wherever a cache is passed."""
    import torch

    if not (layer.training and torch.is_grad_enabled()) or kwargs.get("past_key_values") is not None:
        return type(layer).forward(layer, *args, **kwargs)
    compiled = getattr(layer, COMPILED)
    if layer.gradient_checkpointing:
        return layer._gradient_checkpointing_func(functools.partial(compiled, layer, **kwargs), *args)
    return compiled(layer, *args, **kwargs)
