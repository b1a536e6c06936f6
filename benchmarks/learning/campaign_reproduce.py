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

``--arm-seed FILE`` (repeatable) adds the stored runs of the arm's other seeds: the check then also
says whether the new run lies within the arm's spread, its mean on the same problems between the
lowest and the highest stored seed's, widened by the tolerance (``within_spread``). Issue 65 uses
that rule for its stored arms after the first check (static-calculator seed 0) showed that a seed
does not fix a run across CPUs, so a rerun is another draw of the arm, not the stored run again.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TOLERANCE = 0.10


def on_problems(ids: Sequence[str], rewards: Sequence[float], problems: Sequence[str]) -> tuple[list[float], list[str]]:
    """``rewards`` (one per id of ``ids``) on ``problems``, in their order, and the problems ``ids`` lacks."""
    where = {q: i for i, q in enumerate(ids)}
    missing = [q for q in problems if q not in where]
    return ([] if missing else [rewards[where[q]] for q in problems]), missing


def compare(stored_ids: Sequence[str], stored: Sequence[float], new_ids: Sequence[str], new: Sequence[float],
            tolerance: float = TOLERANCE) -> dict[str, Any]:
    """``new`` minus ``stored`` on the problems ``new`` played (each must be among ``stored_ids``)."""
    from inspo.eval.stats import paired_difference

    old, missing = on_problems(stored_ids, stored, new_ids)
    if missing:
        raise SystemExit(f"{len(missing)} problem(s) of the new run are not in the stored one (first {missing[0]!r}): "
                         "was it run on the same test set?")
    d = paired_difference(list(new), old)
    return {"problems": len(new_ids), "stored_mean": statistics.fmean(old), "new_mean": statistics.fmean(new),
            "same_reward": sum(a == b for a, b in zip(new, old, strict=True)), "difference": d.to_dict(),
            "half_width": (d.high - d.low) / 2, "tolerance": tolerance,
            "reproduces": abs(d.mean) <= tolerance and d.low <= 0 <= d.high}


def _key(result: dict, group: str) -> str:
    """Which instruction's rewards a group is read under: the returned one where ``result`` has
    them (always on the test), else the seed's."""
    return "returned" if group == "test" or "returned" in result["extra"][group]["rewards"] else "seed"


def _rewards(result: dict, group: str, key: str) -> tuple[list[str], list[float]]:
    """A result's problem ids and its rewards under ``key`` in ``group`` (``test`` or an extra test set)."""
    if group == "test":
        return result["test_question_ids"], result["test_rewards"][key]
    extra = result["extra"][group]
    return extra["question_ids"], extra["rewards"][key]


def spread(stored_seeds: Sequence[dict], problems: Sequence[str], group: str, key: str, new_mean: float,
           tolerance: float = TOLERANCE) -> dict[str, Any]:
    """Each stored seed's mean on ``problems`` and whether ``new_mean`` lies within their range
    widened by ``tolerance``."""
    means = {}
    for r in stored_seeds:
        rewards, missing = on_problems(*_rewards(r, group, key), problems)
        if missing:
            raise SystemExit(f"{r['arm']} seed {r['seed']} did not play every problem of the new run's {group}")
        means[int(r["seed"])] = statistics.fmean(rewards)
    low, high = min(means.values()), max(means.values())
    return {"seed_means": {str(s): m for s, m in sorted(means.items())}, "low": low, "high": high,
            "within": low - tolerance <= new_mean <= high + tolerance}


def check(stored: dict, new: dict, tolerance: float = TOLERANCE,
          arm_seeds: Sequence[dict] = ()) -> dict[str, Any]:
    """The test sample and every extra test set the new run played, each under the instruction
    the run returned (``returned``); with ``arm_seeds`` (the arm's other stored seeds) also the
    arm's spread on the same problems (:func:`spread`, the stored run's seed among them)."""
    if (stored["arm"], stored["seed"]) != (new["arm"], new["seed"]):
        raise SystemExit(f"stored {stored['arm']} seed {stored['seed']} against new {new['arm']} seed {new['seed']}")
    for r in arm_seeds:
        if r["arm"] != new["arm"] or int(r["seed"]) == int(new["seed"]):
            raise SystemExit(f"--arm-seed: {r['arm']} seed {r['seed']} is not another seed of {new['arm']}")
    groups = {}
    for name in ("test", *(new.get("extra") or {})):
        key = _key(new, name)
        ids, rewards = _rewards(new, name, key)
        groups[name] = compare(*_rewards(stored, name, key), ids, rewards, tolerance)
        if arm_seeds:
            groups[name]["spread"] = spread([stored, *arm_seeds], ids, name, key, groups[name]["new_mean"], tolerance)
    out = {"arm": new["arm"], "seed": new["seed"], "reproduces": all(g["reproduces"] for g in groups.values())}
    if arm_seeds:
        out["within_spread"] = all(g["spread"]["within"] for g in groups.values())
    return {**out, "groups": groups, "same_instruction": stored["returned_text"] == new["returned_text"],
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
    p.add_argument("--arm-seed", action="append", default=[], metavar="FILE",
                   help="a stored result of another seed of the same arm (repeatable): also check the arm's spread")
    p.add_argument("--json", default=None, help="write the check here")
    args = p.parse_args(argv)
    out = check(json.loads(Path(args.stored).read_text()), json.loads(Path(args.new).read_text()), args.tolerance,
                [json.loads(Path(f).read_text()) for f in args.arm_seed])
    from inspo.eval.provenance import provenance

    out["provenance"]["check"] = provenance(["benchmarks/learning/campaign_reproduce.py", *argv])
    for name, g in out["groups"].items():
        d = g["difference"]
        print(f"{out['arm']} seed {out['seed']} {name}: stored {g['stored_mean']:.3f}, new {g['new_mean']:.3f} on "
              f"{g['problems']} problems ({g['same_reward']} the same reward); new - stored {d['mean']:+.3f} "
              f"[{d['low']:+.3f}, {d['high']:+.3f}] (half-width {g['half_width']:.3f}); "
              f"{'reproduces' if g['reproduces'] else 'DOES NOT reproduce'} at tolerance {g['tolerance']:.2f}")
        if "spread" in g:
            sp = g["spread"]
            print(f"  the arm's stored seeds there: {', '.join(f'{m:.3f}' for m in sp['seed_means'].values())}; "
                  f"new {'within' if sp['within'] else 'OUTSIDE'} [{sp['low']:.3f}, {sp['high']:.3f}] "
                  f"+- {g['tolerance']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
