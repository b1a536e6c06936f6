"""inspo.data: QA / corpus loaders (Search-R1, FlashRAG, JSONL, parquet, Hugging Face datasets)
and the built-in sets: the generated ``world`` and the ``wiki-lite`` corpus."""

from inspo.data.loaders import (
    DataFormatError,
    load_corpus,
    load_hf_corpus,
    load_hf_qa,
    load_qa,
    write_corpus_jsonl,
    write_qa_jsonl,
)
from inspo.data.sources import load_corpus_source, load_qa_source
from inspo.data.wiki_lite import load_wiki_lite, write_wiki_lite
from inspo.data.world import World, WorldConfig, build_world, write_world

__all__ = [
    "DataFormatError",
    "World",
    "WorldConfig",
    "build_world",
    "load_corpus",
    "load_corpus_source",
    "load_hf_corpus",
    "load_hf_qa",
    "load_qa",
    "load_qa_source",
    "load_wiki_lite",
    "write_corpus_jsonl",
    "write_qa_jsonl",
    "write_wiki_lite",
    "write_world",
]
