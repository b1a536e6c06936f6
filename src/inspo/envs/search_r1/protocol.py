"""The Search-R1 tag contract: its instructions, messages, observations and answer extraction.

The policy writes ``<think>…</think>`` (optional), then either ``<search>query</search>`` or
``<answer>…</answer>``. The environment answers a search with an observation in Search-R1's
exact form::

    \\n\\n<information>Doc 1(Title: T) text\\nDoc 2(Title: T2) text2</information>\\n\\n

and answers anything else (no complete search or answer tag in the turn) with the short
corrective message :data:`INVALID_ACTION_MESSAGE`, as Search-R1 does. It is the tag protocol of
:mod:`inspo.envs.tagged` with one tool, ``search``, whose results come in ``<information>``
(:data:`PROTOCOL`; :data:`SEARCH_R1_PROTOCOL` is the block that describes it to the policy
under ``coevolution.protocol_block``): :func:`parse_action` and :func:`extract_answer` follow
its rules (the first complete tag of a turn; the last complete, innermost ``<answer>`` of a
response, environment text ignored: a retrieved document that contains an ``<answer>`` tag
cannot answer for the policy).

Titles in observations are :attr:`Passage.title` as stored (Search-R1 prints the first line of
``contents`` verbatim; our :class:`~inspo.records.Passage` keeps the title without the quotes of
the ``"Title"`` form, so a quoted title prints without quotes). Pure string functions, no heavy
imports.
"""

from __future__ import annotations

from inspo.envs.base import Action
from inspo.envs.tagged import TagProtocol
from inspo.records import Passage
from inspo.tool_protocol import ToolProtocol

#: App. F of the paper: the Search-R1 instruction, the default seed of the population.
#: (Typo "as your want" kept verbatim: it is the published seed.)
SEARCH_R1_INSTRUCTION = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first "
    "every time you get new information. After reasoning, if you find you lack some knowledge, "
    "you can call a search engine by <search> query </search> and it will return the top "
    "searched results between <information> and </information>. You can search as many times "
    "as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>."
)

#: A deliberately weak seed for benchmarks (the ``multihop`` preset): Search-R1's tool contract
#: without its advice. It never says that a question may need several searches, nor to reason
#: first, so the room an evolved instruction has to change how the policy uses its tool is the
#: room the benchmark measures.
WEAK_INSTRUCTION = (
    "Answer the given question. You can call a search engine by <search> query </search> and it "
    "will return the top searched results between <information> and </information>. Give the "
    "answer inside <answer> and </answer>, without detailed illustrations. For example, "
    "<answer> Beijing </answer>."
)

#: The protocol block (``coevolution.protocol_block``): the four tags as the seed describes them,
#: without its advice (when to search, how often), which is the strategy's to evolve.
SEARCH_R1_PROTOCOL = ToolProtocol(
    tags=("think", "search", "information", "answer"),
    block=(
        "Reason inside <think> and </think>. To call the search engine, write <search> query "
        "</search> and it will return the top searched results between <information> and "
        "</information>. Give the final answer inside <answer> and </answer>, for example <answer> "
        "Beijing </answer>."
    ),
)

#: Seed instructions a config may name as ``@NAME`` (``seed_instruction: "@weak"``).
NAMED_INSTRUCTIONS: dict[str, str] = {"search-r1": SEARCH_R1_INSTRUCTION, "weak": WEAK_INSTRUCTION}


#: Generation stops after either closing tag (so real results, not invented ones, follow a search).
STOP_STRINGS: tuple[str, ...] = ("</search>", "</answer>")

#: Search-R1's corrective observation for a turn with neither a search nor an answer.
INVALID_ACTION_MESSAGE = (
    "\nMy previous action is invalid. If I want to search, I should put the query between "
    "<search> and </search>. If I want to give the final answer, I should put the answer "
    "between <answer> and </answer>. Let me try again.\n"
)

#: With ``AgentConfig.last_turn_nudge`` (off by default; Search-R1 has no such text), appended
#: (environment text, env_mask 0) to what the environment writes before the final turn.
LAST_TURN_NUDGE = (
    "\nI have used all my searches. I must now give my final answer between <answer> and "
    "</answer>.\n"
)

INFORMATION_OPEN = "<information>"
INFORMATION_CLOSE = "</information>"
#: What a (possibly truncated) search observation always ends with.
OBSERVATION_TAIL = INFORMATION_CLOSE + "\n\n"

#: Search-R1's protocol: ``<search>`` calls, ``<information>`` results, ``<answer>``.
PROTOCOL = TagProtocol(
    calls=("search",),
    result_tags={"search": "information"},
    answer_tag="answer",
    invalid_message=INVALID_ACTION_MESSAGE,
    nudge_message=LAST_TURN_NUDGE,
)


def parse_action(text: str) -> Action:
    """The action of one policy turn: the first complete search or answer tag (None: invalid)."""
    return PROTOCOL.parse(text)


def strip_environment_text(response: str, *, information: bool = True) -> str:
    """The response without the corrective message and the nudge and, when ``information`` is
    true, every complete ``<information>…</information>`` block (each replaced by one space)."""
    return PROTOCOL.strip_environment_text(response, results=information)


def extract_answer(response: str) -> str | None:
    """The last complete, innermost ``<answer>`` of a response; ``None`` if none (module doc)."""
    return PROTOCOL.answer(response)


# ------------------------------------------------------------------------------- observations


def format_passages(passages: list[Passage]) -> str:
    """Search-R1's ``_passages2string``: ``Doc i(Title: T) text\\n`` for each passage."""
    return "".join(f"Doc {i}(Title: {p.title}) {p.text}\n" for i, p in enumerate(passages, 1))


def format_observation(passages: list[Passage]) -> str:
    """The observation for a search: ``\\n\\n<information>DOCS</information>\\n\\n`` (DOCS
    stripped)."""
    return f"\n\n{INFORMATION_OPEN}{format_passages(passages).strip()}{OBSERVATION_TAIL}"
