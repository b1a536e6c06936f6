"""A generated fictional world: a corpus and single- and multi-hop questions about it.

Why: a small model cannot answer questions about made-up people and places from memory, so the
reward only comes through search; and multi-hop questions ("In which city was the founder of X
born?") make the number and quality of searches matter. Everything is deterministic from the
seed (one ``random.Random(seed)``; no other randomness), fast (a few hundred entities and
~1.5k questions in well under a second) and written in Search-R1's formats.

The world:

- entities of six kinds with made-up names built from syllables: countries, cities, rivers,
  mountains, organisations and people, each with attributes (birth year, occupation, founding
  year, population, height, length) and single-valued relations (person ``born_in`` city,
  ``spouse`` person; city ``country``, ``river``; organisation ``founder``, ``leader``,
  ``headquarters``; country ``capital``; river ``source`` mountain; mountain ``country``);
- one Wikipedia-like passage per entity that states its attributes and relations;
- distractor passages: near-duplicate entities (a name one syllable away, other attributes) and
  "namesake" passages (a prize or a street named after an entity, with no facts about it).
  Distractors never state a fact that answers a question about a real entity;
- questions: an attribute or relation of an entity reached through 0-2 relations, phrased as
  one question ("In which country was the founder of the Velmor Institute born?"). Each
  question's ``meta`` records its hop chain: ``entity_ids`` and ``passage_ids`` (one per hop,
  in reading order), ``relations``, ``hops`` and the ``template``; the gold answer is stated in
  the last hop's passage.

Use :func:`build_world` to get a :class:`World` in memory and :func:`write_world` to write it as
``corpus.jsonl`` (``{"id", "contents"}``), ``{train,dev,test}.jsonl`` (``{"id", "question",
"golden_answers", "metadata"}``), ``entities.jsonl`` and optionally a BM25 index. One module per
part, in the order :func:`build_world` draws from the one RNG: :mod:`.entities` (names,
attributes, relations; records in :mod:`.model`), :mod:`.passages` (the corpus and its
distractors), :mod:`.questions` (the questions and their splits).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from inspo.data.world.entities import make_entities
from inspo.data.world.model import Entity, World, WorldConfig
from inspo.data.world.passages import distractors, entity_passages
from inspo.data.world.questions import make_questions, split_questions

__all__ = ["WORLDS", "Entity", "World", "WorldConfig", "build_world", "world_config", "write_world"]

#: The named built-in worlds (a data source ``NAME`` or ``NAME:SEED``). Every one has the same
#: entities for a seed (they are drawn before the questions) and the same corpus but for
#: ``reverse_mentions``; the questions differ with ``questions`` and ``hop_mix``.
WORLDS: dict[str, WorldConfig] = {
    # ~1.5k questions, 40/40/20 % 1/2/3-hop: 150 test questions, 62 of them two-hop.
    "world": WorldConfig(),
    # 4k questions, 30/50/20 % 1/2/3-hop: 400 test questions, 214 two-hop and 84 three-hop, so a
    # held-out multi-hop score rests on >= 200 questions (the multihop preset; BENCHMARKS.md §4).
    "world-multihop": WorldConfig(questions=4000, hop_mix=(0.3, 0.5, 0.2), name="world-multihop"),
    # world-multihop's questions (same ids but the prefix) over a corpus whose passages never name
    # what points at them, so each hop needs its own search: one BM25 search on the question
    # text returns a two-hop question's second passage for 74 of 400 training questions here
    # against 147 of 400 in world-multihop (top 3; BENCHMARKS.md §4).
    "world-chain": WorldConfig(
        questions=4000, hop_mix=(0.3, 0.5, 0.2), name="world-chain", reverse_mentions=False
    ),
}


def world_config(name: str) -> WorldConfig:
    """The :class:`WorldConfig` of a named world (:data:`WORLDS`)."""
    if name not in WORLDS:
        raise ValueError(f"unknown world {name!r}; the built-in worlds are: {', '.join(WORLDS)}")
    return WORLDS[name]


def build_world(seed: int = 0, config: WorldConfig | None = None) -> World:
    """Generate the world for ``seed`` (same seed and config -> identical world)."""
    cfg = config or WorldConfig()
    rng = random.Random(seed)
    ents, names, by_kind = make_entities(rng, cfg)
    corpus = entity_passages(ents, reverse_mentions=cfg.reverse_mentions)
    corpus += distractors(rng, cfg, ents, names, by_kind)
    questions = make_questions(rng, cfg, ents, seed)
    splits = split_questions(rng, cfg, questions, seed)
    return World(seed=seed, config=cfg, entities=ents, corpus=corpus, splits=splits)


def write_world(world: World, out_dir: str | Path) -> dict[str, Path]:
    """Write ``world`` under ``out_dir`` in Search-R1 formats; returns the written paths by name.

    Files: ``corpus.jsonl`` (``{"id", "contents"}``), ``train.jsonl`` / ``dev.jsonl`` /
    ``test.jsonl`` (``{"id", "question", "golden_answers", "metadata"}``), ``entities.jsonl``,
    ``world.json`` (seed, config, counts). Its BM25 index is the retrieval layer's
    (``inspo data world`` writes one in ``bm25/``: :func:`inspo.retrieval.bm25.write_index`).
    """
    from dataclasses import asdict

    from inspo.data.loaders import write_corpus_jsonl, write_qa_jsonl

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {"corpus": write_corpus_jsonl(out / "corpus.jsonl", world.corpus)}
    for name, questions in world.splits.items():
        paths[name] = write_qa_jsonl(out / f"{name}.jsonl", questions)
    with (out / "entities.jsonl").open("w", encoding="utf-8") as f:
        for e in world.entities.values():
            f.write(json.dumps(e.to_dict(), ensure_ascii=False) + "\n")
    paths["entities"] = out / "entities.jsonl"
    info = {
        "seed": world.seed,
        "config": asdict(world.config),
        "passages": len(world.corpus),
        "questions": {k: len(v) for k, v in world.splits.items()},
    }
    (out / "world.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    paths["info"] = out / "world.json"
    return paths
