"""The process's memory, read and released: what each ``metrics.jsonl`` line records.

Why release: a CPU training step allocates gigabytes of medium tensors (activations, logits
slices) through glibc's ``malloc``; freed, they stay in glibc's arenas as free chunks instead of
going back to the OS, and the resident set climbs step over step although nothing is kept (the
calculator campaign's INSPO runs: 5.6 GB before the first step, 14-16 GB by step 4, then the
kernel's OOM killer on a 23 GB machine). :func:`release_memory` collects Python's garbage and asks
glibc to hand its free pages back (``malloc_trim(0)``); what that gives back is garbage plus the
allocator's retention, and what the level still gains step over step is memory the run really keeps.

The resident set now is read on Linux only (``/proc``); elsewhere that reading is absent. The
release trims only with glibc (musl and macOS have no ``malloc_trim``: there it only collects
garbage).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from collections.abc import Callable
from functools import cache


def peak_memory_gb() -> float | None:
    """This process's peak resident set so far, in GiB (``ru_maxrss``: KiB on Linux, bytes on
    macOS); None where there is no ``resource`` module (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024**3 if sys.platform == "darwin" else peak / 1024**2


def resident_memory_gb() -> float | None:
    """This process's resident set now, in GiB (``/proc/self/statm``); None where there is no
    ``/proc`` (not Linux)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
    except OSError:
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") / 1024**3


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (found among the symbols the interpreter already loaded), or None
    where the C library has none."""
    if not sys.platform.startswith("linux"):
        return None
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
    if trim is None:  # musl
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_memory() -> None:
    """Collect Python's garbage, then return glibc's free pages to the OS (where glibc is there)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def memory_metrics(*, release: bool) -> dict[str, float]:
    """A metrics line's memory: ``system/rss_gib`` (the resident set now, after the release when
    ``release``), ``system/released_gib`` (what the release gave back), ``system/peak_rss_gib``
    (the peak so far); each absent where the OS cannot say (see the module docstring)."""
    before = resident_memory_gb()
    if release:
        release_memory()
    now = resident_memory_gb()
    out: dict[str, float] = {}
    if now is not None:
        out["system/rss_gib"] = now
        if release and before is not None:
            out["system/released_gib"] = max(0.0, before - now)
    peak = peak_memory_gb()
    if peak is not None:
        out["system/peak_rss_gib"] = peak
    return out
