"""The questions: relations as noun phrases, attribute and relation questions as templates, the
walks that make 1- to 3-hop questions, and the train/dev/test splits."""

from __future__ import annotations

import random
from dataclasses import dataclass

from inspo.data.world.model import Entity, WorldConfig
from inspo.data.world.passages import cap
from inspo.records import Question

# relation -> (domain kind, range kind, noun phrase of the related entity given the subject)
RELATIONS: dict[str, tuple[str, str, str]] = {
    "founder": ("organisation", "person", "the founder of {x}"),
    "leader": ("organisation", "person", "the leader of {x}"),
    "headquarters": ("organisation", "city", "the city where {x} is headquartered"),
    "born_in": ("person", "city", "the birthplace of {x}"),
    "spouse": ("person", "person", "the spouse of {x}"),
    "country": ("city", "country", "the country where {x} lies"),
    "river": ("city", "river", "the river on which {x} lies"),
    "capital": ("country", "city", "the capital of {x}"),
    "source": ("river", "mountain", "the mountain where {x} rises"),
    "mountain_country": ("mountain", "country", "the country in which {x} stands"),
}

# final question: (kind, attribute or relation, question template with {x})
FINAL_QUESTIONS: tuple[tuple[str, str, str], ...] = (
    ("person", "birth_year", "In which year was {x} born?"),
    ("person", "occupation", "What is the occupation of {x}?"),
    ("person", "born_in", "In which city was {x} born?"),
    ("person", "spouse", "Who is {x} married to?"),
    ("organisation", "founder", "Who founded {x}?"),
    ("organisation", "leader", "Who leads {x}?"),
    ("organisation", "founded", "In which year was {x} founded?"),
    ("organisation", "headquarters", "In which city is {x} headquartered?"),
    ("city", "country", "In which country does {x} lie?"),
    ("city", "population", "What is the population of {x}?"),
    ("city", "founded", "In which year was {x} founded?"),
    ("city", "river", "On which river does {x} lie?"),
    ("country", "capital", "What is the capital of {x}?"),
    ("river", "source", "On which mountain does {x} rise?"),
    ("river", "length", "How long is {x}?"),
    ("mountain", "height", "How high is {x}?"),
    ("mountain", "mountain_country", "In which country does {x} stand?"),
)


def _answers_for(world_entities: dict[str, Entity], ent: Entity, key: str) -> tuple[str, ...]:
    """Gold answers for an attribute or relation, with number-format variants."""
    if key in ent.relations:
        return (world_entities[ent.relations[key]].name,)
    value = ent.attrs[key]
    if key == "population":
        variants = [f"{value:,}", str(value)]
    elif key == "height":
        variants = [f"{value:,} metres", f"{value:,} m", f"{value:,}", str(value)]
    elif key == "length":
        variants = [f"{value:,} kilometres", f"{value:,} km", f"{value:,}", str(value)]
    else:
        variants = [str(value)]
    return tuple(dict.fromkeys(variants))  # drop repeats (1,000 and 1000 differ; 118 does not)


@dataclass(frozen=True)
class _Path:
    start: str  # entity id named in the question
    relations: tuple[str, ...]  # relations walked before the final question
    final: tuple[str, str, str]  # (kind, key, template)


def _walks(
    ents: dict[str, Entity], e: Entity, depth: int
) -> list[tuple[tuple[str, ...], list[str]]]:
    """All relation walks of length ``depth`` from ``e`` that never revisit an entity."""
    out: list[tuple[tuple[str, ...], list[str]]] = []

    def go(cur: Entity, rels: tuple[str, ...], seen: list[str]) -> None:
        if len(rels) == depth:
            out.append((rels, seen))
            return
        for rel, target in cur.relations.items():
            if target not in seen:
                go(ents[target], rels + (rel,), seen + [target])

    go(e, (), [e.id])
    return out


def _phrase(start: Entity, relations: tuple[str, ...]) -> str:
    np = start.name
    for rel in relations:
        np = RELATIONS[rel][2].format(x=np)
    return np


def _all_questions(
    ents: dict[str, Entity], hops: int
) -> list[tuple[str, tuple[str, ...], list[str], tuple]]:
    """Every (start, relations, chain, final) with ``hops`` passages to read, deterministic
    order."""
    out = []
    for e in ents.values():
        if e.distractor:
            continue
        for rels, chain in _walks(ents, e, hops - 1):
            last = ents[chain[-1]]
            for final in FINAL_QUESTIONS:
                kind, key, _ = final
                if kind != last.kind or (key not in last.attrs and key not in last.relations):
                    continue
                if key in last.relations and last.relations[key] in chain:
                    continue  # "Who is the spouse of the spouse of X?" -> X: skip
                out.append((e.id, rels, chain, final))
    return out


def make_questions(
    rng: random.Random, cfg: WorldConfig, ents: dict[str, Entity], seed: int
) -> list[Question]:
    questions: list[Question] = []
    seen_text: set[str] = set()
    targets = [round(cfg.questions * share) for share in cfg.hop_mix]
    targets[0] += cfg.questions - sum(targets)
    for hops, target in zip((1, 2, 3), targets, strict=True):
        pool = _all_questions(ents, hops)
        rng.shuffle(pool)
        taken = 0
        for start_id, rels, chain, (kind, key, template) in pool:
            if taken >= target:
                break
            start, last = ents[start_id], ents[chain[-1]]
            text = cap(template.format(x=_phrase(start, rels)))
            if text in seen_text:
                continue
            seen_text.add(text)
            answers = _answers_for(ents, last, key)
            meta = {
                "source": cfg.name,
                "seed": seed,
                "hops": hops,
                "entity_ids": list(chain),
                "passage_ids": [ents[x].passage_id for x in chain],
                "relations": list(rels) + [key],
                "template": f"{kind}.{key}",
            }
            if key in last.relations:
                meta["answer_entity_id"] = last.relations[key]
            questions.append(Question(id="", question=text, answers=answers, meta=meta))
            taken += 1
    return questions


def split_questions(
    rng: random.Random, cfg: WorldConfig, questions: list[Question], seed: int
) -> dict[str, list[Question]]:
    order = list(range(len(questions)))
    rng.shuffle(order)
    n = len(order)
    n_train = round(n * cfg.split_fractions[0])
    n_dev = round(n * cfg.split_fractions[1])
    bounds = {
        "train": (0, n_train),
        "dev": (n_train, n_train + n_dev),
        "test": (n_train + n_dev, n),
    }
    splits: dict[str, list[Question]] = {}
    for name, (lo, hi) in bounds.items():
        picked = sorted(order[lo:hi])  # keep generation order (1-hop first) inside a split
        splits[name] = [
            Question(
                id=f"{cfg.name}{seed}-{name}-{j}",
                question=questions[i].question,
                answers=questions[i].answers,
                meta=dict(questions[i].meta, split=name),
            )
            for j, i in enumerate(picked)
        ]
    return splits
