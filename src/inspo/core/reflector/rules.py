"""What the rule-based reflector knows of one environment: :class:`ReflectorRules`.

The reflector's machinery (reading the prompt, ranking the failure modes, laying out revisions) is
generic; what it detects in a failed trajectory and the advice it writes against each mode are the
environment's. An environment offers its rules as ``reflector_rules`` (Search-R1's live in
:mod:`inspo.envs.search_r1.reflector_rules`); without them the reflector uses :data:`ANSWER_RULES`,
which know only the answer tag.

Rules of the rules:

- ``detect(example, parent)`` returns the failure modes of one failed trajectory, each with its
  evidence (``parent``: the instruction being revised, e.g. to expect ``<think>`` only when it
  asks for it);
- ``guidance[mode]`` holds several wordings of the advice against ``mode`` (candidates differ in
  which they use); a wording is used only when every tag it mentions is one the parent uses, so a
  revision never teaches a tag its parent does not have;
- ``generic`` is advice for prompts that show no failure (paraphrase and history templates);
- ``rewordings`` are safe (old, new) phrase swaps for paraphrases, applied outside tags.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from inspo.core.reflector import failures
from inspo.core.reflector.failures import FailureExample, FailureMode, answer_failures, tags_of

Detector = Callable[[FailureExample, str], list[FailureMode]]


@dataclass(frozen=True)
class ReflectorRules:
    """An environment's failure modes and the advice against each (rules in the module
    docstring)."""

    detect: Detector
    guidance: Mapping[str, tuple[str, ...]]
    generic: tuple[str, ...] = ()
    rewordings: tuple[tuple[str, str], ...] = ()


def _answer_detect(example: FailureExample, parent: str) -> list[FailureMode]:
    return answer_failures(example, sorted(tags_of(parent)))


#: The reflector's rules for an environment that brings none: they read the answer tag only.
ANSWER_RULES = ReflectorRules(
    detect=_answer_detect,
    guidance={
        failures.MALFORMED_TAGS: (
            "Close every tag you open, use each tag exactly as the instruction shows it, and write "
            "nothing after </answer>.",
            "Check your format before finishing: every opening tag must be followed by its closing "
            "tag, and tags must not overlap.",
        ),
        failures.NO_ANSWER: (
            "Always finish with a final answer inside <answer> and </answer>, even when you are "
            "unsure: a best guess is better than no answer.",
            "Never stop without writing <answer> your answer </answer>.",
            "Your response must end with exactly one <answer> ... </answer> block.",
        ),
        failures.ANSWER_TOO_LONG: (
            "Inside <answer> and </answer> write only the answer itself, no sentence and no "
            "explanation.",
            "Keep the final answer minimal: no full sentences and no reasoning inside the answer "
            "tags.",
        ),
        failures.WRONG_ANSWER: (
            "Check each step of your work before you give the final answer.",
            "Make sure the answer is exactly what the question asks for.",
            "Work step by step, and use the tools for every step you cannot do with certainty.",
        ),
    },
    generic=(
        "Work step by step before each action.",
        "Use the tools whenever they can check or compute something for you.",
        "Always finish with exactly one <answer> ... </answer> block.",
        "Verify that the answer matches exactly what the question asks before you write it.",
    ),
)
