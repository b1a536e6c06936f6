"""The GPU checks issue 68 owes, as one script for one lease: each item runs only if the time left
covers its estimate, under a timeout of the time left; each item's log and files come back under
``--out`` (two files an item: ``<item>.log`` and ``<item>.tar``, since a call brings back 8).

Items, run in the order given:

- ``inspo``: INSPO, not static, with vLLM (issue 68, item 3). ``step_profile.py`` on the
  ``multihop`` preset with the 0.5B and its LoRA (the adapter synced into vLLM every step),
  ``rl.use_vllm=true``, 10 steps with an evolution round at step 5 whose verification plays on the
  vLLM engine. The optimizer is the rule-based reflector: a check of the machinery only; its
  instructions are no evidence about INSPO.
- ``tests``: the Makefile's ``VLLM_TESTS`` under pytest (item 2). They build ``tiny-qwen2-hd32``
  from Qwen2.5's tokenizer: receive the 0.5B first, or carry ``_tokenizers/qwen2.5-coder`` and
  point ``INSPO_CACHE`` at its parent's parent.
- ``pair``: ``step_vllm.py``, the 0.5B trained in full, static, 10 steps of 128 rollouts, HF and
  vLLM alternating (item 1), as many whole runs as the item's time allows.

Before it, the pieces (``gpu_campaign.py pack --vllm``, then ``receive`` in each carrying call).
On the device::

    INSPO_COMMIT=<sha here> PYTHONPATH=src JAX_PLATFORMS=cpu python3 benchmarks/speed/gpu_checks.py \\
        --items inspo,tests --budget-s 500 --out "$OUT"

``--quick`` plays each item on ``tiny-qwen2-hd32`` in float32 with tiny shapes, to try the wiring on a
CPU with the vLLM CPU build (``.venv-vllm``); it measures nothing.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from step_vllm import QUICK  # noqa: E402  (a sibling script: the tiny model's vLLM settings)

REPO = HERE.parents[1]
WORK = Path("/tmp/inspo-gpu-checks")  # run folders (models, checkpoints): only small files travel back
KEPT = ("*.json", "*.jsonl", "*.xml", "*.txt")  # what an item's tar keeps of its folder
MODEL = ["model.name_or_path=qwen2.5-coder-0.5b"]
INSPO = ["mode=inspo", "rl.use_vllm=true", "optimizer.kind=rule-based", "rl.steps=10", "coevolution.evolve_every=5",
         "coevolution.prune_every=5", "coevolution.validation_size=8", "coevolution.candidates_per_call=2",
         "coevolution.max_rounds=1", "data.eval=", "rl.save_steps=0"]
QUICK_INSPO = ["rl.steps=4", "coevolution.prune_every=2"]  # after step_vllm's QUICK (the tiny model's settings)
PAIR = ["model.dtype=float32", "rl.learning_rate=1e-6", "mode=static", "rl.save_steps=0"]


@dataclass
class Item:
    """One check: its name, the seconds it is expected to take, and its command given its folder
    and the seconds it may use."""

    name: str
    estimate_s: float
    argv: Callable[[Path, float], list[str]]


def vllm_tests(makefile: Path = REPO / "Makefile") -> list[str]:
    """The Makefile's ``VLLM_TESTS``: the one list of vLLM test files, here as there."""
    match = re.search(r"^VLLM_TESTS\s*:=\s*(.+)$", makefile.read_text(), re.MULTILINE)
    if not match:
        raise SystemExit(f"{makefile}: no VLLM_TESTS line")
    return match.group(1).split()


def sets(overrides: Sequence[str]) -> list[str]:
    return [x for item in overrides for x in ("--set", item)]


