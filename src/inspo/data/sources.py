"""One string names a data source, so the CLI and configs can say where data comes from.

QA sources (:func:`load_qa_source`) and corpus sources (:func:`load_corpus_source`):

- ``world`` or ``world:SEED`` - the built-in generated world (:mod:`inspo.data.world`);
  ``world-multihop[:SEED]`` is the same world (same corpus) with 4k questions, half of them
  two-hop; ``world-chain[:SEED]`` has world-multihop's questions over passages that never name
  what points at them, so each hop needs its own search (:data:`inspo.data.world.WORLDS`);
- ``wiki-lite`` - the built-in Wikipedia leads corpus (:mod:`inspo.data.wiki_lite`; corpus only);
- ``hf:NAME`` or ``hf:NAME:CONFIG`` - a Hugging Face dataset (``datasets.load_dataset``);
- a file ``.jsonl`` / ``.json`` / ``.parquet`` (formats in :mod:`inspo.data.loaders`);
- a directory: ``{split}.jsonl|.parquet|.json`` for QA, ``corpus.jsonl|.parquet`` (or
  ``passages.jsonl``) for a corpus - e.g. what :func:`inspo.data.world.write_world` writes.
"""

from __future__ import annotations

from pathlib import Path

from inspo.data.loaders import QA_SUFFIXES, load_corpus, load_hf_corpus, load_hf_qa, load_qa
from inspo.records import Passage, Question

CORPUS_NAMES = ("corpus", "passages")
HELP = (
    "expected a file (.jsonl/.json/.parquet), a directory of such files, 'world[:SEED]', "
    "'world-multihop[:SEED]', 'world-chain[:SEED]', 'wiki-lite' (corpus) or 'hf:NAME[:CONFIG]'"
)


def _world(source: str):
    """``(seed, WorldConfig)`` when ``source`` names a built-in world (``NAME`` or ``NAME:SEED``),
    else None."""
    from inspo.data.world import WORLDS

    name, sep, seed = source.partition(":")
    if name not in WORLDS:
        return None
    if not sep:
        return 0, WORLDS[name]
    try:
        return int(seed), WORLDS[name]
    except ValueError as e:
        raise ValueError(
            f"data source {source!r}: the seed after '{name}:' must be an integer"
        ) from e


def is_world(source: str) -> bool:
    """Whether ``source`` names a built-in world (``world``, ``world-multihop``, ``world-chain``,
    with or without ``:SEED``): one that has questions as well as a corpus."""
    try:
        return _world(source) is not None
    except ValueError:
        return False


def is_named_source(source: str) -> bool:
    """Whether ``source`` names a built-in or hub source (no file to check): a built-in world,
    ``wiki-lite`` or ``hf:NAME``."""
    return source == "wiki-lite" or source.startswith("hf:") or _world(source) is not None


def _hf(source: str) -> tuple[str, str | None]:
    name, _, config = source[3:].partition(":")
    return name, (config or None)


def load_qa_source(
    source: str, *, split: str = "train", limit: int | None = None
) -> list[Question]:
    """Questions of ``split`` from the source named by ``source`` (see module docstring)."""
    world = _world(source)
    if world is not None:
        from inspo.data.world import build_world

        splits = build_world(*world).splits
        if split not in splits:
            raise ValueError(f"world has splits {sorted(splits)}, not {split!r}")
        return splits[split][:limit]
    if source == "wiki-lite":
        raise ValueError("'wiki-lite' is a corpus, it has no questions; use it as a corpus source")
    if source.startswith("hf:"):
        name, config = _hf(source)
        return load_hf_qa(name, config=config, split=split, limit=limit)
    path = Path(source)
    if path.is_dir():
        for suffix in QA_SUFFIXES:
            if (path / f"{split}{suffix}").exists():
                return load_qa(path / f"{split}{suffix}", limit=limit)
        raise FileNotFoundError(
            f"{path}: no {split}.jsonl, {split}.parquet or {split}.json in this directory"
        )
    if path.suffix.lower() in QA_SUFFIXES:
        return load_qa(path, limit=limit)
    raise ValueError(f"unknown QA source {source!r}: {HELP}")


def within_hops(questions: list[Question], max_hops: int) -> list[Question]:
    """The questions whose ``meta["hops"]`` is at most ``max_hops`` (0: all; a question without
    hop metadata is kept)."""
    if not max_hops:
        return list(questions)
    return [q for q in questions if int(q.meta.get("hops", 0) or 0) <= max_hops]


def load_corpus_source(source: str, *, limit: int | None = None) -> list[Passage]:
    """Passages from the corpus named by ``source`` (see module docstring)."""
    world = _world(source)
    if world is not None:
        from inspo.data.world import build_world

        return build_world(*world).corpus[:limit]
    if source == "wiki-lite":
        from inspo.data.wiki_lite import load_wiki_lite

        return load_wiki_lite(limit=limit)
    if source.startswith("hf:"):
        name, config = _hf(source)
        return load_hf_corpus(name, config=config, limit=limit)
    path = Path(source)
    if path.is_dir():
        for name in CORPUS_NAMES:
            for suffix in QA_SUFFIXES:
                if (path / f"{name}{suffix}").exists():
                    return load_corpus(path / f"{name}{suffix}", limit=limit)
        raise FileNotFoundError(
            f"{path}: no corpus.jsonl / corpus.parquet / passages.jsonl in this directory"
        )
    if path.suffix.lower() in QA_SUFFIXES:
        return load_corpus(path, limit=limit)
    raise ValueError(f"unknown corpus source {source!r}: {HELP}")
