"""Arm 5's test rewards beside the campaign's (arms 1-4), per question: the same 300 generated
test problems (the ids are checked), all greedy.

    python benchmarks/learning/arm5/compare_with_campaign.py benchmarks/results/calculator/arm5/gepa-calc-sS.json \
        [benchmarks/results/calculator/arm5/handwritten-sS.json]

Prints each instruction's score and the paired differences of GEPA's and INSPO's frozen-policy
instructions from the untrained policy under the hand-written worked example, and from the trained
arms of the same seed (static GRPO under ``@calculator``, INSPO, the hand-written upper reference).
The optional second file is ``inspo eval``'s JSON for the seed, INSPO's and GEPA's instructions
(in that order) on the 40 problems written by hand; their paired differences are printed too.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from candidates_on_test import rewards_by_instruction  # this script's neighbour

from inspo.eval.stats import paired_difference

CAMPAIGN = Path(__file__).resolve().parents[2] / "results" / "calculator" / "campaign"


def handwritten(path: str) -> None:
    """Paired differences on the hand-written problems from ``inspo eval``'s per-question rows."""
    by = rewards_by_instruction(json.loads(Path(path).read_text()))
    names = list(by)  # the order of --instruction: seed, INSPO's, GEPA's
    if len(names) != 3 or any(set(by[n]) != set(by[names[0]]) for n in names):
        raise SystemExit(f"{path}: expected 3 instructions on the same questions, got {names}")
    ids = sorted(by[names[0]])
    seed, inspo, gepa = ([by[n][q] for q in ids] for n in names)
    print(f"hand-written ({len(ids)} problems): seed {sum(seed) / len(ids):.3f}, INSPO {sum(inspo) / len(ids):.3f}, "
          f"GEPA {sum(gepa) / len(ids):.3f}")
    for label, a, b in (("INSPO - seed", inspo, seed), ("GEPA - seed", gepa, seed), ("GEPA - INSPO", gepa, inspo)):
        print(f"  {label}: {paired_difference(a, b).text()}")


def main(path: str) -> None:
    arm5 = json.loads(Path(path).read_text())
    found = re.search(r"--seed[ =](\d+)", arm5["provenance"]["command"])
    if found is None:
        raise SystemExit(f"{path}: its recorded command names no --seed, so its campaign seed is unknown")
    seed = int(found.group(1))
    ids = arm5["test_question_ids"]
    rows = {f"arm 5 {k} (frozen)": v for k, v in arm5["test_rewards"].items()}
    for name, key in ((f"untrained-s{seed}", "worked"), (f"static-calculator-s{seed}", "returned"),
                      (f"inspo-calculator-s{seed}", "returned"), (f"static-worked-s{seed}", "returned")):
        f = CAMPAIGN / f"{name}.json"
        if not f.is_file() and name.startswith("untrained"):
            f = CAMPAIGN / "untrained-s0.json"  # the untrained policy is greedy: one run serves every seed
        if not f.is_file():
            print(f"{name}: no result ({f})")
            continue
        r = json.loads(f.read_text())
        if r["test_question_ids"] != ids:
            raise SystemExit(f"{f}: other test questions than {path}")
        rows[f"{name} {key}"] = r["test_rewards"][key]
    for name, v in rows.items():
        print(f"{name:36s} {sum(v) / len(v):.3f}")
    for ours in ("arm 5 gepa (frozen)", "arm 5 inspo (frozen)"):
        for other in rows:
            if not other.startswith("arm 5"):
                print(f"{ours} - {other}: {paired_difference(rows[ours], rows[other]).text()}")


if __name__ == "__main__":
    main(sys.argv[1])
    if len(sys.argv) > 2:
        handwritten(sys.argv[2])
