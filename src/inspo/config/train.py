"""Training configuration: validated dataclasses, resolved from a preset, YAML/TOML files and CLI
overrides.

One :class:`TrainConfig` holds a sub-config per component; each component is handed only its
own part. Every field has a one-line doc; every value is validated in ``__post_init__`` with a
message naming the field, the value, and what is allowed. The sections of its own (``model``,
``data``, ``env``, ``rl``) are in :mod:`inspo.config.sections`.

Presets (named starting points) are in :mod:`inspo.config.presets`.

Files map onto the same tree (``[rl]``, ``[coevolution]`` …); overrides are dotted
``section.field=value`` strings whose values are parsed as YAML scalars (both read in
:mod:`inspo.config.files`). How the layers (preset, file, overrides) merge, and what a
search-r1 setting written in the wrong section is told: :mod:`inspo.config.layers`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from inspo.config.files import parse_override, read_config_file
from inspo.config.layers import (
    env_setting_hint,
    merge_layer,
    user_bound,
    warn_full_fine_tuning_rate,
)
from inspo.config.presets import PRESETS
from inspo.config.schedule import offline_round_problem
from inspo.config.sections import (
    DataConfig,
    EnvConfig,
    ModelConfig,
    RLConfig,
    _check,
    _check_bools,
)
from inspo.core.config import CoEvolutionConfig, ConfigError, SettingChange
from inspo.envs.registry import check_seed_name
from inspo.llm.factory import OptimizerLLMConfig

MODES = ("inspo", "static", "pre-policy", "post-policy")
OFFLINE_SCHEDULES = ("compressed", "unchanged")
#: How the returned instruction is chosen at the end (``final_choice``;
#: :mod:`inspo.training.final_choice`).
FINAL_CHOICES = ("weight", "dev", "admitted")
#: The rules that choose on dev questions (``admitted``: among every instruction ever admitted).
DEV_CHOICES = ("dev", "admitted")


@dataclass
class TrainConfig:
    """Everything ``inspo train`` needs."""

    mode: str = "inspo"
    """inspo (co-evolution), static (the seed alone: Search-R1's baseline), pre-policy or
    post-policy (offline ablations)."""
    seed_instruction: str = ""
    """The seed instruction ('' : the environment's own, Search-R1's of App. F for search-r1;
    '@NAME': one of the environment's named ones, e.g. @weak; any other text: that text)."""
    output_dir: str = "runs/inspo"
    """Run directory."""
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    coevolution: CoEvolutionConfig = field(default_factory=CoEvolutionConfig)
    optimizer: OptimizerLLMConfig = field(default_factory=OptimizerLLMConfig)
    offline_steps: int = 30
    """pre-/post-policy modes: steps of the offline instruction-evolution stage (frozen policy);
    also the default of ``inspo evolve --steps``."""
    offline_schedule: str = "compressed"
    """Schedule of the pre-/post-policy stage: compressed (as many evolution rounds as the online
    schedule makes before T_e, spread over offline_steps; see offline_coevolution) or unchanged
    (coevolution's K_p, K_e, T_e as they are)."""
    require_paper_parts: bool = False
    """Refuse to start unless the paper's parts are supplied (policy, data, E5/wiki-18 retrieval, an
    optimizer LLM), listing what is missing; the paper presets turn it on (see
    inspo.config.paper)."""
    final_choice: str = "weight"
    """How the returned instruction is chosen: weight (I* = argmax w, Algorithm 1), dev (a paired
    evaluation of the final population and the seed on data.eval's dev questions; the seed wins
    ties) or admitted (the same over every instruction the run admitted, pruned ones too)."""

    def __post_init__(self) -> None:
        _check_bools(TrainConfig, vars(self), "")
        _check(self.mode in MODES, f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        try:
            check_seed_name(self.env.name, self.seed_instruction)
        except ValueError as exc:
            raise ConfigError(f"seed_instruction: {exc}") from exc
        if self.coevolution.seed is None:  # one seed for the run: the core's streams follow rl.seed
            self.coevolution.seed = self.rl.seed
        _check(
            bool(self.data.train) or self.require_paper_parts,
            "data.train must name the training questions",
        )
        _check(
            isinstance(self.offline_steps, int) and self.offline_steps >= 1,
            f"offline_steps must be an integer >= 1; got {self.offline_steps!r}",
        )
        _check(
            self.offline_schedule in OFFLINE_SCHEDULES,
            f"offline_schedule must be {' or '.join(OFFLINE_SCHEDULES)}; got "
            f"{self.offline_schedule!r}",
        )
        _check(
            self.final_choice in FINAL_CHOICES,
            f"final_choice must be one of {', '.join(FINAL_CHOICES)}; got {self.final_choice!r}",
        )
        if self.mode in ("pre-policy", "post-policy") and self.coevolution.evolve:
            _check_offline_rounds(self)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


def _check_offline_rounds(config: TrainConfig) -> None:
    problem = offline_round_problem(
        config.coevolution, config.offline_steps, config.offline_schedule, config.mode
    )
    _check(problem is None, problem or "")


# ------------------------------------------------------------------------------------ presets
def preset(name: str) -> TrainConfig:
    return from_dict(_preset_data(name))


def _preset_data(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; presets are: {', '.join(PRESETS)}")
    return copy.deepcopy(PRESETS[name])


# ------------------------------------------------------------------------------ dict/file/CLI
def _build(cls, data: dict[str, Any], where: str):
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(where + k for k in unknown)}; "
            f"{where.rstrip('.') or 'the top level'} accepts: "
            f"{', '.join(sorted(known))}{env_setting_hint(unknown)}"
        )
    _check_bools(cls, data, where)
    kwargs = {}
    for name, value in data.items():
        sub = _SECTIONS.get(cls, {}).get(name)
        if sub is None:
            kwargs[name] = value
        elif not isinstance(value, dict):
            raise ConfigError(f"{where}{name} must be a table of settings, got {value!r}")
        elif sub is EnvConfig:  # the environment's own keys: it checks them
            kwargs[name] = EnvConfig.from_dict(value)
        else:
            kwargs[name] = _build(sub, value, f"{where}{name}.")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"{where.rstrip('.') or 'config'}: {exc}") from exc


_SECTIONS: dict[type, dict[str, type]] = {
    TrainConfig: {
        "env": EnvConfig,
        "model": ModelConfig,
        "data": DataConfig,
        "rl": RLConfig,
        "coevolution": CoEvolutionConfig,
        "optimizer": OptimizerLLMConfig,
    }
}


def from_dict(data: dict[str, Any]) -> TrainConfig:
    return _build(TrainConfig, data, "")


def resolve(
    preset_name: str = "cpu-tiny",
    file: str | Path | None = None,
    overrides: list[str] = (),
    *,
    base: dict[str, Any] | None = None,
) -> TrainConfig:
    """Preset, then the file, then the overrides; validated once at the end. ``base`` replaces
    the preset as the starting point (``inspo eval --grid``: the run directory's config.yaml)."""
    start = _preset_data(preset_name) if base is None else copy.deepcopy(base)
    layers = ([read_config_file(file)] if file is not None else []) + [
        parse_override(text) for text in overrides
    ]
    data, kept = start, {}
    for layer in layers:
        data = merge_layer(data, layer, kept)
        kept = user_bound(layer, kept)
    warn_full_fine_tuning_rate(start, data, layers, lora_default=ModelConfig.lora)
    return from_dict(data)


def flat_settings(config: TrainConfig | dict[str, Any]) -> dict[str, Any]:
    """Every setting under its dotted ``--set`` key
    (``{"rl.steps": 8, "model.lora": True, ...}``)."""
    out: dict[str, Any] = {}

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                out[prefix + key] = value

    walk(_plain(config) if is_dataclass(config) else dict(config), "")
    return out


def setting_changes(
    old: TrainConfig | dict[str, Any], new: TrainConfig | dict[str, Any]
) -> list[SettingChange]:
    """Every dotted setting whose value differs from ``old`` to ``new`` (in ``new``'s order; a key
    only one side has shows ``None`` on the other)."""
    a, b = flat_settings(old), flat_settings(new)
    keys = list(b) + [k for k in a if k not in b]
    return [SettingChange(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def dump(config: TrainConfig) -> str:
    """The resolved config as YAML (the run directory keeps it as config.yaml)."""
    try:
        import yaml

        return yaml.safe_dump(_plain(config), sort_keys=False)
    except ImportError:  # pragma: no cover - yaml ships with the train extra
        return json.dumps(_plain(config), indent=2)


def _plain(obj: Any) -> Any:
    if isinstance(obj, EnvConfig):
        return _plain(obj.to_dict())
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if is_dataclass(obj):
        return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    return obj
