"""The retrieval seam.

Rules of :class:`Retriever`:

- ``search(queries, k)`` returns one list per query, in query order, each with at most ``k``
  :class:`~inspo.records.Passage` sorted best first (``score`` set when the backend has one).
- An empty query returns an empty list for that query; it never raises for one bad query.
- Batching is the retriever's job: callers hand it every query of a rollout step at once.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from inspo.records import Passage


@runtime_checkable
class Retriever(Protocol):
    def search(self, queries: list[str], k: int = 3) -> list[list[Passage]]: ...


def indexed_text(passage: Passage) -> str:
    """What a retriever indexes for a passage: its title line, then its text."""
    return f"{passage.title}\n{passage.text}" if passage.title else passage.text
