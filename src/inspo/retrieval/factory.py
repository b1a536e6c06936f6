"""Build a retriever from CLI-style arguments (``inspo serve-retriever``, ``inspo train`` ...).

``load_retriever(kind, corpus=..., index_dir=..., index_path=..., url=..., index=...)``:

- ``bm25`` / ``dense``: when ``index_dir`` holds a saved index of that kind it is loaded (the
  corpus is not needed); otherwise the index is built from ``corpus`` (passages, or a corpus
  source string for :func:`inspo.data.sources.load_corpus_source`: a file, a directory,
  ``world[:SEED]``, ``wiki-lite``, ``hf:NAME``) and, when ``index_dir`` is given, saved there;
- ``dense`` with ``index_path``: a prebuilt faiss index (Search-R1's ``e5_Flat.index``) whose
  rows are the lines of the JSONL file ``corpus`` (``wiki-18.jsonl``), opened with
  :meth:`~inspo.retrieval.dense.DenseRetriever.from_prebuilt` without re-encoding. A saved
  index in ``index_dir`` still wins; ``index_dir`` is written only when ``index.kind`` asks for
  a rebuild (a prebuilt index searched as it is is not copied);
- ``index`` (:class:`~inspo.retrieval.faiss_index.IndexOptions`: kind, nprobe, ef_search,
  device) applies to ``dense`` only;
- ``http``: a client for the Search-R1-compatible server at ``url`` (``timeout`` seconds per
  request, ``retries`` retries: :class:`~inspo.retrieval.http_client.HttpRetriever`);
  ``check()`` is called so a wrong or dead URL fails here, before any work, with
  ``cannot reach retrieval server at URL``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from inspo.records import Passage
from inspo.retrieval.base import Retriever
from inspo.retrieval.faiss_index import IndexOptions

KINDS = ("bm25", "dense", "http")


def load_retriever(
    kind: str,
    *,
    corpus: str | Sequence[Passage] | None = None,
    index_dir: str | Path | None = None,
    url: str | None = None,
    model: str | None = None,
    device: str = "cpu",
    index_path: str | Path | None = None,
    index: IndexOptions | None = None,
    check: bool = True,
    timeout: float = 30.0,
    retries: int = 3,
) -> Retriever:
    """A ready retriever of ``kind`` (``bm25``, ``dense`` or ``http``); see the module docstring."""
    if kind == "http":
        if not url:
            raise ValueError("retriever kind 'http' needs url=... (e.g. http://127.0.0.1:8000)")
        from inspo.retrieval.http_client import HttpRetriever

        client = HttpRetriever(url, timeout=timeout, retries=retries)
        if check:
            client.check()
        return client
    if kind not in KINDS:
        raise ValueError(f"unknown retriever kind {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "bm25":
        from inspo.retrieval.bm25 import BM25Retriever as cls
    else:
        from inspo.retrieval.dense import DenseRetriever as cls
    if index_path is not None and kind != "dense":
        raise ValueError(
            f"index_path={str(index_path)!r} is a prebuilt faiss index: it needs retriever kind "
            f"'dense', not {kind!r}"
        )
    if index_dir is not None and cls.is_index_dir(index_dir):
        if kind == "dense":
            return cls.load(index_dir, model=model, device=device, index=index)
        return cls.load(index_dir)
    if index_path is not None:
        return _prebuilt(
            index_path, corpus, index_dir=index_dir, model=model, device=device, index=index
        )
    if corpus is None:
        where = f"{index_dir} holds no {kind} index, and " if index_dir is not None else ""
        raise ValueError(f"{where}retriever kind {kind!r} needs corpus=... to build an index")
    if isinstance(corpus, (str, Path)):
        from inspo.data.sources import load_corpus_source

        passages = load_corpus_source(str(corpus))
    else:
        passages = list(corpus)
    if not passages:
        raise ValueError(
            f"corpus {corpus if isinstance(corpus, str) else '(list)'} has no passages"
        )
    retriever = (
        cls(passages) if kind == "bm25" else cls(passages, model=model, device=device, index=index)
    )
    if index_dir is not None:
        retriever.save(index_dir)
    return retriever


def _prebuilt(
    index_path: str | Path,
    corpus: str | Sequence[Passage] | None,
    *,
    index_dir: str | Path | None,
    model: str | None,
    device: str,
    index: IndexOptions | None,
) -> Retriever:
    from inspo.retrieval.dense import DenseRetriever

    if not isinstance(corpus, (str, Path)) or not str(corpus):
        raise ValueError(
            f"the prebuilt index {index_path} needs corpus=PATH, the JSONL file whose lines are "
            "its rows in order (Search-R1: wiki-18.jsonl beside e5_Flat.index)"
        )
    retriever = DenseRetriever.from_prebuilt(
        index_path, corpus, model=model, device=device, index=index
    )
    if index_dir is not None and index is not None and index.kind:
        retriever.save(index_dir)
    return retriever
