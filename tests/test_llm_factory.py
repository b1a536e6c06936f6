"""Choosing and building the optimizer LLM from config and environment."""

from __future__ import annotations

import logging
import random

import pytest

from inspo.core.optimizer_llm import LLMError
from inspo.core.reflector import RuleBasedReflector
from inspo.llm.factory import OptimizerLLMConfig, choose_kind, make_optimizer_llm
from inspo.llm.openai_client import OpenAICompatibleClient

KEY = "sk-factory-SECRET-998877"


def test_default_is_rule_based_and_logged(caplog):
    caplog.set_level(logging.INFO, logger="inspo.llm")
    client = make_optimizer_llm(None, random.Random(0), env={})
    assert isinstance(client, RuleBasedReflector)
    assert "rule-based offline reflector (because no optimizer endpoint or local model is configured)" in caplog.text


@pytest.mark.parametrize(
    ("spec", "env", "kind", "why"),
    [
        (OptimizerLLMConfig(base_url="http://127.0.0.1:1/v1"), {}, "openai", "base_url is set in the config"),
        (OptimizerLLMConfig(), {"INSPO_OPTIMIZER_BASE_URL": "http://h/v1"}, "openai", "INSPO_OPTIMIZER_BASE_URL is set"),
        (OptimizerLLMConfig(), {"OPENAI_BASE_URL": "http://h/v1"}, "openai", "OPENAI_BASE_URL is set"),
        (OptimizerLLMConfig(model="gpt-4o-mini"), {"OPENAI_API_KEY": KEY}, "openai", "a model name and an API key"),
        (OptimizerLLMConfig(), {"OPENAI_API_KEY": KEY}, "rule-based", "no optimizer endpoint"),  # a key alone spends nothing
        (OptimizerLLMConfig(local_model_path="smollm2"), {}, "local", "local_model_path"),
        (OptimizerLLMConfig(kind="rule_based"), {"INSPO_OPTIMIZER_BASE_URL": "http://h/v1"}, "rule-based", "kind='rule-based'"),
    ],
)
def test_choose_kind(spec, env, kind, why):
    got, reason = choose_kind(spec, env)
    assert got == kind and why in reason


def test_openai_client_built_from_env_without_logging_the_key(caplog):
    caplog.set_level(logging.DEBUG)
    env = {"INSPO_OPTIMIZER_BASE_URL": "http://127.0.0.1:9/v1", "INSPO_OPTIMIZER_MODEL": "qwen", "MY_KEY": KEY}
    spec = OptimizerLLMConfig(api_key_env="MY_KEY", timeout_s=3, max_retries=1)
    client = make_optimizer_llm(spec, random.Random(0), env=env)
    assert isinstance(client, OpenAICompatibleClient)
    assert (client.base_url, client.model, client.timeout_s, client.max_retries) == ("http://127.0.0.1:9/v1", "qwen", 3.0, 1)
    assert client._api_key.reveal() == KEY
    assert "OpenAI-compatible endpoint http://127.0.0.1:9/v1, model qwen" in caplog.text
    assert KEY not in caplog.text and KEY not in repr(client)


def test_missing_key_variable_and_missing_model_are_clear_errors():
    spec = OptimizerLLMConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="ABSENT_KEY")
    with pytest.raises(LLMError, match="api_key_env='ABSENT_KEY' but that environment variable is not set"):
        make_optimizer_llm(spec, random.Random(0), env={})
    with pytest.raises(LLMError, match="INSPO_OPTIMIZER_MODEL"):
        make_optimizer_llm(OptimizerLLMConfig(kind="openai", base_url="http://h/v1"), random.Random(0), env={})


def test_child_rng_is_derived_deterministically():
    from inspo.core.templates import render_paraphrase

    prompt = [{"role": "user", "content": render_paraphrase("Answer in <answer></answer>.", 3)}]
    outs = [make_optimizer_llm(None, random.Random(4), env={}).generate(prompt)[0] for _ in range(2)]
    assert outs[0] == outs[1]
    parent, reference = random.Random(4), random.Random(4)
    make_optimizer_llm(None, parent, env={})
    reference.getrandbits(64)
    assert parent.random() == reference.random()  # exactly one draw taken from the caller's rng


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": "gpt"}, "is not one of auto, openai, local, rule-based"),
        ({"base_url": "127.0.0.1:8000/v1"}, "must start with http:// or https://"),
        ({"api_key_env": "sk-abc123-secret"}, "NAME of an environment variable"),
        ({"timeout_s": 0}, "timeout_s must be a number of seconds > 0"),
        ({"max_retries": -1}, "max_retries must be an integer >= 0"),
        ({"max_retries": 1.5}, "max_retries must be an integer >= 0"),
        ({"kind": "local"}, "needs local_model_path"),
    ],
)
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        OptimizerLLMConfig(**kwargs)


def test_api_key_value_never_echoed_by_validation():
    with pytest.raises(ValueError) as info:
        OptimizerLLMConfig(api_key_env=KEY)
    assert KEY not in str(info.value)


@pytest.mark.parametrize(("visible", "env", "device"), [("cpu", {}, "cpu"), ("cuda", {}, "cuda"),
                                                          ("cuda", {"LOCAL_RANK": "1"}, "cuda:1"),
                                                          ("cpu", {"LOCAL_RANK": "1"}, "cpu")])
def test_a_local_optimizer_loads_where_the_policy_would(monkeypatch, visible, env, device):
    import inspo.llm.local
    import inspo.models.precision

    built = {}

    class Local:
        def __init__(self, path, *, rng, device):
            built.update(path=path, device=device)

    monkeypatch.setattr(inspo.llm.local, "LocalTransformersClient", Local)
    monkeypatch.setattr(inspo.models.precision, "default_device", lambda: visible)
    spec = OptimizerLLMConfig(kind="local", local_model_path="qwen2.5-coder-0.5b")
    make_optimizer_llm(spec, random.Random(0), env=env)
    assert built == {"path": "qwen2.5-coder-0.5b", "device": device}