def items(quick: bool = False) -> dict[str, Item]:
    model = QUICK if quick else MODEL
    python = sys.executable
    return {
        "inspo": Item("inspo", 60 if quick else 240, lambda d, left: [
            python, str(HERE / "step_profile.py"), "--preset", "multihop", "--out", str(d / "run"),
            "--json", str(d / "inspo.json"), *sets([*INSPO, *model, *(QUICK_INSPO if quick else [])])]),
        "tests": Item("tests", 120 if quick else 300, lambda d, left: [
            python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", str(d / "vllm-tests.xml"),
            *vllm_tests()]),
        "pair": Item("pair", 60 if quick else 240, lambda d, left: [
            python, str(HERE / "step_vllm.py"), "--preset", "multihop", "--steps", "2" if quick else "10",
            "--pairs", "4", "--deadline-s", str(int(left - 20)), "--keep", str(d / "runs"),
            "--json", str(d / "pair.json"), *(["--quick"] if quick else []), *sets([*PAIR, *([] if quick else MODEL)])]),
    }


def bundle(folder: Path, to: Path) -> int:
    """The small files of ``folder`` (``KEPT``) in one tar ``to``; returns how many."""
    files = sorted({f for pattern in KEPT for f in folder.rglob(pattern) if f.is_file()})
    with tarfile.open(to, "w") as tar:
        for f in files:
            tar.add(f, arcname=str(f.relative_to(folder)))
    return len(files)


def run_items(chosen: Sequence[Item], budget_s: float, out: Path, work: Path = WORK, *,
              clock: Callable[[], float] = time.monotonic, runner=subprocess.run) -> list[dict]:
    """Run each item whose estimate fits in the time left, with that time as its timeout; the
    summary (``out/gpu-checks.json``) is rewritten after each, so a killed call keeps the finished ones."""
    out.mkdir(parents=True, exist_ok=True)
    began, records = clock(), []
    for item in chosen:
        left = budget_s - (clock() - began)
        record = {"item": item.name, "left_s": round(left, 1), "estimate_s": item.estimate_s}
        if left < item.estimate_s:
            record["status"] = "skipped: too little time left"
            print(f"gpu_checks: {item.name} skipped, {left:.0f} s left against about {item.estimate_s:.0f} s")
        else:
            folder = work / item.name
            folder.mkdir(parents=True, exist_ok=True)
            argv, t0 = item.argv(folder, left), clock()
            print(f"gpu_checks: {item.name} ({left:.0f} s left): {' '.join(argv)}", flush=True)
            with (out / f"{item.name}.log").open("w") as log:
                try:
                    code = runner(argv, stdout=log, stderr=subprocess.STDOUT, timeout=left, cwd=REPO).returncode
                    record["status"] = "passed" if code == 0 else f"failed: exit {code}"
                except subprocess.TimeoutExpired:
                    record["status"] = f"stopped at its {left:.0f} s"
            record.update(wall_s=round(clock() - t0, 1), files=bundle(folder, out / f"{item.name}.tar"))
            print(f"gpu_checks: {item.name} {record['status']} after {record['wall_s']:.0f} s; the log's end:")
            print("\n".join((out / f"{item.name}.log").read_text(errors="replace").splitlines()[-12:]), flush=True)
        records.append(record)
        (out / "gpu-checks.json").write_text(json.dumps(records, indent=2) + "\n")
    return records


def main(argv: Sequence[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", default="inspo,tests,pair", help="comma-separated, in order: inspo, tests, pair")
    p.add_argument("--budget-s", type=float, required=True, help="seconds all items may use together")
    p.add_argument("--out", required=True, help="where each item's log and tar go (the device's $OUT)")
    p.add_argument("--work", default=str(WORK), help="the items' run folders")
    p.add_argument("--quick", action="store_true", help="tiny model and shapes: the wiring on a CPU, no figures")
    args = p.parse_args(argv)
    known = items(args.quick)
    names = [n for n in args.items.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"--items: a comma-separated list of {', '.join(known)}; got {args.items!r}")
    records = run_items([known[n] for n in names], args.budget_s, Path(args.out), Path(args.work))
    print("\n".join(f"{r['item']}: {r['status']}" for r in records))
    return records


if __name__ == "__main__":
    main()
