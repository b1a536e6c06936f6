"""A step's speed-up, before against after, from pairs of ``step_profile.py`` results (issue 64).

Each ``--pair BEFORE AFTER`` names two ``step_profile.py --json`` files run back to back on the same
machine with nothing else running (the order alternating between pairs). Per pair: the step's wall
time before / after (the speed-up), each part's, and the peak resident memory after / before. The
record goes under ``--key`` (default ``step_speedup``: the step before issue 64 against now) into
``--into`` (``roofline.py``'s JSON, which keeps its own measurements and provenance), with this
command's provenance and ``--label`` (what the pairs compare) beside it.

Usage::

    python benchmarks/speed/step_speedup.py --pair runs/step-before.json runs/step-after.json \\
        --pair runs/step-before-2.json runs/step-after-2.json --into benchmarks/results/speed/cpu-step-roofline.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def peak(profile: dict[str, Any]) -> float | None:
    """The step's peak resident memory (GiB): the largest over its parts."""
    values = [v for v in (profile.get("peak_gib") or {}).values() if v is not None]
    return max(values) if values else None


def pair_record(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """One pair: the step's and each part's before / after, the peak's after / before."""
    parts = {
        name: before["per_step"][name] / after["per_step"][name]
        for name in before["per_step"]
        if after["per_step"].get(name, 0) > 0 and before["per_step"][name] > 0
    }
    peaks = peak(before), peak(after)
    return {
        "before": {"commit": before["provenance"]["commit"], "utc": before["provenance"]["utc"],
                   "step_wall_s": before["step_wall_s"], "peak_gib": peaks[0]},
        "after": {"commit": after["provenance"]["commit"], "utc": after["provenance"]["utc"],
                  "dirty": after["provenance"].get("dirty"), "step_wall_s": after["step_wall_s"],
                  "peak_gib": peaks[1]},
        "speedup": before["step_wall_s"] / after["step_wall_s"],
        "part_speedup": parts,
        "peak_ratio": peaks[1] / peaks[0] if None not in peaks else None,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from inspo.eval.provenance import provenance

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pair", nargs=2, action="append", required=True, metavar=("BEFORE", "AFTER"),
                   help="two step_profile.py JSON files (repeat per pair)")
    p.add_argument("--into", required=True, help="the JSON file that gets the record")
    p.add_argument("--key", default="step_speedup", help="the record's key in --into (one change on and off: its own key)")
    p.add_argument("--label", default="", help="what BEFORE and AFTER are, in words")
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    pairs = [pair_record(json.loads(Path(b).read_text()), json.loads(Path(a).read_text())) for b, a in args.pair]
    record = {"pairs": pairs, "files": args.pair, "label": args.label,
              "provenance": provenance(["benchmarks/speed/step_speedup.py", *raw])}
    into = Path(args.into)
    data = json.loads(into.read_text()) if into.exists() else {}
    data[args.key] = record
    into.parent.mkdir(parents=True, exist_ok=True)
    into.write_text(json.dumps(data, indent=2) + "\n")
    for i, r in enumerate(pairs, 1):
        print(f"pair {i}: step {r['before']['step_wall_s']:.1f} -> {r['after']['step_wall_s']:.1f} s "
              f"({r['speedup']:.2f}x); peak {r['before']['peak_gib']} -> {r['after']['peak_gib']} GiB; parts: "
              + ", ".join(f"{k} {v:.2f}x" for k, v in r["part_speedup"].items()))
    return record


if __name__ == "__main__":
    main()
