"""Two processes on CPU (``torchrun --nproc_per_node 2``, gloo): every process uses the same
instruction for a question group — also for the group TRL splits over both processes — and
both end with the same population. Runs ``tests/train_run_script.py`` under torchrun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("trl")

from inspo import artifacts  # noqa: E402
from inspo.processes import free_local_port

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SCRIPT = Path(__file__).with_name("train_run_script.py")


def test_two_processes_share_instructions_and_population(tmp_path):
    out = tmp_path / "ddp"
    # 3 questions x G 2 = 6 rows, 3 per process: the middle question's group is split in two
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_local_port()),
           str(SCRIPT), str(out), "--set", "rl.steps=3", "--set", "rl.questions_per_step=3",
           "--set", "rl.micro_batch_size=3", "--set", "rl.save_steps=0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    seen = {}
    shared = 0
    for rank in (0, 1):
        for c in artifacts.read_jsonl(out / f"choices.rank{rank}.jsonl"):
            key = (c["step"], c["question_id"])
            if key in seen:
                shared += 1
                assert seen[key] == c["instruction_id"], f"ranks disagree on {key}"
            seen[key] = c["instruction_id"]
    assert shared == 3  # one split group per step, drawn identically on both ranks
    assert len(seen) == 9

    populations = [json.loads((out / f"final_population.rank{r}.json").read_text()) for r in (0, 1)]
    assert populations[0] == populations[1]
    state = json.loads((out / "inspo_state.json").read_text())
    assert [m["instruction"]["id"] for m in state["population"]["members"]] == populations[0]

    metrics = artifacts.read_jsonl(out / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["rollout/count"] == 6 for m in metrics)  # both processes' rollouts were gathered
    sampled = Counter(e["step"] for e in artifacts.read_jsonl(out / "events.jsonl") if e["kind"] == "sampled")
    assert sampled == {1: 3, 2: 3, 3: 3}
    assert {(s, q): i for (s, q), i in seen.items()} == {
        (e["step"], e["question_id"]): e["instruction_id"]
        for e in artifacts.read_jsonl(out / "events.jsonl") if e["kind"] == "sampled"
    }


def test_a_step_end_that_fails_on_the_main_process_stops_every_process_with_its_message(tmp_path):
    # rank 0 alone ends a step (verification, evaluation); when that stops the run (over
    # rl.max_error_rate), rank 1 must stop with the same message, not wait in the broadcast
    out = tmp_path / "ddp-fail"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_local_port()),
           str(SCRIPT), str(out), "--fail-step-end", "2", "--set", "rl.steps=3", "--set", "rl.questions_per_step=2",
           "--set", "rl.micro_batch_size=2", "--set", "rl.save_steps=0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    message = "3 of 4 rollouts failed (injected at step 2), over rl.max_error_rate=0.1"
    for rank in (0, 1):
        assert f"rank {rank} stopped: {message}" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1]
