"""The world's records: its size (:class:`WorldConfig`), its entities and the generated
:class:`World`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from inspo.records import Passage, Question

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
    name: str = (
        "world"  # the questions' source and id prefix (ids NAME{seed}-{split}-{j}): worlds differ
    )
    # A passage also names what points at it ("Rot founded the Kel Museum", "It is the capital of
    # Vela"), as Wikipedia does. Then one search on a two-hop question often returns both of its
    # passages; False leaves those sentences out, so each hop needs its own search.
    reverse_mentions: bool = True

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
                raise ValueError(
                    f"WorldConfig.{name} must be 3 non-negative numbers summing to 1, got {values}"
                )


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
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "attrs": self.attrs,
            "relations": self.relations,
            "passage_id": self.passage_id,
            "distractor": self.distractor,
        }


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
