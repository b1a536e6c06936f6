"""Comparing a run's record with a golden file (``tests/golden/*.json``): ints and strings exactly,
floats to a relative tolerance, every difference named by its place; and two float32 passes' log-probs,
entropies and gradients (:func:`same_pass`)."""

from __future__ import annotations

import pytest


def same(got, want, where: str, rel: float) -> None:
    """``got`` equals ``want``: ints and strings exactly, floats to ``rel``; the message names the place."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            same(got[key], want[key], f"{where}.{key}", rel)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            same(g, w, f"{where}[{i}]", rel)
    elif isinstance(want, float) and not isinstance(want, bool):
        assert got == pytest.approx(want, rel=rel, abs=1e-9), f"{where}: {got!r} != {want!r}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def same_run(got: dict, want: dict, where: str, trl_metrics: tuple[str, ...]) -> None:
    """A run's record against its golden one: TRL's numbers (``trl_metrics``: loss, gradient
    norm) in each metrics line to 1e-4, everything else to 1e-6."""
    for i, (g, w) in enumerate(zip(got["metrics"], want["metrics"], strict=True)):
        same({k: g[k] for k in trl_metrics if k in w}, {k: w[k] for k in trl_metrics if k in w},
             f"{where}.metrics[{i}]", 1e-4)

    def strip(record: dict) -> dict:
        return {**record, "metrics": [{k: v for k, v in m.items() if k not in trl_metrics} for m in record["metrics"]]}

    same(strip(got), strip(want), where, 1e-6)


def same_pass(got: tuple, want: tuple, entropy_atol: float = 1e-5) -> None:
    """Two passes' ``(log-probs, entropies, gradients)`` the same to float32 rounding: a gradient's
    error scales with its largest entry (sums in another order; an AVX-512 EPYC differs from the AMX
    machine by 1.2e-5 of it), a wrong gradient's with its whole size."""
    import torch

    (lp1, en1, g1), (lp0, en0, g0) = got, want
    torch.testing.assert_close(lp1, lp0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(en1, en0, atol=entropy_atol, rtol=1e-5)
    assert len(g1) == len(g0) > 0
    for a, b in zip(g1, g0, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4 * float(b.abs().max()), rtol=1e-4)
