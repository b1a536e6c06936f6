"""Saving and loading the whole core state (population, weights and their windows, buffer, RNG
state, counters) as one JSON file with a ``schema_version``.

Writes are atomic (a temp file renamed over the old one), so a run killed mid-save leaves the
previous state intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from inspo.core.coevolution import CoEvolution


def save_state(coevo: CoEvolution, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(coevo.state_dict(), fh, ensure_ascii=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_state(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no INSPO state at {path}: expected the inspo_state.json a run writes")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); was it written by inspo?") from exc


def load_state(coevo: CoEvolution, path: str | Path) -> CoEvolution:
    """Restore ``coevo`` (built with the same proposer) from a saved state file."""
    coevo.load_state_dict(read_state(path))
    return coevo
