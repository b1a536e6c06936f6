"""The Search-R1 tag contract: prompts, actions, observations, answer extraction.

The policy writes ``<think>…</think>`` (optional), then either ``<search>query</search>`` or
``<answer>…</answer>``. The environment answers a search with an observation in Search-R1's
exact form::

    \\n\\n<information>Doc 1(Title: T) text\\nDoc 2(Title: T2) text2</information>\\n\\n

and answers anything else (no complete search or answer tag in the turn) with the short
corrective message :data:`INVALID_ACTION_MESSAGE`, as Search-R1 does.

Rules of this module (pure string functions, no heavy imports):

- :func:`parse_action` reads ONE policy turn (the text the policy produced since the last
  observation). Like Search-R1 it takes the FIRST complete ``<search>…</search>`` or
  ``<answer>…</answer>`` in that text; the content is stripped. No complete tag -> invalid.
- :func:`extract_answer` reads a whole RESPONSE (never the prompt, so an ``<answer>`` example in
  the instruction can never score). It returns the content of the LAST complete, innermost
  ``<answer>…</answer>`` pair, stripped; ``None`` when there is none. Details that make the rule
  predictable:

  * environment text is ignored (:func:`strip_environment_text`): ``<information>`` blocks (a
    retrieved document that contains an ``<answer>`` tag cannot answer for the policy) and the
    environment's fixed messages (the corrective message and the last-turn nudge both mention
    ``<answer> and </answer>``, which must not read as the answer "and");
  * several answers -> the last complete one wins; a trailing unclosed ``<answer>`` is ignored;
  * nested tags: ``<answer>a<answer>b</answer></answer>`` -> ``"b"`` (the innermost pair, i.e.
    content that contains no answer tag);
  * ``<answer></answer>`` -> ``""`` (an empty answer: it exists, it just scores 0);
  * tags are case-sensitive (``<Answer>`` is not a tag), as in Search-R1.
- Titles in observations are :attr:`Passage.title` as stored (Search-R1 prints the first line of
  ``contents`` verbatim; our :class:`~inspo.records.Passage` keeps the title without the quotes
  of the ``"Title"`` form, so a quoted title prints without quotes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from inspo.records import Passage

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

#: Seed instructions a config may name as ``@NAME`` (``seed_instruction: "@weak"``).
NAMED_INSTRUCTIONS: dict[str, str] = {"search-r1": SEARCH_R1_INSTRUCTION, "weak": WEAK_INSTRUCTION}


def resolve_instruction(text: str) -> str:
    """A seed instruction as written in a config: '' is Search-R1's (App. F), ``@NAME`` one of
    :data:`NAMED_INSTRUCTIONS`, anything else the text itself. ValueError for an unknown name."""
    if not text:
        return SEARCH_R1_INSTRUCTION
    if text.startswith("@"):
        name = text[1:]
        if name not in NAMED_INSTRUCTIONS:
            raise ValueError(f"unknown named instruction {text!r}; the named ones are: "
                             + ", ".join("@" + k for k in NAMED_INSTRUCTIONS))
        return NAMED_INSTRUCTIONS[name]
    return text


#: Where a question goes in an instruction that wants to place it itself.
QUESTION_PLACEHOLDER = "{question}"

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

_ACTION_RE = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)
_INFORMATION_RE = re.compile(r"<information>.*?</information>", re.DOTALL)
_ANSWER_RE = re.compile(r"<answer>((?:(?!<answer>|</answer>).)*)</answer>", re.DOTALL)


@dataclass(frozen=True)
class Action:
    """What one policy turn asked for. ``content`` is the query or the answer ('' if invalid)."""

    kind: Literal["search", "answer", "invalid"]
    content: str = ""


# ------------------------------------------------------------------------------------ prompts


def build_prompt(instruction: str, question: str) -> str:
    """The user message: the instruction, then the question.

    An instruction that contains ``{question}`` gets the question there (plain replacement, so
    other braces in an evolved instruction are harmless). Otherwise the question follows the
    instruction as ``"\\n\\nQuestion: ..."`` (Search-R1 appends ``Question: ...`` after the
    instruction; the paragraph break keeps multi-paragraph evolved instructions readable).
    """
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError("build_prompt: the instruction is empty; pass the instruction text")
    question = question.strip()
    if QUESTION_PLACEHOLDER in instruction:
        return instruction.replace(QUESTION_PLACEHOLDER, question)
    return f"{instruction.rstrip()}\n\nQuestion: {question}"


def build_chat(tokenizer: Any, instruction: str, question: str) -> str:
    """The prompt text with the tokenizer's chat template applied.

    One user message holding :func:`build_prompt`, ``add_generation_prompt=True`` so the text
    ends where the assistant's answer starts. A tokenizer without a chat template gets the
    plain :func:`build_prompt` text (base models, as in Search-R1's base template).
    """
    content = build_prompt(instruction, question)
    if not getattr(tokenizer, "chat_template", None):
        return content
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )


# ------------------------------------------------------------------------------------ actions


def parse_action(text: str) -> Action:
    """The action of one policy turn: the first complete search or answer tag (see module doc)."""
    match = _ACTION_RE.search(text)
    if match is None:
        return Action("invalid")
    return Action(match.group(1), match.group(2).strip())  # type: ignore[arg-type]


def strip_environment_text(response: str, *, information: bool = True) -> str:
    """The response without what the environment wrote into it.

    Removes every :data:`INVALID_ACTION_MESSAGE` and :data:`LAST_TURN_NUDGE` and, when
    ``information`` is true, every complete ``<information>…</information>`` block (each
    replaced by one space so the text around it does not glue together).
    """
    for message in (INVALID_ACTION_MESSAGE, LAST_TURN_NUDGE):
        response = response.replace(message, " ")
    return _INFORMATION_RE.sub(" ", response) if information else response


def extract_answer(response: str) -> str | None:
    """The last complete, innermost ``<answer>`` of a response; ``None`` if none (module doc)."""
    visible = strip_environment_text(response)
    matches = _ANSWER_RE.findall(visible)
    if not matches:
        return None
    return matches[-1].strip()


# ------------------------------------------------------------------------------- observations


def format_passages(passages: list[Passage]) -> str:
    """Search-R1's ``_passages2string``: ``Doc i(Title: T) text\\n`` for each passage."""
    return "".join(f"Doc {i}(Title: {p.title}) {p.text}\n" for i, p in enumerate(passages, 1))


def format_observation(passages: list[Passage]) -> str:
    """The observation for a search: ``\\n\\n<information>DOCS</information>\\n\\n`` (DOCS stripped)."""
    return f"\n\n{INFORMATION_OPEN}{format_passages(passages).strip()}{OBSERVATION_TAIL}"
