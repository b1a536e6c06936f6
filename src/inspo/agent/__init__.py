"""Policy engines: how a policy is asked for text (transformers, vLLM, an OpenAI-compatible endpoint).

What an agent IS (its tools, protocol, reward, data) is an environment: :mod:`inspo.envs`. The
search agent that lived here is the ``search-r1`` environment (:mod:`inspo.envs.search_r1`); the
rollout loop and the evaluate seam are :mod:`inspo.envs.loop` and :mod:`inspo.envs.evaluate`.
Their old names as attributes of ``inspo.agent`` still resolve, with a DeprecationWarning naming the new
place; the old modules (``inspo.agent.protocol``, ``.rollout`` ...) raise an ImportError that names it.

Importing this package is cheap; torch/transformers/openai/vllm load when an engine is built.
"""

from inspo.agent.engines import (
    Generation,
    GenerationInput,
    HFEngine,
    PolicyEngine,
    render_messages,
)
from inspo.agent.load import load_engine
from inspo.agent.openai_engine import OpenAIEngine
from inspo.agent.vllm_engine import VLLMEngine, VLLMOptions

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

#: Names that moved to the environment layer: old name -> "module:attr" of the new place.
_MOVED = {
    "AgentConfig": "inspo.envs.loop:AgentConfig",
    "Episode": "inspo.envs.loop:Episode",
    "run_rollouts": "inspo.envs.loop:run_rollouts",
    "Evaluate": "inspo.envs.evaluate:Evaluate",
    "make_evaluate": "inspo.envs.evaluate:make_evaluate",
    "EvaluateFn": "inspo.records:EvaluateFn",
    "SEARCH_R1_INSTRUCTION": "inspo.envs.search_r1.protocol:SEARCH_R1_INSTRUCTION",
    "extract_answer": "inspo.envs.search_r1.protocol:extract_answer",
    "format_observation": "inspo.envs.search_r1.protocol:format_observation",
    "parse_action": "inspo.envs.search_r1.protocol:parse_action",
    "build_prompt": "inspo.envs.tagged:build_prompt",
    "RewardSpec": "inspo.envs.search_r1.rewards:RewardSpec",
    "em_reward": "inspo.envs.search_r1.rewards:em_reward",
    "f1_reward": "inspo.envs.search_r1.rewards:f1_reward",
    "format_ok": "inspo.envs.search_r1.rewards:format_ok",
    "exact_match": "inspo.answers:exact_match",
    "f1_score": "inspo.answers:f1_score",
    "normalize_answer": "inspo.answers:normalize_answer",
}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib
        import warnings

        module, _, attr = _MOVED[name].partition(":")
        warnings.warn(f"inspo.agent.{name} moved to {module}.{attr} (the environment seam); import it from there",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'inspo.agent' has no attribute {name!r}")
