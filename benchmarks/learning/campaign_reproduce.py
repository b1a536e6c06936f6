"""Does a stored campaign arm still reproduce? Issue 65's check before reusing the first calculator
campaign's arms: the arm is run again at today's commit on a sample of the test problems
(``calculator_campaign.py --arms ARM --set data.max_test_questions=30``: the first 30 of the same
300) and its rewards are paired, problem by problem, with the stored run's on those problems.

    python benchmarks/learning/campaign_reproduce.py \\
        benchmarks/results/calculator/campaign/static-calculator-s0.json runs/repro/results/static-calculator-s0.json \\
        --json benchmarks/results/calculator/evidence/reproduce-static-calculator-s0.json

The arm reproduces when the new minus the stored mean is within ``--tolerance`` (default 0.10) and
its 95 % interval over the problems holds 0, on the test sample and on each extra test set (the
hand-written problems). The interval's half-width is printed: on 30 problems it is wide, so the
check finds a broken pipeline, not a small drift; a sampled run on another CPU is not expected to
give the same rewards problem by problem (bf16 rounding moves its samples), only the same level.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOLERANCE = 0.10


def compare(stored_ids: Sequence[str], stored: Sequence[float], new_ids: Sequence[str], new: Sequence[float],
            tolerance: float = TOLERANCE) -> dict[str, Any]:
    """``new`` minus ``stored`` on the problems ``new`` played (each must be among ``stored_ids``)."""
    from inspo.eval.stats import paired_difference

    where = {q: i for i, q in enumerate(stored_ids)}
    missing = [q for q in new_ids if q not in where]
    if missing:
        raise SystemExit(f"{len(missing)} problem(s) of the new run are not in the stored one (first {missing[0]!r}): "
                         "was it run on the same test set?")
    old = [stored[where[q]] for q in new_ids]
    d = paired_difference(list(new), old)
    return {"problems": len(new_ids), "stored_mean": statistics.fmean(old), "new_mean": statistics.fmean(new),
            "same_reward": sum(a == b for a, b in zip(new, old, strict=True)), "difference": d.to_dict(),
            "half_width": (d.high - d.low) / 2, "tolerance": tolerance,
            "reproduces": abs(d.mean) <= tolerance and d.low <= 0 <= d.high}


def check(stored: dict, new: dict, tolerance: float = TOLERANCE) -> dict[str, Any]:
    """The test sample and every extra test set the new run played, each under the instruction
    the run returned (``returned``)."""
    if (stored["arm"], stored["seed"]) != (new["arm"], new["seed"]):
        raise SystemExit(f"stored {stored['arm']} seed {stored['seed']} against new {new['arm']} seed {new['seed']}")
    groups = {"test": compare(stored["test_question_ids"], stored["test_rewards"]["returned"],
                              new["test_question_ids"], new["test_rewards"]["returned"], tolerance)}
    for name, extra in (new.get("extra") or {}).items():
        old = stored["extra"][name]
        key = "returned" if "returned" in extra["rewards"] else "seed"
        groups[name] = compare(old["question_ids"], old["rewards"][key], extra["question_ids"], extra["rewards"][key],
                               tolerance)
    return {"arm": new["arm"], "seed": new["seed"], "reproduces": all(g["reproduces"] for g in groups.values()),
            "groups": groups, "same_instruction": stored["returned_text"] == new["returned_text"],
            "provenance": {k: {"commit": r["provenance"].get("commit"), "command": r["provenance"].get("command"),
                               "cpu": (r["provenance"].get("machine") or {}).get("cpu")}
                           for k, r in (("stored", stored), ("new", new))}}


def main(argv: Sequence[str] | None = None) -> dict:
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("stored", help="the stored arm's result JSON")
    p.add_argument("new", help="the same arm and seed run again (calculator_campaign.py's result JSON)")
    p.add_argument("--tolerance", type=float, default=TOLERANCE, help="largest |new - stored| mean that reproduces")
    p.add_argument("--json", default=None, help="write the check here")
    args = p.parse_args(argv)
    out = check(json.loads(Path(args.stored).read_text()), json.loads(Path(args.new).read_text()), args.tolerance)
    from inspo.eval.provenance import provenance

    out["provenance"]["check"] = provenance(["benchmarks/learning/campaign_reproduce.py", *argv])
    for name, g in out["groups"].items():
        d = g["difference"]
        print(f"{out['arm']} seed {out['seed']} {name}: stored {g['stored_mean']:.3f}, new {g['new_mean']:.3f} on "
              f"{g['problems']} problems ({g['same_reward']} the same reward); new - stored {d['mean']:+.3f} "
              f"[{d['low']:+.3f}, {d['high']:+.3f}] (half-width {g['half_width']:.3f}); "
              f"{'reproduces' if g['reproduces'] else 'DOES NOT reproduce'} at tolerance {g['tolerance']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
