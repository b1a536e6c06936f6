"""The precision of a run: ``model.dtype`` and ``rl.bf16`` with ``auto`` resolved, once per entry.

:func:`run_precision` returns the config with concrete values (what ``config.yaml``, the
checkpoints' ``inspo_step.json`` and the exported ``agent.json`` then record) and the
:class:`~inspo.models.precision.Precision` the entry logs (:func:`announce`). The rule itself
is :func:`inspo.models.precision.resolve_precision`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from inspo.config.train import TrainConfig
from inspo.models.precision import (
    Precision,
    Probe,
    default_device,
    resolve_bf16_setting,
    resolve_precision,
)

log = logging.getLogger("inspo.training")


def run_precision(
    config: TrainConfig,
    *,
    device: str | None = None,
    probe: Probe | None = None,
    saved: dict[str, Any] | None = None,
    training: bool = True,
) -> tuple[TrainConfig, Precision]:
    """``config`` with ``model.dtype`` and ``rl.bf16`` concrete, and how they were resolved.

    ``device``: where the policy runs (None: cuda when visible, else cpu). ``saved``: the config
    a resumed checkpoint was written with; ``model.dtype=auto`` then keeps the checkpoint's
    weights dtype (the weights are in it; a resume may not change it), whatever this machine
    would pick. ``training``: False where nothing is trained (``inspo evolve``: the compute is the
    weights dtype and the line leaves ``rl.bf16`` out; the config still records it resolved).
    """
    device = device or default_device()
    asked, note = config.model.dtype, ""
    old = ((saved or {}).get("model") or {}).get("dtype")
    if asked == "auto" and old not in (None, "auto"):
        asked, note = old, f"model.dtype=auto on resume: the checkpoint's weights are {old}"
    precision = resolve_precision(
        asked, config.rl.bf16 if training else None, device=device, probe=probe
    )
    precision = replace(precision, asked_dtype=config.model.dtype, note=note)
    model = replace(config.model, dtype=precision.dtype)
    bf16 = (
        precision.bf16 if training else resolve_bf16_setting(config.rl.bf16, precision.support.fast)
    )
    return replace(config, model=model, rl=replace(config.rl, bf16=bf16)), precision


def announce(precision: Precision) -> None:
    """Log ``precision``'s line (INFO) and its warnings, once per entry."""
    log.info("%s", precision.line())
    for warning in precision.warnings():
        log.warning("%s", warning)
