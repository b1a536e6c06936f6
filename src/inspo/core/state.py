"""Saving and loading the whole core state (population, weights and their windows, buffer, RNG
state, counters) as one JSON file with a ``schema_version``.

Writes are atomic (a temp file renamed over the old one), so a run killed mid-save leaves the
previous state intact.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from inspo.core.accounting import CostLedger
from inspo.core.coevolution import CoEvolution, InitRounds
from inspo.core.population import Population
from inspo.core.replay import ReplayBuffer
from inspo.rng import rng_from_json


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


#: The sections of a saved state and the JSON type each must have.
STATE_SECTIONS: dict[str, type | tuple[type, ...]] = {
    "schema_version": int,
    "config": dict,
    "last_step": int,
    "next_id": int,
    "rng_state": list,
    "population": dict,
    "buffer": dict,
    "ledger": dict,
}


def read_state(path: str | Path) -> dict[str, Any]:
    """A saved state, checked section by section: ``FileNotFoundError`` when ``path`` is missing,
    ``ValueError`` naming the file when it is not UTF-8 JSON, lacks a section or has one of the
    wrong type (cut off, damaged, or not a state file), or was written by another schema version."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no INSPO state at {path}: expected the inspo_state.json a run writes"
        )
    try:
        state = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path} is not an INSPO state: not UTF-8 at byte offset {exc.start} (the file is "
            "damaged)"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path} is not valid JSON ({exc}); the INSPO state file is cut off or damaged"
        ) from exc
    if not isinstance(state, dict):
        raise ValueError(
            f"{path} is not an INSPO state: it holds a JSON {type(state).__name__}, not an object"
        )
    missing = [k for k in STATE_SECTIONS if k not in state]
    if missing:
        raise ValueError(
            f"{path} is not an INSPO state: it lacks {', '.join(missing)} (has "
            f"{', '.join(state) or 'nothing'}); the file was replaced or damaged"
        )
    wrong = [
        f"{k} is a {type(state[k]).__name__}"
        for k, kind in STATE_SECTIONS.items()
        if not isinstance(state[k], kind) or isinstance(state[k], bool)
    ]
    if wrong:
        raise ValueError(
            f"{path} is not an INSPO state: {', '.join(wrong)}; the file was replaced or damaged"
        )
    if state["schema_version"] not in CoEvolution.READS:
        raise ValueError(
            f"{path} has INSPO state schema_version {state['schema_version']}; this inspo reads "
            f"version {' or '.join(map(str, CoEvolution.READS))}. Resume with the inspo version "
            "that wrote it."
        )
    for section, parse in _SECTION_PARSERS.items():  # each section as loading will read it
        if section not in STATE_SECTIONS and state.get(section) is None:
            continue  # an optional section, absent
        try:
            parse(state[section])
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ValueError(
                f"{path} is not a readable INSPO state: its {section} section is damaged "
                f"({type(exc).__name__}: {exc})"
            ) from exc
    return state


def _rng(data: list) -> None:
    random.Random().setstate(rng_from_json(data))


def _init(data: dict) -> None:
    InitRounds(**data)
    wrong = [
        k
        for k, kind in (("rounds", int), ("reason", str), ("events", int))
        if not isinstance(data[k], kind)
    ]
    if wrong:
        raise ValueError(f"{', '.join(wrong)} of the wrong type")


def _proposer(data: dict) -> None:
    if data.get("sampling_rng"):
        _rng(data["sampling_rng"])


_SECTION_PARSERS = {
    "population": Population.from_dict,
    "buffer": ReplayBuffer.from_dict,
    "ledger": CostLedger.from_dict,
    "rng_state": _rng,
    # optional: init only in a state saved inside the initial population, proposer from version 3
    "init": _init,
    "proposer": _proposer,
}


def load_state(coevo: CoEvolution, path: str | Path) -> CoEvolution:
    """Restore ``coevo`` (built with the same proposer) from a saved state file."""
    coevo.load_state_dict(read_state(path))
    return coevo
