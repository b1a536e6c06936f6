"""The paired race's error rates and cost, computed exactly (``inspo.core.race``), for the table in
docs/evidence.md and the D_B size a preset should use.

For a candidate whose mean reward is ``gap`` above its parent's (or equal, or ``gap`` below) and
which differs from the parent on a share ``discordance`` of the questions, it prints the chance
the race admits it and the D_B questions it plays on average, for each futility setting, at the
smallest D_B that admits a better candidate with probability >= ``--power`` and a worse one with
probability <= ``--alpha``. No model, no randomness: a second run prints the same numbers.

    python benchmarks/learning/race_rates.py --json benchmarks/results/calculator/evidence/race-rates.json

What the discordance is on the calculator: the share of the 300 test problems on which two
instructions' greedy outcomes differ (arm 5's admitted instructions against their parents, read
by ``benchmarks/learning/evidence_diagnosis.py``); 0.2-0.4 covers what was seen.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from inspo.core.race import RaceRule, gap_rates, size_for_gap


def rows(gap: float, discordances: list[float], futilities: list[int], chunk: int, power: float,
         alpha: float) -> list[dict]:
    """One row per (discordance, futility): the D_B size that meets the rates and the rates there."""
    out = []
    for disc in discordances:
        for futility in futilities:
            rule = RaceRule(futility, chunk)
            n = size_for_gap(gap, disc, rule, power=power, alpha=alpha)
            if n is None:
                out.append({"discordance": disc, "futility": futility, "n": None})
                continue
            better, equal, worse = gap_rates(gap, disc, n, rule)
            out.append({"discordance": disc, "futility": futility, "chunk": chunk, "n": n,
                        "admit_better": better.admit, "admit_equal": equal.admit, "admit_worse": worse.admit,
                        "played_better": better.expected_played, "played_equal": equal.expected_played,
                        "played_worse": worse.expected_played})
    return out


def at_size(n: int, gap: float, discordances: list[float], futilities: list[int], chunk: int) -> list[dict]:
    """The rates of each rule at a fixed D_B of ``n`` (the preset's), and of a clear loser (a
    candidate that never wins a question and loses a third of them)."""
    out = []
    for disc in discordances:
        for futility in futilities:
            rule = RaceRule(futility, chunk)
            better, equal, worse = gap_rates(gap, disc, n, rule)
            loser = gap_rates(1 / 3, 1 / 3, n, rule)[2]
            out.append({"discordance": disc, "futility": futility, "chunk": chunk, "n": n,
                        "admit_better": better.admit, "admit_equal": equal.admit, "admit_worse": worse.admit,
                        "played_worse": worse.expected_played, "played_clear_loser": loser.expected_played})
    return out


def table(found: list[dict], fixed: list[dict], gap: float) -> str:
    lines = [f"Smallest D_B that admits a candidate {gap:+.2f} better with P >= power and one {gap:.2f} worse "
             "with P <= alpha:",
             "| discordance | futility | D_B | admit better | admit equal | admit worse | played: better / worse |",
             "|---|---|---|---|---|---|---|"]
    for r in found:
        if r["n"] is None:
            lines.append(f"| {r['discordance']:.2f} | {r['futility']} | none within 1024 | | | | |")
            continue
        lines.append(f"| {r['discordance']:.2f} | {r['futility']} | {r['n']} | {r['admit_better']:.3f} | "
                     f"{r['admit_equal']:.3f} | {r['admit_worse']:.3f} | "
                     f"{r['played_better']:.1f} / {r['played_worse']:.1f} |")
    n = fixed[0]["n"] if fixed else 0
    lines += ["", f"At D_B = {n} (questions played by a clear loser: never wins, loses 1 in 3):",
              "| discordance | futility | admit better | admit equal | admit worse | played: worse / clear loser |",
              "|---|---|---|---|---|---|"]
    for r in fixed:
        lines.append(f"| {r['discordance']:.2f} | {r['futility']} | {r['admit_better']:.3f} | {r['admit_equal']:.3f} | "
                     f"{r['admit_worse']:.3f} | {r['played_worse']:.1f} / {r['played_clear_loser']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gap", type=float, default=0.1)
    ap.add_argument("--discordance", default="0.2,0.3,0.4")
    ap.add_argument("--futility", default="0,3,4,6")
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--power", type=float, default=0.8)
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--size", type=int, default=64, help="the D_B size of the second table (the preset's)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    discs = [float(x) for x in args.discordance.split(",")]
    futs = [int(x) for x in args.futility.split(",")]
    found = rows(args.gap, discs, futs, args.chunk, args.power, args.alpha)
    fixed = at_size(args.size, args.gap, discs, futs, args.chunk)
    print(table(found, fixed, args.gap))
    if args.json is not None:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "command": " ".join(["python", *sys.argv]), "commit": commit,
            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "gap": args.gap, "power": args.power, "alpha": args.alpha, "smallest_size": found, "at_size": fixed,
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
