"""Precision that is fast where it runs: ``model.dtype=auto`` and ``rl.bf16=auto`` resolve to bf16
only where the device multiplies bf16 fast (:mod:`inspo.models.precision`), once per entry, logged
as one line and recorded concrete. The machine's answer is injected (``probe``) or patched, so no
test depends on this CPU; the GRPO run is the tiny random Qwen2."""

from __future__ import annotations

import json
import logging

import pytest

import inspo.models.precision as precision_module
from inspo.cli import main
from inspo.config.train import resolve
from inspo.core.config import ConfigError
from inspo.models.precision import (
    Bf16Support,
    fast_bf16,
    play_precision,
    probe_bf16,
    resolve_precision,
)
from inspo.training.precision import run_precision

SLOW_CPU = Bf16Support(False, "CPU AVX2: no fast bf16 matmul")
FAST_CPU = Bf16Support(True, "CPU AVX512: oneDNN bf16 matmul")


def slow(device: str) -> Bf16Support:
    return SLOW_CPU


def fast(device: str) -> Bf16Support:
    return FAST_CPU


def cuda_probe(device: str) -> Bf16Support:
    """A machine whose GPU has bf16 and whose CPU has not."""
    return Bf16Support(True, "CUDA H100: bf16 supported") if device.startswith("cuda") else SLOW_CPU


def test_auto_picks_bf16_only_where_it_is_fast():
    slow_cpu = resolve_precision("auto", "auto", device="cpu", probe=slow)
    assert (slow_cpu.dtype, slow_cpu.bf16, slow_cpu.compute) == ("float32", False, "float32")
    fast_cpu = resolve_precision("auto", "auto", device="cpu", probe=fast)
    assert (fast_cpu.dtype, fast_cpu.bf16, fast_cpu.compute) == ("bfloat16", True, "bfloat16")
    gpu = resolve_precision("float32", "auto", device="cuda", probe=cuda_probe)  # the paper presets
    assert (gpu.dtype, gpu.bf16, gpu.compute) == ("float32", True, "bfloat16")
    assert resolve_precision("float32", "auto", device="cpu", probe=cuda_probe).bf16 is False
    # explicit settings are obeyed whatever the device
    explicit = resolve_precision("bfloat16", True, device="cpu", probe=slow)
    assert (explicit.dtype, explicit.bf16) == ("bfloat16", True)
    assert resolve_precision("float16", False, device="cpu", probe=fast).dtype == "float16"
    assert fast_bf16("cuda", probe=cuda_probe) and not fast_bf16("cpu", probe=cuda_probe)
    # inference entries have no rl.bf16: the compute is the weights dtype
    assert resolve_precision("auto", device="cpu", probe=fast).compute == "bfloat16"
    with pytest.raises(ValueError, match="dtype='bf16' is not supported; use one of auto, bfloat16, float32, float16"):
        resolve_precision("bf16", device="cpu", probe=fast)
    with pytest.raises(ValueError, match="bf16 must be true, false or auto; got 'maybe'"):
        resolve_precision("auto", "maybe", device="cpu", probe=fast)


def test_the_line_says_what_ran_and_why():
    line = resolve_precision("auto", "auto", device="cpu", probe=slow).line()
    assert line == ("precision: weights float32, compute float32 (model.dtype=auto, rl.bf16=auto; "
                    "CPU AVX2: no fast bf16 matmul)")
    eval_line = resolve_precision("auto", device="cpu", probe=fast, dtype_key="--dtype").line()
    assert eval_line == "precision: weights bfloat16, compute bfloat16 (--dtype=auto; CPU AVX512: oneDNN bf16 matmul)"


def test_explicit_bf16_on_a_slow_device_warns_with_how_to_change_it():
    both = resolve_precision("bfloat16", True, device="cpu", probe=slow).warnings()
    assert len(both) == 2
    assert both[0].startswith("model.dtype=bfloat16 on a device without fast bf16 (CPU AVX2: no fast bf16 matmul)")
    assert "tens of times slower" in both[0] and "set model.dtype=auto (here: float32)" in both[0]
    assert both[1].startswith("rl.bf16=true on a device") and "set rl.bf16=auto (here: false)" in both[1]
    # float32 master weights with bf16 compute: only the compute is named
    assert [w.split(" ")[0] for w in resolve_precision("float32", True, device="cpu", probe=slow).warnings()] \
        == ["rl.bf16=true"]
    assert resolve_precision("auto", "auto", device="cpu", probe=slow).warnings() == []
    assert resolve_precision("bfloat16", True, device="cpu", probe=fast).warnings() == []


