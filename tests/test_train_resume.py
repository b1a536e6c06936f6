"""Kill a training run with SIGKILL after a checkpoint, resume it, and compare with an
uninterrupted run of the same seed: same population, weights, buffer and costs; the same model
bytes; every step logged exactly once. Runs ``tests/train_run_script.py`` as subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("trl")

from inspo import artifacts  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SCRIPT = Path(__file__).with_name("train_run_script.py")
ARGS = ["--set", "rl.steps=3", "--set", "rl.save_steps=1"]


def _env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


def _run(out: Path, *extra: str) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *ARGS, *extra], env=_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _started_step(out: Path, step: int) -> bool:
    return any(r.get("step") == step for r in artifacts.read_jsonl(out / "choices.rank0.jsonl"))


def _kill_after_checkpoint(out: Path, checkpoint: int) -> None:
    """Start a run; SIGKILL it once checkpoint-N is complete and step N+1's rollouts began."""
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(out), *ARGS], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600
        while time.time() < deadline and proc.poll() is None:
            if (out / f"checkpoint-{checkpoint}" / artifacts.STATE_FILE).is_file() and _started_step(out, checkpoint + 1):
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"


def test_killed_and_resumed_run_equals_an_uninterrupted_one(tmp_path):
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    _run(straight)
    _kill_after_checkpoint(killed, 1)
    assert not (killed / "summary.json").exists() and not (killed / "checkpoint-3").exists()
    assert _started_step(killed, 2)  # the killed run logged part of step 2: resume must drop it
    _run(killed, "--resume")

    a = json.loads((straight / "inspo_state.json").read_text())
    b = json.loads((killed / "inspo_state.json").read_text())
    assert a["population"] == b["population"]  # members, weights windows, version, archive
    assert a["ledger"] == b["ledger"] and a["buffer"] == b["buffer"] and a["rng_state"] == b["rng_state"]
    assert len(a["population"]["members"]) >= 1

    def lines(run, name, drop=("step_time", "system/rss_gib", "system/peak_rss_gib", "system/released_gib")):
        return [{k: v for k, v in r.items() if k not in drop} for r in artifacts.read_jsonl(run / name)]

    steps = [m["step"] for m in lines(killed, "metrics.jsonl")]
    assert steps == [1, 2, 3]  # contiguous, no duplicates, none lost
    assert lines(killed, "metrics.jsonl") == lines(straight, "metrics.jsonl")
    assert lines(killed, "events.jsonl") == lines(straight, "events.jsonl")
    assert lines(killed, "choices.rank0.jsonl") == lines(straight, "choices.rank0.jsonl")
    assert (killed / "model" / "model.safetensors").read_bytes() == (straight / "model" / "model.safetensors").read_bytes()
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-1")


def test_resume_with_new_settings_applies_and_records_them(tmp_path):
    # issue 11: settings given on --resume were replaced by the checkpoint's, without a word
    out = tmp_path / "run"
    _run(out)
    _run(out, "--resume", "--set", "rl.steps=4", "--set", "coevolution.max_rounds=2")
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3, 4]  # rl.steps applied
    changed = [e for e in artifacts.read_jsonl(out / "events.jsonl") if e["kind"] == "settings_changed"]
    assert changed == [{"kind": "settings_changed", "step": 3, "changes": {
        "rl.steps": {"old": 3, "new": 4}, "coevolution.max_rounds": {"old": 1, "new": 2}}}]
    (entry,) = json.loads((out / "resume.json").read_text())["resumes"]
    assert entry["checkpoint"].endswith("checkpoint-3") and entry["compared_with"].endswith("inspo_step.json")
    assert (out / "config.yaml").read_text().startswith("# resumed from")
    assert json.loads((out / "inspo_state.json").read_text())["config"]["max_rounds"] == 2
    assert artifacts.read_step(out / "checkpoint-4")["config"]["rl"]["steps"] == 4  # the next resume compares with it
    summary = json.loads((out / "summary.json").read_text())
    assert summary["resume_changes"] == ["rl.steps: 3 -> 4", "coevolution.max_rounds: 1 -> 2"]


def test_resuming_a_finished_run_trains_no_further_step(tmp_path):
    # Trainer.train checks max_steps only after a step: resumed at the last checkpoint it trained a
    # step past rl.steps, and a killed campaign run's test then scored a policy one step longer.
    out = tmp_path / "run"
    _run(out)
    model = (out / "model" / "model.safetensors").read_bytes()
    state = json.loads((out / "inspo_state.json").read_text())
    _run(out, "--resume")
    assert not (out / "checkpoint-4").exists()
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3]
    assert (out / "model" / "model.safetensors").read_bytes() == model
    assert json.loads((out / "inspo_state.json").read_text())["population"] == state["population"]
    assert json.loads((out / "summary.json").read_text())["resumed_from"].endswith("checkpoint-3")

    done = subprocess.run([sys.executable, str(SCRIPT), str(out), *ARGS, "--resume", "--set", "rl.steps=2"],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    assert "holds INSPO step 3, past rl.steps=2" in done.stdout + done.stderr
