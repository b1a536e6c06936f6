"""The process's memory, read and released: what each ``metrics.jsonl`` line records.

Why release: a CPU training step allocates gigabytes of medium tensors (activations, logits
slices) through glibc's ``malloc``; freed, they stay in glibc's arenas as free chunks instead of
going back to the OS, and the resident set climbs step over step although nothing is kept (the
calculator campaign's INSPO runs: 5.6 GB before the first step, 14-16 GB by step 4, then the
kernel's OOM killer on a 23 GB machine). :func:`release_memory` collects Python's garbage and asks
glibc to hand its free pages back (``malloc_trim(0)``); what that gives back is garbage plus the
allocator's retention, and what the level still gains step over step is memory the run really keeps.

Between releases, a run keeps freed blocks mapped for reuse (:func:`freed_blocks_kept`): a page
faulted in once serves many tensors instead of one.

The resident set now is read on Linux only (``/proc``); elsewhere that reading is absent. The
release trims only with glibc (musl and macOS have no ``malloc_trim``: there it only collects
garbage).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any


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


def _glibc_function(name: str, argtypes: list[Any]) -> Callable[..., int] | None:
    """The C library's ``name`` (found among the symbols the interpreter already loaded), typed to
    return an int; None off Linux or where the library has none (musl has no ``malloc_trim``)."""
    if not sys.platform.startswith("linux"):
        return None
    fn = getattr(ctypes.CDLL(None), name, None)
    if fn is not None:
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
    return fn


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None."""
    return _glibc_function("malloc_trim", [ctypes.c_size_t])


@cache
def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None."""
    return _glibc_function("mallopt", [ctypes.c_int, ctypes.c_int])


_M_TRIM_THRESHOLD = -1  # mallopt's parameters, and glibc's defaults put back when a block ends
_M_MMAP_MAX = -4
_DEFAULT_MMAP_MAX = 65536
_DEFAULT_TRIM_THRESHOLD = 128 * 1024


@contextmanager
def freed_blocks_kept() -> Iterator[bool]:
    """While the block runs, glibc keeps freed blocks of every size mapped for reuse, handing them
    back only at each :func:`release_memory`; yields whether that took (glibc: True; elsewhere
    False, and nothing changes). At the end glibc's default limits come back and the kept pages
    are released.

    By default glibc serves a block above its mmap threshold (at most 32 MiB) with a fresh
    ``mmap`` and unmaps it when freed, so the next tensor of that size faults in and zeroes its
    pages again, one page at a time. A CPU training pass allocates and frees such tensors by the
    hundred (a calculator micro-batch's MLP activations are 43 MB each): measured on this
    project's machine (torch 2.13, one thread), a bf16 ``silu`` of one took 61-63 ms with fresh
    pages and 29-30 ms with reused ones, and the calculator micro-batch's forward and backward
    ran 1.04-1.21x faster in four pairs (``train_memory.py``'s pass, one core beside another
    job; ``benchmarks/notes/speed.md``). Served
    from the heap instead (``M_MMAP_MAX`` 0) and not trimmed as they are freed (``M_TRIM_THRESHOLD``
    at its largest), the pages stay mapped; a run still hands them back once a step, as each
    metrics line is written. The cost: a peak resident set higher by what the heap cannot reuse
    between steps (the same pass: 3.2-3.8 GB before, 4.0-4.1 after). The setting is the
    process's, so a run holds it only while it runs (glibc's adaptive mmap threshold, which any
    setting switches off, stays off after)."""
    mallopt = _mallopt()
    took = (
        mallopt is not None
        and bool(mallopt(_M_MMAP_MAX, 0))
        and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    )
    try:
        yield took
    finally:
        if mallopt is not None:
            mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
            mallopt(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
            release_memory()


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
