"""Helpers for the dense-retrieval tests: random unit vectors and an encoder that looks them up."""

from __future__ import annotations

import re

import numpy as np


def unit_rows(n: int, d: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, d)).astype("float32")
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class LookupEncoder:
    """Stands in for a SentenceTransformer: the last number in a text picks a row of ``table``;
    a query (``find i``) gets that row plus noise of its own, the same at every call."""

    def __init__(self, table: np.ndarray, noise: float = 0.05):
        self.table, self.noise = table, noise

    def embed(self, text: str) -> np.ndarray:
        i = int(re.findall(r"\d+", text)[-1])
        row = self.table[i]
        if text.startswith("find"):
            row = row + self.noise * np.random.default_rng(i).standard_normal(row.shape).astype("float32")
        return row / np.linalg.norm(row)

    def encode(self, texts, **kwargs):
        return np.stack([self.embed(t) for t in texts])

    def get_embedding_dimension(self):
        return self.table.shape[1]
