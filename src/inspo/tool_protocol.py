"""An environment's tool protocol as one object: its tags and the block of text that teaches them.

Under ``coevolution.protocol_block`` an evolved instruction is two parts: the optimizer's
STRATEGY (how to solve the task) and the environment's protocol BLOCK (its tags and how to write
them), which no optimizer ever rewrites, so no candidate can drop a tag::

    instruction = compose(strategy) = strategy + "\\n\\n" + block

:meth:`ToolProtocol.split` reads an instruction back into its strategy and block; a seed that
does not end with the block is its own strategy. It lives on the ground floor (no inspo import)
because both sides use it: the environments own one (``env.protocol``, :mod:`inspo.envs`
re-exports the class) and the core's proposer composes with it. Pure, no heavy imports.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolProtocol:
    """The tags of an environment and the block that says how to use them.

    Rules (checked when built): ``tags`` is a non-empty tuple of tag names; ``block`` is text
    (kept stripped) that holds every tag both opening and closing (``<calc>`` and ``</calc>``),
    so an instruction that ends with the block keeps every tag, whatever its strategy says.
    """

    tags: tuple[str, ...]
    """The tag names the block describes (``("calc", "result", "answer")``)."""
    block: str
    """The protocol's text, appended to every evolved instruction's strategy."""

    def __post_init__(self) -> None:
        tags = tuple(self.tags) if isinstance(self.tags, (list, tuple)) else ()
        if not tags or not all(isinstance(t, str) and t.strip() for t in tags):
            raise ValueError(
                f"ToolProtocol: tags must be a non-empty tuple of tag names; got {self.tags!r}"
            )
        if not isinstance(self.block, str) or not self.block.strip():
            raise ValueError(
                "ToolProtocol: block must be a non-empty text that says how to use the tags"
            )
        object.__setattr__(self, "tags", tags)
        object.__setattr__(self, "block", self.block.strip())
        missing = [t for t in tags if f"<{t}>" not in self.block or f"</{t}>" not in self.block]
        if missing:
            lacking = ", ".join(f"<{t}>…</{t}>" for t in missing)
            raise ValueError(
                f"ToolProtocol: the block must show every tag opening and closing; "
                f"it lacks {lacking}"
            )

    def compose(self, strategy: str) -> str:
        """The instruction of ``strategy``: the strategy (stripped), a blank line, the block."""
        return f"{strategy.strip()}\n\n{self.block}"

    def split(self, instruction: str) -> tuple[str, str | None]:
        """``(strategy, block)`` of an instruction that ends with the block (trailing whitespace
        aside); ``(instruction stripped, None)`` for one that does not (a seed is then its own
        strategy). ``split(compose(s)) == (s.strip(), block)`` for every ``s``."""
        text = instruction.rstrip()
        if text.endswith(self.block):
            return text[: len(text) - len(self.block)].rstrip(), self.block
        return instruction.strip(), None

    def strategy(self, instruction: str) -> str:
        """The strategy part of ``instruction`` (:meth:`split`'s first half)."""
        return self.split(instruction)[0]


__all__ = ["ToolProtocol"]
