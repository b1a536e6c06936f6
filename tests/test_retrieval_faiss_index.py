"""faiss index kinds: parsing, building each compressed kind behind DenseRetriever, save/load
round trips, search parameters, and the GPU path (skipped without a GPU, refused clearly).

The encoder is a lookup table of random unit vectors (the model is not the point here): passage
``i`` embeds to row ``i``; the query ``find i`` embeds to row ``i`` plus a little noise, so the
exact top-1 of every query is known."""

from __future__ import annotations

import json

import pytest

from inspo.records import Passage
from inspo.retrieval.dense import DenseRetriever
from inspo.retrieval.faiss_index import (
    IndexKind,
    IndexOptions,
    build_index,
    gpu_problem,
    index_bytes,
    to_device,
)
from retrieval_helpers import LookupEncoder, unit_rows

faiss = pytest.importorskip("faiss")

DIM, ROWS = 32, 600
KINDS = ["sq8", "pq8", "ivf16", "ivf16,sq8", "ivf16,pq8", "hnsw16", "hnsw16,sq8"]


@pytest.fixture
def lookup(monkeypatch):
    encoder = LookupEncoder(unit_rows(ROWS, DIM, seed=0))
    monkeypatch.setattr(DenseRetriever, "_load_encoder", staticmethod(lambda path, device: encoder))
    return encoder


PASSAGES = [Passage(f"p{i}", f"Title {i}", f"passage {i}") for i in range(ROWS)]
EASY = list(range(0, ROWS, 12))  # 50 queries


def top1(retriever: DenseRetriever) -> list[str]:
    return [r[0].id for r in retriever.search([f"find {i}" for i in EASY], k=3)]


# ------------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize(("text", "spec", "factory"), [
    ("flat", "flat", "Flat"),
    ("SQ8", "sq8", "SQ8"),
    ("pq64", "pq64", "PQ64np"),
    ("ivf1024", "ivf1024", "IVF1024,Flat"),
    ("ivf1024,flat", "ivf1024", "IVF1024,Flat"),
    ("IVF4096, PQ64", "ivf4096,pq64", "IVF4096,PQ64np"),
    ("ivf256,sq8", "ivf256,sq8", "IVF256,SQ8"),
    ("hnsw32", "hnsw32", "HNSW32,Flat"),
    ("hnsw32,sq8", "hnsw32,sq8", "HNSW32,SQ8"),
])
def test_kinds_parse_to_canonical_specs_and_factory_strings(text, spec, factory):
    kind = IndexKind.parse(text)
    assert (kind.spec, kind.factory_string) == (spec, factory)
    assert IndexKind.parse(kind.spec) == kind


@pytest.mark.parametrize(("text", "message"), [
    ("", "is not one of"),
    ("ivf", "is not one of"),
    ("lsh", "is not one of"),
    ("pq", "pq needs its byte count"),
    ("sq8x", "is not one of"),
    ("ivf0", ">= 1"),
    ("hnsw32,pq16", "L2 distance only"),
])
def test_bad_kinds_say_what_is_allowed(text, message):
    with pytest.raises(ValueError, match=message):
        IndexKind.parse(text)


def test_options_are_validated():
    with pytest.raises(ValueError, match="nprobe must be an integer >= 0"):
        IndexOptions(nprobe=-1)
    with pytest.raises(ValueError, match="faiss device must be cpu, cuda or cuda:N"):
        IndexOptions(device="gpu")
    with pytest.raises(ValueError, match="is not one of"):
        IndexOptions(kind="ivf-pq")
    assert IndexOptions().parsed_kind.spec == "flat"


def test_too_few_rows_or_an_indivisible_dimension_say_what_to_change():
    x = unit_rows(100, DIM, seed=3)
    with pytest.raises(ValueError, match=r"ivf256.* needs at least 256 vectors .* there are 100: use a smaller nlist"):
        build_index(x, IndexOptions(kind="ivf256"))
    with pytest.raises(ValueError, match=r"pq8.* 256 centroids per sub-vector"):
        build_index(x, IndexOptions(kind="pq8"))
    with pytest.raises(ValueError, match=r"pq5 must divide the dimension 32; .* e\.g\. pq4"):
        build_index(unit_rows(300, DIM, seed=3), IndexOptions(kind="pq5"))


