"""Search-R1's agent (the paper's): one batched ``search`` tool over a retriever, results in
``<information>``, exact match (or F1) on ``<answer>``, the App. F seed instruction.

- :mod:`.protocol`: the instructions, messages and observation format, answer extraction;
- :mod:`.rewards`: EM / F1 on the response's answer, plus an optional format term;
- :mod:`.reflector_rules`: the rule-based reflector's failure modes and advice for the search agent;
- :mod:`.env`: :class:`SearchR1Env`, its ``env:`` settings (:class:`SearchR1Options`) and
  :func:`load_environment`, the factory ``env.name: search-r1`` names.
"""

from inspo.envs.search_r1.env import (
    NAME,
    SearchR1Env,
    SearchR1Options,
    load_environment,
    search_tool,
)
from inspo.envs.search_r1.protocol import (
    NAMED_INSTRUCTIONS,
    SEARCH_R1_INSTRUCTION,
    WEAK_INSTRUCTION,
)

__all__ = [
    "NAME",
    "NAMED_INSTRUCTIONS",
    "SEARCH_R1_INSTRUCTION",
    "WEAK_INSTRUCTION",
    "SearchR1Env",
    "SearchR1Options",
    "load_environment",
    "search_tool",
]
