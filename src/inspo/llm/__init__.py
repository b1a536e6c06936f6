"""Optimizer LLMs behind one seam (:class:`LLMClient`).

- :class:`OpenAICompatibleClient`: OpenAI, Gemini's compatible endpoint, vLLM, llama.cpp, Ollama.
- :class:`LocalTransformersClient`: a local transformers chat model.
- :class:`RuleBasedReflector`: the offline default, no LLM needed (it lives in
  :mod:`inspo.core.reflector`, next to the templates it reads).
- :class:`ScriptedLLM`: scripted answers for tests.
- :func:`make_optimizer_llm`: picks one from an :class:`OptimizerLLMConfig` and the environment.

Importing this package is cheap: openai, torch and transformers load only when a client needs them.
"""

from inspo.llm.base import LLMClient, LLMError, LLMUsage, Message
from inspo.llm.factory import OptimizerLLMConfig, choose_kind, make_optimizer_llm
from inspo.llm.local import LocalTransformersClient
from inspo.llm.openai_client import OpenAICompatibleClient
from inspo.llm.scripted import ScriptedLLM

_REFLECTOR_NAMES = ("FailureExample", "FailureMode", "RuleBasedReflector", "detect_failure_modes")

__all__ = [
    "FailureExample",
    "FailureMode",
    "LLMClient",
    "LLMError",
    "LLMUsage",
    "LocalTransformersClient",
    "Message",
    "OpenAICompatibleClient",
    "OptimizerLLMConfig",
    "RuleBasedReflector",
    "ScriptedLLM",
    "choose_kind",
    "detect_failure_modes",
    "make_optimizer_llm",
]


def __getattr__(name: str):
    """The reflector's names, on first use: :mod:`inspo.core.reflector` imports
    :mod:`inspo.llm.base`, so importing it here eagerly would be an import circle."""
    if name in _REFLECTOR_NAMES:
        from inspo.core import reflector

        return getattr(reflector, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
