"""BM25 retrieval with ``bm25s`` (sparse, CPU, fast: ~0.4 s to index 10k passages).

Rules:

- The index is built once from a list of passages, over ``title + text``; passages are kept in
  memory and returned as new :class:`~inspo.records.Passage` objects with ``score`` set.
- Tokenisation is light: lower-case, words of 2+ characters, English stopwords removed, no
  stemming (the same for passages and queries).
- ``search(queries, k)`` scores each query with ``bm25s`` and keeps the ``k`` best, **ties broken
  by corpus order** (:func:`top_k`): bm25s's own selection (``np.argpartition``) orders tied
  passages by the CPU's SIMD path, so one query returned a different second passage on an AVX2
  machine than on an AVX512 one. A query that is empty, or whose words are all stopwords or
  unknown to the corpus, gets ``[]``; passages that match no query word (score 0) are never
  returned, so a result can have fewer than ``k`` passages.
- ``save(dir)`` writes the bm25s index (``index/``), the passages in Search-R1 corpus format
  (``passages.jsonl``) and ``bm25.json`` (parameters); ``BM25Retriever.load(dir)`` reads them
  back without the original corpus file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from inspo.records import Passage
from inspo.retrieval.base import indexed_text

META_FILE = "bm25.json"
PASSAGES_FILE = "passages.jsonl"
INDEX_DIR = "index"
FORMAT = "inspo-bm25/1"


def import_bm25s() -> Any:
    """``bm25s``, imported so that JAX, if installed, does not take the GPU's memory.

    Where JAX is installed, importing ``bm25s`` runs a JAX operation (``bm25s/selection.py``), which
    starts JAX's GPU backend on a CUDA machine, and JAX then takes 75 % of the GPU's memory: a
    training run beside it ran out of GPU memory on an H200 (docs/scale.md). Unless the user set
    ``XLA_PYTHON_CLIENT_PREALLOCATE`` already, JAX allocates on demand instead."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import bm25s

    return bm25s


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, highest first, equal scores in index order: the order
    ``sorted(range(n), key=lambda i: (-scores[i], i))[:k]`` gives, on any CPU. One partition finds
    the k-th score; only the scores at or above it are sorted (stably)."""
    n = len(scores)
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(scores, n - k)[n - k]
    candidates = np.flatnonzero(scores >= kth)
    order = np.argsort(-scores[candidates], kind="stable")
    return candidates[order[:k]]


def write_index(corpus: str | Path, directory: str | Path) -> Path:
    """Build the BM25 index of a corpus file (Search-R1's ``corpus.jsonl``, as ``inspo data``
    writes one) and save it under ``directory`` (:meth:`BM25Retriever.save`); returns it."""
    from inspo.data.loaders import load_corpus

    return BM25Retriever(load_corpus(corpus)).save(directory)


class BM25Retriever:
    """BM25 over a fixed list of passages (see the module docstring for the rules)."""

    backend = "bm25"

    def __init__(
        self,
        passages: Sequence[Passage],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stopwords: str | list[str] | None = "en",
        _index: Any = None,
    ) -> None:
        bm25s = import_bm25s()

        self.passages: list[Passage] = list(passages)
        self.params = {"k1": k1, "b": b, "method": method, "stopwords": stopwords}
        if _index is not None:
            self._bm25 = _index
            return
        if not self.passages:
            raise ValueError("BM25Retriever needs at least one passage; the corpus is empty")
        tokens = bm25s.tokenize(
            [indexed_text(p) for p in self.passages], stopwords=stopwords, show_progress=False
        )
        self._bm25 = bm25s.BM25(k1=k1, b=b, method=method)
        self._bm25.index(tokens, show_progress=False)

    def __len__(self) -> int:
        return len(self.passages)

    def _query_tokens(self, queries: list[str]) -> list[list[str]]:
        bm25s = import_bm25s()

        words = bm25s.tokenize(
            queries, stopwords=self.params["stopwords"], return_ids=False, show_progress=False
        )
        vocab = self._bm25.vocab_dict
        return [[w for w in ws if w in vocab] for ws in words]

    def search(self, queries: list[str], k: int = 3) -> list[list[Passage]]:
        """Top-``k`` passages per query, best first, ties in corpus order (:func:`top_k`)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        results: list[list[Passage]] = [[] for _ in queries]
        texts = [q if isinstance(q, str) else "" for q in queries]
        live = [i for i, q in enumerate(texts) if q.strip()]
        if not live:
            return results
        tokens = self._query_tokens([texts[i] for i in live])
        searchable = [
            (i, t) for i, t in zip(live, tokens, strict=True) if t
        ]  # drop all-stopword queries
        if not searchable:
            return results
        for i, words in searchable:
            scores = self._bm25.get_scores(words)
            for doc in top_k(scores, k).tolist():
                if scores[doc] <= 0.0:
                    break
                p = self.passages[doc]
                score = float(scores[doc])
                results[i].append(Passage(id=p.id, title=p.title, text=p.text, score=score))
        return results

    def save(self, directory: str | Path) -> Path:
        """Write index + passages + parameters under ``directory`` (created); returns it."""
        from inspo.data.loaders import write_corpus_jsonl

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        self._bm25.save(str(out / INDEX_DIR), show_progress=False)
        write_corpus_jsonl(out / PASSAGES_FILE, self.passages)
        meta = {"format": FORMAT, "passages": len(self.passages), **self.params}
        (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, directory: str | Path) -> BM25Retriever:
        """Load what :meth:`save` wrote; raises a clear error for anything else."""
        bm25s = import_bm25s()

        from inspo.data.loaders import load_corpus

        src = Path(directory)
        meta_path = src / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(
                f"{src} is not a BM25 index directory (no {META_FILE}); build one with "
                "BM25Retriever(passages).save(dir)"
            )
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(
                f"{meta_path}: unsupported format {meta.get('format')!r}; expected {FORMAT!r}"
            )
        passages = load_corpus(src / PASSAGES_FILE)
        if len(passages) != meta["passages"]:
            raise ValueError(
                f"{src}: {PASSAGES_FILE} has {len(passages)} passages but the index was built on "
                f"{meta['passages']}; rebuild the index"
            )
        index = bm25s.BM25.load(str(src / INDEX_DIR), show_progress=False)
        return cls(
            passages,
            k1=meta["k1"],
            b=meta["b"],
            method=meta["method"],
            stopwords=meta["stopwords"],
            _index=index,
        )

    @staticmethod
    def is_index_dir(directory: str | Path) -> bool:
        """True when ``directory`` holds a saved BM25 index."""
        return (Path(directory) / META_FILE).exists()
