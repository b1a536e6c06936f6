"""Rewards as a rubric: several weighted reward functions, each seeing the whole episode.

verifiers' ``Rubric`` (before 0.4; 0.4's ``@vf.reward(weight=)``) scores an episode with weighted
reward functions; inspo's does the same for
:class:`~inspo.envs.tagged.TaggedToolEnv` (``reward=Rubric(...)``): each function gets the
episode's :class:`Episode` (the question, the whole response with the tool results the
environment wrote into it, the final answer, the tool calls in order and each call's result) and
returns a number; the reward is ``sum(weight * value)``. Each function's value is also one of the
environment's metrics, under its name: a column of ``inspo eval``'s table and ``env/<name>`` in a
run's ``metrics.jsonl``. The single ``reward(answer, question)`` stays the simple case.

Rules: names are unique and weights finite (a weight may be 0: reported, not rewarded, as a
diagnostic); a function that raises is the rubric's bug and propagates (never averaged as 0);
pure, no heavy imports.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inspo.records import Question, ToolCall


@dataclass(frozen=True)
class Episode:
    """One episode as a rubric function sees it."""

    question: Question
    response: str
    """Everything after the prompt: the policy's turns and what the environment wrote (results)."""
    answer: str | None
    """The final answer's text (None: the episode gave none)."""
    calls: list[ToolCall] = field(default_factory=list)
    """The tool calls that ran, in order."""
    results: list[str] = field(default_factory=list)
    """Each call's result, as the environment wrote it (without its tags), in the calls' order."""
    state: Any = None
    """A stateful environment's instance at the episode's end (:mod:`inspo.envs.state`), else
    None."""

    def calls_of(self, tool: str) -> list[str]:
        """The arguments of each call of ``tool``, in order."""
        return [c.args for c in self.calls if c.tool == tool]


@dataclass(frozen=True)
class Criterion:
    """One reward function of a rubric, its name (its metric) and its weight."""

    name: str
    fn: Callable[[Episode], float]
    weight: float = 1.0


class Rubric:
    """Weighted reward functions over whole episodes (module docstring).

    ``Rubric(correct, (used_tool, 0.2), Criterion("short", brevity, 0.1))``: a function alone has
    weight 1 and its ``__name__`` as its name; a ``(fn, weight)`` pair names the weight.
    """

    def __init__(
        self,
        *criteria: Criterion
        | Callable[[Episode], float]
        | tuple[Callable[[Episode], float], float],
    ):
        self.criteria: list[Criterion] = [_criterion(c) for c in criteria]
        if not self.criteria:
            raise ValueError("Rubric: give at least one reward function")
        names = [c.name for c in self.criteria]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(
                f"Rubric: each reward function needs its own name (its metric); {twice} appear "
                "twice: name them with Criterion(name, fn, weight)"
            )

    def scores(self, episode: Episode) -> dict[str, float]:
        """Each function's value on ``episode``, by name."""
        return {c.name: float(c.fn(episode)) for c in self.criteria}

    def reward(self, episode: Episode) -> float:
        """``sum(weight * value)`` over the functions."""
        return self.total(self.scores(episode))

    def total(self, scores: dict[str, float]) -> float:
        """The reward of the values :meth:`scores` gave (each function run once)."""
        return sum(c.weight * scores[c.name] for c in self.criteria)

    def __repr__(self) -> str:
        return "Rubric(" + ", ".join(f"{c.name} x {c.weight:g}" for c in self.criteria) + ")"


def _criterion(
    item: Criterion | Callable[[Episode], float] | tuple[Callable[[Episode], float], float],
) -> Criterion:
    if isinstance(item, Criterion):
        made = item
    elif isinstance(item, tuple) and len(item) == 2 and callable(item[0]):
        made = Criterion(getattr(item[0], "__name__", "reward"), item[0], item[1])
    elif callable(item):
        made = Criterion(getattr(item, "__name__", "reward"), item)
    else:
        raise TypeError(
            f"Rubric: {item!r} is not a reward function, a (function, weight) pair or a Criterion"
        )
    if (
        isinstance(made.weight, bool)
        or not isinstance(made.weight, (int, float))
        or not math.isfinite(made.weight)
    ):
        raise ValueError(
            f"Rubric: the weight of {made.name!r} must be a finite number, got {made.weight!r}"
        )
    return made


def episode_of(env: object, response: str, question: Question, state: Any = None) -> Episode:
    """The :class:`Episode` of ``response`` in a tag environment (``parse``, ``split_turns``,
    ``observations``, ``result_of``, ``answer``): the calls whose results came back, paired in
    order."""
    turns = [text for text, _ in env.split_turns(response)]  # type: ignore[attr-defined]
    calls = [a for a in (env.parse(t) for t in turns) if isinstance(a, ToolCall)]  # type: ignore[attr-defined]
    observations = env.observations(response)  # type: ignore[attr-defined]
    ran = calls[: len(observations)]
    results = [env.result_of(c, o) for c, o in zip(ran, observations, strict=True)]  # type: ignore[attr-defined]
    return Episode(question, response, env.answer(response), ran, results, state)  # type: ignore[attr-defined]


__all__ = ["Criterion", "Episode", "Rubric", "episode_of"]
