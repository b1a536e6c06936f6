"""Choose and build the optimizer LLM from a config and the environment.

Rules of the choice (``kind="auto"``), first match wins:

1. an endpoint is configured — ``base_url`` in the config, or ``INSPO_OPTIMIZER_BASE_URL`` /
   ``OPENAI_BASE_URL`` in the environment, or a model name (config or
   ``INSPO_OPTIMIZER_MODEL``) together with an API key (OpenAI's own endpoint) — gives the
   :class:`~inspo.llm.openai_client.OpenAICompatibleClient`;
2. a ``local_model_path`` gives the :class:`~inspo.llm.local.LocalTransformersClient`;
3. otherwise the offline :class:`~inspo.core.reflector.RuleBasedReflector`.

An explicit ``kind`` skips the choice. The decision and its reason are logged on the
``inspo.llm`` logger; the API key never is. The built client gets its own ``random.Random``
derived from the one passed in, so its draws do not shift the caller's.
"""

from __future__ import annotations

import logging
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from inspo.core.optimizer_llm import LLMClient, LLMError

logger = logging.getLogger("inspo.llm")

KINDS = ("auto", "openai", "local", "rule-based")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class OptimizerLLMConfig:
    """Which optimizer LLM to use and how to reach it."""

    kind: str = "auto"
    """``auto`` (see the module docstring), ``openai``, ``local`` or ``rule-based``."""
    base_url: str | None = None
    """OpenAI-compatible API root, e.g. ``http://127.0.0.1:8000/v1``; env fallbacks apply."""
    model: str | None = None
    """Model name at the endpoint; falls back to ``INSPO_OPTIMIZER_MODEL``."""
    api_key_env: str | None = None
    """NAME of the environment variable holding the key (default: INSPO_OPTIMIZER_API_KEY, then
    OPENAI_API_KEY)."""
    timeout_s: float = 120.0
    """Seconds per request before it counts as timed out."""
    max_retries: int = 4
    """Retries after the first attempt on 429 / 5xx / connection errors / timeouts."""
    local_model_path: str | None = None
    """A transformers checkpoint folder, a .gguf file, or ``smollm2`` (for kind ``local``)."""

    def __post_init__(self) -> None:
        kind = str(self.kind).strip().lower().replace("_", "-")
        if kind == "rulebased":
            kind = "rule-based"
        if kind not in KINDS:
            raise ValueError(f"optimizer kind {self.kind!r} is not one of {', '.join(KINDS)}")
        self.kind = kind
        if self.base_url is not None and not re.match(r"^https?://", self.base_url):
            raise ValueError(
                f"optimizer base_url {self.base_url!r} must start with http:// or https:// "
                "(e.g. http://127.0.0.1:8000/v1)"
            )
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            raise ValueError(
                "optimizer api_key_env must be the NAME of an environment variable (e.g. "
                "OPENAI_API_KEY), not the key itself; put the key in that variable"
            )
        if (
            isinstance(self.timeout_s, bool)
            or not isinstance(self.timeout_s, (int, float))
            or self.timeout_s <= 0
        ):
            raise ValueError(
                f"optimizer timeout_s must be a number of seconds > 0, got {self.timeout_s!r}"
            )
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or self.max_retries < 0
        ):
            raise ValueError(
                f"optimizer max_retries must be an integer >= 0, got {self.max_retries!r}"
            )
        if self.kind == "local" and not self.local_model_path:
            raise ValueError(
                "optimizer kind 'local' needs local_model_path (a checkpoint folder, a .gguf file, "
                "or 'smollm2')"
            )


def choose_kind(spec: OptimizerLLMConfig, env: Mapping[str, str]) -> tuple[str, str]:
    """(kind, reason) for ``spec`` under ``env``; see the module docstring for the rules."""
    if spec.kind != "auto":
        return spec.kind, f"kind={spec.kind!r} in the config"
    if spec.base_url:
        return "openai", "base_url is set in the config"
    for var in ("INSPO_OPTIMIZER_BASE_URL", "OPENAI_BASE_URL"):
        if env.get(var):
            return "openai", f"{var} is set"
    model = spec.model or env.get("INSPO_OPTIMIZER_MODEL")
    if model and _api_key(spec, env, required=False):
        return "openai", "a model name and an API key are set (OpenAI's own endpoint)"
    if spec.local_model_path:
        return "local", "local_model_path is set in the config"
    return "rule-based", "no optimizer endpoint or local model is configured"


def _api_key(spec: OptimizerLLMConfig, env: Mapping[str, str], *, required: bool) -> str | None:
    if spec.api_key_env:
        key = env.get(spec.api_key_env)
        if not key and required:
            raise LLMError(
                f"api_key_env={spec.api_key_env!r} but that environment variable is not set; "
                f"export {spec.api_key_env}=... before running"
            )
        return key or None
    return env.get("INSPO_OPTIMIZER_API_KEY") or env.get("OPENAI_API_KEY") or None


def make_optimizer_llm(
    spec: OptimizerLLMConfig | None,
    rng: random.Random,
    *,
    env: Mapping[str, str] | None = None,
    rules: Any = None,
) -> LLMClient:
    """Build the optimizer LLM that ``spec`` (default: all ``auto``) and the environment ask for.

    Args:
        spec: the config; ``None`` means ``OptimizerLLMConfig()``.
        rng: the parent random source; the client gets ``random.Random(rng.getrandbits(64))``.
        env: where to read environment variables (``os.environ`` when omitted).
        rules: the agent environment's rules for the rule-based reflector
            (``agent_env.reflector_rules``, :class:`~inspo.core.reflector.rules.ReflectorRules`;
            None: the answer-level rules). LLM optimizers read the prompt alone.

    Raises:
        LLMError: the chosen client cannot be built (no model name, a missing key variable,
            a local model path that does not exist).
    """
    spec = spec or OptimizerLLMConfig()
    env = os.environ if env is None else env
    child = random.Random(rng.getrandbits(64))
    kind, why = choose_kind(spec, env)
    if kind == "openai":
        from inspo.llm.openai_client import OpenAICompatibleClient

        client = OpenAICompatibleClient(
            base_url=spec.base_url,
            model=spec.model,
            api_key=_api_key(spec, env, required=True),
            timeout_s=spec.timeout_s,
            max_retries=spec.max_retries,
            rng=child,
            env=env,
        )
        logger.info(
            "optimizer LLM: OpenAI-compatible endpoint %s, model %s (because %s)",
            client.base_url,
            client.model,
            why,
        )
        return client
    if kind == "local":
        if not spec.local_model_path:
            raise LLMError("optimizer kind 'local' needs local_model_path")
        from inspo.llm.local import LocalTransformersClient
        from inspo.models.precision import default_device

        device = (
            default_device()
        )  # a GPU when one is visible, as for the policy: decoding 400 tokens on CPU takes minutes
        if (
            device == "cuda" and env.get("LOCAL_RANK", "").isdigit()
        ):  # under torchrun: this process's GPU, not GPU 0
            device = f"cuda:{env['LOCAL_RANK']}"
        logger.info(
            "optimizer LLM: local transformers model %s on %s (because %s)",
            spec.local_model_path,
            device,
            why,
        )
        return LocalTransformersClient(spec.local_model_path, rng=child, device=device)
    from inspo.core.reflector import RuleBasedReflector

    logger.info("optimizer LLM: rule-based offline reflector (because %s)", why)
    return RuleBasedReflector(rng=child, rules=rules)