def test_the_machine_probe_reads_onednn_and_is_false_without_the_op(monkeypatch):
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    real = probe_bf16("cpu")
    assert real.fast == bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    assert real.why.startswith(f"CPU {capability}: ")

    def missing():
        raise RuntimeError("No such operator mkldnn::_is_mkldnn_bf16_supported")

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", missing)
    assert probe_bf16("cpu") == Bf16Support(False, f"CPU {capability}: no fast bf16 matmul")
    assert probe_bf16("mps").fast is False
    if not torch.cuda.is_available():
        assert probe_bf16("cuda") == Bf16Support(False, "no CUDA device is visible")


def test_a_trained_agent_plays_its_dtype_unless_bf16_is_slow_here():
    upcast = play_precision("bfloat16", None, device="cpu", probe=slow)
    assert upcast.dtype == "float32" and upcast.warnings() == []
    assert "agent's dtype=bfloat16" in upcast.line() and "--dtype bfloat16 keeps bf16" in upcast.line()
    assert play_precision("bfloat16", None, device="cpu", probe=fast).dtype == "bfloat16"
    assert play_precision("float32", None, device="cpu", probe=fast).dtype == "float32"
    asked = play_precision("float32", "bfloat16", device="cpu", probe=slow)
    assert asked.dtype == "bfloat16" and asked.warnings()[0].startswith("--dtype=bfloat16 on a device")


def test_config_takes_auto_by_default_and_refuses_junk_naming_the_key():
    config = resolve("cpu-tiny")
    assert (config.model.dtype, config.rl.bf16) == ("auto", "auto")
    paper = resolve("paper")
    assert (paper.model.dtype, paper.rl.bf16) == ("float32", "auto")  # float32 master weights, bf16 compute on GPU
    assert resolve("multihop").model.dtype == "auto"
    assert resolve("cpu-tiny", overrides=["rl.bf16=true", "model.dtype=bfloat16"]).rl.bf16 is True
    with pytest.raises(ConfigError, match=r"^model.dtype must be auto, bfloat16, float32 or float16; got 'bf16'$"):
        resolve("cpu-tiny", overrides=["model.dtype=bf16"])
    with pytest.raises(ConfigError, match=r"^rl.bf16 must be true, false or auto; got 'maybe'"):
        resolve("cpu-tiny", overrides=["rl.bf16=maybe"])
    with pytest.raises(ConfigError, match=r"^rl.bf16 must be true, false or auto; got 1"):
        resolve("cpu-tiny", overrides=["rl.bf16=1"])


def test_a_run_config_is_made_concrete():
    config, precision = run_precision(resolve("cpu-tiny"), device="cpu", probe=slow)
    assert (config.model.dtype, config.rl.bf16) == ("float32", False)
    assert precision.asked_dtype == "auto" and precision.asked_bf16 == "auto"
    config, _ = run_precision(resolve("cpu-tiny"), device="cpu", probe=fast)
    assert (config.model.dtype, config.rl.bf16) == ("bfloat16", True)
    # evolve trains nothing: the line leaves rl.bf16 out, the config still records it resolved
    config, evolve = run_precision(resolve("cpu-tiny"), device="cpu", probe=fast, training=False)
    assert "rl.bf16" not in evolve.line() and evolve.compute == "bfloat16" and config.rl.bf16 is True
    # a resume keeps the checkpoint's weights dtype under auto, and says so
    config, resumed = run_precision(resolve("cpu-tiny"), device="cpu", probe=slow,
                                    saved={"model": {"dtype": "bfloat16"}})
    assert config.model.dtype == "bfloat16" and config.rl.bf16 is False
    assert "model.dtype=auto on resume: the checkpoint's weights are bfloat16" in resumed.line()
    assert resumed.warnings() == [
        "model.dtype=bfloat16 on a device without fast bf16 (CPU AVX2: no fast bf16 matmul): its matmuls may run "
        "tens of times slower than in float32 (benchmarks/speed/precision.py measures it); model.dtype=auto on resume: "
        "the checkpoint's weights are bfloat16: a new run with model.dtype=auto would use float32 here"]


def test_grpo_settings_resolve_an_auto_left_in_the_config(monkeypatch):
    from inspo.training.grpo_config import grpo_settings

    monkeypatch.setattr(precision_module, "probe_bf16", slow)
    settings = grpo_settings(resolve("cpu-tiny"), world_size=1, cuda=False)
    assert settings["bf16"] is False and settings["model_init_kwargs"] == {"dtype": "float32"}
    monkeypatch.setattr(precision_module, "probe_bf16", fast)
    settings = grpo_settings(resolve("cpu-tiny"), world_size=1, cuda=False)
    assert settings["bf16"] is True and settings["model_init_kwargs"] == {"dtype": "bfloat16"}


