"""inspo's OpenAI-compatible clients against vLLM's own OpenAI server (``vllm serve``) on 127.0.0.1.

The optimizer client (:class:`~inspo.llm.openai_client.OpenAICompatibleClient`: chat
completions, n > 1, a timeout) and the frozen-policy engine of ``inspo evolve``
(:class:`~inspo.engines.openai_engine.OpenAIEngine`: completions with stop strings) are tested against
the FastAPI stand-in elsewhere; here the server is the real one. It serves ``tiny-qwen2-hd32``
in float32, so its greedy text can be checked against transformers on the same weights. Needs
the ``vllm`` module (``make test`` runs this file in ``.venv-vllm``); starting the server takes
~30-60 s on 2 cores. The server runs with LoRA enabled and run-time adapter loading allowed, so
a trained adapter can be pushed to it between steps (:mod:`inspo.engines.vllm_server`).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")
httpx = pytest.importorskip("httpx")

from inspo.core.optimizer_llm import LLMError  # noqa: E402
from inspo.engines.base import GenerationInput  # noqa: E402
from inspo.engines.hf import HFEngine  # noqa: E402
from inspo.engines.openai_engine import OpenAIEngine  # noqa: E402
from inspo.llm.openai_client import OpenAICompatibleClient  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.integration]

MODEL = "tiny-qwen2-hd32"
SERVED = "tiny"
CHAT = [{"role": "user", "content": "Where is the capital of Zarn?"}]


@pytest.fixture(scope="module")
def vllm_server():
    """``vllm serve`` on the tiny model; yields (base_url, model path); stopped afterwards."""
    from inspo.engines.vllm_server import serve
    from inspo.models import model_path

    path = str(model_path(MODEL))
    with serve(path, served_name=SERVED, dtype="float32", max_model_len=2048, kv_cache_bytes=64 << 20,
               extra_args=["--enable-lora", "--max-lora-rank", "8", "--max-loras", "2"],
               env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}) as server:
        yield server.base_url, path


def _client(base_url: str, **kw) -> OpenAICompatibleClient:
    kw.setdefault("timeout_s", 60.0)
    kw.setdefault("max_retries", 0)
    return OpenAICompatibleClient(base_url=base_url, model=SERVED, api_key="EMPTY", rng=random.Random(0),
                                  sleep=lambda s: None, env={}, **kw)


def test_optimizer_client_gets_n_completions_in_one_request(vllm_server):
    base_url, _ = vllm_server
    client = _client(base_url)
    texts = client.generate(CHAT, n=3, temperature=1.0, max_tokens=8)
    assert len(texts) == 3 and all(isinstance(t, str) for t in texts)
    assert client.usage.calls == 1  # vLLM honours n: one request, not three
    assert client.usage.estimated is False and client.usage.prompt_tokens > 5
    assert 3 <= client.usage.completion_tokens <= 24


def test_optimizer_client_times_out_and_says_so(vllm_server):
    base_url, _ = vllm_server
    client = _client(base_url, timeout_s=0.05, max_retries=1)
    with pytest.raises(LLMError, match=r"failed after 2 attempt\(s\): timed out after 0.05 s"):
        client.generate(CHAT, n=1, temperature=0.0, max_tokens=1000)
    assert client.usage.failures == 1 and client.usage.calls == 0


def test_policy_engine_stops_where_transformers_would_and_keeps_the_stop(vllm_server):
    from inspo.models import load_model

    base_url, path = vllm_server
    hf = HFEngine.from_loaded(load_model(MODEL, dtype="float32"))
    prompt = "Answer the question.\n\nQuestion: where is the capital of Zarn?\n"
    [free] = hf.generate([GenerationInput(hf.encode(prompt), [], prompt)], max_new_tokens=24, temperature=0.0,
                         top_p=1.0, stop=[])
    assert len(free.text) > 12
    stop = free.text[8:12]  # a stop string the greedy text is known to reach
    [ref] = hf.generate([GenerationInput(hf.encode(prompt), [], prompt)], max_new_tokens=24, temperature=0.0,
                        top_p=1.0, stop=[stop])

    engine = OpenAIEngine(SERVED, base_url=base_url, api_key="EMPTY", max_retries=0)
    [served] = engine.generate([GenerationInput([], [], prompt)], max_new_tokens=24, temperature=0.0, top_p=1.0,
                               stop=[stop])
    assert served.finish == "stop" and served.text.endswith(stop)  # the API strips it; the engine puts it back
    assert served.text == ref.text  # greedy, float32: the same text as transformers up to the stop


def test_inspo_evolve_runs_with_the_vllm_server_as_its_frozen_policy(vllm_server, tmp_path):
    from inspo.config.train import resolve
    from inspo.training.evolve import run_evolve

    base_url, _ = vllm_server
    config = resolve("cpu-tiny", overrides=[
        f"output_dir={tmp_path / 'evo'}", "rl.questions_per_step=2", "rl.group_size=2", "rl.max_response_tokens=8",
        "data.warmup_questions=2", "coevolution.evolve_every=2", "coevolution.prune_every=1",
        "coevolution.validation_size=2", "coevolution.candidates_per_call=2", "final_choice=weight", "data.eval=",
    ])
    summary = run_evolve(config, steps=2, policy_url=base_url, policy_model=SERVED, progress=False)
    assert summary.steps == 2 and SERVED in summary.policy
    assert summary.ledger["training_rollouts"] == 2 * 2 * 2
    assert summary.ledger["verification_rollouts"] > 0  # step 2 evolved: candidates were played by the server


def test_an_adapter_pushed_between_steps_generates_what_the_trained_model_generates(vllm_server, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    from inspo.engines.vllm_engine import eos_ids_of
    from inspo.engines.vllm_server import AdapterPusher, VLLMServerEngine
    from inspo.models import load_model

    base_url, path = vllm_server
    loaded = load_model(MODEL, dtype="float32")
    model = get_peft_model(loaded.model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                    init_lora_weights=False))
    model.eval()
    tokenizer = loaded.tokenizer
    engine = VLLMServerEngine(base_url, SERVED, tokenizer, eos_ids=eos_ids_of(path, tokenizer))
    pusher = AdapterPusher(engine, tmp_path / "adapters")
    prompts = [tokenizer(f"Question: where is the capital of {c}?\n")["input_ids"] for c in ("Zarn", "Quell")]

    def greedy(policy):
        rows = [GenerationInput(p, [], "") for p in prompts]
        return [g.token_ids for g in policy.generate(rows, max_new_tokens=12, temperature=0.0, top_p=1.0, stop=[])]

    base = greedy(engine)  # the served base model, before any adapter
    first = greedy(pusher.engine_for(model, version=1))
    assert first == greedy(HFEngine(model, tokenizer)) and first != base
    assert pusher.engine_for(model, version=1) is engine and pusher.pushes == 1  # nothing new: no push

    with torch.no_grad():  # a "training step": the adapter moves
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.add_(torch.randn_like(param) * 2.0)
    second = greedy(pusher.engine_for(model, version=2))
    assert pusher.pushes == 2 and second == greedy(HFEngine(model, tokenizer)) and second != first
    served = {m["id"] for m in httpx.get(f"{base_url}/models", timeout=10).json()["data"]}
    assert "inspo-adapter-2" in served and "inspo-adapter-1" not in served  # the old adapter was unloaded
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == ["inspo-adapter-2"]

    # sampled rows: the row's own seed decides its tokens, whatever else shares the batch
    rows = [GenerationInput(prompts[0], [], "", seed=7), GenerationInput(prompts[1], [], "", seed=8)]
    once = [g.token_ids for g in engine.generate(rows, max_new_tokens=8, temperature=1.0, top_p=1.0, stop=[])]
    again = [g.token_ids for g in engine.generate(rows[:1], max_new_tokens=8, temperature=1.0, top_p=1.0, stop=[])]
    assert again[0] == once[0]

    with pytest.raises(TypeError, match="NCCL"):  # full weights cannot be pushed over HTTP
        pusher.sync(torch.nn.Linear(2, 2), version=3)


def test_training_with_the_vllm_server_plays_every_rollout_there(vllm_server, tmp_path):
    """inspo train with rl.vllm_mode=server: the LoRA adapter pushed to the server once per optimizer step."""
    from inspo import artifacts

    base_url, path = vllm_server
    out = tmp_path / "run"
    script = Path(__file__).with_name("train_run_script.py")
    sets = [f"model.name_or_path={path}", "model.lora=true", "model.lora_r=8", "rl.use_vllm=true",
            "rl.vllm_mode=server", f"rl.vllm_server_url={base_url}", "rl.steps=3", "rl.save_steps=0"]
    cmd = [sys.executable, str(script), str(out), "--record-vllm"] + [a for s in sets for a in ("--set", s)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]
    records = artifacts.read_jsonl(out / "vllm_calls.rank0.jsonl")
    # P_0, the rollouts of steps 1-3 and step 2's verification, all played by the server; the
    # adapter pushed once per optimizer step
    assert [r["version"] for r in records if r["event"] == "play"] == [0, 0, 1, 2, 2]
    assert [r["version"] for r in records if r["event"] == "sync"] == [0, 1, 2]
    served = {m["id"] for m in httpx.get(f"{base_url}/models", timeout=10).json()["data"]}
    assert not any(name.startswith("inspo-r0-adapter") for name in served)  # unloaded at the end


def test_server_mode_refuses_full_weights_and_a_missing_url(tmp_path):
    from inspo.config.train import resolve
    from inspo.training.run import SetupError, run_training

    for sets, expected in ((["model.lora=false", "rl.vllm_server_url=http://127.0.0.1:9"], "NCCL"),
                           (["model.lora=true"], "rl.vllm_server_url")):
        config = resolve("cpu-tiny", overrides=[f"output_dir={tmp_path / 'r'}", f"model.name_or_path={MODEL}",
                                                "rl.use_vllm=true", "rl.vllm_mode=server", *sets])
        with pytest.raises(SetupError, match=expected):
            run_training(config, progress=False)
