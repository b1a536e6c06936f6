"""``load_engine``: a local policy engine by kind (``hf``: transformers, ``vllm``: vLLM).

Its own module so that :mod:`inspo.engines.base` and :mod:`inspo.engines.vllm_engine` (which
builds on the first) do not import each other.
"""

from __future__ import annotations

import os
import random
from typing import Any

from inspo.engines.base import PolicyEngine
from inspo.engines.hf import HFEngine

#: The kinds :func:`load_engine` starts.
ENGINE_KINDS = ("hf", "vllm")


def load_engine(
    name_or_path: str | os.PathLike[str],
    *,
    kind: str = "hf",
    dtype: str = "auto",
    device: str = "cpu",
    rng: random.Random | None = None,
    vllm: Any = None,
) -> PolicyEngine:
    """A local policy engine on a registered model name or a Hugging Face folder.

    ``kind``: ``"hf"`` loads the model with :func:`inspo.models.load_model` on ``device`` and
    wraps it in :class:`HFEngine`; ``"vllm"`` starts a
    :class:`~inspo.engines.vllm_engine.VLLMEngine` with ``vllm`` (a
    :class:`~inspo.engines.vllm_engine.VLLMOptions`; None: its defaults) and raises ImportError
    with the install command when the ``vllm`` module is missing or broken. ``dtype``: the
    weights dtype; ``"auto"`` (bfloat16 where the device multiplies it fast, else float32) is
    resolved by the loader (:func:`inspo.models.precision.concrete_dtype`); the entries resolve
    and log it first (:func:`inspo.models.precision.resolve_precision`) and pass a concrete one.
    """
    if kind == "vllm":
        from inspo.engines.vllm_engine import VLLMEngine, VLLMOptions

        return VLLMEngine.from_pretrained(
            name_or_path, dtype=dtype, rng=rng, options=vllm if vllm is not None else VLLMOptions()
        )
    if kind != "hf":
        raise ValueError(
            f"load_engine: kind must be one of {', '.join(ENGINE_KINDS)}; got {kind!r}"
        )
    from inspo.models import load_model

    return HFEngine.from_loaded(load_model(name_or_path, dtype=dtype, device=device), rng=rng)
