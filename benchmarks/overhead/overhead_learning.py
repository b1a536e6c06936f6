"""INSPO versus static GRPO on the same config and seed: overhead (benchmark 1) and learning
(benchmark 4, first half), side by side in one run.

Both arms run ``inspo.training.run.run_training`` on the same preset, seed, data and step count;
only ``mode`` differs (``static`` = the Search-R1 baseline: one fixed instruction; ``inspo`` =
co-evolution). The script prints

- the wall-clock ratio inspo / static and its parts: the extra policy inference INSPO does
  (verification + warm-up rollouts) as a share of training rollouts, and the optimizer's calls;
- the test-split score of each trained policy under its own instruction (static: the seed;
  INSPO: its best instruction I*), greedy decoding, plus the trained INSPO policy under the seed.

Usage::

    python benchmarks/overhead/overhead_learning.py --preset cpu-tiny --eval-questions 50 --out runs/bench
    python benchmarks/overhead/overhead_learning.py --quick      # a tiny smoke run (tiny random model)

Order: the arms alternate (static first on even repetitions) so drift in machine load hits both.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result


def run_arm(mode: str, args: argparse.Namespace, rep: int) -> dict:
    from inspo.config.train import resolve
    from inspo.training.run import run_training

    out = Path(args.out) / f"{mode}-rep{rep}"
    overrides = [
        f"mode={mode}",
        f"output_dir={out}",
        f"data.max_test_questions={args.eval_questions}",
        f"rl.seed={args.seed}",
        f"coevolution.seed={args.seed}",
        *args.set,
    ]
    if args.steps:
        overrides.append(f"rl.steps={args.steps}")
    config = resolve(args.preset, None, overrides)
    started = time.perf_counter()
    summary = run_training(config, progress=False)
    wall = time.perf_counter() - started
    led = summary.ledger
    ev = summary.evaluation or {}
    return {
        "mode": mode,
        "rep": rep,
        "wall_s": wall,
        "training_rollouts": led.get("training_rollouts", 0),
        "verification_rollouts": led.get("verification_rollouts", 0),
        "warmup_rollouts": led.get("warmup_rollouts", 0),
        "optimizer_calls": led.get("optimizer_calls", 0),
        "reward_start": summary.reward_start,
        "reward_end": summary.reward_end,
        "tool_calls_end": summary.tool_calls_end,
        "test_metric": ev.get("metric"),
        "test_questions": ev.get("test_questions"),
        "test_seed_instruction": ev.get("test_seed"),
        "test_best_instruction": ev.get("test_returned"),
        "best_instruction": summary.best_instruction,
    }


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-tiny")
    p.add_argument("--steps", type=int, default=0, help="training steps per arm (0: the preset's)")
    p.add_argument("--eval-questions", type=int, default=50, help="test questions evaluated per arm")
    p.add_argument("--reps", type=int, default=1, help="repetitions of the pair")
    add_common(p, json_help="also write the results here")
    p.add_argument("--set", action="append", default=[], help="extra config override for both arms")
    p.add_argument("--out", default="runs/bench-overhead")
    p.add_argument("--quick", action="store_true", help="tiny random model, 2 steps: a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = args.steps or 2
        args.eval_questions = 2
        args.set = [
            "model.name_or_path=tiny-qwen2", "model.lora=false", "rl.max_response_tokens=8",
            "rl.questions_per_step=2", "rl.group_size=2", "coevolution.evolve_every=2",
            "coevolution.prune_every=1", "coevolution.evolve_until=3", "coevolution.validation_size=2",
            *args.set,
        ]
    import torch

    from inspo.config.train import resolve

    warm = resolve(args.preset, None, args.set)
    info = start("benchmarks/overhead/overhead_learning.py", argv, threads=args.threads, dtype=warm.model.dtype)

    # One-time costs (imports, the model's first read from disk) must not land on the first arm.
    import trl  # noqa: F401

    from inspo.models import load_model

    load_model(warm.model.name_or_path)  # loaded and dropped

    arms: list[dict] = []
    for rep in range(args.reps):
        order = ("static", "inspo") if rep % 2 == 0 else ("inspo", "static")
        for mode in order:
            result = run_arm(mode, args, rep)
            arms.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "best_instruction"}))

    def of(mode: str, key: str) -> list[float]:
        return [a[key] for a in arms if a["mode"] == mode]

    wall_ratios = [i["wall_s"] / s["wall_s"] for i, s in zip(
        [a for a in arms if a["mode"] == "inspo"], [a for a in arms if a["mode"] == "static"], strict=True)]
    inspo = [a for a in arms if a["mode"] == "inspo"]
    extra = [(a["verification_rollouts"] + a["warmup_rollouts"]) / a["training_rollouts"] for a in inspo]
    result = {
        "wall_ratio_inspo_over_static": statistics.median(wall_ratios),
        "extra_inference_share": statistics.median(extra),
        "optimizer_calls": statistics.median(of("inspo", "optimizer_calls")),
        "test_static_seed": statistics.median(of("static", "test_seed_instruction")),
        "test_inspo_best": statistics.median(of("inspo", "test_best_instruction")),
        "test_inspo_seed": statistics.median(of("inspo", "test_seed_instruction")),
        "reward_end_static": statistics.median(of("static", "reward_end")),
        "reward_end_inspo": statistics.median(of("inspo", "reward_end")),
        "arms": arms,
        "torch_threads": torch.get_num_threads(),
        "provenance": info,
    }
    print()
    print(f"wall-clock ratio INSPO / static:        {result['wall_ratio_inspo_over_static']:.3f}")
    print(f"extra inference (verification+warm-up): {100 * result['extra_inference_share']:.1f}% of training rollouts")
    print(f"optimizer calls (INSPO):                {result['optimizer_calls']:.0f}")
    metric = arms[0]["test_metric"]
    print(f"test {metric}, static policy + seed:      {result['test_static_seed']:.3f}")
    print(f"test {metric}, INSPO policy + best I*:    {result['test_inspo_best']:.3f}")
    print(f"test {metric}, INSPO policy + seed:       {result['test_inspo_seed']:.3f}")
    print(f"training reward, last steps (static / INSPO): {result['reward_end_static']:.3f} / {result['reward_end_inspo']:.3f}")
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
