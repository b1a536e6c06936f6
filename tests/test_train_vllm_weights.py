"""Full fine-tuning with ``rl.use_vllm``: every weight synced into a real vLLM in the training
process (inspo.training.vllm_sync.WeightSync), on one process and on two under torchrun.

Needs the ``vllm`` module (``make test`` runs this file in the vLLM venv, see the Makefile);
without it every test here skips at the import. The model is ``tiny-qwen2-hd32`` in float32
(vLLM's CPU attention needs head size >= 32; its output embedding is tied, the case vLLM's
in-place reload gets wrong unless the head is handed over by name). The test that could fail in
the interesting way: after a real optimizer step and a sync, vLLM must generate exactly what
transformers generates with the trained weights.

An engine in this process changes the process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, vLLM's
settings cache, a no-op ``torch.set_num_threads``); the fixture puts all three back, and the
training runs go to subprocesses (``tests/train_run_script.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from agent_helpers import greedy_ids, hf_greedy_ids  # noqa: E402
from inspo import artifacts  # noqa: E402
from inspo.config.train import resolve  # noqa: E402
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION  # noqa: E402
from inspo.processes import free_local_port  # noqa: E402

TOKENS = 12  # greedy tokens compared between vLLM and transformers

MODEL = "tiny-qwen2-hd32"
VLLM = ("model.vllm_kv_cache_gib=0.05", "model.vllm_max_model_len=2048", "model.vllm_enforce_eager=true")
SCRIPT = Path(__file__).with_name("train_run_script.py")


@pytest.fixture(scope="module")
def weight_sync():
    """A WeightSync on the tiny model beside the transformers model it is synced from."""
    import torch
    import vllm.envs

    from inspo.models import load_model
    from inspo.training.vllm_sync import start_weight_sync

    set_threads, env = torch.set_num_threads, os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")
    config = resolve("cpu-tiny", overrides=[f"model.name_or_path={MODEL}", "model.dtype=float32", "model.lora=false",
                                            *VLLM])
    loaded = load_model(MODEL, dtype="float32")
    sync = start_weight_sync(config, loaded.path, seed=0)
    try:
        yield sync, loaded.model, loaded.tokenizer
    finally:
        sync.shutdown()
        torch.set_num_threads = set_threads
        if env is None:
            os.environ.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)
        else:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = env
        vllm.envs.disable_envs_cache()


def _optimizer_step(model, prompt_ids):
    """One real training step: the LM loss on ``prompt_ids``, backward, AdamW (a large rate)."""
    import torch

    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    ids = torch.tensor([prompt_ids])
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    model.eval()


def test_synced_weights_generate_what_the_trained_model_generates(weight_sync):
    import torch

    sync, model, tokenizer = weight_sync
    assert sync.engine.in_process
    prompts = [tokenizer(SEARCH_R1_INSTRUCTION + f" Where is {city}?")["input_ids"][:40] for city in ("Zarn", "Quell")]

    engine = sync.engine_for(model, version=0)
    before = [greedy_ids(engine, p, TOKENS) for p in prompts]
    assert before == [hf_greedy_ids(model, tokenizer, p, TOKENS) for p in prompts]
    assert sync.syncs == 1 and sync.engine_for(model, version=0) is engine and sync.syncs == 1  # no new step: no sync

    embed = model.get_input_embeddings().weight.detach().clone()
    _optimizer_step(model, prompts[0])
    assert not torch.equal(embed, model.get_input_embeddings().weight)  # the (tied) head moved too
    after = [greedy_ids(sync.engine_for(model, version=1), p, TOKENS) for p in prompts]
    assert sync.syncs == 2
    assert after == [hf_greedy_ids(model, tokenizer, p, TOKENS) for p in prompts]
    assert after != before  # the new weights are really in use

    _optimizer_step(model, prompts[1])  # a second sync replaces the first one's weights
    again = [greedy_ids(sync.engine_for(model, version=2), p, TOKENS) for p in prompts]
    assert again == [hf_greedy_ids(model, tokenizer, p, TOKENS) for p in prompts]


def test_a_tied_head_is_handed_over_by_name(weight_sync):
    from inspo.engines.vllm_engine import checkpoint_weights

    _, model, _ = weight_sync
    names = [name for name, _ in checkpoint_weights(model)]
    assert model.config.tie_word_embeddings
    assert names.count("lm_head.weight") == 1 and "model.embed_tokens.weight" in names
    assert len(names) == len(list(model.parameters())) + 1


def _train(out: Path, *, processes: int, steps: int = 3, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``tests/train_run_script.py`` with full fine-tuning and rl.use_vllm, recording each vLLM sync and play."""
    sets = [f"model.name_or_path={MODEL}", "model.lora=false", "rl.use_vllm=true", f"rl.steps={steps}",
            "rl.save_steps=0", *VLLM, *extra]
    launch = [sys.executable] if processes == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
        "--master_port", str(free_local_port())]
    cmd = [*launch, str(SCRIPT), str(out), "--record-vllm"] + [a for s in sets for a in ("--set", s)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)


