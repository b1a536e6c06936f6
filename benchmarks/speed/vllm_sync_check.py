"""Does a full-weight sync keep an in-process vLLM on the trained model? (issue 22, a real model)

``tests/test_train_vllm_weights.py`` checks this on the tiny model. This script does it on a
real one (default: the 0.5B policy of ``cpu-tiny``): it starts the engine ``rl.use_vllm`` starts
(:func:`inspo.training.vllm_sync.start_weight_sync`), then, before any training and after each of
``--steps`` real AdamW steps on all weights, syncs and compares ``--tokens`` greedy tokens from
vLLM with transformers' on the same weights, for two chat prompts. It also checks that a sync
leaves the training model's own weights untouched (vLLM gets the tensors themselves). Prints
each comparison with the decoded text; exits 1 when any differs.

Usage::

    .venv-vllm/bin/python benchmarks/speed/vllm_sync_check.py                  # qwen2.5-coder-0.5b, float32
    .venv-vllm/bin/python benchmarks/speed/vllm_sync_check.py --quick          # tiny model
    python3 benchmarks/speed/vllm_sync_check.py --device cuda                  # on a GPU, both copies on it
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from inspo.lab.harness import add_common, start, write_result

PROMPTS = ("Where was Ama Rot born?", "Where was Kel Vane born?")


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--lr", type=float, default=2e-5, help="AdamW learning rate of each step (cpu-tiny's)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--tokens", type=int, default=24, help="greedy tokens compared per prompt")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2-hd32, a large rate, 12 tokens")
    p.add_argument("--device", default="cpu", help="where transformers' copy trains (cuda: as inspo train does on a GPU)")
    add_common(p, seed=False)
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.lr, args.tokens = "tiny-qwen2-hd32", 0.05, 12
    import torch

    from inspo.config.train import resolve
    from inspo.engines.base import GenerationInput
    from inspo.engines.hf import HFEngine
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
    from inspo.models import load_model
    from inspo.models.precision import default_device
    from inspo.training.vllm_sync import start_weight_sync

    # transformers' copy trains on --device; vLLM runs where its build runs
    info = start("benchmarks/speed/vllm_sync_check.py", argv, threads=args.threads,
                 device=f"transformers {args.device}, vLLM {default_device()}", dtype=args.dtype)
    config = resolve("cpu-tiny", overrides=[f"model.name_or_path={args.model}", f"model.dtype={args.dtype}",
                                            "model.lora=false", "model.vllm_kv_cache_gib=0.25",
                                            "model.vllm_max_model_len=2048"])
    loaded = load_model(args.model, dtype=args.dtype, device=args.device)
    model, tokenizer = loaded.model, loaded.tokenizer
    sync = start_weight_sync(config, loaded.path, seed=0)
    prompts = [list(tokenizer.apply_chat_template([{"role": "user", "content": f"{SEARCH_R1_INSTRUCTION} Question: {q}"}],
                                                  add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"])
               for q in PROMPTS]

    def greedy(engine) -> list[list[int]]:
        out = engine.generate([GenerationInput(p, [], "") for p in prompts], max_new_tokens=args.tokens,
                              temperature=0.0, top_p=1.0, stop=[])
        return [o.token_ids for o in out]

    checks = []
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    try:
        for step in range(args.steps + 1):
            if step:
                model.train()
                ids = torch.tensor([prompts[(step - 1) % len(prompts)]], device=args.device)
                model(input_ids=ids, labels=ids).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                model.eval()
            kept = {n: w.detach().clone() for n, w in model.named_parameters()}
            started = time.perf_counter()
            engine = sync.engine_for(model, version=step)
            sync_s = time.perf_counter() - started
            touched = [n for n, w in model.named_parameters() if not torch.equal(kept[n], w.detach())]
            del kept
            vllm_ids, hf_ids = greedy(engine), greedy(HFEngine(model, tokenizer))
            check = {"step": step, "equal": vllm_ids == hf_ids, "sync_s": sync_s, "touched": touched,
                     "vllm": [tokenizer.decode(t) for t in vllm_ids], "hf": [tokenizer.decode(t) for t in hf_ids]}
            checks.append(check)
            print(f"after {step} step(s) (lr {args.lr}): vLLM {'equals' if check['equal'] else 'DIFFERS FROM'} "
                  f"transformers; sync {sync_s:.1f} s; training weights changed by the sync: {len(touched)}", flush=True)
            for v, h in zip(check["vllm"], check["hf"], strict=True):
                print(f"  vllm: {v!r}\n  hf:   {h!r}")
    finally:
        sync.shutdown()
    result = {"provenance": info, "model": args.model, "dtype": args.dtype, "lr": args.lr, "checks": checks,
              "ok": all(c["equal"] and not c["touched"] for c in checks)}
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    raise SystemExit(0 if main()["ok"] else 1)
