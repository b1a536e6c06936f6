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
"golden_answers", "metadata"}``), ``entities.jsonl`` and optionally a BM25 index.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo.records import Passage, Question

SYLLABLES = (
    "ka", "lor", "ven", "mi", "tas", "dor", "el", "ri", "an", "bru", "sel", "thi", "mar", "ost",
    "qui", "ne", "vo", "ral", "isk", "um", "zan", "fe", "gol", "pri", "ash", "te", "yl", "dra",
    "moc", "hul", "sar", "bel", "ty", "nor", "wen", "cas", "lin", "gar", "po", "jus",
)
CITY_SUFFIXES = ("ford", "heim", "grad", "mouth", "vale", "stad", "ton", "burg", "wick", "polis")
COUNTRY_SUFFIXES = ("ia", "land", "ar", "esh", "onia", "ustan")
ORG_KINDS = (
    "Institute", "Trading Company", "Conservatory", "Shipping Guild", "Observatory", "Press",
    "Bank", "Academy", "Foundry", "Museum",
)
OCCUPATIONS = (
    "cartographer", "violinist", "shipwright", "botanist", "astronomer", "glassblower",
    "archivist", "engineer", "poet", "physician", "architect", "sculptor", "chemist", "diplomat",
    "novelist", "mathematician", "painter", "judge", "geologist", "composer",
)
KINDS = ("country", "city", "river", "mountain", "organisation", "person")


@dataclass(frozen=True)
class WorldConfig:
    """Sizes of a generated world; the defaults give ~360 entities and ~1.5k questions."""

    countries: int = 8  # number of countries
    cities: int = 48  # number of cities (each lies in a country and on a river)
    rivers: int = 16  # number of rivers (each rises on a mountain)
    mountains: int = 16  # number of mountains
    organisations: int = 60  # number of organisations (founder, leader, headquarters)
    people: int = 220  # number of people (birth year, occupation, birthplace, some married)
    near_duplicates: int = 80  # distractor entities whose names are one syllable off a real one
    namesakes: int = 40  # distractor passages named after a real entity, stating no fact of it
    questions: int = 1500  # total questions over all splits (fewer if the world has fewer)
    hop_mix: tuple[float, float, float] = (0.4, 0.4, 0.2)  # share of 1-, 2- and 3-hop questions
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)  # train / dev / test

    def __post_init__(self) -> None:
        for name in ("countries", "cities", "rivers", "mountains", "organisations", "people"):
            if getattr(self, name) < 2:
                raise ValueError(f"WorldConfig.{name} must be >= 2, got {getattr(self, name)}")
        if self.cities < self.countries:
            raise ValueError("WorldConfig.cities must be >= countries (each country has a capital)")
        if self.near_duplicates < 0 or self.namesakes < 0 or self.questions < 1:
            raise ValueError("WorldConfig: near_duplicates/namesakes must be >= 0, questions >= 1")
        for name in ("hop_mix", "split_fractions"):
            values = getattr(self, name)
            if len(values) != 3 or min(values) < 0 or abs(sum(values) - 1.0) > 1e-6:
                raise ValueError(f"WorldConfig.{name} must be 3 non-negative numbers summing to 1, got {values}")


@dataclass
class Entity:
    """One thing of the world. ``relations`` map a relation name to another entity's id."""

    id: str
    kind: str
    name: str
    attrs: dict[str, Any] = field(default_factory=dict)
    relations: dict[str, str] = field(default_factory=dict)
    passage_id: str = ""
    distractor: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "name": self.name, "attrs": self.attrs,
                "relations": self.relations, "passage_id": self.passage_id,
                "distractor": self.distractor}


@dataclass
class World:
    """A generated world: ``corpus`` (entity + distractor passages), ``splits`` of questions."""

    seed: int
    config: WorldConfig
    entities: dict[str, Entity]
    corpus: list[Passage]
    splits: dict[str, list[Question]]

    @property
    def passages_by_id(self) -> dict[str, Passage]:
        return {p.id: p for p in self.corpus}


# --------------------------------------------------------------------------------------------
# Question grammar: relations as noun phrases, final questions as templates
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------