# ----------------------------------------------------------------------- building and searching
@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_finds_the_exact_top1_and_round_trips(lookup, tmp_path, kind):
    flat = DenseRetriever(PASSAGES)
    expected = [f"p{i}" for i in EASY]
    assert top1(flat) == expected  # the query set is easy: exact search gets every one

    built = DenseRetriever(PASSAGES, index=IndexOptions(kind=kind))
    assert built.index_kind == IndexKind.parse(kind).spec
    assert top1(built) == expected
    if kind in ("sq8", "pq8", "ivf16,sq8", "ivf16,pq8"):  # codes smaller than 4-byte floats, no graph
        assert index_bytes(built.index) < index_bytes(flat.index)

    built.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "dense.json").read_text())
    assert meta["index"]["kind"] == built.index_kind
    loaded = DenseRetriever.load(tmp_path / "idx")
    assert loaded.index_kind == built.index_kind and len(loaded) == ROWS
    assert type(faiss.downcast_index(loaded.index)) is type(faiss.downcast_index(built.index))
    queries = [f"find {i}" for i in EASY]
    before, after = built.search(queries, k=3), loaded.search(queries, k=3)
    assert [[p.id for p in r] for r in after] == [[p.id for p in r] for r in before]
    assert loaded.search(["find 7"], k=1)[0][0] == Passage("p7", "Title 7", "passage 7", loaded.search(
        ["find 7"], k=1)[0][0].score)  # passages come back from passages.jsonl whole


def test_search_parameters_default_persist_and_can_be_overridden(lookup, tmp_path):
    ivf = DenseRetriever(PASSAGES, index=IndexOptions(kind="ivf16"))
    assert faiss.extract_index_ivf(ivf.index).nprobe == 16  # DEFAULT_NPROBE, not faiss's 1
    hnsw = DenseRetriever(PASSAGES, index=IndexOptions(kind="hnsw8", ef_search=40))
    assert faiss.downcast_index(hnsw.index).hnsw.efSearch == 40
    ivf_narrow = DenseRetriever(PASSAGES, index=IndexOptions(kind="ivf16", nprobe=2))
    ivf_narrow.save(tmp_path / "ivf")
    assert faiss.extract_index_ivf(DenseRetriever.load(tmp_path / "ivf").index).nprobe == 2  # saved with it
    wider = DenseRetriever.load(tmp_path / "ivf", index=IndexOptions(nprobe=9))
    assert faiss.extract_index_ivf(wider.index).nprobe == 9


def test_loading_a_saved_index_as_another_kind_is_refused(lookup, tmp_path):
    DenseRetriever(PASSAGES, index=IndexOptions(kind="sq8")).save(tmp_path / "sq8")
    with pytest.raises(ValueError, match=r"holds a 'sq8' index but index kind 'ivf16' was asked: leave the kind unset"):
        DenseRetriever.load(tmp_path / "sq8", index=IndexOptions(kind="ivf16"))
    assert DenseRetriever.load(tmp_path / "sq8", index=IndexOptions(kind="SQ8")).index_kind == "sq8"


def test_an_index_saved_before_kinds_existed_loads_as_flat(lookup, tmp_path):
    DenseRetriever(PASSAGES[:20]).save(tmp_path / "old")
    meta_path = tmp_path / "old" / "dense.json"
    meta = json.loads(meta_path.read_text())
    del meta["index"]
    meta_path.write_text(json.dumps(meta))
    assert DenseRetriever.load(tmp_path / "old").index_kind == "flat"


# ------------------------------------------------------------------------------------------ GPU
def test_cpu_is_the_default_and_never_needs_a_gpu():
    index = build_index(unit_rows(50, 8, seed=2))
    placed = to_device(index, "cpu")
    assert placed.index is index and placed.resources is None


def test_asking_for_a_gpu_without_one_says_what_is_missing(lookup):
    problem = gpu_problem("cuda")
    if problem is None:
        pytest.skip("faiss sees a GPU here: the refusal cannot be observed")
    assert "no GPU support" in problem or "sees no GPU" in problem
    with pytest.raises(RuntimeError, match="faiss device 'cuda' asked, but .* or use device 'cpu'"):
        DenseRetriever(PASSAGES[:20], index=IndexOptions(device="cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["flat", "ivf16", "ivf16,pq8"])
def test_index_on_gpu_searches_like_cpu_and_saves(lookup, tmp_path, kind):
    problem = gpu_problem("cuda")
    if problem is not None:
        pytest.skip(f"needs faiss with GPU support and a visible CUDA GPU: {problem}")
    cpu = DenseRetriever(PASSAGES, index=IndexOptions(kind=kind))
    gpu = DenseRetriever(PASSAGES, index=IndexOptions(kind=kind, device="cuda"))
    assert type(gpu.index).__name__.startswith("Gpu")
    assert top1(gpu) == top1(cpu) == [f"p{i}" for i in EASY]
    gpu.save(tmp_path / "g")  # written from a CPU copy
    assert DenseRetriever.load(tmp_path / "g").index_kind == IndexKind.parse(kind).spec
