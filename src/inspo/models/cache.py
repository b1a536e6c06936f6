"""The local model cache: where converted models live and how they are written.

Rules of the cache:

- The root is, in order: the ``cache_dir`` argument, ``$INSPO_CACHE/models``, or
  ``~/.cache/inspo/models``. Each model is one Hugging Face directory ``<root>/<name>/`` that
  ``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained`` (and so TRL)
  can read by path.
- A directory is *complete* when it holds the marker file ``inspo-model.json`` (written last,
  with what was built from what). Incomplete directories are never used.
- Writes are atomic: a model is built into a temporary directory next to its final place and
  renamed into place in one step, so an interrupted conversion leaves no half-written model
  and two processes converting at once both end up with one complete copy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKER = "inspo-model.json"
CACHE_ENV = "INSPO_CACHE"
MARKER_FORMAT = 1

log = logging.getLogger("inspo.models")


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory that holds one sub-directory per converted model (see module rules)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser() / "models"
    return Path.home() / ".cache" / "inspo" / "models"


def is_complete(path: Path, version: int = 0) -> bool:
    """True when ``path`` is a finished cache entry (its marker file exists) built by a builder
    of at least ``version`` (the marker's ``build_version``, 0 when it has none)."""
    return (path / MARKER).is_file() and read_marker(path).get("build_version", 0) >= version


def read_marker(path: Path) -> dict[str, Any]:
    """The metadata a finished cache entry was written with."""
    return json.loads((path / MARKER).read_text(encoding="utf-8"))


def build_once(dest: Path, build: Callable[[Path], dict[str, Any]], *, version: int = 0) -> Path:
    """Return ``dest``, building it first with ``build(tmp_dir)`` if it is not complete yet.

    ``build`` writes the model into the empty directory it is given and returns JSON-able
    metadata (what it was built from); that metadata becomes the marker file. On any error the
    temporary directory is removed and the error propagates; ``dest`` is untouched.
    ``version``: the builder's version; an entry an older builder wrote is built again and
    replaced (with a warning that says why), so a fixed conversion reaches every cache.
    """
    if is_complete(dest, version):
        return dest
    stale = is_complete(dest)
    if stale:
        log.warning(
            "%s was built by an older inspo (build %s, now %d); building it again",
            dest,
            read_marker(dest).get("build_version", 0),
            version,
        )
    elif dest.exists():
        raise FileExistsError(
            f"{dest} exists but is not a finished inspo model (no {MARKER} inside); it was not "
            "written by inspo or was changed by hand. Delete that directory and run again."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    started = time.monotonic()
    try:
        meta = dict(build(tmp))
        meta.setdefault("name", dest.name)
        meta["marker_format"] = MARKER_FORMAT
        meta["build_version"] = version
        meta["built_in_seconds"] = round(time.monotonic() - started, 2)
        (tmp / MARKER).write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
        tmp.chmod(0o755)  # mkdtemp makes it private; a model cache is readable like any file
        if stale:
            _retire(dest)
        try:
            os.rename(tmp, dest)
        except OSError:
            if not is_complete(
                dest, version
            ):  # not a lost race with another process: a real failure
                raise
            log.info("another process finished %s first; using its copy", dest)
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("cached %s in %.1f s", dest, time.monotonic() - started)
    return dest


def _retire(dest: Path) -> None:
    """Move an outdated entry out of the way and delete it (a process that has its files open
    keeps reading them); another process that retired it first is not an error."""
    old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
    with contextlib.suppress(FileNotFoundError):
        os.rename(dest, old / dest.name)
    shutil.rmtree(old, ignore_errors=True)


def scratch_dir(root: Path) -> tempfile.TemporaryDirectory[str]:
    """A temporary directory on the cache's file system (large GGUF joins do not fit /tmp)."""
    root.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".scratch-", dir=root)
