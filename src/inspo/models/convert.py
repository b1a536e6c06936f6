"""Builders that write one Hugging Face model directory each (torch/transformers imported lazily).

Every builder takes an empty directory, writes ``config.json``, the weights, the tokenizer
files (with the chat template) and ``generation_config.json`` into it, and returns JSON-able
metadata for the cache marker. They are called through :func:`inspo.models.cache.build_once`,
which makes the write atomic.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("inspo.models")

DTYPES = ("bfloat16", "float16", "float32")


def resolve_dtype(dtype: Any) -> Any:
    """``"bfloat16" | "float16" | "float32"`` or a ``torch.dtype`` -> the ``torch.dtype``
    (``"auto"`` is resolved before, for the device:
    :func:`inspo.models.precision.concrete_dtype`)."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in DTYPES:
        return getattr(torch, dtype)
    raise ValueError(
        f"dtype={dtype!r} is not supported; use one of auto, {', '.join(DTYPES)} or a torch.dtype"
    )


def gguf_tokenizer(gguf: Path, tokenizer_class: str | None = None) -> Any:
    """The tokenizer (with chat template) stored in a GGUF file's metadata.

    ``tokenizer_class`` names a transformers class (``"Qwen2Tokenizer"``, ``"TokenizersBackend"``)
    when the caller knows it: transformers then reads only the tokenizer metadata (~2 s for
    Qwen2.5). ``None`` lets ``AutoTokenizer`` work it out, which for some architectures parses
    the whole file first (~10-20 s for Qwen2.5); both give identical tokenizer files.
    """
    import transformers

    started = time.monotonic()
    loader = (
        getattr(transformers, tokenizer_class) if tokenizer_class else transformers.AutoTokenizer
    )
    tokenizer = loader.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    log.info(
        "read tokenizer from %s (%d tokens) in %.1f s",
        gguf.name,
        len(tokenizer),
        time.monotonic() - started,
    )
    return tokenizer


def save_tokenizer_from_gguf(
    gguf: Path, dest: Path, tokenizer_class: str | None = None
) -> dict[str, Any]:
    """Builder: a tokenizer-only directory read from ``gguf``."""
    gguf_tokenizer(gguf, tokenizer_class).save_pretrained(dest)
    return {"kind": "tokenizer", "source": gguf.name}


def convert_gguf(
    gguf: Path,
    dest: Path,
    *,
    tokenizer: Any | None = None,
    source: dict[str, Any] | None = None,
    tie_head: bool = False,
) -> dict[str, Any]:
    """Builder: dequantise a GGUF causal LM and save it in bfloat16 with its tokenizer.

    The quantizer transformers attaches on GGUF load is dropped (``model.hf_quantizer = None``
    and ``config.quantization_config`` deleted) so the saved directory is a plain bf16
    checkpoint that loads, trains and saves like any other. ``tokenizer`` defaults to the one
    stored in the GGUF. Peak memory is about 5x the bf16 size (~3 GB for Qwen2.5-0.5B).

    ``tie_head``: the published model ties its input embedding and output head, but the GGUF
    stores that matrix twice, quantized apart (Qwen2.5-Coder-0.5B q4_k_m: ``output.weight``
    Q8_0, ``token_embd.weight`` Q5_0); both become the output head's copy, the more precise,
    shared as one tied parameter (see :func:`tie_to_head`).
    """
    import torch
    from transformers import AutoModelForCausalLM

    started = time.monotonic()
    log.info(
        "dequantising %s (%.0f MB) to bfloat16; this runs once per cache",
        gguf.name,
        gguf.stat().st_size / 1e6,
    )
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16
    )
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tied = tie_to_head(model) if tie_head else None
    log.info("loaded %s in %.1f s; saving", gguf.name, time.monotonic() - started)
    model.save_pretrained(dest)
    if tokenizer is None:
        tokenizer = gguf_tokenizer(gguf)
    tokenizer.save_pretrained(dest)
    meta = {
        "kind": "model",
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": "bfloat16",
        "source": source or {"gguf": gguf.name, "bytes": gguf.stat().st_size},
    }
    if tied is not None:
        meta["tied_head"] = tied
    log.info(
        "converted %s: %d parameters in %.1f s",
        gguf.name,
        meta["parameters"],
        time.monotonic() - started,
    )
    return meta


def tie_to_head(model: Any) -> dict[str, Any]:
    """Tie ``model``'s input embedding to its output head, keeping the head's values (its GGUF
    copy is the more precise one); returns how far apart the two copies were (relative norm of
    their difference, as measured before tying)."""
    import torch

    embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
    if embedding.weight.shape != head.weight.shape:
        raise ValueError(
            f"cannot tie an embedding {tuple(embedding.weight.shape)} to a head "
            f"{tuple(head.weight.shape)}"
        )
    with torch.no_grad():
        a, b = embedding.weight.float(), head.weight.float()
        gap = float((a - b).norm() / b.norm())
        embedding.weight.copy_(head.weight)
    model.config.tie_word_embeddings = True
    head.weight = embedding.weight  # one parameter, saved once as the published checkpoint is
    return {"kept": "output head", "relative_difference_before": round(gap, 5)}


@dataclass(frozen=True)
class TinyQwen2Config:
    """Shape of the randomly initialised test model (defaults build in well under a second)."""

    num_hidden_layers: int = 2
    hidden_size: int = 64
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 4096
    seed: int = 0  # torch seed for the weights: same seed + same tokenizer -> same weights

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("hidden_size must be a multiple of num_attention_heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")


def build_tiny_qwen2(
    dest: Path,
    tokenizer: Any,
    config: TinyQwen2Config = TinyQwen2Config(),
    *,
    tokenizer_source: str = "given",
) -> dict[str, Any]:
    """Builder: a randomly initialised Qwen2 causal LM sized to ``tokenizer``'s vocabulary.

    Weights come from ``torch.manual_seed(config.seed)`` inside ``torch.random.fork_rng`` (the
    caller's RNG state is left as it was). Embeddings are tied to the LM head. Saved in float32
    (the model is small); load it in any dtype.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen2Config

    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    hf_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=eos, pad_token_id=pad
    )
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return {
        "kind": "model",
        "architecture": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": "float32",
        "tiny_config": asdict(config),
        "tokenizer_source": tokenizer_source,
    }
