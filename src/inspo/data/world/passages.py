"""The corpus: one Wikipedia-like passage per entity, and distractor passages that never answer."""

from __future__ import annotations

import random

from inspo.data.world.entities import OCCUPATIONS, Names, renderers
from inspo.data.world.model import Entity, WorldConfig
from inspo.records import Passage


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _surname(person: Entity) -> str:
    return person.name.split(" ", 1)[1]


def _person_text(
    e: Entity, ents: dict[str, Entity], founded: list[Entity], led: list[Entity]
) -> str:
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


def _passage_text(
    e: Entity, ents: dict[str, Entity], reverse: dict[tuple[str, str], list[Entity]]
) -> str:
    """``e``'s passage; ``reverse`` (relation, target id) -> the entities pointing at a target
    (empty: the passage names only what ``e`` points at)."""
    rel = {k: ents[v].name for k, v in e.relations.items()}
    if e.kind == "person":
        return _person_text(
            e, ents, reverse.get(("founder", e.id), []), reverse.get(("leader", e.id), [])
        )
    if e.kind == "organisation":
        return (
            f"{cap(e.name)} is an organisation founded in {e.attrs['founded']} by "
            f"{rel['founder']}. It is headquartered in {rel['headquarters']}. Its current leader "
            f"is {rel['leader']}."
        )
    if e.kind == "city":
        text = (
            f"{e.name} is a city in {rel['country']}, on the banks of {rel['river']}. It was "
            f"founded in {e.attrs['founded']} and has a population of {e.attrs['population']:,}."
        )
        capital_of = reverse.get(("capital", e.id), [])
        if capital_of:
            text += f" It is the capital of {capital_of[0].name}."
        return text
    if e.kind == "country":
        return (
            f"{e.name} is a country founded in {e.attrs['founded']}. "
            f"Its capital is {rel['capital']}."
        )
    if e.kind == "river":
        return (
            f"{cap(e.name)} is a river {e.attrs['length']:,} kilometres long. "
            f"It rises on {rel['source']}."
        )
    if e.kind == "mountain":
        return (
            f"{e.name} is a mountain {e.attrs['height']:,} metres high in "
            f"{rel['mountain_country']}."
        )
    raise ValueError(f"unknown entity kind {e.kind!r}")


def entity_passages(ents: dict[str, Entity], *, reverse_mentions: bool = True) -> list[Passage]:
    """One passage per entity; ``reverse_mentions`` (WorldConfig's) also names what points at it."""
    reverse: dict[tuple[str, str], list[Entity]] = {}
    for e in ents.values() if reverse_mentions else ():
        for rel, target in e.relations.items():
            reverse.setdefault((rel, target), []).append(e)
    return [
        Passage(id=e.passage_id, title=_title(e), text=_passage_text(e, ents, reverse))
        for e in ents.values()
    ]


def _title(e: Entity) -> str:
    return e.name[4:] if e.name.startswith("the ") else e.name


def distractors(
    rng: random.Random,
    cfg: WorldConfig,
    ents: dict[str, Entity],
    names: Names,
    by_kind: dict[str, list[Entity]],
) -> list[Passage]:
    """Near-duplicates (similar name, other attributes) and namesake passages.

    A distractor never states a fact that answers a question about a real entity: it has no
    spouse, leads and founds nothing real, and is nobody's capital.
    """
    render = renderers()
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
            d.attrs = {
                "birth_year": rng.randrange(1720, 1990),
                "occupation": rng.choice(OCCUPATIONS),
            }
            d.relations = {"born_in": rng.choice(cities).id}
            text = _person_text(d, ents, [], [])
        elif d.kind == "city":
            d.attrs = {
                "population": rng.randrange(2_000, 2_500_000),
                "founded": rng.randrange(600, 1700),
            }
            d.relations = {
                "country": rng.choice(by_kind["country"]).id,
                "river": rng.choice(by_kind["river"]).id,
            }
            text = _passage_text(d, ents, {})
        else:
            founder = rng.choice(by_kind["person"])
            text = (
                f"{cap(d.name)} was a short-lived organisation based in {rng.choice(cities).name}. "
                f"It was dissolved in {rng.randrange(1800, 2000)} and has no connection to "
                f"{founder.name}'s work."
            )
        ents[d.id] = d
        passages.append(Passage(id=d.passage_id, title=_title(d), text=text))
    real_people = by_kind["person"] + by_kind["organisation"]
    for i in range(cfg.namesakes):
        base = rng.choice(real_people)
        year = rng.randrange(1900, 2020)
        place = rng.choice(cities).name
        if base.kind == "person":
            title = f"{base.name} Prize"
            text = (
                f"The {base.name} Prize is an award named in honour of {base.name}. It has been "
                f"presented in {place} every year since {year}."
            )
        else:
            title = f"{_title(base)} Street"
            text = (
                f"{_title(base)} Street is a street in {place} named after {base.name}. "
                f"It was paved in {year}."
            )
        passages.append(Passage(id=f"p-n{i}", title=title, text=text))
    return passages
