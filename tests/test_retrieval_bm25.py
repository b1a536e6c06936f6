"""BM25Retriever: finds the right passage, batches, handles empty queries, breaks ties by corpus order on
any CPU, saves and reloads."""

import os
import random

import numpy as np
import pytest

from inspo.records import Passage
from inspo.retrieval.base import Retriever
from inspo.retrieval.bm25 import BM25Retriever, top_k

CORPUS = [
    Passage("p0", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."),
    Passage("p1", "Amazon River", "The Amazon is the largest river in South America by discharge volume."),
    Passage("p2", "Photosynthesis", "Plants convert light energy into chemical energy through photosynthesis."),
    Passage("p3", "Mount Everest", "Everest is Earth's highest mountain above sea level, in the Himalayas."),
    Passage("p4", "Python", "Python is a programming language created by Guido van Rossum."),
    Passage("p5", "Saturn", "Saturn is the sixth planet from the Sun, known for its rings."),
    Passage("p6", "Great Barrier Reef", "It is the world's largest coral system, off Queensland."),
]


@pytest.fixture(scope="module")
def bm25():
    return BM25Retriever(CORPUS)


def test_finds_the_right_passage_per_query_in_one_batch(bm25):
    queries = ["tower in Paris", "highest mountain Himalayas", "who created the Python language",
               "planet with rings", "how do plants make chemical energy from light"]
    results = bm25.search(queries, k=3)
    assert [r[0].id for r in results] == ["p0", "p3", "p4", "p5", "p2"]
    for r in results:
        assert 1 <= len(r) <= 3
        scores = [p.score for p in r]
        assert all(s is not None and s > 0 for s in scores)
        assert scores == sorted(scores, reverse=True)


def test_top_k_is_the_naive_order_ties_by_index():
    """Against the naive reference: highest score first, equal scores in index order, k past the
    end clamped; many ties, as BM25 gives passages that share the same query words."""
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 40)
        scores = np.array([rng.choice([0.0, 1.3, 2.6, 4.1, rng.random()]) for _ in range(n)], dtype=np.float32)
        k = rng.randint(1, n + 3)
        naive = sorted(range(n), key=lambda i: (-scores[i], i))[:k]
        assert top_k(scores, k).tolist() == naive
    assert top_k(np.zeros(3, dtype=np.float32), 0).tolist() == []


def test_tied_passages_come_back_in_corpus_order():
    """Four passages tie for a query (the same words, the same length); every k returns them in the
    corpus's order, not the order a CPU's SIMD partition happens to leave (the golden Search-R1
    episode read a different second passage on an AVX2 machine before)."""
    tied = [Passage(f"t{i}", f"Town {name}", "a town by the Lorral River") for i, name in enumerate("DACB")]
    other = [Passage("r", "Lorral River", "The Lorral River is long. Lorral River rises on Mount Dorpri.")]
    bm25 = BM25Retriever([*other, *tied, Passage("x", "Saturn", "a planet")])
    assert [p.id for p in bm25.search(["Lorral River"], k=5)[0]] == ["r", "t0", "t1", "t2", "t3"]
    assert [p.id for p in bm25.search(["Lorral River"], k=3)[0]] == ["r", "t0", "t1"]
    assert [p.id for p in bm25.search(["town"], k=2)[0]] == ["t0", "t1"]


def test_title_is_indexed(bm25):
    # "barrier" and "reef" occur only in p6's title, never in any text
    assert [p.id for p in bm25.search(["barrier reef"], k=3)[0]] == ["p6"]


def test_returned_passages_carry_text_and_title(bm25):
    hit = bm25.search(["Saturn"], k=1)[0][0]
    assert (hit.title, hit.text) == (CORPUS[5].title, CORPUS[5].text)
    assert CORPUS[5].score is None  # the corpus itself is not mutated


def test_empty_stopword_and_unknown_queries_get_empty_lists(bm25):
    results = bm25.search(["", "   ", "the of and", "zzzqqq", "Saturn"], k=2)
    assert results[:4] == [[], [], [], []]
    assert results[4][0].id == "p5"
    assert bm25.search([], k=3) == []


def test_k_larger_than_corpus_and_bad_k(bm25):
    assert len(bm25.search(["the Sun planet Paris river mountain"], k=50)[0]) <= len(CORPUS)
    with pytest.raises(ValueError, match="k must be >= 1"):
        bm25.search(["Saturn"], k=0)


def test_is_a_retriever_and_has_a_size(bm25):
    assert isinstance(bm25, Retriever)
    assert len(bm25) == len(CORPUS)


def test_empty_corpus_is_refused():
    with pytest.raises(ValueError, match="corpus is empty"):
        BM25Retriever([])


def test_save_load_round_trip_gives_equal_results(bm25, tmp_path):
    queries = ["tower in Paris", "programming language", "", "largest river South America"]
    bm25.save(tmp_path / "idx")
    assert BM25Retriever.is_index_dir(tmp_path / "idx")
    assert (tmp_path / "idx" / "passages.jsonl").exists()
    loaded = BM25Retriever.load(tmp_path / "idx")
    assert len(loaded) == len(CORPUS)
    assert loaded.search(queries, k=3) == bm25.search(queries, k=3)


def test_load_of_a_non_index_directory_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a BM25 index directory"):
        BM25Retriever.load(tmp_path)


def test_bm25s_is_imported_with_jax_allocating_on_demand_unless_the_user_chose(monkeypatch):
    """bm25s runs a JAX op at import where JAX is installed; on a GPU that starts JAX, which
    then takes 75 % of the GPU's memory (a training run beside it ran out of memory on an H200).
    inspo's import of bm25s asks JAX to allocate on demand, and keeps a value the user set."""
    from inspo.retrieval.bm25 import import_bm25s

    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "placeholder")  # restored after the test
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE")
    assert import_bm25s().BM25 is not None
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    import_bm25s()
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    BM25Retriever([Passage(id="1", title="t", text="the only passage")])
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
