"""What several answers from one optimizer call cost on this machine (``coevolution.answers_per_call``):
the local optimizer (transformers, :class:`~inspo.llm.local.LocalTransformersClient`) asked one
reflection prompt with ``n`` 1 and ``n`` ``--answers``, alternately, ``--pairs`` times. Printed per
pair: seconds per call for each and the ratio of seconds per answer (1 answer a call over n answers
in one call): how many more answers the batch gives for the same time.

``--vllm`` (run with ``.venv-vllm``'s Python) also starts vLLM's own OpenAI server for the same
model on 127.0.0.1 (:func:`inspo.engines.vllm_server.serve`) and asks it, through the optimizer's
OpenAI client (``optimizer.kind=openai``), the same prompt with the same ``n``s, right after
transformers in each pair; printed per pair: tokens a second of each engine and vLLM over
transformers. The server's CPU time while transformers runs is recorded (a server that spins
while idle would slow transformers and flatter vLLM).

Usage::

    python benchmarks/speed/optimizer_answers.py --threads 2 --json benchmarks/results/calculator/optimizer-answers-1.5b.json
    python benchmarks/speed/optimizer_answers.py --quick        # tiny random model
    VLLM_CPU_NUM_OF_RESERVED_CPU=0 .venv-vllm/bin/python benchmarks/speed/optimizer_answers.py --vllm --threads 2 \
        --tokens 300 --pairs 2 --json benchmarks/results/calculator/optimizer-engines-1.5b.json
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections.abc import Sequence

from inspo.lab.harness import add_common, run_benchmark, start

SCRIPT = "benchmarks/speed/optimizer_answers.py"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-1.5b")
    p.add_argument("--answers", type=int, default=4, help="n of the batched call")
    p.add_argument("--tokens", type=int, default=300, help="max new tokens a call (every answer runs to it)")
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--vllm", action="store_true", help="also time vLLM's OpenAI server on the same calls")
    p.add_argument("--vllm-kv-cache-gib", type=float, default=1.0)
    p.add_argument("--quick", action="store_true", help="tiny random model, short answers")
    add_common(p)
    args = p.parse_args(argv)
    if args.quick:  # vLLM's CPU attention needs the head size of tiny-qwen2-hd32
        args.model, args.tokens, args.pairs = ("tiny-qwen2-hd32" if args.vllm else "tiny-qwen2"), 8, 1
    if args.answers < 2:
        p.error("--answers must be >= 2 (1 is the reference)")
    return args


def measure(args: argparse.Namespace) -> dict:
    from inspo.core.templates import render_reflection
    from inspo.envs.calculator import load_environment
    from inspo.llm.local import LocalTransformersClient
    from inspo.records import Rollout

    info = start(SCRIPT, args.argv, threads=args.threads, device="cpu", dtype=args.dtype)
    env = load_environment()
    failures = [Rollout(question=q, instruction_id="weak", response="<answer> 100 </answer>")
                for q in env.questions("train")[:3]]
    prompt = render_reflection(env.instructions["calculator"], failures, 4)
    client = LocalTransformersClient(args.model, dtype=args.dtype, rng=random.Random(args.seed),
                                     batch_size=args.answers)
    # min_new_tokens would change the model's choice; instead every answer is cut at --tokens and
    # the completion tokens are counted: the per-answer time is over what was written
    messages = [{"role": "user", "content": prompt}]
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(_server(args, client)) if args.vllm else None
        engines = {"": client}
        if server is not None:
            from inspo.llm.openai_client import OpenAICompatibleClient

            engines["vllm_"] = OpenAICompatibleClient(base_url=server.base_url, model=SERVED, api_key="EMPTY",
                                                      rng=random.Random(args.seed), timeout_s=3600.0,
                                                      max_retries=0, env={})
        for engine in engines.values():
            engine.generate(messages, n=1, temperature=0.7, max_tokens=4)  # warm-up
        pairs = []
        for _ in range(args.pairs):
            row: dict = {}
            for key, engine in engines.items():
                cpu = server.cpu_seconds() if server is not None else None
                for n in (1, args.answers):
                    before = engine.usage.completion_tokens
                    t0 = time.perf_counter()
                    engine.generate(messages, n=n, temperature=0.7, max_tokens=args.tokens)
                    row[f"{key}n{n}_s"] = time.perf_counter() - t0
                    row[f"{key}n{n}_tokens"] = engine.usage.completion_tokens - before
                if key == "" and cpu is not None:
                    row["server_cpu_s_during_transformers"] = server.cpu_seconds() - cpu
            row["answers_per_s_ratio"] = (args.answers / row[f"n{args.answers}_s"]) / (1 / row["n1_s"])
            row["tokens_per_s_ratio"] = ((row[f"n{args.answers}_tokens"] / row[f"n{args.answers}_s"])
                                         / (row["n1_tokens"] / row["n1_s"]))
            if server is not None:
                for n in (1, args.answers):
                    row[f"vllm_over_transformers_tokens_per_s_n{n}"] = (
                        (row[f"vllm_n{n}_tokens"] / row[f"vllm_n{n}_s"]) / (row[f"n{n}_tokens"] / row[f"n{n}_s"]))
            pairs.append(row)
    result = {"provenance": info, "model": args.model, "answers": args.answers, "tokens": args.tokens,
              "prompt_tokens": len(client.tokenizer(client.tokenizer.apply_chat_template(
                  messages, tokenize=False, add_generation_prompt=True))["input_ids"]), "pairs": pairs,
              "median_answers_per_s_ratio": statistics.median(p["answers_per_s_ratio"] for p in pairs),
              "median_tokens_per_s_ratio": statistics.median(p["tokens_per_s_ratio"] for p in pairs)}
    if server is not None:
        result["vllm"] = {"command": server.command, "dtype": str(client.model.dtype).removeprefix("torch.")}
        for n in (1, args.answers):
            key = f"vllm_over_transformers_tokens_per_s_n{n}"
            result[f"median_{key}"] = statistics.median(p[key] for p in pairs)
    return result


SERVED = "optimizer"


def _server(args: argparse.Namespace, client):
    """vLLM's OpenAI server for the optimizer's weights, in the dtype transformers resolved."""
    from inspo.engines.vllm_server import serve
    from inspo.models import model_path

    dtype = str(client.model.dtype).removeprefix("torch.")
    return serve(str(model_path(args.model)), served_name=SERVED, dtype=dtype, max_model_len=4096,
                 kv_cache_bytes=int(args.vllm_kv_cache_gib * (1 << 30)), seed=args.seed)


def report(result: dict) -> str:
    n = result["answers"]
    lines = [f"{result['model']}, a {result['prompt_tokens']}-token reflection prompt, at most {result['tokens']} tokens an answer",
             f"| pair | n=1: s (tokens) | n={n}: s (tokens) | answers/s, n={n} over n=1 | tokens/s, n={n} over n=1 |",
             "|---|---|---|---|---|"]
    for i, p in enumerate(result["pairs"], 1):
        lines.append(f"| {i} | {p['n1_s']:.1f} ({p['n1_tokens']}) | {p[f'n{n}_s']:.1f} ({p[f'n{n}_tokens']}) | "
                     f"{p['answers_per_s_ratio']:.2f}x | {p['tokens_per_s_ratio']:.2f}x |")
    lines.append(f"median: {result['median_answers_per_s_ratio']:.2f}x answers/s, "
                 f"{result['median_tokens_per_s_ratio']:.2f}x tokens/s")
    if "vllm" in result:
        lines += [f"the same calls to vLLM's OpenAI server ({result['vllm']['dtype']}), after transformers in each pair",
                  f"| pair | vLLM n=1: s (tokens) | vLLM n={n}: s (tokens) | tokens/s vLLM over transformers, n=1 | "
                  f"n={n} | server CPU s while transformers ran |", "|---|---|---|---|---|---|"]
        for i, p in enumerate(result["pairs"], 1):
            lines.append(f"| {i} | {p['vllm_n1_s']:.1f} ({p['vllm_n1_tokens']}) | {p[f'vllm_n{n}_s']:.1f} "
                         f"({p[f'vllm_n{n}_tokens']}) | {p['vllm_over_transformers_tokens_per_s_n1']:.2f}x | "
                         f"{p[f'vllm_over_transformers_tokens_per_s_n{n}']:.2f}x | "
                         f"{_seconds(p.get('server_cpu_s_during_transformers'))} |")
        lines.append(f"median tokens/s, vLLM over transformers: n=1 "
                     f"{result['median_vllm_over_transformers_tokens_per_s_n1']:.2f}x, n={n} "
                     f"{result[f'median_vllm_over_transformers_tokens_per_s_n{n}']:.2f}x")
    return "\n".join(lines)


def _seconds(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1f}"


def main(argv: Sequence[str] | None = None) -> dict:
    def parse(a):
        args = parse_args(a)
        args.argv = a
        return args

    return run_benchmark(argv, parse, measure, report)


if __name__ == "__main__":
    main()
