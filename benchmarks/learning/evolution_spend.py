"""What each evolution of an INSPO run spent on verification, against its ``evolve_rollouts``.

Reads a run's ``events.jsonl`` and ``inspo_state.json`` (a run directory, or a committed
``*-run.tar.gz`` of one): for each evolution (``evolution_started`` to ``evolution_finished``) the
verification rollouts its ``gated``, ``parent_verified`` and ``verified`` events carry, and the
candidates refused at stage ``budget``. Before the allowance (issue 63's fix) an evolution's budget
was checked only between rounds, so a round could run past it; this shows by how much. It also
counts the candidates the guard refused, by reason (the text before the reason's first colon),
per run and over all runs, and the optimizer calls of each evolution none of whose candidates
played a single verification rollout while some were refused for budget (``unplayed_calls``: calls
the budget could not pay to judge, which later code no longer makes)::

    python benchmarks/learning/evolution_spend.py benchmarks/results/calculator/evidence/rematch-s*-run.tar.gz
"""

from __future__ import annotations

import argparse
import json
import tarfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

SPENDING = ("gated", "parent_verified", "verified")


def read_run(path: Path) -> tuple[list[dict], dict]:
    """The events and the saved state of the INSPO run at ``path`` (a folder holding
    ``events.jsonl``, at any depth, or a ``.tar.gz`` of one)."""
    if path.is_dir():
        events = next(path.rglob("events.jsonl"))
        state = events.with_name("inspo_state.json")
        lines, saved = events.read_text(encoding="utf-8"), state.read_text(encoding="utf-8")
    else:
        with tarfile.open(path) as tar:
            names = tar.getnames()
            events_name = next(n for n in names if n.endswith("/events.jsonl"))
            state_name = events_name.replace("events.jsonl", "inspo_state.json")
            lines = tar.extractfile(events_name).read().decode("utf-8")
            saved = tar.extractfile(state_name).read().decode("utf-8")
    return [json.loads(line) for line in lines.splitlines() if line.strip()], json.loads(saved)


def evolution_spend(events: Sequence[dict], budget: int) -> list[dict]:
    """One record an evolution: its step, rollouts spent on verification, the budget, whether it
    ran past it, and its ``budget`` refusals."""
    out: list[dict] = []
    current: dict | None = None
    calls: list[list[list[str]]] = []  # per evolution, each optimizer call's candidate ids
    played: set[str] = set()
    budget_refused: set[str] = set()
    for e in events:
        kind = e.get("kind")
        if kind == "evolution_started":
            current = {"step": e["step"], "spent": 0, "budget": budget, "budget_refusals": 0}
            out.append(current)
            calls.append([])
        elif current is not None and kind == "proposed":
            calls[-1].append(list(e.get("candidate_ids", [])))
        elif current is not None and kind in SPENDING:
            current["spent"] += int(e.get("n_rollouts", 0))
            if int(e.get("n_rollouts", 0)) and "candidate_id" in e:
                played.add(e["candidate_id"])
        elif current is not None and kind == "rejected" and e.get("stage") == "budget":
            current["budget_refusals"] += 1
            budget_refused.add(e.get("candidate_id"))
    for record, made in zip(out, calls, strict=True):
        record["over"] = bool(budget) and record["spent"] > budget
        record["calls"] = len(made)
        record["unplayed_calls"] = sum(1 for ids in made if not played & set(ids) and budget_refused & set(ids))
    return out


def guard_reasons(events: Sequence[dict]) -> Counter:
    """The guard's refusals (``rejected`` at stage ``guard``) by reason, up to its first colon."""
    return Counter(str(e.get("reason", "")).split(":")[0] for e in events
                   if e.get("kind") == "rejected" and e.get("stage") == "guard")


def main(argv: Sequence[str] | None = None) -> dict[str, list[dict]]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", help="run folders or *-run.tar.gz files")
    args = p.parse_args(argv)
    report, guarded = {}, Counter()
    for run in args.runs:
        events, state = read_run(Path(run))
        budget = int(state["config"].get("evolve_rollouts", 0))
        report[run] = rows = evolution_spend(events, budget)
        cells = ", ".join(f"step {r['step']}: {r['spent']}" + (" OVER" if r["over"] else "")
                          + (f" ({r['budget_refusals']} refused: budget)" if r["budget_refusals"] else "")
                          + (f" ({r['unplayed_calls']} of {r['calls']} calls unplayed)" if r["unplayed_calls"] else "")
                          for r in rows)
        reasons = guard_reasons(events)
        guarded.update(reasons)
        print(f"{run}: evolve_rollouts {budget}; {cells}; total {sum(r['spent'] for r in rows)}"
              + (f"; guard: {_counts(reasons)}" if reasons else ""))
    print(f"guard refusals over these runs: {sum(guarded.values())}" + (f" ({_counts(guarded)})" if guarded else ""))
    return report


def _counts(c: Counter) -> str:
    return ", ".join(f"{reason} {n}" for reason, n in c.most_common())


if __name__ == "__main__":
    main()
