"""float32 against bfloat16 on this machine's CPU: what ``model.dtype=auto`` and ``rl.bf16=auto`` rest on.

Times, side by side in one run, a matmul the size of one of Qwen2.5-0.5B's MLP projections
(2048 tokens x 896 @ 896 x 4864, the default) and one forward pass of a small model
(``tiny-qwen2`` by default) in float32 and in bfloat16, alternating the order every repetition
(fp32 then bf16, then bf16 then fp32, ...) so a drift of the machine's load falls on both.
Each matmul measurement repeats the call until ``--min-seconds`` have passed (at least once).

Printed: GFLOP/s of the matmul per dtype (every repetition and the median), the forward's
seconds per dtype, the float32/bfloat16 ratios, and what :func:`inspo.models.precision.bf16_support`
says for the CPU (the rule ``auto`` follows). ``--json`` writes the result with its provenance.

Usage::

    python benchmarks/speed/precision.py --threads 1            # the 0.5B-sized matmul, 3 pairs, tiny-qwen2 forward
    python benchmarks/speed/precision.py --quick                # small shapes, 2 pairs (a smoke test)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from inspo.lab.harness import add_common, run_benchmark, start

DTYPES = ("float32", "bfloat16")


def _timed_calls(fn: Callable[[], Any], min_seconds: float) -> tuple[int, float]:
    """(calls, seconds): ``fn`` called until ``min_seconds`` have passed, at least once."""
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return calls, elapsed


def bench_matmul(m: int, k: int, n: int, reps: int, min_seconds: float) -> dict[str, Any]:
    """GFLOP/s of ``(m x k) @ (k x n)`` per dtype over ``reps`` alternating pairs."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a32, b32 = torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen)
    inputs = {"float32": (a32, b32), "bfloat16": (a32.bfloat16(), b32.bfloat16())}
    flops = 2.0 * m * k * n
    for a, b in inputs.values():  # warm-up: first-call allocations and kernel selection
        torch.matmul(a, b)
    gflops: dict[str, list[float]] = {d: [] for d in DTYPES}
    for rep in range(reps):
        for dtype in DTYPES if rep % 2 == 0 else tuple(reversed(DTYPES)):
            a, b = inputs[dtype]
            calls, seconds = _timed_calls(lambda a=a, b=b: torch.matmul(a, b), min_seconds)
            gflops[dtype].append(calls * flops / seconds / 1e9)
    return {"shape": [m, k, n], "gflop_per_call": flops / 1e9, "gflops": gflops,
            "median_gflops": {d: statistics.median(v) for d, v in gflops.items()},
            "pair_ratios": [f / b for f, b in zip(gflops["float32"], gflops["bfloat16"], strict=True)]}