class _Names:
    """Unique made-up names; ``near`` gives a name one syllable away from a given stem."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()
        self.stems: dict[str, tuple[str, ...]] = {}

    def _stem(self, n_syllables: int) -> tuple[str, ...]:
        return tuple(self.rng.choice(SYLLABLES) for _ in range(n_syllables))

    @staticmethod
    def _word(parts: tuple[str, ...]) -> str:
        return "".join(parts).capitalize()

    def make(self, render: Callable[[tuple[str, ...]], str], n_syllables: int = 2) -> str:
        while True:
            stem = self._stem(n_syllables)
            name = render(stem)
            if name not in self.used:
                self.used.add(name)
                self.stems[name] = stem
                return name

    def near(self, name: str, render: Callable[[tuple[str, ...]], str]) -> str | None:
        """A new name whose stem differs from ``name``'s stem in one syllable (None if stuck)."""
        stem = self.stems[name]
        for _ in range(50):
            parts = list(stem)
            i = self.rng.randrange(len(parts))
            parts[i] = self.rng.choice(SYLLABLES)
            candidate = render(tuple(parts))
            if candidate not in self.used:
                self.used.add(candidate)
                self.stems[candidate] = tuple(parts)
                return candidate
        return None


def _renderers() -> dict[str, Callable[[tuple[str, ...]], str]]:
    """Per-kind name renderers; a suffix (city, country, organisation kind) is a function of the
    stem, so a near-duplicate usually keeps the kind and differs in one syllable."""

    def pick(options: tuple[str, ...], stem: tuple[str, ...]) -> str:
        return options[sum(SYLLABLES.index(s) * (i + 7) for i, s in enumerate(stem)) % len(options)]

    def person(stem: tuple[str, ...]) -> str:
        return f"{_Names._word(stem[:2])} {_Names._word(stem[2:])}"

    return {
        "country": lambda s: _Names._word(s) + pick(COUNTRY_SUFFIXES, s),
        "city": lambda s: _Names._word(s) + pick(CITY_SUFFIXES, s),
        "river": lambda s: f"the {_Names._word(s)} River",
        "mountain": lambda s: f"Mount {_Names._word(s)}",
        "organisation": lambda s: f"the {_Names._word(s)} {pick(ORG_KINDS, s)}",
        "person": person,
    }


_SYLLABLE_COUNT = {"country": 2, "city": 2, "river": 2, "mountain": 2, "organisation": 2, "person": 5}


