"""Derived random streams, the same in every process."""

from __future__ import annotations

import hashlib
import random
from typing import Any


def derived_rng(*keys: Any) -> random.Random:
    """A ``random.Random`` seeded from ``keys`` by SHA-256: the same keys give the same stream
    in every process and every Python (no dependence on ``hash()`` randomisation)."""
    digest = hashlib.sha256(repr(keys).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def rng_to_json(state: tuple) -> list:
    """``random.Random.getstate()`` as JSON (lists), for a saved state."""
    version, internal, gauss = state
    return [version, list(internal), gauss]


def rng_from_json(data: list) -> tuple:
    """The inverse of :func:`rng_to_json`: a state ``random.Random.setstate`` takes."""
    version, internal, gauss = data
    return (version, tuple(internal), gauss)
