"""State per episode: an object that lives for one episode, its public methods the tools.

Some tools need state that one episode builds and another must not see: a sqlite connection, a
game board, a sandbox. ``TaggedToolEnv(state=Board, ...)`` takes a class (or any factory) as TRL's
``environment_factory`` does: for each episode the loop makes one instance, calls its ``reset``
if it has one (with ``question=`` when ``reset`` takes it, else with nothing: OpenEnv's
``reset()``), routes that episode's calls to that instance's methods, scores the episode while the
instance is still open (a :class:`~inspo.envs.rubric.Rubric` sees it as ``episode.state``: the
final state), then calls its ``close`` if it has one, whatever happened. OpenEnv's ``step(action)``
is one method among the tools: name it as a tool, or wrap it in methods that say what they do.

Rules: the tools are the class's public methods (not ``reset``, ``close`` or a name starting with
``_``), each a typed method with a docstring as any tool (:func:`~inspo.envs.tools.tool`; the
arguments come from the text the same way); an instance never serves two episodes; calls to one
instance run in the order the policy made them (one episode's calls are never batched together,
so a stateful tool cannot be ``batched``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from inspo.envs.tools import DEFAULT_TIMEOUT_S, Tool, method_tool
from inspo.records import Question

#: Methods of a state class that are its lifecycle, not tools.
LIFECYCLE = ("reset", "close")


@dataclass
class EpisodeState:
    """One episode's instance and its tools (bound to it)."""

    instance: Any
    tools: dict[str, Tool]


class StateFactory:
    """Makes one :class:`EpisodeState` per episode from a class (module docstring)."""

    def __init__(self, factory: Callable[[], Any], *, timeout_s: float | None = DEFAULT_TIMEOUT_S):
        cls = factory if isinstance(factory, type) else None
        if cls is None or not callable(factory):
            raise TypeError(
                f"state={factory!r}: give a class whose public methods are the tools "
                "(an instance lives for one episode)"
            )
        self.factory = factory
        names = [
            n
            for n, f in inspect.getmembers(cls, inspect.isfunction)
            if not n.startswith("_") and n not in LIFECYCLE
        ]
        if not names:
            raise ValueError(f"state={cls.__name__}: it has no public method to call as a tool")
        self.templates: dict[str, Tool] = {
            n: method_tool(getattr(cls, n), n, timeout_s=timeout_s) for n in names
        }

    def open(self, question: Question) -> EpisodeState:
        """A fresh instance, reset for ``question``, with its tools."""
        instance = self.factory()
        reset = getattr(instance, "reset", None)
        if callable(reset):
            takes_question = "question" in inspect.signature(reset).parameters
            reset(question=question) if takes_question else reset()
        return EpisodeState(
            instance, {n: replace(t, fn=getattr(instance, n)) for n, t in self.templates.items()}
        )

    @staticmethod
    def close(state: EpisodeState) -> None:
        close = getattr(state.instance, "close", None)
        if callable(close):
            close()


__all__ = ["LIFECYCLE", "EpisodeState", "StateFactory"]
