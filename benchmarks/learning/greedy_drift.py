"""How far do greedy episodes move between two versions of a policy? Pairs the greedy episodes of
two ``--episodes`` files of ``calculator_pilot.py`` (or any file of one JSON rollout per line
with a ``cell``) by (cell, question) and counts those whose response, final answer or reward
changed, per cell and in all, with the paired reward difference (B - A) and its 95% interval.

Made for issue 34's tied head: the 0.5B converted with an untied head (A, commit 31dfb41) and
with the head tied as published (B), played greedily on the same 200 held-out problems under
each seed. Only greedy cells are compared (sampled episodes differ by design once logits move).

Usage::

    python benchmarks/learning/greedy_drift.py A.jsonl[.gz] B.jsonl[.gz] [--json OUT]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics

from inspo.lab.harness import add_common, start, write_result


def read(path: str) -> dict[tuple[str, str], dict]:
    """The greedy rows of an episodes file (``.jsonl`` or ``.jsonl.gz``), keyed by (cell, question id)."""
    rows = {}
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        row = json.loads(line)
        if row["cell"].startswith("greedy:"):
            rows[(row["cell"], row["question"]["id"])] = row
    return rows


def drift(a: dict[tuple[str, str], dict], b: dict[tuple[str, str], dict]) -> dict:
    """Counts of changed episodes per cell and in all; pairs present in only one file are counted apart."""
    shared = sorted(set(a) & set(b))
    cells: dict[str, dict] = {}
    for key in shared:
        x, y = a[key], b[key]
        c = cells.setdefault(key[0], {"episodes": 0, "response_changed": 0, "answer_changed": 0,
                                      "reward_changed": 0, "errors": 0, "diffs": []})
        c["episodes"] += 1
        if x.get("error") or y.get("error"):
            c["errors"] += 1
            continue
        c["response_changed"] += x["response"] != y["response"]
        c["answer_changed"] += x.get("answer") != y.get("answer")
        c["reward_changed"] += x["reward"] != y["reward"]
        c["diffs"].append(y["reward"] - x["reward"])
    out: dict = {"unpaired": len(set(a) ^ set(b)), "cells": {}}
    every: list[float] = []
    for name, c in sorted(cells.items()):
        diffs = c.pop("diffs")
        every += diffs
        out["cells"][name] = {**c, **interval(diffs)}
    keys = ("episodes", "response_changed", "answer_changed", "reward_changed", "errors")
    out["all"] = {k: sum(c[k] for c in out["cells"].values()) for k in keys} | interval(every)
    return out


def interval(diffs: list[float]) -> dict:
    if not diffs:
        return {"mean_diff": None, "low": None, "high": None}
    mean = statistics.fmean(diffs)
    half = 1.96 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
    return {"mean_diff": mean, "low": mean - half, "high": mean + half}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a")
    p.add_argument("b")
    add_common(p, threads=None, seed=False)
    args = p.parse_args(argv)
    info = start("benchmarks/learning/greedy_drift.py", argv, device="cpu")  # reads two files: no model
    result = {"a": args.a, "b": args.b, "command": info["command"], "provenance": info,
              **drift(read(args.a), read(args.b))}
    print(f"{'cell':<20} {'episodes':>8} {'response':>9} {'answer':>7} {'reward':>7} {'B - A':>8}  95% CI")
    for name, c in [*result["cells"].items(), ("all", result["all"])]:
        ci = f"[{c['low']:+.3f}, {c['high']:+.3f}]" if c["low"] is not None else ""
        mean = f"{c['mean_diff']:+.3f}" if c["mean_diff"] is not None else "-"
        print(f"{name:<20} {c['episodes']:>8} {c['response_changed']:>9} {c['answer_changed']:>7} "
              f"{c['reward_changed']:>7} {mean:>8}  {ci}")
    if result["unpaired"]:
        print(f"{result['unpaired']} episodes were in one file only (not compared)")
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
