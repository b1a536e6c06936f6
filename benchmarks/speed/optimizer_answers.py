"""What several answers from one optimizer call cost on this machine (``coevolution.answers_per_call``):
the local optimizer (transformers, :class:`~inspo.llm.local.LocalTransformersClient`) asked one
reflection prompt with ``n`` 1 and ``n`` ``--answers``, alternately, ``--pairs`` times. Printed per
pair: seconds per call for each and the ratio of seconds per answer (1 answer a call over n answers
in one call): how many more answers the batch gives for the same time.

Usage::

    python benchmarks/speed/optimizer_answers.py --threads 2 --json benchmarks/results/calculator/optimizer-answers-1.5b.json
    python benchmarks/speed/optimizer_answers.py --quick        # tiny random model
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Sequence

from inspo.eval.harness import add_common, run_benchmark, start

SCRIPT = "benchmarks/speed/optimizer_answers.py"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-1.5b")
    p.add_argument("--answers", type=int, default=4, help="n of the batched call")
    p.add_argument("--tokens", type=int, default=300, help="max new tokens a call (every answer runs to it)")
    p.add_argument("--pairs", type=int, default=2)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--quick", action="store_true", help="tiny random model, short answers")
    add_common(p)
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.tokens, args.pairs = "tiny-qwen2", 8, 1
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
    client.generate(messages, n=1, temperature=0.7, max_tokens=4)  # warm-up
    pairs = []
    for _ in range(args.pairs):
        row = {}
        for n in (1, args.answers):
            before = client.usage.completion_tokens
            t0 = time.perf_counter()
            client.generate(messages, n=n, temperature=0.7, max_tokens=args.tokens)
            row[f"n{n}_s"] = time.perf_counter() - t0
            row[f"n{n}_tokens"] = client.usage.completion_tokens - before
        row["answers_per_s_ratio"] = (args.answers / row[f"n{args.answers}_s"]) / (1 / row["n1_s"])
        row["tokens_per_s_ratio"] = ((row[f"n{args.answers}_tokens"] / row[f"n{args.answers}_s"])
                                     / (row["n1_tokens"] / row["n1_s"]))
        pairs.append(row)
    return {"provenance": info, "model": args.model, "answers": args.answers, "tokens": args.tokens,
            "prompt_tokens": len(client.tokenizer(client.tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True))["input_ids"]), "pairs": pairs,
            "median_answers_per_s_ratio": statistics.median(p["answers_per_s_ratio"] for p in pairs),
            "median_tokens_per_s_ratio": statistics.median(p["tokens_per_s_ratio"] for p in pairs)}


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
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict:
    def parse(a):
        args = parse_args(a)
        args.argv = a
        return args

    return run_benchmark(argv, parse, measure, report)


if __name__ == "__main__":
    main()