def test_dry_run_prints_the_resolved_precision(monkeypatch, capsys):
    monkeypatch.setattr(precision_module, "probe_bf16", slow)
    assert main(["train", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert ("precision:              weights float32, compute float32 (model.dtype=auto, rl.bf16=auto; "
            "CPU AVX2: no fast bf16 matmul)") in out.splitlines()
    assert "warning:" not in out
    assert main(["train", "--dry-run", "--set", "model.dtype=bfloat16", "--set", "rl.bf16=true"]) == 0
    out = capsys.readouterr().out
    assert "precision:              weights bfloat16, compute bfloat16 (model.dtype=bfloat16, rl.bf16=true;" in out
    assert "warning: model.dtype=bfloat16 on a device without fast bf16" in out
    assert "warning: rl.bf16=true on a device without fast bf16" in out
    monkeypatch.setattr(precision_module, "probe_bf16", fast)
    assert main(["train", "--dry-run"]) == 0
    assert "precision:              weights bfloat16, compute bfloat16 (model.dtype=auto, rl.bf16=auto;" \
        in capsys.readouterr().out


def test_resume_under_auto_keeps_the_checkpoints_dtype_instead_of_refusing(tmp_path, monkeypatch, caplog):
    """A run checkpointed in bfloat16 (the old default) resumed with model.dtype=auto on a CPU without
    fast bf16: auto would pick float32, which the checkpoint's weights refuse; auto keeps bfloat16."""
    import inspo.training.grpo_stage as grpo_stage
    import inspo.training.run as run_module
    from inspo.training.resume import ResumeRefused
    from test_train_resume_settings import BASE, _checkpoint

    run = tmp_path / "run"
    _checkpoint(run, resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}", "model.dtype=bfloat16",
                                                    "rl.bf16=true"]))

    class Prepared(Exception):
        pass

    def prepared(*args, **kwargs):
        raise Prepared

    monkeypatch.setattr(grpo_stage, "prepare", prepared)  # past the resume plan: stop before any model loads
    monkeypatch.setattr(precision_module, "probe_bf16", slow)
    caplog.set_level(logging.INFO, logger="inspo.training")
    with pytest.raises(Prepared):
        run_module.run_training(resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}"]), resume=True,
                                progress=False)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("precision:")]
    assert lines == ["precision: weights bfloat16, compute bfloat16 (model.dtype=auto, rl.bf16=auto; CPU AVX2: no "
                     "fast bf16 matmul; model.dtype=auto on resume: the checkpoint's weights are bfloat16)"]
    # an explicit float32 is still refused: the checkpoint holds bfloat16 weights
    with pytest.raises(ResumeRefused, match="model.dtype: 'bfloat16' -> 'float32'"):
        run_module.run_training(resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}", "model.dtype=float32"]),
                                resume=True, progress=False)


@pytest.mark.slow
def test_a_tiny_run_records_the_precision_that_ran(tmp_path, monkeypatch, caplog):
    """model.dtype=auto and rl.bf16=auto on a machine said to have fast bf16: the run trains in bf16
    and config.yaml, summary.json and the exported agent.json say bfloat16, never auto."""
    pytest.importorskip("trl")
    import torch
    import yaml

    from inspo.training.run import run_training
    from train_run_script import TINY, scripted_reward

    monkeypatch.setattr(precision_module, "probe_bf16", fast)
    caplog.set_level(logging.INFO, logger="inspo.training")
    out = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith(("model.dtype=", "rl.bf16="))]
    config = resolve("cpu-tiny", overrides=[*overrides, f"output_dir={out}", "rl.steps=2", "rl.save_steps=2"])
    assert (config.model.dtype, config.rl.bf16) == ("auto", "auto")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_training(config, progress=False, reward_fn=scripted_reward)
    finally:
        torch.set_num_threads(threads)
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert (saved["model"]["dtype"], saved["rl"]["bf16"]) == ("bfloat16", True)
    step = json.loads((out / "checkpoint-2" / "inspo_step.json").read_text())
    assert (step["config"]["model"]["dtype"], step["config"]["rl"]["bf16"]) == ("bfloat16", True)
    assert json.loads((out / "agent" / "agent.json").read_text())["dtype"] == "bfloat16"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["precision"].startswith("weights bfloat16, compute bfloat16 (model.dtype=auto, rl.bf16=auto;")
    assert json.loads((out / "model" / "config.json").read_text())["dtype"] == "bfloat16"
    assert sum(r.getMessage().startswith("precision:") for r in caplog.records) == 1
