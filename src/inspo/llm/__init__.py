"""Optimizer LLMs behind one seam (:class:`LLMClient`, defined in the core that calls it:
:mod:`inspo.core.optimizer_llm`).

- :class:`OpenAICompatibleClient`: OpenAI, Gemini's compatible endpoint, vLLM, llama.cpp, Ollama.
- :class:`LocalTransformersClient`: a local transformers chat model.
- :class:`RuleBasedReflector`: the offline default, no LLM needed (it lives in
  :mod:`inspo.core.reflector`, next to the templates it reads).
- :class:`ScriptedLLM`: scripted answers for tests.
- :func:`make_optimizer_llm`: picks one from an :class:`OptimizerLLMConfig` and the environment.

Importing this package is cheap: openai, torch and transformers load only when a client needs them.
"""

from inspo.core.optimizer_llm import LLMClient, LLMError, LLMUsage, Message
from inspo.core.reflector import FailureExample, FailureMode, RuleBasedReflector
from inspo.llm.factory import OptimizerLLMConfig, choose_kind, make_optimizer_llm
from inspo.llm.local import LocalTransformersClient
from inspo.llm.openai_client import OpenAICompatibleClient
from inspo.llm.scripted import ScriptedLLM

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
    "make_optimizer_llm",
]