def _make_entities(rng: random.Random, cfg: WorldConfig) -> tuple[dict[str, Entity], _Names, dict]:
    names = _Names(rng)
    render = _renderers()
    ents: dict[str, Entity] = {}
    by_kind: dict[str, list[Entity]] = {k: [] for k in KINDS}

    def new(kind: str, prefix: str, i: int) -> Entity:
        e = Entity(id=f"{prefix}{i}", kind=kind, name=names.make(render[kind], _SYLLABLE_COUNT[kind]))
        e.passage_id = f"p-{e.id}"
        ents[e.id] = e
        by_kind[kind].append(e)
        return e

    counts = {"country": cfg.countries, "city": cfg.cities, "river": cfg.rivers,
              "mountain": cfg.mountains, "organisation": cfg.organisations, "person": cfg.people}
    prefixes = {"country": "k", "city": "c", "river": "r", "mountain": "m", "organisation": "o", "person": "h"}
    for kind in KINDS:
        for i in range(counts[kind]):
            new(kind, prefixes[kind], i)

    countries, cities = by_kind["country"], by_kind["city"]
    for m in by_kind["mountain"]:
        m.attrs["height"] = rng.randrange(900, 6200)
        m.relations["mountain_country"] = rng.choice(countries).id
    for r in by_kind["river"]:
        r.attrs["length"] = rng.randrange(40, 2400)
        r.relations["source"] = rng.choice(by_kind["mountain"]).id
    for i, c in enumerate(cities):
        # the first cities give every country at least one city (its capital)
        country = countries[i] if i < len(countries) else rng.choice(countries)
        c.relations["country"] = country.id
        c.relations["river"] = rng.choice(by_kind["river"]).id
        c.attrs["population"] = rng.randrange(2_000, 2_500_000)
        c.attrs["founded"] = rng.randrange(600, 1700)
        if i < len(countries):
            country.relations["capital"] = c.id
    for k in countries:
        k.attrs["founded"] = rng.randrange(400, 1600)
    people = by_kind["person"]
    for p in people:
        p.attrs["birth_year"] = rng.randrange(1720, 1990)
        p.attrs["occupation"] = rng.choice(OCCUPATIONS)
        p.relations["born_in"] = rng.choice(cities).id
    singles = people[:]
    rng.shuffle(singles)
    for a, b in zip(singles[0 : len(singles) // 2 : 2], singles[1 : len(singles) // 2 : 2], strict=False):
        a.relations["spouse"] = b.id
        b.relations["spouse"] = a.id
    for o in by_kind["organisation"]:
        founder, leader = rng.sample(people, 2)
        o.relations["founder"] = founder.id
        o.relations["leader"] = leader.id
        o.relations["headquarters"] = rng.choice(cities).id
        o.attrs["founded"] = max(founder.attrs["birth_year"] + rng.randrange(22, 60), 1750)
    return ents, names, by_kind


# --------------------------------------------------------------------------------------------
# Passages
# --------------------------------------------------------------------------------------------


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _surname(person: Entity) -> str:
    return person.name.split(" ", 1)[1]


def _person_text(e: Entity, ents: dict[str, Entity], founded: list[Entity], led: list[Entity]) -> str:
    sur = _surname(e)
    job = e.attrs["occupation"]
    article = "an" if job[0] in "aeiou" else "a"
    parts = [f"{e.name} (born {e.attrs['birth_year']}) is {article} {job}."]
    parts.append(f"{sur} was born in {ents[e.relations['born_in']].name}.")
    if "spouse" in e.relations:
        parts.append(f"{sur} is married to {ents[e.relations['spouse']].name}.")
    for o in founded:
        parts.append(f"In {o.attrs['founded']}, {sur} founded {o.name}.")
    for o in led:
        parts.append(f"{sur} is the current leader of {o.name}.")
    return " ".join(parts)


def _passage_text(e: Entity, ents: dict[str, Entity], reverse: dict[tuple[str, str], list[Entity]]) -> str:
    rel = {k: ents[v].name for k, v in e.relations.items()}
    if e.kind == "person":
        return _person_text(e, ents, reverse.get(("founder", e.id), []), reverse.get(("leader", e.id), []))
    if e.kind == "organisation":
        return (f"{_cap(e.name)} is an organisation founded in {e.attrs['founded']} by {rel['founder']}. "
                f"It is headquartered in {rel['headquarters']}. Its current leader is {rel['leader']}.")
    if e.kind == "city":
        text = (f"{e.name} is a city in {rel['country']}, on the banks of {rel['river']}. "
                f"It was founded in {e.attrs['founded']} and has a population of {e.attrs['population']:,}.")
        capital_of = reverse.get(("capital", e.id), [])
        if capital_of:
            text += f" It is the capital of {capital_of[0].name}."
        return text
    if e.kind == "country":
        return (f"{e.name} is a country founded in {e.attrs['founded']}. "
                f"Its capital is {rel['capital']}.")
    if e.kind == "river":
        return (f"{_cap(e.name)} is a river {e.attrs['length']:,} kilometres long. "
                f"It rises on {rel['source']}.")
    if e.kind == "mountain":
        return f"{e.name} is a mountain {e.attrs['height']:,} metres high in {rel['mountain_country']}."
    raise ValueError(f"unknown entity kind {e.kind!r}")


def _entity_passages(ents: dict[str, Entity]) -> list[Passage]:
    reverse: dict[tuple[str, str], list[Entity]] = {}
    for e in ents.values():
        for rel, target in e.relations.items():
            reverse.setdefault((rel, target), []).append(e)
    return [Passage(id=e.passage_id, title=_title(e), text=_passage_text(e, ents, reverse))
            for e in ents.values()]


def _title(e: Entity) -> str:
    return e.name[4:] if e.name.startswith("the ") else e.name


def _distractors(rng: random.Random, cfg: WorldConfig, ents: dict[str, Entity], names: _Names,
                 by_kind: dict[str, list[Entity]]) -> list[Passage]:
    """Near-duplicates (similar name, other attributes) and namesake passages.

    A distractor never states a fact that answers a question about a real entity: it has no
    spouse, leads and founds nothing real, and is nobody's capital.
    """
    render = _renderers()
    cities = by_kind["city"]
    passages = []
    bases = [e for k in ("person", "city", "organisation") for e in by_kind[k]]
    for i in range(cfg.near_duplicates):
        base = rng.choice(bases)
        name = names.near(base.name, render[base.kind])
        if name is None:
            continue
        d = Entity(id=f"d{i}", kind=base.kind, name=name, passage_id=f"p-d{i}", distractor=True)
        if d.kind == "person":
            d.attrs = {"birth_year": rng.randrange(1720, 1990), "occupation": rng.choice(OCCUPATIONS)}
            d.relations = {"born_in": rng.choice(cities).id}
            text = _person_text(d, ents, [], [])
        elif d.kind == "city":
            d.attrs = {"population": rng.randrange(2_000, 2_500_000), "founded": rng.randrange(600, 1700)}
            d.relations = {"country": rng.choice(by_kind["country"]).id,
                           "river": rng.choice(by_kind["river"]).id}
            text = _passage_text(d, ents, {})
        else:
            founder = rng.choice(by_kind["person"])
            text = (f"{_cap(d.name)} was a short-lived organisation based in {rng.choice(cities).name}. "
                    f"It was dissolved in {rng.randrange(1800, 2000)} and has no connection to "
                    f"{founder.name}'s work.")
        ents[d.id] = d
        passages.append(Passage(id=d.passage_id, title=_title(d), text=text))
    real_people = by_kind["person"] + by_kind["organisation"]
    for i in range(cfg.namesakes):
        base = rng.choice(real_people)
        year = rng.randrange(1900, 2020)
        place = rng.choice(cities).name
        if base.kind == "person":
            title = f"{base.name} Prize"
            text = (f"The {base.name} Prize is an award named in honour of {base.name}. It has been "
                    f"presented in {place} every year since {year}.")
        else:
            title = f"{_title(base)} Street"
            text = (f"{_title(base)} Street is a street in {place} named after {base.name}. "
                    f"It was paved in {year}.")
        passages.append(Passage(id=f"p-n{i}", title=title, text=text))
    return passages


# --------------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Path:
    start: str  # entity id named in the question
    relations: tuple[str, ...]  # relations walked before the final question
    final: tuple[str, str, str]  # (kind, key, template)


def _walks(ents: dict[str, Entity], e: Entity, depth: int) -> list[tuple[tuple[str, ...], list[str]]]:
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


def _all_questions(ents: dict[str, Entity], hops: int) -> list[tuple[str, tuple[str, ...], list[str], tuple]]:
    """Every (start, relations, chain, final) with ``hops`` passages to read, deterministic order."""
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


def _questions(rng: random.Random, cfg: WorldConfig, ents: dict[str, Entity], seed: int) -> list[Question]:
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
            text = _cap(template.format(x=_phrase(start, rels)))
            if text in seen_text:
                continue
            seen_text.add(text)
            answers = _answers_for(ents, last, key)
            meta = {
                "source": "world",
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


def _split(rng: random.Random, cfg: WorldConfig, questions: list[Question], seed: int) -> dict[str, list[Question]]:
    order = list(range(len(questions)))
    rng.shuffle(order)
    n = len(order)
    n_train = round(n * cfg.split_fractions[0])
    n_dev = round(n * cfg.split_fractions[1])
    bounds = {"train": (0, n_train), "dev": (n_train, n_train + n_dev), "test": (n_train + n_dev, n)}
    splits: dict[str, list[Question]] = {}
    for name, (lo, hi) in bounds.items():
        picked = sorted(order[lo:hi])  # keep generation order (1-hop first) inside a split
        splits[name] = [
            Question(id=f"world{seed}-{name}-{j}", question=questions[i].question,
                     answers=questions[i].answers, meta=dict(questions[i].meta, split=name))
            for j, i in enumerate(picked)
        ]
    return splits


def build_world(seed: int = 0, config: WorldConfig | None = None) -> World:
    """Generate the world for ``seed`` (same seed and config -> identical world)."""
    cfg = config or WorldConfig()
    rng = random.Random(seed)
    ents, names, by_kind = _make_entities(rng, cfg)
    corpus = _entity_passages(ents)
    corpus += _distractors(rng, cfg, ents, names, by_kind)
    questions = _questions(rng, cfg, ents, seed)
    splits = _split(rng, cfg, questions, seed)
    return World(seed=seed, config=cfg, entities=ents, corpus=corpus, splits=splits)


def write_world(world: World, out_dir: str | Path, *, bm25_index: bool = True) -> dict[str, Path]:
    """Write ``world`` under ``out_dir`` in Search-R1 formats; returns the written paths by name.

    Files: ``corpus.jsonl`` (``{"id", "contents"}``), ``train.jsonl`` / ``dev.jsonl`` /
    ``test.jsonl`` (``{"id", "question", "golden_answers", "metadata"}``), ``entities.jsonl``,
    ``world.json`` (seed, config, counts) and, with ``bm25_index``, a BM25 index in ``bm25/``
    (loadable with :meth:`inspo.retrieval.bm25.BM25Retriever.load`).
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
    info = {"seed": world.seed, "config": asdict(world.config), "passages": len(world.corpus),
            "questions": {k: len(v) for k, v in world.splits.items()}}
    (out / "world.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    paths["info"] = out / "world.json"
    if bm25_index:
        from inspo.retrieval.bm25 import BM25Retriever

        paths["bm25"] = BM25Retriever(world.corpus).save(out / "bm25")
    return paths
