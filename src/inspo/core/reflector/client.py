"""The rule-based reflector as an optimizer LLM (:class:`~inspo.core.optimizer_llm.LLMClient`).

Rules:

- it answers in the shape an LLM optimizer would: a short critique, then ``<ins_1>…</ins_1>`` …
  ``<ins_N>…</ins_N>`` (N read from the prompt);
- what it detects and the advice it writes are the environment's (``rules``,
  :class:`~inspo.core.reflector.rules.ReflectorRules`; default: the answer-only rules);
- deterministic: all choices come from the injected ``random.Random`` (``rng=`` or ``seed=``);
- ``usage`` counts one call per ``generate`` and zero tokens; a prompt it cannot read raises
  :class:`~inspo.core.optimizer_llm.LLMError` and counts a failure.
"""

from __future__ import annotations

import logging
import random

from inspo.core.optimizer_llm import LLMError, LLMUsage, Message
from inspo.core.reflector.prompts import ParsedPrompt, parse_prompt
from inspo.core.reflector.revisions import history_sentences, write_candidates, write_critique
from inspo.core.reflector.rules import ANSWER_RULES, ReflectorRules
from inspo.rng import derived_rng

logger = logging.getLogger("inspo.llm")


class RuleBasedReflector:
    """The offline optimizer LLM (see the module docstring).

    Args:
        rng: the source of every choice; ``random.Random(seed)`` when omitted.
        seed: used only when ``rng`` is omitted.
        rules: the environment's failure modes and advice (``env.reflector_rules``).
    """

    name = "rule-based"

    def __init__(
        self,
        rng: random.Random | None = None,
        *,
        seed: int = 0,
        rules: ReflectorRules | None = None,
    ) -> None:
        # One draw from the injected RNG; every call then derives its own stream from
        # (that draw, the prompt), so the reflector is stateless between calls: a run resumed
        # from a checkpoint gets exactly the answers an uninterrupted run would.
        self._seed = (rng if rng is not None else random.Random(seed)).getrandbits(64)
        self.rules = rules if rules is not None else ANSWER_RULES
        self.usage = LLMUsage()
        logger.info("optimizer: rule-based offline reflector (no LLM; deterministic heuristics)")

    def __repr__(self) -> str:
        return f"RuleBasedReflector(calls={self.usage.calls})"

    def check(self) -> None:
        """Nothing to reach: always fine."""

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        """``n`` responses, each a critique plus N candidates; temperature and max_tokens are
        ignored."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        users = [m.get("content", "") for m in messages if m.get("role") == "user"]
        text = users[-1] if users else "\n".join(m.get("content", "") for m in messages)
        try:
            parsed = parse_prompt(text)
        except LLMError:
            self.usage.failures += 1
            raise
        outputs = [self.respond(parsed, derived_rng(self._seed, text, i)) for i in range(n)]
        self.usage.add(0, 0)
        return outputs

    def respond(self, parsed: ParsedPrompt, rng: random.Random) -> str:
        """One full answer (critique + ``<ins_i>`` candidates) to a parsed prompt."""
        rules = self.rules
        if parsed.kind == "reflection":
            per_example = [rules.detect(ex, parsed.parent) for ex in parsed.examples]
            critique, ranked = write_critique(parsed, per_example, rules)
            logger.debug("rule-based reflector: modes %s", ranked)
            candidates = write_candidates(parsed.parent, ranked, parsed.n, rng, rules=rules)
        elif parsed.kind == "history":
            extra = history_sentences(parsed)
            critique = (
                f"Rule-based offline revision (no LLM) of the best of {len(parsed.history)} scored "
                "instruction(s), borrowing sentences from the other good ones and adding generic "
                "strengthenings."
            )
            candidates = write_candidates(
                parsed.parent, [], parsed.n, rng, rules=rules, extra_sentences=extra
            )
        else:
            critique = (
                "Rule-based offline paraphrase (no LLM): rewordings plus generic strengthenings."
            )
            candidates = write_candidates(
                parsed.parent, [], parsed.n, rng, rules=rules, reword=True
            )
        body = "\n".join(f"<ins_{i}>\n{c}\n</ins_{i}>" for i, c in enumerate(candidates, start=1))
        return f"{critique}\n\n{body}"
