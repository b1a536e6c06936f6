"""Arm 5, seed 0 only: GEPA's proposals of the iterations run before GEPA's proposals were kept
(``proposals.jsonl``, commit f53e36e), read back from ``gepa.log`` and ``gepa_state.bin``.

A proposal's text is the log's "Iteration N: Proposed new text for instruction:" up to the next
"Iteration" line; its parent is the program the log's "Selected program K" names; the answers its
reflection was shown are those of the trainset questions GEPA's trace (``full_program_trace``,
whose ``i`` is N - 1) lists for that iteration, the trainset rebuilt exactly as
``evolve_vs_gepa.py`` builds it; its decision is the log's "skipping" (rejected) or "New program
candidate index" (accepted). Written as ``proposals.jsonl`` lines marked ``"source": "gepa.log"``.

    python benchmarks/learning/arm5/proposals_from_log.py RUN_DIR/gepa [--before N] [--check]

``--before N`` keeps iterations below N. ``--check`` compares the proposals it reads with the ones
``proposals.jsonl`` kept itself for the same iterations (each side read as ``ProposalLog`` reads
it), and fails on any difference; keep ``--before`` below the iteration a live run is in, whose
shown answers the saved state does not hold yet.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pickle
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SEED0 = [  # the arm-5 seed-0 command's options that decide the questions
    "--preset", "calculator", "--test-fraction", "0", "--test-questions", "300", "--gepa-prompt", "gepa",
    "--evolutions", "2", "--set", "seed_instruction=@calculator", "--seed", "0",
]


def trainset() -> list:
    spec = importlib.util.spec_from_file_location("evolve_vs_gepa", ROOT / "benchmarks/learning/evolve_vs_gepa.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["evolve_vs_gepa"] = bench
    spec.loader.exec_module(bench)
    from inspo.config.train import resolve
    from inspo.training.preflight import prepare

    args = bench.parse_args(SEED0)
    config = resolve(args.preset, None, [*bench.rematch_settings(args), *args.set])
    inputs = prepare(config, need_optimizer=False, need_model=False, need_eval=True)  # as the bench, no model
    return bench.split_for_gepa(inputs.questions, args.val_size, args.seed)[0]


def from_log(run: Path, train: list) -> list[dict]:
    state = pickle.loads((run / "gepa_state.bin").read_bytes())
    programs = [p["instruction"] for p in state["program_candidates"]]
    shown_ids = {e["i"] + 1: e["subsample_ids"] for e in state["full_program_trace"]}
    lines: list[dict] = []
    parent: dict[int, int] = {}
    text: list[str] | None = None
    log = (run / "gepa.log").read_text(encoding="utf-8").removesuffix("\n")  # each message ends a line
    for raw in log.split("\n"):
        m = re.match(r"Iteration (\d+): (.*)", raw)
        if m is None and not raw.startswith("Loading gepa state"):  # a proposal's next line
            if text is not None:
                text.append(raw)
            continue
        if text is not None:
            lines[-1]["text"] = "\n".join(text)
            text = None
        if m is None:
            continue
        n, message = int(m[1]), m[2]
        if message.startswith("Selected program "):
            parent[n] = int(message.split()[2])
        elif message.startswith("Proposed new text for instruction: "):
            answers = sorted({str(a) for i in shown_ids.get(n, ()) for a in train[i].answers})
            lines.append({"iteration": n, "text": "", "parent": programs[parent[n]], "shown_answers": answers,
                          "source": "gepa.log"})
            text = [message.removeprefix("Proposed new text for instruction: ")]
        elif "is not better than old score" in message:
            lines.append({"iteration": n, "outcome": "rejected", "source": "gepa.log"})
        elif message.startswith("New program candidate index"):
            lines.append({"iteration": n, "outcome": "accepted", "source": "gepa.log"})
    if text is not None:
        lines[-1]["text"] = "\n".join(text)
    return lines


def proposals_of(lines: list[dict]) -> dict:
    """The proposals ``lines`` hold, by iteration, as :class:`ProposalLog` reads its file (an
    iteration run again after a stop keeps its last proposal)."""
    from inspo.baselines.gepa_proposals import ProposalLog

    log = ProposalLog(None)
    log.lines = lines
    return {p.iteration: p for p in log.proposals()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--before", type=int, default=None)
    p.add_argument("--check", action="store_true")
    args = p.parse_args()
    lines = from_log(args.run, trainset())
    if args.before is not None:
        lines = [line for line in lines if line["iteration"] < args.before]
    if not args.check:
        for line in lines:
            print(json.dumps(line))
        return
    kept = [json.loads(x) for x in (args.run / "proposals.jsonl").read_text().splitlines() if x.strip()]
    ours, theirs = proposals_of(lines), proposals_of([x for x in kept if x.get("source") != "gepa.log"])
    common = sorted(set(ours) & set(theirs))
    bad = [(ours[i], theirs[i]) for i in common if ours[i] != theirs[i]]
    print(f"{len(common)} iterations both kept and read from the log, {len(bad)} differences")
    for diff in bad[:5]:
        print(diff)
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
