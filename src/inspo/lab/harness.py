"""What every benchmark script shares: its common arguments, its start, and its result file.

A script in ``benchmarks/`` answers one question (BENCHMARKS.md has one section per question) and
writes one JSON that carries where it came from. The parts that were the same in every script
live here, so that each script holds only its measurement::

    parser = argparse.ArgumentParser(description=...)
    add_common(parser)                      # --threads, --seed, --json
    parser.add_argument("--steps", ...)     # the script's own
    args = parser.parse_args(argv)
    info = start("benchmarks/learning/x.py", argv, threads=args.threads, dtype="float32")
    ...
    write_result(args.json, {**result, "provenance": info})

A script whose ``main`` is only parse, measure, report and write hands those parts to
:func:`run_benchmark`.

:func:`start` sets torch's threads, collects :func:`~inspo.eval.provenance.provenance` (commit,
command, library versions, the CPU's model and flags) together with the device and dtype the
script measured on, and prints one line that says so. Nothing here imports torch unless threads
are set, the device is asked for or an ``"auto"`` dtype is resolved.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inspo.eval.provenance import provenance


def load_script(path: str | Path, name: str) -> Any:
    """The Python file ``path`` as module ``name``, imported once (``sys.modules`` keeps it):
    benchmark folders are not packages, and a script reuses a sibling's pieces this way."""
    import importlib.util

    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up here
        spec.loader.exec_module(module)
    return sys.modules[name]


def add_common(
    parser: argparse.ArgumentParser,
    *,
    threads: int | None = 0,
    seed: bool = True,
    json_help: str | None = None,
    threads_help: str | None = None,
    seed_help: str | None = None,
) -> argparse.ArgumentParser:
    """Add ``--threads`` (default ``threads``; 0: torch's default; None: no such option, for a
    script that runs no torch), ``--seed`` (default 0; unless ``seed`` is False) and ``--json``
    (where the result goes) to ``parser``; returns it. The
    ``*_help`` texts replace the generic ones where a script's option means something narrower.
    The generic texts name their default unless the parser's formatter shows defaults itself."""
    shown = issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter)

    def generic(text: str, default: int) -> str:
        return text if shown else f"{text} (default {default})"

    if threads is not None:
        parser.add_argument(
            "--threads",
            type=int,
            default=threads,
            help=threads_help or generic("torch threads (0: torch's default)", threads),
        )
    if seed:
        parser.add_argument(
            "--seed", type=int, default=0, help=seed_help or generic("the run's seed", 0)
        )
    parser.add_argument(
        "--json", default=None, help=json_help or "write the result as JSON to this path"
    )
    return parser


def start(
    script: str,
    argv: Sequence[str] | None = None,
    *,
    threads: int = 0,
    device: str | None = None,
    dtype: str | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Begin a benchmark run: set torch's threads (when ``threads`` > 0), and return the run's
    provenance with ``device``, ``dtype`` and the torch threads in use added (``device`` None:
    CUDA where present, else CPU; ``dtype`` ``"auto"``: the dtype inspo picks for that device, as a
    run resolves ``model.dtype``). ``argv`` defaults to ``sys.argv[1:]``; the recorded command is
    ``script`` followed by it. Prints the command, commit, threads, device and dtype unless
    ``quiet``."""
    torch = None
    if threads > 0 or device is None or "torch" in sys.modules:
        import torch

        if threads > 0:
            torch.set_num_threads(threads)
    if device is None:
        device = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        from inspo.models.precision import concrete_dtype

        dtype = concrete_dtype(dtype, device)
    info = provenance([script, *(sys.argv[1:] if argv is None else list(argv))])
    info["device"], info["dtype"] = device, dtype
    info["torch_threads"] = torch.get_num_threads() if torch is not None else None
    if not quiet:
        print(describe(info), flush=True)
    return info


def run_benchmark(
    argv: Sequence[str] | None,
    parse_args: Callable[[Sequence[str] | None], argparse.Namespace],
    measure: Callable[[argparse.Namespace], dict[str, Any]],
    report: Callable[[dict[str, Any]], str],
) -> dict[str, Any]:
    """The ``main`` of a script made of three parts: parse ``argv``, ``measure`` (which calls
    :func:`start`), print ``report(result)``, write the result to ``--json``; returns the result."""
    args = parse_args(argv)
    result = measure(args)
    print(report(result))
    write_result(args.json, result)
    return result


def describe(info: dict[str, Any]) -> str:
    """The one line :func:`start` prints: command, commit, threads, device, dtype."""
    commit = (info.get("commit") or "unknown")[:12] + (
        " (uncommitted changes)" if info.get("dirty") else ""
    )
    parts = [
        f"torch threads {info['torch_threads']}" if info.get("torch_threads") else None,
        f"device {info['device']}" if info.get("device") else None,
        f"dtype {info['dtype']}" if info.get("dtype") else None,
    ]
    return f"command: {info['command']} (commit {commit}; " + ", ".join(p for p in parts if p) + ")"


def write_result(path: str | Path | None, result: dict[str, Any]) -> Path | None:
    """Write ``result`` as indented JSON to ``path`` (its folder made); nothing when ``path`` is
    None. A result without ``"provenance"`` is refused: a figure must say where it came from."""
    if path is None:
        return None
    if "provenance" not in result:
        raise ValueError(
            "a benchmark result needs its 'provenance' (from inspo.lab.harness.start) before it "
            "is written"
        )
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return out
