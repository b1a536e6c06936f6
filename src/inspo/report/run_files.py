"""Reading the optional files of a run directory for :func:`inspo.report.data.load_run`:
``metrics.jsonl``, the JSON files (``inspo_state.json``, ``summary.json``) and the config
(``config.json`` or ``config.yaml``). A file that is missing or cannot be read gives ``None`` (or
nothing), and a line in ``notes`` says what was not recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from inspo.artifacts import CONFIG_FILE, DEMO_CONFIG_FILE
from inspo.core.events import read_events


def read_json(path: Path, notes: list[str]) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` with a note when the file is missing, cannot be
    read or holds something else."""
    if not path.is_file():
        notes.append(f"{path.name} not recorded")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        notes.append(f"{path.name} could not be read ({exc}); its contents are left out")
        return None
    if not isinstance(data, dict):
        notes.append(f"{path.name} does not hold a JSON object; left out")
        return None
    return data


def read_metrics(path: Path, notes: list[str]) -> list[dict[str, Any]]:
    """The lines of ``metrics.jsonl`` at ``path`` merged into one dict per step (later keys win),
    in step order; a line without ``step`` is ignored. ``[]`` with a note when it is missing."""
    if not path.is_file():
        notes.append("metrics.jsonl not recorded: per-step numbers are derived from events")
        return []
    by_step: dict[int, dict[str, Any]] = {}
    for record in read_events(path):
        if not isinstance(record, dict) or not isinstance(record.get("step"), (int, float)):
            continue
        by_step.setdefault(int(record["step"]), {}).update(record)
    return [by_step[s] for s in sorted(by_step)]


def read_config(path: Path, notes: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """The config of run directory ``path`` and its file's name: ``config.json`` (the demo's),
    else ``config.yaml``. ``(None, name)`` with a note when it cannot be read, ``(None, None)``
    with a note when there is neither."""
    json_path, yaml_path = path / DEMO_CONFIG_FILE, path / CONFIG_FILE
    if json_path.is_file():
        return read_json(json_path, notes), json_path.name
    if yaml_path.is_file():
        try:
            import yaml
        except ImportError:
            notes.append(
                "config.yaml present but PyYAML is not installed (pip install 'inspo[train]')"
            )
            return None, yaml_path.name
        try:
            data = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            notes.append(f"config.yaml could not be read ({exc})")
            return None, yaml_path.name
        return (data if isinstance(data, dict) else None), yaml_path.name
    notes.append("config.json / config.yaml not recorded")
    return None, None
