"""Where a result came from: the commit, the command, the library versions and the machine behind
it.

Every benchmark's result JSON carries :func:`provenance` under ``"provenance"``, so a figure
quoted in BENCHMARKS.md can be traced to the code and the invocation that produced it. Nothing
here raises: a value that cannot be read (no git, a package not installed) is recorded as
``None``, never guessed.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

COMMIT_ENV = "INSPO_COMMIT"  # the commit, for a copy of the checkout that has no .git

# The libraries whose versions can change a result (what is absent is recorded as None).
LIBRARIES = (
    "inspo",
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "vllm",
    "bm25s",
    "sentence-transformers",
    "faiss-cpu",
    "gepa",
    "openai",
)


def _git(args: Sequence[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def library_versions(names: Sequence[str] = LIBRARIES) -> dict[str, str | None]:
    """``{distribution: version}`` for each of ``names``; None where it is not installed."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


#: The CPU flags that decide which kernels torch and vLLM's CPU build use (bf16, int8, AMX).
CPU_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def machine(cpuinfo: str | Path = "/proc/cpuinfo") -> dict[str, Any]:
    """The CPU's model name, how many cores this process may use, which of :data:`CPU_FLAGS` it
    has, and torch's CPU capability (the kernels it dispatches to); None where unreadable."""
    model, flags = None, None
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model is None:
            model = value.strip()
        elif key.strip() == "flags" and flags is None:
            have = set(value.split())
            flags = [f for f in CPU_FLAGS if f in have]
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count()
    capability = None
    if "torch" in sys.modules:  # never imported here for its own sake
        try:
            capability = sys.modules["torch"].backends.cpu.get_cpu_capability()
        except Exception:  # noqa: BLE001 - an old torch without it: recorded as None
            capability = None
    return {"cpu": model, "cores": cores, "cpu_flags": flags, "torch_cpu_capability": capability}


def provenance(
    argv: Sequence[str] | None = None, *, repo: str | Path | None = None
) -> dict[str, Any]:
    """The commit (and whether the work tree had uncommitted changes), the command line, the
    library versions, Python, the platform, the machine (:func:`machine`) and the UTC time, as a
    JSON-ready dict.

    ``argv`` defaults to ``sys.argv``; ``repo`` to the folder of this source file (the checkout
    inspo was installed from in editable mode). ``$INSPO_COMMIT``, where set, is recorded instead
    of git's HEAD, marked as such: a copy of the work tree without ``.git``, or with a ``.git`` that
    lags its files (the GPU machine's copy holds the files of now under the ``.git`` of the
    session's start), is told its commit. Where git's HEAD differs from it, that is kept too
    (``git_commit``), and ``dirty`` is None: git compares the files with another commit.
    """
    cwd = Path(repo) if repo is not None else Path(__file__).resolve().parent
    args = list(sys.argv if argv is None else argv)
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    head = _git(["rev-parse", "HEAD"], cwd)
    told = os.environ.get(COMMIT_ENV)
    use_told = bool(told) and told != head
    commit, source = (told, COMMIT_ENV) if use_told else (head, "git")
    lagging = use_told and head is not None  # git sees a .git, but of another commit
    return {
        "commit": commit,
        "commit_from": source if commit else None,
        **({"git_commit": head} if lagging else {}),
        "dirty": None if status is None or lagging else bool(status),
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *args]),
        "versions": library_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": machine(),
        "utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