def _calls(out: Path, rank: int) -> tuple[list[int], list[int]]:
    records = artifacts.read_jsonl(out / f"vllm_calls.rank{rank}.jsonl")
    return ([r["version"] for r in records if r["event"] == "play"],
            [r["version"] for r in records if r["event"] == "sync"])


@pytest.mark.slow
def test_full_fine_tuning_plays_every_rollout_in_vllm(tmp_path):
    out = tmp_path / "run"
    done = _train(out, processes=1)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]
    played, synced = _calls(out, 0)
    # P_0 (global step 0), the rollouts of steps 1, 2, 3 (global steps 0, 1, 2) and the
    # verification at the end of step 2 (an evolve step, after the second optimizer step): all
    # in vLLM, the weights synced once per optimizer step, never twice
    assert played == [0, 0, 1, 2, 2]
    assert synced == [0, 1, 2]
    assert (out / "model" / "config.json").is_file()


@pytest.mark.slow
@pytest.mark.integration
def test_two_processes_each_play_their_shard_in_their_own_vllm(tmp_path):
    out = tmp_path / "ddp"
    # 3 questions x G 2 = 6 rows, 3 per process
    done = _train(out, processes=2, extra=("rl.questions_per_step=3", "rl.micro_batch_size=3"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = artifacts.read_jsonl(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["rollout/count"] == 6 for m in metrics)  # both processes' rollouts were gathered
    for rank in (0, 1):
        played, synced = _calls(out, rank)
        # each process synced its own engine once per optimizer step and played its rows of steps
        # 1-3 with it; P_0 and the verification at step 2 run on the main process only
        assert synced == [0, 1, 2], (rank, synced)
        assert played == ([0, 0, 1, 2, 2] if rank == 0 else [0, 1, 2]), (rank, played)
    choices = {rank: artifacts.read_jsonl(out / f"choices.rank{rank}.jsonl") for rank in (0, 1)}
    assert all(len({c["question_id"] for c in choices[r] if c["step"] == 1}) == 2 for r in (0, 1))  # its own shard
    assert (out / "model" / "config.json").is_file()


@pytest.mark.slow
def test_the_sync_check_script_compares_vllm_with_transformers_after_each_step(tmp_path):
    """benchmarks/speed/vllm_sync_check.py (run on the 0.5B for BENCHMARKS §2) on the tiny model, in its
    own process (it starts its own engine)."""
    out = tmp_path / "check.json"
    script = Path(__file__).parents[1] / "benchmarks" / "speed" / "vllm_sync_check.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(script), "--quick", "--json", str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["ok"] and [c["step"] for c in result["checks"]] == [0, 1, 2]
    assert all(c["equal"] and c["touched"] == [] for c in result["checks"])
    assert result["checks"][1]["vllm"] != result["checks"][0]["vllm"]  # the steps really moved the policy
    assert "vLLM equals transformers" in done.stdout
