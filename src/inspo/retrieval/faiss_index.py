"""Which faiss index holds a dense retriever's vectors, and how it is built, tuned and moved.

Index kinds (:class:`IndexKind`, parsed from a short string; all use inner product, so scores are
cosine similarities of normalised vectors, higher is better):

=====================  ======================  ==========================================
kind                   faiss factory string     what it is
=====================  ======================  ==========================================
``flat``               ``Flat``                 exact search, 4 bytes per dimension
``sq8``                ``SQ8``                  exact scan of 8-bit scalar-quantised vectors
``pq<m>``              ``PQ<m>np``              exact scan of m-byte product-quantised codes
``ivf<nlist>``         ``IVF<nlist>,Flat``      nlist k-means lists, ``nprobe`` of them searched
``ivf<nlist>,sq8``     ``IVF<nlist>,SQ8``       the same lists holding 8-bit vectors
``ivf<nlist>,pq<m>``   ``IVF<nlist>,PQ<m>np``   the same lists holding m-byte codes (IVF-PQ)
``hnsw<M>``            ``HNSW<M>,Flat``         a graph of M links per node, ``ef_search`` wide
``hnsw<M>,sq8``        ``HNSW<M>,SQ8``          the same graph over 8-bit vectors
=====================  ======================  ==========================================

Rules:

- ``pq<m>`` needs ``m`` to divide the dimension; training (sq8, pq, ivf) uses evenly spaced rows,
  at most :data:`TRAIN_POINTS_PER_CENTROID` per centroid, and needs at least one row per
  centroid (``nlist`` for ivf, 256 for pq), else a :class:`ValueError` that says what to lower.
  HNSW with PQ is refused: faiss builds it with L2 distance only.
- ``nprobe`` / ``ef_search`` of 0 keep what the index holds (faiss saves both with the index);
  an index built here gets :data:`DEFAULT_NPROBE` / :data:`DEFAULT_EF_SEARCH` unless set.
- ``device`` is ``cpu`` (default) or ``cuda`` / ``cuda:N``: :func:`to_device` moves the index to
  that GPU when faiss has GPU support (``StandardGpuResources``) and sees a GPU, and otherwise
  raises :class:`RuntimeError` saying which is missing. CPU behaviour never depends on a GPU.
- faiss is imported inside the functions that need it, never at module import.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_NPROBE = 16
DEFAULT_EF_SEARCH = 64
TRAIN_POINTS_PER_CENTROID = 64
PQ_CENTROIDS = 256  # 8-bit codes
ADD_CHUNK = 65536  # rows added (or reconstructed from another index) per faiss call

KIND_FORMS = "flat, sq8, pq<m>, ivf<nlist>, ivf<nlist>,sq8, ivf<nlist>,pq<m>, hnsw<M>, hnsw<M>,sq8"
_KIND = re.compile(
    r"(?:(?P<coarse>ivf|hnsw)(?P<size>\d+))?,?(?:(?P<codec>flat|sq8|pq)(?P<m>\d+)?)?"
)
_DEVICE = re.compile(r"cpu|cuda(?::(\d+))?")


@dataclass(frozen=True)
class IndexKind:
    """A parsed index kind (see the module docstring): ``coarse`` is ``""``, ``ivf`` or ``hnsw``
    with ``size`` its nlist or M; ``codec`` is ``flat``, ``sq8`` or ``pq`` with ``pq_m`` bytes."""

    coarse: str = ""
    size: int = 0
    codec: str = "flat"
    pq_m: int = 0

    @classmethod
    def parse(cls, text: str) -> IndexKind:
        spec = text.strip().lower().replace(" ", "")
        match = _KIND.fullmatch(spec)
        if not spec or match is None or not (match["coarse"] or match["codec"]):
            raise ValueError(
                f"faiss index kind {text!r} is not one of: {KIND_FORMS} (e.g. 'ivf1024,pq64')"
            )
        codec, m = match["codec"] or "flat", int(match["m"] or 0)
        if (codec == "pq") != bool(match["m"]):
            raise ValueError(
                f"faiss index kind {text!r}: pq needs its byte count (pq<m>, e.g. pq64), "
                "and flat / sq8 take none"
            )
        coarse, size = match["coarse"] or "", int(match["size"] or 0)
        if coarse and size < 1 or codec == "pq" and m < 1:
            raise ValueError(f"faiss index kind {text!r}: nlist, M and m must be >= 1")
        if coarse == "hnsw" and codec == "pq":
            raise ValueError(
                f"faiss index kind {text!r}: faiss builds HNSW over PQ with L2 distance only; "
                "use ivf<nlist>,pq<m> (or hnsw<M>,sq8)"
            )
        return cls(coarse=coarse, size=size, codec=codec, pq_m=m)

    @property
    def spec(self) -> str:
        """The canonical short string (``ivf1024,pq64``)."""
        codec = f"pq{self.pq_m}" if self.codec == "pq" else self.codec
        if not self.coarse:
            return codec
        return f"{self.coarse}{self.size}" + ("" if codec == "flat" else f",{codec}")

    @property
    def factory_string(self) -> str:
        # "np": no polysemous training (a Hamming pre-filter inspo does not use; ~13 s even on 600
        # rows)
        codec = {"flat": "Flat", "sq8": "SQ8", "pq": f"PQ{self.pq_m}np"}[self.codec]
        return f"{self.coarse.upper()}{self.size},{codec}" if self.coarse else codec

    def train_rows_needed(self) -> int:
        """Fewest rows faiss can train this kind on (0: nothing to train)."""
        need = self.size if self.coarse == "ivf" else 0
        if self.codec == "pq":
            need = max(need, PQ_CENTROIDS)
        return max(need, 1 if self.codec == "sq8" else 0)

    def train_rows_wanted(self) -> int:
        """Rows used for training when that many exist."""
        centroids = max(
            self.size if self.coarse == "ivf" else 0, PQ_CENTROIDS if self.codec == "pq" else 0
        )
        return max(TRAIN_POINTS_PER_CENTROID * centroids, 10_000 if self.codec == "sq8" else 0)

    def check(self, dimension: int, rows: int) -> None:
        """Raise :class:`ValueError` when this kind cannot index ``rows`` vectors of
        ``dimension``."""
        if self.codec == "pq" and dimension % self.pq_m:
            raise ValueError(
                f"faiss index kind {self.spec!r}: pq{self.pq_m} must divide the dimension "
                f"{dimension}; use one of its divisors, e.g. "
                f"pq{_divisor_near(dimension, self.pq_m)}"
            )
        need = self.train_rows_needed()
        if rows < need:
            ivf_bound = self.coarse == "ivf" and self.size == need
            why = (
                f"ivf{self.size} trains {self.size} lists"
                if ivf_bound
                else f"pq{self.pq_m} trains {PQ_CENTROIDS} centroids per sub-vector"
            )
            raise ValueError(
                f"faiss index kind {self.spec!r} needs at least {need} vectors to train ({why}) "
                f"but there are {rows}: use a smaller nlist (about sqrt(rows)), or flat / sq8 / "
                "hnsw<M>"
            )


def _divisor_near(n: int, m: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: (abs(d - m), d))


@dataclass(frozen=True)
class IndexOptions:
    """How a dense retriever indexes and searches its vectors (rules in the module docstring)."""

    kind: str = ""
    """An index kind (module docstring); '': flat when building, a saved or prebuilt index as it
    is."""
    nprobe: int = 0
    """IVF lists searched per query (0: the index's own; DEFAULT_NPROBE when built here)."""
    ef_search: int = 0
    """HNSW candidates kept per query (0: the index's own; DEFAULT_EF_SEARCH when built here)."""
    device: str = "cpu"
    """cpu, or cuda / cuda:N to search on that GPU (needs faiss with GPU support)."""

    def __post_init__(self) -> None:
        if self.kind:
            IndexKind.parse(self.kind)
        for name in ("nprobe", "ef_search"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"{name} must be an integer >= 0 (0: the index's own); got {value!r}"
                )
        if not isinstance(self.device, str) or not _DEVICE.fullmatch(self.device):
            raise ValueError(f"faiss device must be cpu, cuda or cuda:N; got {self.device!r}")

    @property
    def parsed_kind(self) -> IndexKind:
        """The kind to build ('' builds flat)."""
        return IndexKind.parse(self.kind or "flat")


# ------------------------------------------------------------------------------------- building
def build_index(vectors: Any, options: IndexOptions | None = None) -> Any:
    """A faiss index of ``options.kind`` over ``vectors`` (float32, rows x dimension), trained
    on evenly spaced rows when the kind needs training, with search parameters set."""
    import numpy as np

    vectors = np.ascontiguousarray(vectors, dtype="float32")
    return build_from_rows(
        lambda a, b: vectors[a:b],
        len(vectors),
        vectors.shape[1],
        options or IndexOptions(),
        take=lambda ids: vectors[ids],
    )


def rebuild_index(index: Any, options: IndexOptions) -> Any:
    """``index``'s vectors (reconstructed, ``ADD_CHUNK`` rows at a time) in a new index of
    ``options.kind``: e.g. Search-R1's exact ``e5_Flat.index`` as ``ivf4096,pq64``, nothing
    re-encoded."""
    import numpy as np

    def take(ids):
        return index.reconstruct_batch(np.asarray(ids, dtype="int64"))

    try:
        index.reconstruct(0)
    except RuntimeError as e:
        raise ValueError(
            f"cannot read the vectors back from a {type(index).__name__} to rebuild it as "
            f"{options.kind!r}: only indexes that store vectors (flat, hnsw) can be rebuilt; "
            "leave the kind unset to search it as it is"
        ) from e
    return build_from_rows(
        lambda a, b: index.reconstruct_n(a, b - a),
        int(index.ntotal),
        int(index.d),
        options,
        take=take,
    )


def build_from_rows(
    rows: Callable[[int, int], Any],
    n: int,
    dimension: int,
    options: IndexOptions,
    *,
    take: Callable[[Any], Any],
) -> Any:
    """Build from ``rows(start, stop)`` (contiguous float32 blocks) and ``take(ids)`` (a training
    sample): the shared part of :func:`build_index` and :func:`rebuild_index`."""
    import faiss
    import numpy as np

    kind = options.parsed_kind
    kind.check(dimension, n)
    index = faiss.index_factory(dimension, kind.factory_string, faiss.METRIC_INNER_PRODUCT)
    if (
        index.metric_type != faiss.METRIC_INNER_PRODUCT
    ):  # a faiss change must not silently switch metric
        raise RuntimeError(
            f"faiss built {kind.factory_string} with metric {index.metric_type}, not inner product"
        )
    if not index.is_trained:
        size = min(n, max(kind.train_rows_wanted(), kind.train_rows_needed()))
        ids = np.linspace(0, n - 1, num=size).round().astype("int64") if size < n else np.arange(n)
        index.train(np.ascontiguousarray(take(ids), dtype="float32"))
    for start in range(0, n, ADD_CHUNK):
        index.add(np.ascontiguousarray(rows(start, min(n, start + ADD_CHUNK)), dtype="float32"))
    set_search_params(
        index,
        IndexOptions(
            nprobe=options.nprobe or DEFAULT_NPROBE,
            ef_search=options.ef_search or DEFAULT_EF_SEARCH,
        ),
    )
    return index


def set_search_params(index: Any, options: IndexOptions) -> None:
    """Set ``nprobe`` (IVF) and ``efSearch`` (HNSW) on a CPU index where they apply; 0 keeps."""
    import faiss

    if options.nprobe:
        with contextlib.suppress(RuntimeError):  # raised for an index without IVF lists
            faiss.extract_index_ivf(index).nprobe = options.nprobe
    hnsw = getattr(faiss.downcast_index(index), "hnsw", None)
    if options.ef_search and hnsw is not None:
        hnsw.efSearch = options.ef_search


def index_bytes(index: Any) -> int:
    """Size of ``index`` serialised with ``faiss.serialize_index`` (what ``write_index`` writes)."""
    import faiss

    return int(faiss.serialize_index(on_cpu(index)).nbytes)


def describe(index: Any) -> str:
    """The faiss class of ``index`` (``IndexIVFPQ``), for messages and ``dense.json``."""
    import faiss

    return type(faiss.downcast_index(index)).__name__ if _is_cpu(index) else type(index).__name__


# ------------------------------------------------------------------------------------------ GPU
@dataclass
class PlacedIndex:
    """An index and what keeps it alive on its device (GPU resources must outlive the index)."""

    index: Any
    device: str = "cpu"
    resources: Any = None


def gpu_problem(device: str = "cuda") -> str | None:
    """Why ``device`` cannot hold a faiss index here, or None when it can."""
    import faiss

    if not hasattr(faiss, "StandardGpuResources"):
        return (
            f"faiss device {device!r} asked, but this faiss has no GPU support (faiss-cpu is "
            "installed): install a GPU build (conda install -c pytorch faiss-gpu, or pip install "
            "faiss-gpu-cu12), or use device 'cpu'"
        )
    gpus = faiss.get_num_gpus()
    wanted = _gpu_id(device)
    if gpus == 0:
        return (
            f"faiss device {device!r} asked, but faiss sees no GPU (check nvidia-smi and "
            "CUDA_VISIBLE_DEVICES), or use device 'cpu'"
        )
    if wanted >= gpus:
        return f"faiss device {device!r} asked, but faiss sees {gpus} GPU(s) (ids 0..{gpus - 1})"
    return None


def to_device(index: Any, device: str) -> PlacedIndex:
    """``index`` on ``device`` (``cpu``: unchanged; ``cuda[:N]``: a GPU copy, or RuntimeError)."""
    if device == "cpu":
        return PlacedIndex(index)
    problem = gpu_problem(device)
    if problem:
        raise RuntimeError(problem)
    import faiss

    resources = faiss.StandardGpuResources()
    try:
        gpu_index = faiss.index_cpu_to_gpu(resources, _gpu_id(device), index)
    except (RuntimeError, AssertionError) as e:
        raise RuntimeError(
            f"faiss cannot move a {describe(index)} to {device} ({e}); faiss has no GPU "
            "version of HNSW: use flat or ivf kinds on GPU, or device 'cpu'"
        ) from e
    return PlacedIndex(gpu_index, device, resources)


def on_cpu(index: Any) -> Any:
    """``index`` itself when it is on the CPU, else a CPU copy (for saving and measuring)."""
    if _is_cpu(index):
        return index
    import faiss

    return faiss.index_gpu_to_cpu(index)


def _is_cpu(index: Any) -> bool:
    return not type(index).__name__.startswith("Gpu")


def _gpu_id(device: str) -> int:
    match = _DEVICE.fullmatch(device)
    return int(match.group(1) or 0) if match else 0
