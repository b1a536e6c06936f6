"""Resident memory of the greedy test a run ends with, one ``generate`` call at a time.

Issue 33's pre-policy run was OOM-killed (24.3 GB resident) in its held-out test, and its resumed
test swung between 2 and 10.7 GB. This plays a preset's test problems the way a run's test does
(``rl_static_vs_inspo.greedy_test_scores``: ``greedy_evaluate`` with the config's agent, one batch
of ``micro_batch_size`` or a step's trajectories), samples the process's resident memory every
50 ms, and prints for every ``generate`` call its rows, prompt width, the resident memory before it
and its peak, and the shapes the model's head returned (``(rows, 1, vocab)`` in the prefill means
``generate`` computes the last position's logits only).

Usage::

    python benchmarks/overhead/eval_batch_memory.py --threads 1                  # calculator, base 0.5B, 32 problems
    python benchmarks/overhead/eval_batch_memory.py --policy runs/calc/runs/inspo-calculator-s0/model
    python benchmarks/overhead/eval_batch_memory.py --quick                       # tiny-qwen2, 4 problems
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "learning"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))


def resident_gb() -> float:
    """This process's resident set, in GB (the library's reading is in GiB)."""
    from inspo.training.memory import resident_memory_gb

    return (resident_memory_gb() or 0.0) * 2**30 / 1e9


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="calculator")
    p.add_argument("--policy", default="", help="a trained model folder (default: the preset's base model)")
    p.add_argument("--problems", type=int, default=32, help="test problems played (data.max_test_questions)")
    p.add_argument("--set", action="append", default=[], help="extra config override")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2, 4 problems: a smoke run")
    add_common(p, json_help="also write the result here")
    args = p.parse_args(argv)
    if args.problems < 1:
        p.error("--problems must be >= 1")
    if args.quick:
        args.problems, args.set = 4, ["model.name_or_path=tiny-qwen2", *args.set]
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def measure(args: argparse.Namespace) -> dict:
    import rl_static_vs_inspo as rl

    from inspo.config.train import resolve
    from inspo.engines import hf as engines

    config = resolve(args.preset, None, [f"data.max_test_questions={args.problems}", "output_dir=runs/eval-memory",
                                         *args.set])
    info = start("benchmarks/overhead/eval_batch_memory.py", args.argv, threads=args.threads,
                 dtype=config.model.dtype)
    calls: list[dict] = []
    heads: list[tuple[int, ...]] = []
    plain = engines.HFEngine._generate_ids

    from reliability import RssSampler  # benchmarks/reliability: the resident-memory sampler

    def watched(self, sequences, **kw):
        if not getattr(self, "_head_watched", False):
            self.model.get_output_embeddings().register_forward_hook(
                lambda mod, inp, out: heads.append(tuple(out.shape)))
            self._head_watched = True
        seen, t = len(heads), time.perf_counter()
        with RssSampler(os.getpid(), interval=0.05) as rss:
            out = plain(self, sequences, **kw)
        calls.append({"rows": len(sequences), "width": max(map(len, sequences)),
                      "max_new_tokens": kw["max_new_tokens"], "rss_before_gb": rss.before / 1e9,
                      "rss_peak_gb": rss.peak / 1e9, "seconds": time.perf_counter() - t,
                      "prefill_logits": list(heads[seen]) if len(heads) > seen else None})
        return out

    engines.HFEngine._generate_ids = watched
    try:
        t0 = time.perf_counter()
        ids, rewards = rl.greedy_test_scores(config, args.policy, [""])
        wall = time.perf_counter() - t0
    finally:
        engines.HFEngine._generate_ids = plain
    return {"provenance": info, "preset": args.preset, "policy": args.policy or config.model.name_or_path,
            "problems": len(ids), "mean_reward": sum(rewards[0]) / len(ids), "wall_s": wall, "calls": calls,
            "peak_gb": max(c["rss_peak_gb"] for c in calls), "final_gb": resident_gb()}


def report(result: dict) -> str:
    lines = [f"{result['policy']} on {result['problems']} {result['preset']} test problems, greedy: reward "
             f"{result['mean_reward']:.3f}, {result['wall_s']:.0f} s"]
    for c in result["calls"]:
        lines.append(f"  generate {c['rows']:3d} rows, width {c['width']:4d}: resident {c['rss_before_gb']:.2f} GB "
                     f"before, peak {c['rss_peak_gb']:.2f} GB, {c['seconds']:.1f} s; prefill logits "
                     f"{c['prefill_logits']}")
    lines.append(f"peak {result['peak_gb']:.2f} GB; at the end {result['final_gb']:.2f} GB")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    result = measure(args)
    print(report(result))
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
