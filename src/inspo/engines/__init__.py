"""Policy engines: how a policy is asked for text (transformers, vLLM, an OpenAI-compatible
endpoint).

What an agent IS (its tools, protocol, reward, data) is an environment: :mod:`inspo.envs`. The
search agent is the ``search-r1`` environment (:mod:`inspo.envs.search_r1`); the rollout loop and
the evaluate seam are :mod:`inspo.envs.loop` and :mod:`inspo.envs.evaluate`.

Importing this package is cheap; torch/transformers/openai/vllm load when an engine is built.
"""

from inspo.engines.base import Generation, GenerationInput, PolicyEngine, render_messages
from inspo.engines.hf import HFEngine
from inspo.engines.load import load_engine
from inspo.engines.openai_engine import OpenAIEngine
from inspo.engines.vllm_engine import VLLMEngine, VLLMOptions

__all__ = [
    "Generation",
    "GenerationInput",
    "HFEngine",
    "OpenAIEngine",
    "PolicyEngine",
    "VLLMEngine",
    "VLLMOptions",
    "load_engine",
    "render_messages",
]
