"""The offline optimizer: a rule-based reflector that needs no LLM, next to the templates it reads.

It is the default optimizer when no endpoint is configured, so INSPO runs end to end on a
laptop. It reads the prompts rendered by :mod:`inspo.core.templates` and answers in the same
shape an LLM optimizer would: a short critique, then ``<ins_1>…</ins_1>`` … ``<ins_N>…</ins_N>``.

One module per responsibility:

- :mod:`.prompts` reads INSPO's prompts (the inverse of :mod:`inspo.core.templates`);
- :mod:`.failures` finds what went wrong in each failed trajectory of a reflection prompt;
- :mod:`.revisions` writes the critique and the revised candidates;
- :mod:`.client` is :class:`RuleBasedReflector`, the :class:`~inspo.llm.base.LLMClient` tying them
  together (also importable as ``inspo.llm.rule_based`` and ``inspo.llm.RuleBasedReflector``).

Rules:

- **Reflection prompts**: each candidate is the parent plus concrete guidance for the detected
  failure modes; the N candidates differ in which modes they address, in what order, in which
  wording and in layout. **Paraphrase prompts** get generic rewordings and strengthenings;
  **history prompts** start from the best-scored instruction and borrow sentences from the other
  good ones.
- Candidates always keep the parent's whole text, so every protocol tag it has (``<think>``,
  ``<search>``, ``<information>``, ``<answer>`` and their closing tags) survives; added guidance
  never mentions a tag the parent does not use.
- N comes from the prompt ("giving N different" / "Give N different"), 6 when absent.
- Deterministic: all choices come from the injected ``random.Random`` (``rng=`` or ``seed=``).
- ``usage`` counts one call per ``generate`` and zero tokens.
"""

from inspo.core.reflector.client import RuleBasedReflector
from inspo.core.reflector.failures import (
    ANSWER_TOO_LONG,
    IGNORED_EVIDENCE,
    MALFORMED_TAGS,
    NEVER_SEARCHED,
    NO_ANSWER,
    NO_REASONING,
    QUERY_MISSES_QUESTION,
    QUESTION_AS_QUERY,
    RAN_OUT_OF_TURNS,
    REPEATED_QUERIES,
    WRONG_ANSWER,
    FailureExample,
    FailureMode,
    detect_failure_modes,
    tag_problems,
)
from inspo.core.reflector.prompts import DEFAULT_N, ParsedPrompt, parse_prompt
from inspo.core.reflector.revisions import (
    GENERIC_STRENGTHENINGS,
    GUIDANCE,
    REWORDINGS,
    covered,
    history_sentences,
    tags_of,
    write_candidates,
    write_critique,
)

__all__ = [
    "ANSWER_TOO_LONG",
    "DEFAULT_N",
    "GENERIC_STRENGTHENINGS",
    "GUIDANCE",
    "IGNORED_EVIDENCE",
    "MALFORMED_TAGS",
    "NEVER_SEARCHED",
    "NO_ANSWER",
    "NO_REASONING",
    "QUERY_MISSES_QUESTION",
    "QUESTION_AS_QUERY",
    "RAN_OUT_OF_TURNS",
    "REPEATED_QUERIES",
    "REWORDINGS",
    "WRONG_ANSWER",
    "FailureExample",
    "FailureMode",
    "ParsedPrompt",
    "RuleBasedReflector",
    "covered",
    "detect_failure_modes",
    "history_sentences",
    "parse_prompt",
    "tag_problems",
    "tags_of",
    "write_candidates",
    "write_critique",
]
