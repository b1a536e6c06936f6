"""The accelerate launch configs shipped for GPUs (configs/accelerate/) parse with accelerate's own
loader and say what their comments and the docs (docs/scale.md) promise. They are never launched here (no GPU):
this checks the files, not a multi-GPU run."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("accelerate")
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs" / "accelerate"

#: file -> (distributed type, ZeRO stage or None, machines)
EXPECTED = {
    "multi_gpu.yaml": ("MULTI_GPU", None, 1),
    "zero2.yaml": ("DEEPSPEED", 2, 1),
    "multi_node.yaml": ("DEEPSPEED", 2, 2),
}


def test_every_shipped_config_is_checked_here():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_launch_config_parses_with_accelerate(name):
    config = load_config_from_file(str(CONFIGS / name))
    kind, stage, machines = EXPECTED[name]
    assert isinstance(config, ClusterConfig)
    assert str(config.distributed_type).rsplit(".", 1)[-1] == kind
    assert config.mixed_precision == "bf16"  # the paper presets train with rl.bf16
    assert config.use_cpu is False
    assert config.num_machines == machines
    assert config.num_processes % machines == 0 and config.num_processes // machines == 8
    if stage is None:
        assert not config.deepspeed_config
    else:
        assert config.deepspeed_config["zero_stage"] == stage
    if machines > 1:
        assert config.main_process_ip and config.main_process_port
    text = (CONFIGS / name).read_text()
    assert f"configs/accelerate/{name}" in text  # the launch command in its own header


def test_docs_name_each_config_and_the_deepspeed_extra():
    scale = (ROOT / "docs" / "scale.md").read_text()  # the README's "Several GPUs and machines" moved here
    for name in EXPECTED:
        assert f"configs/accelerate/{name}" in scale
    assert '".[all,deepspeed]"' in scale
