"""Trackers that work: one real GRPO step (TRL, the tiny random Qwen2, CPU) with
``rl.report_to=[tensorboard]`` writes event files whose ``inspo/`` and ``rollout/`` scalars read
back with tensorboard's own reader; the same run announces every phase at INFO (warm-up, P_0's
round, the periodic evaluation, the final choice, the held-out test). A tracker whose package is
missing is refused before anything loads, with the install command; an unknown name is a
config error."""

from __future__ import annotations

import importlib.util
import logging

import pytest

from inspo.config.trackers import missing_tracker_message
from inspo.config.train import resolve
from inspo.core.config import ConfigError
from test_train_progress import _in_order
from train_run_script import TINY, scripted_reward


def test_unknown_tracker_is_a_config_error():
    with pytest.raises(ConfigError, match=r"rl.report_to: unknown tracker\(s\) 'tensorbord'; choose from tensorboard"):
        resolve("cpu-tiny", overrides=["rl.report_to=[tensorbord]"])
    assert resolve("cpu-tiny", overrides=["rl.report_to=tensorboard"]).rl.report_to == ["tensorboard"]
    assert resolve("cpu-tiny", overrides=["rl.report_to=none"]).rl.report_to == []


def test_missing_tracker_is_refused_before_anything_loads(tmp_path, monkeypatch, capsys):
    import inspo.training.grpo_stage as grpo_stage
    from inspo.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))

    def must_not_load(*args, **kwargs):
        raise AssertionError("the run's inputs were prepared before the missing tracker was refused")

    monkeypatch.setattr(grpo_stage, "prepare", must_not_load)
    code = main(["train", "--set", "rl.report_to=[tensorboard,wandb]", "--output-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err == ("inspo: error: rl.report_to names wandb, which is not installed: run pip install 'inspo[wandb]' "
                   "(or drop it from rl.report_to)")
    assert not (tmp_path / "run").exists()
    assert missing_tracker_message(["tensorboard"]) is None  # the dev extra installs it


@pytest.mark.slow
def test_one_grpo_step_writes_inspo_and_rollout_scalars_to_tensorboard(tmp_path, monkeypatch, caplog):
    pytest.importorskip("trl")
    import torch
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from inspo.training.run import run_training

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    out = tmp_path / "run"
    config = resolve("cpu-tiny", overrides=[
        *TINY, f"output_dir={out}", "rl.steps=1", "rl.save_steps=0", "rl.report_to=[tensorboard]",
        "data.eval=world", "data.max_eval_questions=2", "data.max_test_questions=2", "rl.eval_every=1",
    ])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with caplog.at_level(logging.INFO, logger="inspo.training"):
            run_training(config, progress=False, reward_fn=scripted_reward)
    finally:
        torch.set_num_threads(threads)

    files = sorted((out / "runs").glob("*/events.out.tfevents.*"))
    assert files, f"no tensorboard event file under {out / 'runs'}"
    acc = EventAccumulator(str(files[0].parent))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for tag in ("train/inspo/population_size", "train/inspo/optimizer_calls", "train/rollout/search_calls",
                "train/rollout/tool_calls", "train/rollout/count", "train/rollout/finish/length",
                "train/reward/mean", "train/eval/reward", "train/eval/tool_calls", "train/eval/search_calls"):
        assert tag in tags, f"{tag} not in {sorted(tags)}"
    population = acc.Scalars("train/inspo/population_size")
    assert [e.step for e in population] == [1] and population[0].value >= 1
    assert acc.Scalars("train/rollout/count")[0].value == 4.0  # 2 questions x 2 rollouts
    assert any(t.startswith("train/inspo/weight/ins-") for t in tags)

    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "inspo.training")
    _in_order(text, [
        r"warm-up: rolling the seed out on 2 training question",
        r"initial population: growing the seed into 3 instructions",
        r"initial population: round 1/1: \d+ proposed, \d+ verified, \d+ admitted \(population \d/3\)",
        r"initial population: done",
        r"step 1 evaluation: ins-\d+ on 2 dev question",
        r"step 1/1 \| reward",
        r"final choice: scoring \d instruction\(s\) on 2 dev questions",
        r"final choice \(dev\): returning ins-",
        r"held-out test: scoring \d instruction\(s\) on 2 test questions",
        r"held-out test: returned",
    ])
