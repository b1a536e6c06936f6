"""The world's entities: made-up names built from syllables, their attributes and relations."""

from __future__ import annotations

import random
from collections.abc import Callable

from inspo.data.world.model import KINDS, Entity, WorldConfig

SYLLABLES = (
    "ka",
    "lor",
    "ven",
    "mi",
    "tas",
    "dor",
    "el",
    "ri",
    "an",
    "bru",
    "sel",
    "thi",
    "mar",
    "ost",
    "qui",
    "ne",
    "vo",
    "ral",
    "isk",
    "um",
    "zan",
    "fe",
    "gol",
    "pri",
    "ash",
    "te",
    "yl",
    "dra",
    "moc",
    "hul",
    "sar",
    "bel",
    "ty",
    "nor",
    "wen",
    "cas",
    "lin",
    "gar",
    "po",
    "jus",
)
CITY_SUFFIXES = ("ford", "heim", "grad", "mouth", "vale", "stad", "ton", "burg", "wick", "polis")
COUNTRY_SUFFIXES = ("ia", "land", "ar", "esh", "onia", "ustan")
ORG_KINDS = (
    "Institute",
    "Trading Company",
    "Conservatory",
    "Shipping Guild",
    "Observatory",
    "Press",
    "Bank",
    "Academy",
    "Foundry",
    "Museum",
)
OCCUPATIONS = (
    "cartographer",
    "violinist",
    "shipwright",
    "botanist",
    "astronomer",
    "glassblower",
    "archivist",
    "engineer",
    "poet",
    "physician",
    "architect",
    "sculptor",
    "chemist",
    "diplomat",
    "novelist",
    "mathematician",
    "painter",
    "judge",
    "geologist",
    "composer",
)


class Names:
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


def renderers() -> dict[str, Callable[[tuple[str, ...]], str]]:
    """Per-kind name renderers; a suffix (city, country, organisation kind) is a function of the
    stem, so a near-duplicate usually keeps the kind and differs in one syllable."""

    def pick(options: tuple[str, ...], stem: tuple[str, ...]) -> str:
        return options[sum(SYLLABLES.index(s) * (i + 7) for i, s in enumerate(stem)) % len(options)]

    def person(stem: tuple[str, ...]) -> str:
        return f"{Names._word(stem[:2])} {Names._word(stem[2:])}"

    return {
        "country": lambda s: Names._word(s) + pick(COUNTRY_SUFFIXES, s),
        "city": lambda s: Names._word(s) + pick(CITY_SUFFIXES, s),
        "river": lambda s: f"the {Names._word(s)} River",
        "mountain": lambda s: f"Mount {Names._word(s)}",
        "organisation": lambda s: f"the {Names._word(s)} {pick(ORG_KINDS, s)}",
        "person": person,
    }


_SYLLABLE_COUNT = {
    "country": 2,
    "city": 2,
    "river": 2,
    "mountain": 2,
    "organisation": 2,
    "person": 5,
}


def make_entities(rng: random.Random, cfg: WorldConfig) -> tuple[dict[str, Entity], Names, dict]:
    names = Names(rng)
    render = renderers()
    ents: dict[str, Entity] = {}
    by_kind: dict[str, list[Entity]] = {k: [] for k in KINDS}

    def new(kind: str, prefix: str, i: int) -> Entity:
        e = Entity(
            id=f"{prefix}{i}", kind=kind, name=names.make(render[kind], _SYLLABLE_COUNT[kind])
        )
        e.passage_id = f"p-{e.id}"
        ents[e.id] = e
        by_kind[kind].append(e)
        return e

    counts = {
        "country": cfg.countries,
        "city": cfg.cities,
        "river": cfg.rivers,
        "mountain": cfg.mountains,
        "organisation": cfg.organisations,
        "person": cfg.people,
    }
    prefixes = {
        "country": "k",
        "city": "c",
        "river": "r",
        "mountain": "m",
        "organisation": "o",
        "person": "h",
    }
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
    for a, b in zip(
        singles[0 : len(singles) // 2 : 2], singles[1 : len(singles) // 2 : 2], strict=False
    ):
        a.relations["spouse"] = b.id
        b.relations["spouse"] = a.id
    for o in by_kind["organisation"]:
        founder, leader = rng.sample(people, 2)
        o.relations["founder"] = founder.id
        o.relations["leader"] = leader.id
        o.relations["headquarters"] = rng.choice(cities).id
        o.attrs["founded"] = max(founder.attrs["birth_year"] + rng.randrange(22, 60), 1750)
    return ents, names, by_kind
