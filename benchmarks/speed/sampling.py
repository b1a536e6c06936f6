"""One decoding step's sampling, ``torch.multinomial`` against :func:`inspo.engines.sampling.multinomial_draw`
(issue 64), side by side in one run.

transformers' ``do_sample`` draws a token with ``torch.multinomial`` over the whole vocabulary: on
CPU one serial exponential variate per entry. For each row count (``--rows``) this times, in
alternating order over ``--pairs`` pairs, both draws on the same probabilities (softmax of seeded
logits at ``--scale``, Qwen's 151,936-token vocabulary), checks that they drew the same tokens and
left the generator in the same state, and prints each pair's ratio. Run while nothing else runs on
the machine, as ``inspo train`` would run it (freed blocks kept mapped).

Usage::

    python benchmarks/speed/sampling.py --threads 2 --json benchmarks/results/speed/sampling.json
    python benchmarks/speed/sampling.py --quick       # small vocabulary, a smoke test
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roofline import best_seconds  # noqa: E402  (a sibling script)

from inspo.lab.harness import add_common, start, write_result  # noqa: E402


def same_draw(probs: Any, seed: int) -> bool:
    """Both draws from the same seed: the same tokens and the same generator state after."""
    import torch

    from inspo.engines.sampling import multinomial_draw

    ours, theirs = torch.Generator().manual_seed(seed), torch.Generator().manual_seed(seed)
    tokens = torch.equal(multinomial_draw(probs, ours), torch.multinomial(probs, 1, generator=theirs).squeeze(1))
    return tokens and torch.equal(torch.rand(4, generator=ours), torch.rand(4, generator=theirs))


def measure(rows: int, vocab: int, scale: float, pairs: int, repeats: int, seed: int) -> dict[str, Any]:
    import torch

    from inspo.engines.sampling import multinomial_draw

    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(rows, vocab, generator=g) * scale, -1)
    arms = {"torch.multinomial": lambda: torch.multinomial(probs, 1),
            "multinomial_draw": lambda: multinomial_draw(probs)}
    ratios, times = [], {name: [] for name in arms}
    for i in range(pairs):
        order = list(arms) if i % 2 == 0 else list(arms)[::-1]
        got = {name: best_seconds(arms[name], repeats) * 1e3 for name in order}
        for name, ms in got.items():
            times[name].append(ms)
        ratios.append(got["torch.multinomial"] / got["multinomial_draw"])
    return {"rows": rows, "vocab": vocab, "ms": times, "ratio_per_pair": ratios,
            "ratio_median": statistics.median(ratios), "same_draw": same_draw(probs, seed + 1)}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from inspo.training.memory import freed_blocks_kept

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="3,8,32", help="comma-separated row counts (the calculator's turns: 32, then fewer)")
    p.add_argument("--vocab", type=int, default=151_936, help="vocabulary entries (Qwen2.5's)")
    p.add_argument("--scale", type=float, default=3.0, help="the logits' standard deviation")
    p.add_argument("--pairs", type=int, default=4, help="alternating pairs per row count")
    p.add_argument("--repeats", type=int, default=10, help="timed calls per arm and pair (the fastest counts)")
    p.add_argument("--quick", action="store_true", help="rows 2,4, vocabulary 5,000, 2 pairs of 3 calls")
    add_common(p, threads=0)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    if args.quick:
        args.rows, args.vocab, args.pairs, args.repeats = "2,4", 5000, 2, 3
    info = start("benchmarks/speed/sampling.py", raw, threads=args.threads, device="cpu", dtype="float32")
    with freed_blocks_kept():
        results = [measure(int(r), args.vocab, args.scale, args.pairs, args.repeats, args.seed)
                   for r in args.rows.split(",")]
    for r in results:
        ms = {name: statistics.median(v) for name, v in r["ms"].items()}
        print(f"{r['rows']:>3} rows x {r['vocab']}: torch.multinomial {ms['torch.multinomial']:.1f} ms, "
              f"multinomial_draw {ms['multinomial_draw']:.1f} ms; ratio per pair "
              + ", ".join(f"{x:.2f}" for x in r["ratio_per_pair"]) + f"; same draw: {r['same_draw']}")
    result = {"provenance": info, "results": results}
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
