"""Multi-step arithmetic word problems, generated offline from a seed.

A problem is a story of ``steps`` operations on one pile of things, then a question about the pile
(DESIGN.md's setting: "N buys a packs of b things, then gives away c; how many are left?"):

- step 1 is always a multiplication: ``min_packs`` … ``max_packs`` packs of ``min_pack_size`` …
  ``max_pack_size`` things (the pile's start);
- every later step draws its operation from ``ops`` (``+ - * /``) and its number: ``+`` gets
  ``min_change`` … ``max_change`` more things; ``-`` gives as many away, never the whole pile (at
  most the pile minus 1, so below ``min_change`` when the pile is small; a pile of 1 gets ``+``);
  ``*`` multiplies the pile by a factor in 2 … ``max_factor``; ``/`` splits it into a number of
  equal groups in 2 … ``max_factor`` that divides it exactly and keeps one (no divisor: ``-``);
- each step and the question are written in one of several phrasings (:data:`PHRASINGS`), with a
  person from :data:`NAMES` and things from :data:`THINGS`, so a policy cannot learn one template.

So the answer is always a positive integer: ``Question.answers == (str(answer),)``, and
``Question.meta`` holds ``expression`` (the steps as calc would take them, e.g.
``7 * 23 - 45``; evaluating it gives the answer), ``packs``, ``steps`` (``[{"op", "value",
"phrasing"}]``, the first step's value being the pack size) and ``answer`` (the int).

Splits (:func:`generate_problems`): ``test``, then ``dev``, then ``train``, each drawn from its own
``random.Random`` seeded with ``"SEED:SPLIT"``, skipping any text an earlier split has: the splits
are disjoint by problem text, the same for a seed (and settings), and a larger ``train_size``
only extends ``train``, never changing ``test`` or ``dev``. Ids are ``calc-SPLIT-I``.
:func:`write_splits` writes them as JSONL rows ``{"id", "question", "answers", "meta"}``, which
:func:`inspo.data.sources.load_qa_source` reads.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from inspo.records import Question

SPLITS = ("test", "dev", "train")
OPS = "+-*/"
#: At most this many steps: a longer story is not a word problem any more.
MAX_STEPS = 6
#: Draws in a row that give only problems already made before the generator gives up.
MAX_MISSES = 2000

NAMES = (
    "Ava",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Iris",
    "Jamal",
    "Keiko",
    "Liam",
)
#: (the things, what they come packed in)
THINGS = (
    ("pencils", "boxes"),
    ("stickers", "sheets"),
    ("eggs", "cartons"),
    ("marbles", "bags"),
    ("cards", "packs"),
    ("cookies", "tins"),
    ("apples", "crates"),
    ("batteries", "packets"),
    ("beads", "jars"),
    ("stamps", "albums"),
    ("candles", "cases"),
    ("buttons", "pouches"),
)

#: Several wordings of each step and of the question. ``packs`` is the first step; fields:
#: ``{name}``, ``{things}``, ``{box}``, ``{packs}`` and ``{n}`` (the step's number).
PHRASINGS: dict[str, tuple[str, ...]] = {
    "packs": (
        "{name} buys {packs} {box} of {n} {things}.",
        "{name} has {packs} {box}, each holding {n} {things}.",
        "{name} picks up {packs} {box} with {n} {things} in each.",
        "There are {n} {things} in each of the {packs} {box} that {name} bought.",
    ),
    "+": (
        "Then {name} buys {n} more {things}.",
        "A friend gives {name} {n} more {things}.",
        "After that, {name} finds {n} extra {things}.",
        "Later {name} is given another {n} {things}.",
    ),
    "-": (
        "Then {name} gives away {n} {things}.",
        "After that, {name} sells {n} of the {things}.",
        "Later {name} uses up {n} {things}.",
        "{name} then loses {n} {things}.",
    ),
    "*": (
        "Then {name} ends up with {n} times as many {things}.",
        "After that, the number of {things} grows to {n} times what it was.",
        "{name} then multiplies the pile of {things} by {n}.",
    ),
    "/": (
        "Then {name} splits the {things} into {n} equal groups and keeps one group.",
        "After that, {name} shares the {things} equally among {n} people, {name} included, and "
        "keeps one share.",
        "{name} then divides the {things} into {n} equal piles and keeps only one pile.",
    ),
    "question": (
        "How many {things} does {name} have now?",
        "How many {things} does {name} have in the end?",
        "How many {things} are left with {name}?",
        "What is the number of {things} {name} has at the end?",
    ),
}


@dataclass
class ProblemSpec:
    """How the word problems are made: their shape, their numbers, the seed and the split sizes
    (the generator's part of the calculator's ``env:`` section)."""

    steps: int = 2
    """Operations per problem (1 to 6): a multiplication, then ``steps - 1`` operations from
    ``ops``."""
    ops: str = "+-"
    """Operations the steps after the first draw from: any of + - * / written together (e.g.
    '+-*/')."""
    min_packs: int = 3
    """Fewest packs bought in the first step."""
    max_packs: int = 9
    """Most packs bought in the first step."""
    min_pack_size: int = 12
    """Fewest things in a pack."""
    max_pack_size: int = 29
    """Most things in a pack."""
    min_change: int = 10
    """Fewest things added or taken away in a + or - step (a - step never empties the pile)."""
    max_change: int = 99
    """Most things added or taken away in a + or - step."""
    max_factor: int = 5
    """Largest factor of a * step, and most equal groups of a / step (both from 2)."""
    train_size: int = 1000
    """Problems in the train split."""
    dev_size: int = 100
    """Problems in the dev split."""
    test_size: int = 200
    """Problems in the test split."""
    seed: int = 0
    """Seed of the problems: the same seed (and settings) gives the same splits."""

    def __post_init__(self) -> None:
        for f in fields(ProblemSpec):
            value = getattr(self, f.name)
            if f.name != "ops" and (not isinstance(value, int) or isinstance(value, bool)):
                raise ValueError(f"env.{f.name} must be an integer; got {value!r}")
        if not isinstance(self.ops, str) or not self.ops or not set(self.ops) <= set(OPS):
            raise ValueError(
                "env.ops must be one or more of + - * / written together (e.g. '+-'); got "
                f"{self.ops!r}"
            )
        checks = [
            (
                1 <= self.steps <= MAX_STEPS,
                f"env.steps must be from 1 to {MAX_STEPS}; got {self.steps}",
            ),
            (self.max_factor >= 2, f"env.max_factor must be >= 2; got {self.max_factor}"),
        ]
        for low, high in (
            ("min_packs", "max_packs"),
            ("min_pack_size", "max_pack_size"),
            ("min_change", "max_change"),
        ):
            a, b = getattr(self, low), getattr(self, high)
            checks.append(
                (
                    1 <= a <= b,
                    f"env.{low} and env.{high} must satisfy 1 <= {low} <= {high}; got {a}, {b}",
                )
            )
        for split, size in self.sizes().items():
            checks.append((size >= 0, f"env.{split}_size must be >= 0; got {size}"))
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    def sizes(self) -> dict[str, int]:
        """Problems per split, in the order they are drawn (test, dev, train)."""
        return {split: getattr(self, f"{split}_size") for split in SPLITS}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Step:
    """One operation on the pile: ``op`` with number ``value``, worded by
    ``PHRASINGS[key][phrasing]`` (``key`` is ``packs`` for the first step, else ``op``)."""

    op: str
    value: int
    phrasing: int


@dataclass(frozen=True)
class Problem:
    """One word problem: who, what, the packs of the first step, the steps, the question's
    wording."""

    name: str
    things: str
    box: str
    packs: int
    steps: tuple[Step, ...]
    question: int

    @property
    def answer(self) -> int:
        pile = self.packs
        for step in self.steps:
            pile = _apply(pile, step)
        return pile

    @property
    def expression(self) -> str:
        """The steps as one calc expression, left to right (``(7 * 23 - 45) * 2``)."""
        text, additive = str(self.packs), False  # additive: the text's last operation is + or -
        for step in self.steps:
            if step.op in "*/" and additive:
                text = f"({text})"
            text, additive = f"{text} {step.op} {step.value}", step.op in "+-"
        return text

    @property
    def text(self) -> str:
        fill = {"name": self.name, "things": self.things, "box": self.box, "packs": self.packs}
        words = [
            PHRASINGS["packs" if i == 0 else s.op][s.phrasing].format(n=s.value, **fill)
            for i, s in enumerate(self.steps)
        ]
        return " ".join([*words, PHRASINGS["question"][self.question].format(**fill)])

    def to_question(self, qid: str) -> Question:
        steps = [
            {
                "op": s.op,
                "value": s.value,
                "phrasing": f"{'packs' if i == 0 else s.op}.{s.phrasing}",
            }
            for i, s in enumerate(self.steps)
        ]
        meta = {
            "expression": self.expression,
            "packs": self.packs,
            "steps": steps,
            "answer": self.answer,
        }
        return Question(id=qid, question=self.text, answers=(str(self.answer),), meta=meta)


def _apply(pile: int, step: Step) -> int:
    if step.op == "+":
        return pile + step.value
    if step.op == "-":
        return pile - step.value
    if step.op == "*":
        return pile * step.value
    return pile // step.value  # exact: a / step's value divides the pile


def _later_step(op: str, pile: int, spec: ProblemSpec, rng: random.Random) -> tuple[str, int]:
    """The operation a later step really does to ``pile``, and its number (module docstring)."""
    if op == "/":
        divisors = [d for d in range(2, spec.max_factor + 1) if pile % d == 0]
        if divisors:
            return "/", rng.choice(divisors)
        op = "-"
    if op == "-":
        high = min(spec.max_change, pile - 1)
        if high >= 1:
            return "-", rng.randint(min(spec.min_change, high), high)
        op = "+"
    if op == "*":
        return "*", rng.randint(2, spec.max_factor)
    return "+", rng.randint(spec.min_change, spec.max_change)


def draw_problem(spec: ProblemSpec, rng: random.Random) -> Problem:
    """One problem drawn with ``rng`` (rules in the module docstring)."""
    name = rng.choice(NAMES)
    things, box = rng.choice(THINGS)
    packs = rng.randint(spec.min_packs, spec.max_packs)
    first = Step(
        "*",
        rng.randint(spec.min_pack_size, spec.max_pack_size),
        rng.randrange(len(PHRASINGS["packs"])),
    )
    steps, pile = [first], packs * first.value
    for _ in range(spec.steps - 1):
        op, value = _later_step(rng.choice(spec.ops), pile, spec, rng)
        step = Step(op, value, rng.randrange(len(PHRASINGS[op])))
        steps.append(step)
        pile = _apply(pile, step)
    return Problem(
        name, things, box, packs, tuple(steps), rng.randrange(len(PHRASINGS["question"]))
    )


def generate_problems(spec: ProblemSpec) -> dict[str, list[Question]]:
    """Every split's questions, ``{"train", "dev", "test"}`` (rules in the module docstring).

    ValueError when the settings cannot give that many distinct problems (:data:`MAX_MISSES`
    draws in a row found nothing new): widen the ranges or ask for fewer."""
    seen: set[str] = set()
    out: dict[str, list[Question]] = {}
    for split, size in spec.sizes().items():
        rng = random.Random(f"{spec.seed}:{split}")
        questions: list[Question] = []
        misses = 0
        while len(questions) < size and misses < MAX_MISSES:
            problem = draw_problem(spec, rng)
            if problem.text in seen:
                misses += 1
                continue
            misses = 0
            seen.add(problem.text)
            questions.append(problem.to_question(f"calc-{split}-{len(questions)}"))
        if len(questions) < size:
            raise ValueError(
                f"the calculator's problem settings gave only {len(questions)} distinct {split} "
                f"problems of env.{split}_size={size}; widen the number ranges "
                "(env.min_*/env.max_*), add steps or ops, or lower the sizes"
            )
        out[split] = questions
    return {split: out[split] for split in ("train", "dev", "test")}


def write_splits(out_dir: str | Path, spec: ProblemSpec) -> dict[str, Path]:
    """Write ``train.jsonl``, ``dev.jsonl`` and ``test.jsonl`` of :func:`generate_problems` into
    ``out_dir`` (created), one ``{"id", "question", "answers", "meta"}`` row per line; returns
    ``{split: path}``. ``spec`` may be the calculator's options (they are a
    :class:`ProblemSpec`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, questions in generate_problems(spec).items():
        path = out / f"{split}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for q in questions:
                f.write(json.dumps(q.to_dict(), ensure_ascii=False) + "\n")
        paths[split] = path
    return paths


__all__ = [
    "MAX_STEPS",
    "NAMES",
    "OPS",
    "PHRASINGS",
    "SPLITS",
    "THINGS",
    "Problem",
    "ProblemSpec",
    "Step",
    "draw_problem",
    "generate_problems",
    "write_splits",
]
