"""Settings as text: config files (YAML/TOML) and dotted ``--set`` overrides, read into the
nested dicts that :mod:`inspo.config.layers` merges over a preset before validating."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from inspo.core.config import ConfigError


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A YAML (.yaml/.yml) or TOML (.toml) file as a dict; JSON is accepted as YAML."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 at byte offset {exc.start} ({exc.reason}); save the file as UTF-8"
        ) from exc
    if path.suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the top level must be a table of settings, got {type(data).__name__}"
        )
    return data


_EXPONENT = re.compile(r"[-+]?\d+(\.\d*)?[eE][-+]?\d+")


def parse_override(text: str) -> dict[str, Any]:
    """``"rl.steps=20"`` -> ``{"rl": {"steps": 20}}`` (the value parsed as a YAML scalar; a number
    YAML 1.1 leaves as a string, like ``3e-7``, is read as a float)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"override {text!r} must look like section.key=value (e.g. rl.steps=20)")
    import yaml

    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str) and _EXPONENT.fullmatch(
        value.strip()
    ):  # YAML 1.1 reads 3e-7 as a string
        value = float(value)
    node: dict[str, Any] = {}
    cursor = node
    parts = key.strip().split(".")
    for part in parts[:-1]:
        cursor = cursor.setdefault(part, {})
    cursor[parts[-1]] = value
    return node
