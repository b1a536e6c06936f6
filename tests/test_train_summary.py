"""RunSummary: one summary for train, evolve and demo; summary.json keeps what its readers use."""

from __future__ import annotations

from inspo import artifacts
from inspo.training.summary import RunSummary

BASE = dict(run_dir="runs/x", mode="demo", steps=3, reward_start=0.1, reward_end=0.4, tool_calls_start=None,
            tool_calls_end=None, window=1, best_instruction_id="ins-0002", best_instruction="Search first.",
            best_weight=0.5, population=["ins-0002"], optimizer="rule-based",
            ledger={"training_rollouts": 40, "verification_rollouts": 10}, wall_seconds=1.0)


def test_extra_numbers_sit_at_the_top_of_summary_json_and_read_back(tmp_path):
    summary = RunSummary(**{**BASE, "run_dir": str(tmp_path)}, extra={"seed_quality": 0.15, "best_quality": 0.75})
    summary.write()
    data = artifacts.read_json(tmp_path / artifacts.SUMMARY_FILE)
    assert data["best_quality"] == 0.75 and data["seed_quality"] == 0.15 and "extra" not in data
    assert data["verification_share"] == 0.25 and data["best_instruction"] == "Search first."
    assert RunSummary.read(tmp_path / artifacts.SUMMARY_FILE) == summary


def test_an_evolve_summary_written_before_the_merge_reads_back():
    old = {k: v for k, v in BASE.items() if k != "mode"} | {"policy": "HFEngine (given)", "extra": {},
                                                            "evaluation": None, "selection_rollouts": 4}
    summary = RunSummary.from_dict(old)
    assert summary.mode == "evolve" and summary.policy == "HFEngine (given)" and summary.selection_rollouts == 4


def test_printed_lines_name_how_the_instruction_was_returned():
    text = str(RunSummary(**BASE, extra={"best_quality": 0.75}))
    assert "best instruction:     ins-0002 (I* = argmax w, weight 0.500)" in text
    assert "best quality:         0.750" in text and "tool calls / episode" not in text
    chosen = str(RunSummary(**{**BASE, "tool_calls_start": 1.0, "tool_calls_end": 2.0},
                            evaluation={"rule": "dev", "metric": "f1", "returned_id": "ins-0002",
                                        "returned_text": "Search first.", "seed_id": "ins-0001",
                                        "by_weight_id": "ins-0002"}))
    assert "returned instruction: ins-0002 (weight 0.500)" in chosen and "tool calls / episode: 1.00 -> 2.00" in chosen


def test_a_resumed_runs_wall_time_says_it_counts_from_the_resume():
    assert "wall time:            1 s; peak" in str(RunSummary(**BASE))
    resumed = str(RunSummary(**BASE, resumed_from="runs/x/inspo_state.json (INSPO step 3)"))
    assert "wall time:            1 s (since the resume); peak" in resumed
