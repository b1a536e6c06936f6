"""Hugging Face hub names (``org/model``) in the local hub cache: what :mod:`inspo.models.registry`
accepts beside registered names, folders and .gguf files. The cache is only read; nothing is
downloaded."""

from __future__ import annotations

import os
import re
from pathlib import Path

_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def is_hub_name(name: str | os.PathLike[str]) -> bool:
    """``org/model`` that is not an existing path: a Hugging Face hub name."""
    key = os.fspath(name)
    return bool(_HUB_NAME.match(key)) and not Path(key).expanduser().exists()


def hub_snapshot(name: str) -> Path | None:
    """The snapshot folder of hub model ``name`` in the local hub cache (``$HF_HUB_CACHE``), or
    None when its ``config.json`` is not there. Reads the cache only; never contacts the hub."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    found = try_to_load_from_cache(name, "config.json")
    return Path(found).parent if isinstance(found, str) else None


def not_cached_message(name: str) -> str:
    """What to tell someone whose hub name ``name`` is not in the local hub cache: where the cache
    is and the command that fetches it (inspo downloads nothing)."""
    try:
        from huggingface_hub import constants

        where = constants.HF_HUB_CACHE
    except ImportError:  # pragma: no cover
        where = "the Hugging Face hub cache"
    return (
        f"{name!r} is no local folder, and as a Hugging Face hub name it is not in the local hub "
        f"cache ({where}); inspo downloads nothing at run time: fetch it once with "
        f"`huggingface-cli download {name}`, or give a local model folder"
    )
