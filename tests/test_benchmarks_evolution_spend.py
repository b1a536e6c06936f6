"""benchmarks/learning/evolution_spend.py: each evolution's verification spend against its budget,
read from a run folder or its tarball."""

from __future__ import annotations

import json
import tarfile

from test_benchmarks import load_script


def events():
    return [
        {"kind": "evolution_started", "step": 0},
        {"kind": "proposed", "candidate_ids": ["a", "b", "c"]},
        {"kind": "gated", "n_rollouts": 4},
        {"kind": "parent_verified", "n_rollouts": 64},
        {"kind": "verified", "candidate_id": "a", "n_rollouts": 40},
        {"kind": "rejected", "candidate_id": "b", "stage": "budget"},
        {"kind": "rejected", "candidate_id": "c", "stage": "race"},
        # a second call none of whose candidates played: one refused by the guard, one for budget
        {"kind": "proposed", "candidate_ids": ["d", "e"]},
        {"kind": "rejected", "candidate_id": "d", "stage": "guard", "reason": "duplicate of its parent"},
        {"kind": "verified", "candidate_id": "e", "n_rollouts": 0},
        {"kind": "rejected", "candidate_id": "e", "stage": "budget"},
        # a call refused whole by the guard is no budget's doing
        {"kind": "proposed", "candidate_ids": ["f"]},
        {"kind": "rejected", "candidate_id": "f", "stage": "guard", "reason": "truncated: stopped at its completion limit"},
        {"kind": "evolution_finished", "step": 0},
        {"kind": "weights", "n_rollouts": 96},  # a step's rollouts are no verification
        {"kind": "evolution_started", "step": 2},
        {"kind": "verified", "n_rollouts": 8},
    ]


def test_spend_per_evolution_counts_verification_and_budget_refusals(tmp_path):
    spend = load_script("evolution_spend")
    rows = spend.evolution_spend(events(), 100)
    assert rows == [
        {"step": 0, "spent": 108, "budget": 100, "budget_refusals": 2, "over": True, "calls": 3, "unplayed_calls": 1},
        {"step": 2, "spent": 8, "budget": 100, "budget_refusals": 0, "over": False, "calls": 0, "unplayed_calls": 0},
    ]
    assert not any(r["over"] for r in spend.evolution_spend(events(), 0))  # 0: no budget
    run = tmp_path / "run" / "inspo"
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events()))
    (run / "inspo_state.json").write_text(json.dumps({"config": {"evolve_rollouts": 100}}))
    with tarfile.open(tmp_path / "run.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "run", arcname="run")
    report = spend.main([str(tmp_path / "run"), str(tmp_path / "run.tar.gz")])
    assert list(report.values()) == [rows, rows]


def test_guard_refusals_are_counted_by_the_reason_before_its_colon():
    spend = load_script("evolution_spend")
    assert spend.guard_reasons(events()) == {"duplicate of its parent": 1, "truncated": 1}
    assert not spend.guard_reasons([{"kind": "rejected", "stage": "race", "reason": "lost"}])