def bench_forward(model_name: str, batch: int, tokens: int, reps: int) -> dict[str, Any]:
    """Seconds of one forward pass of ``model_name`` on ``batch x tokens`` ids, per dtype."""
    import torch

    from inspo.models import load_model

    models = {d: load_model(model_name, dtype=d).model for d in DTYPES}
    vocab = models["float32"].config.vocab_size
    ids = torch.randint(0, vocab, (batch, tokens), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        for model in models.values():
            model(input_ids=ids)  # warm-up
        seconds: dict[str, list[float]] = {d: [] for d in DTYPES}
        for rep in range(reps):
            for dtype in DTYPES if rep % 2 == 0 else tuple(reversed(DTYPES)):
                start = time.perf_counter()
                models[dtype](input_ids=ids)
                seconds[dtype].append(time.perf_counter() - start)
    return {"model": model_name, "batch": batch, "tokens": tokens, "seconds": seconds,
            "median_seconds": {d: statistics.median(v) for d, v in seconds.items()},
            "pair_ratios": [b / f for f, b in zip(seconds["float32"], seconds["bfloat16"], strict=True)]}


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from inspo.models.precision import bf16_support

    info = start("benchmarks/speed/precision.py", args.argv, threads=args.threads, device="cpu",
                 dtype=" and ".join(DTYPES))
    support = bf16_support("cpu")
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "argv")}
    result: dict[str, Any] = {
        "benchmark": "precision", "settings": settings,
        "provenance": info,
        "environment": {"cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                        "loadavg_start": list(os.getloadavg())},
        "bf16_support": {"fast": support.fast, "why": support.why},
        "auto": {"model.dtype": "bfloat16" if support.fast else "float32", "rl.bf16": support.fast},
    }
    result["matmul"] = bench_matmul(*args.shape, reps=args.reps, min_seconds=args.min_seconds)
    if args.forward:
        result["forward"] = bench_forward(args.forward, args.batch, args.tokens, args.reps)
    result["environment"]["loadavg_end"] = list(os.getloadavg())
    return result


def report(result: dict[str, Any]) -> str:
    env, mm = result["environment"], result["matmul"]
    m, k, n = mm["shape"]
    lines = [
        f"CPU capability {env['cpu_capability']}, {env['torch_threads']} torch thread(s), {env['cpu_count']} cores; "
        f"load {env['loadavg_start'][0]:.1f} -> {env['loadavg_end'][0]:.1f}",
        f"fast_bf16('cpu'): {result['bf16_support']['fast']} ({result['bf16_support']['why']}); "
        f"auto -> model.dtype={result['auto']['model.dtype']}, rl.bf16={str(result['auto']['rl.bf16']).lower()}",
        f"matmul {m}x{k} @ {k}x{n} ({mm['gflop_per_call']:.3g} GFLOP a call), GFLOP/s per repetition:",
    ]
    for dtype in DTYPES:
        runs = ", ".join(f"{g:.2f}" for g in mm["gflops"][dtype])
        lines.append(f"  {dtype:<9} median {mm['median_gflops'][dtype]:8.2f}   ({runs})")
    ratio = mm["median_gflops"]["float32"] / mm["median_gflops"]["bfloat16"]
    lines.append(f"  float32 / bfloat16 speed: {ratio:.1f}x (pairs: "
                 + ", ".join(f"{r:.1f}" for r in mm["pair_ratios"]) + ")")
    if "forward" in result:
        fw = result["forward"]
        lines.append(f"forward of {fw['model']}, {fw['batch']} x {fw['tokens']} tokens, seconds:")
        for dtype in DTYPES:
            runs = ", ".join(f"{s:.4f}" for s in fw["seconds"][dtype])
            lines.append(f"  {dtype:<9} median {fw['median_seconds'][dtype]:8.4f}   ({runs})")
        lines.append(f"  bfloat16 / float32 time: {fw['median_seconds']['bfloat16'] / fw['median_seconds']['float32']:.1f}x"
                     " (pairs: " + ", ".join(f"{r:.1f}" for r in fw["pair_ratios"]) + ")")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--shape", type=int, nargs=3, default=[2048, 896, 4864], metavar=("M", "K", "N"),
                   help="matmul (M x K) @ (K x N); the default is one Qwen2.5-0.5B MLP projection over 2048 tokens")
    p.add_argument("--reps", type=int, default=3, help="alternating float32/bfloat16 pairs")
    p.add_argument("--min-seconds", type=float, default=0.5, help="each matmul measurement lasts at least this")
    p.add_argument("--forward", default="tiny-qwen2", help="model whose forward pass is timed ('' to skip)")
    p.add_argument("--batch", type=int, default=8, help="forward: rows")
    p.add_argument("--tokens", type=int, default=128, help="forward: tokens a row")
    add_common(p, seed=False, json_help="also write the result as JSON to this path")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: a 256x128 @ 128x512 matmul, 2 pairs, 0.05 s measurements, forward of 2 x 16")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # recorded in the result's provenance
    if args.quick:
        args.shape, args.reps, args.min_seconds, args.batch, args.tokens = [256, 128, 512], 2, 0.05, 2, 16
    if min(args.shape) < 1 or args.reps < 1 or args.batch < 1 or args.tokens < 1 or args.min_seconds < 0:
        p.error("--shape, --reps, --batch and --tokens must be >= 1 and --min-seconds >= 0")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, return the result dict."""
    return run_benchmark(argv, parse_args, benchmark, report)


if __name__ == "__main__":
    main()
