"""Training with ``rl.use_vllm``: the LoRA adapter synced into a real vLLM
(inspo.training.vllm_sync).

Needs the ``vllm`` module (``make test`` runs this file in the vLLM venv, see the Makefile);
without it every test here skips at the import. The model is ``tiny-qwen2-hd32`` in float32
(vLLM's CPU attention needs head size >= 32). The test that could fail in the interesting way:
after the adapter changes, vLLM must generate exactly what transformers generates with the
trained model, and must not re-load the adapter when nothing changed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")
pytest.importorskip("peft")

from agent_helpers import greedy_ids, hf_greedy_ids  # noqa: E402
from inspo import artifacts  # noqa: E402
from inspo.config.train import resolve  # noqa: E402
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION  # noqa: E402
from train_run_script import TINY, scripted_reward  # noqa: E402

TOKENS = 10  # greedy tokens compared between vLLM and transformers

MODEL = "tiny-qwen2-hd32"
VLLM = ("model.vllm_kv_cache_gib=0.05", "model.vllm_max_model_len=2048", "model.vllm_enforce_eager=true")


@pytest.fixture(scope="module")
def adapter_sync(tmp_path_factory):
    """An AdapterSync on the tiny model beside a peft model whose adapter is not zero."""
    from peft import LoraConfig, get_peft_model

    from inspo.models import load_model
    from inspo.training.vllm_sync import start_adapter_sync

    config = resolve("cpu-tiny", overrides=[f"model.name_or_path={MODEL}", "model.dtype=float32", "model.lora=true",
                                            "model.lora_r=8", *VLLM])
    loaded = load_model(MODEL, dtype="float32")
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=list(config.model.lora_target_modules),
                      init_lora_weights=False)
    model = get_peft_model(loaded.model, lora)
    sync = start_adapter_sync(config, loaded.path, tmp_path_factory.mktemp("run"), seed=0)
    yield sync, model, loaded.tokenizer
    sync.shutdown()


def test_synced_adapter_generates_what_the_trained_model_generates(adapter_sync):
    import torch

    sync, model, tokenizer = adapter_sync
    prompt = tokenizer(SEARCH_R1_INSTRUCTION + " Where is Zarn?")["input_ids"][:40]
    model.eval()

    engine = sync.engine_for(model, version=1)
    first = greedy_ids(engine, prompt, TOKENS)
    assert first == hf_greedy_ids(model, tokenizer, prompt, TOKENS)
    assert sync.syncs == 1
    assert sync.engine_for(model, version=1) is engine and sync.syncs == 1  # nothing new: no reload

    with torch.no_grad():  # a "training step": the adapter moves
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.add_(torch.randn_like(param) * 2.0)
    second = greedy_ids(sync.engine_for(model, version=2), prompt, TOKENS)
    assert sync.syncs == 2
    assert second == hf_greedy_ids(model, tokenizer, prompt, TOKENS)
    assert second != first  # the new adapter is really in use

    sync.engine_for(model, version=3)
    kept = sorted(p.name for p in sync.directory.iterdir())
    assert kept == ["adapter-2", "adapter-3"]  # older adapters are removed


def test_training_with_use_vllm_plays_every_rollout_in_vllm(tmp_path, monkeypatch):
    import torch

    from inspo.training.run import run_training
    from inspo.training.vllm_sync import AdapterSync

    synced: list[int] = []
    played: list[int] = []
    sync = AdapterSync.sync
    engine_for = AdapterSync.engine_for

    def record_sync(self, model, version):
        synced.append(version)
        return sync(self, model, version)

    def record_engine_for(self, model, version, rng=None):
        played.append(version)
        return engine_for(self, model, version, rng)

    monkeypatch.setattr(AdapterSync, "sync", record_sync)
    monkeypatch.setattr(AdapterSync, "engine_for", record_engine_for)
    out = tmp_path / "run"
    config = resolve("cpu-tiny", overrides=[
        *TINY, f"output_dir={out}", f"model.name_or_path={MODEL}", "model.lora=true", "model.lora_r=8",
        "rl.use_vllm=true", "rl.steps=3", "rl.save_steps=0", *VLLM,
    ])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        summary = run_training(config, progress=False, reward_fn=scripted_reward)
    finally:
        torch.set_num_threads(threads)

    assert summary.steps == 3
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]
    # every generation went through vLLM: P_0 (global step 0), the rollouts of steps 1, 2, 3
    # (global steps 0, 1, 2) and the verification at the end of step 2 (an evolve step, after the
    # second optimizer step); the adapter was synced once per optimizer step, never twice
    assert played == [0, 0, 1, 2, 2]
    assert synced == [0, 1, 2]
    assert (out / "model" / "config.json").is_file()
