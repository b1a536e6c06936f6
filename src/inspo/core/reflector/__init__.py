"""The offline optimizer: a rule-based reflector that needs no LLM, next to the templates it reads.

It is the default optimizer when no endpoint is configured, so INSPO runs end to end on a
laptop. It reads the prompts rendered by :mod:`inspo.core.templates` and answers in the same
shape an LLM optimizer would: a short critique, then ``<ins_1>…</ins_1>`` … ``<ins_N>…</ins_N>``.
Its rules are written by hand for one environment at a time: never count what it writes as
evidence about INSPO's instructions (that needs a language-model optimizer).

One module per responsibility:

- :mod:`.prompts` reads INSPO's prompts (the inverse of :mod:`inspo.core.templates`);
- :mod:`.rules` is what the reflector knows of an environment (:class:`ReflectorRules`: failure
  modes and the advice against each; an environment brings its own, e.g. Search-R1's in
  :mod:`inspo.envs.search_r1.reflector_rules`; :data:`ANSWER_RULES` read the answer tag only);
- :mod:`.failures` holds the answer-level failure modes every tagged protocol shares;
- :mod:`.revisions` writes the critique and the revised candidates;
- :mod:`.client` is :class:`RuleBasedReflector`, the
  :class:`~inspo.core.optimizer_llm.LLMClient` tying them together (also importable as
  ``inspo.llm.RuleBasedReflector``).

Rules:

- **Reflection prompts**: each candidate is the parent plus concrete guidance for the detected
  failure modes; the N candidates differ in which modes they address, in what order, in which
  wording and in layout. **Paraphrase prompts** get the rules' rewordings and generic
  strengthenings; **history prompts** start from the best-scored instruction and borrow sentences
  from the other good ones.
- Candidates always keep the parent's whole text, so every protocol tag it has survives; added
  guidance never mentions a tag the parent does not use.
- N comes from the prompt ("giving N different" / "Give N different"), 6 when absent.
- Deterministic: all choices come from the injected ``random.Random`` (``rng=`` or ``seed=``).
- ``usage`` counts one call per ``generate`` and zero tokens.
"""

from inspo.core.reflector.client import RuleBasedReflector
from inspo.core.reflector.failures import (
    ANSWER_TOO_LONG,
    MALFORMED_TAGS,
    NO_ANSWER,
    WRONG_ANSWER,
    FailureExample,
    FailureMode,
    answer_failures,
    tag_problems,
    tags_of,
)
from inspo.core.reflector.prompts import DEFAULT_N, ParsedPrompt, parse_prompt
from inspo.core.reflector.revisions import (
    covered,
    history_sentences,
    write_candidates,
    write_critique,
)
from inspo.core.reflector.rules import ANSWER_RULES, ReflectorRules

__all__ = [
    "ANSWER_RULES",
    "ANSWER_TOO_LONG",
    "DEFAULT_N",
    "MALFORMED_TAGS",
    "NO_ANSWER",
    "WRONG_ANSWER",
    "FailureExample",
    "FailureMode",
    "ParsedPrompt",
    "ReflectorRules",
    "RuleBasedReflector",
    "answer_failures",
    "covered",
    "history_sentences",
    "parse_prompt",
    "tag_problems",
    "tags_of",
    "write_candidates",
    "write_critique",
]
