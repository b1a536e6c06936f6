"""The calculator agent: arithmetic word problems, a ``calc`` tool, an exact numeric reward.

DESIGN.md's setting where the instruction decides tool use. The policy writes ``<calc> expression
</calc>`` and reads ``<result> value </result>`` (or ``<result>error: ...</result>`` when calc
refuses the expression: :mod:`.arith` has the grammar, a knob of the benchmark), then answers in
``<answer> ... </answer>``. It is :class:`~inspo.envs.tagged.TaggedToolEnv` with one tool.

- :class:`CalculatorOptions` is the ``env:`` section of ``env.name: calculator``: the problem
  generator's knobs (:class:`~.data.ProblemSpec`: steps, ops, number ranges, split sizes, seed)
  and ``accept_equals`` (calc accepts ``expr = value``; off by default, which is the lever);
- the questions are generated when first asked for (:mod:`.data`), then kept;
- the reward (``metric: correct``) is 1 when the FIRST number in the response's LAST complete
  ``<answer>`` equals a gold answer exactly (``1,932``, ``1932.0``, ``$1932``, ``1932 apples``),
  else 0; no answer scores 0; the prompt is never read (an instruction's example cannot score);
- :meth:`CalculatorEnv.metrics`: ``correct``, ``answered``, ``calc_calls`` and ``calc_errors``
  (calls calc refused: counted by asking calc again on each recorded call, which is pure, so a
  result block the policy wrote itself never counts);
- :data:`NAMED_INSTRUCTIONS` (``@NAME`` in a config): ``calculator`` (the default: the tool
  described in two sentences, as DESIGN.md's third check), ``weak`` (names the tool, nothing
  more), ``notool`` (never names it) and ``worked`` (the default plus one worked example, on a
  problem the generator never writes); :data:`CALCULATOR_PROTOCOL` is the protocol block
  (``coevolution.protocol_block``): the three tags as the default seed describes them;
- :data:`RULES`: the rule-based reflector's calculator modes (never used calc, calc refused an
  input, an answer without a number) on top of the answer-level ones, with advice that names only
  ``<calc>``, ``<result>`` and ``<answer>`` and no entity or number of the data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inspo.core.reflector.failures import (
    WRONG_ANSWER,
    FailureExample,
    FailureMode,
    answer_failures,
    tags_of,
)
from inspo.core.reflector.rules import ANSWER_RULES, ReflectorRules
from inspo.envs.base import settings_from
from inspo.envs.calculator.arith import (
    calculate,
    evaluate_expression,
    format_number,
    is_refusal,
    parse_number,
    same_number,
)
from inspo.envs.calculator.data import ProblemSpec, generate_problems
from inspo.envs.tagged import NEVER_USED_TOOL, TaggedToolEnv
from inspo.envs.tools import Tool, tool
from inspo.records import Question, Rollout
from inspo.tool_protocol import ToolProtocol

NAME = "calculator"

#: The default seed: the tool described in two sentences (DESIGN.md's third check), and the answer's
#: place.
CALCULATOR_INSTRUCTION = (
    "Answer the question. You have a calculator: write <calc> expression </calc> and the result "
    "comes back in <result> ... </result>. Use it for the arithmetic, then give the final number "
    "inside <answer> and </answer>."
)
#: Names the tool and nothing more (keeps the tags the guard requires).
WEAK_INSTRUCTION = (
    "Answer the question. You can use <calc> expression </calc>. Put the final number in <answer> "
    "</answer>."
)
#: Never names the tool.
NOTOOL_INSTRUCTION = "Answer the question. Put the final number in <answer> </answer>."
#: The default plus one worked example: two calls, then the answer (a baker's rolls: not a generated
#: problem).
WORKED_INSTRUCTION = (
    CALCULATOR_INSTRUCTION
    + '\n\nFor example, to answer "A baker fills 4 trays with 15 rolls each and then sells 23 '
    'rolls. How many rolls are left?", write:\n<calc> 4 * 15 </calc>\n<result>60</result>'
    "\n<calc> 60 - 23 </calc>\n<result>37</result>\n<answer> 37 </answer>"
)
#: The protocol block (``coevolution.protocol_block``): the tags as the default seed describes them.
CALCULATOR_PROTOCOL = ToolProtocol(
    tags=("calc", "result", "answer"),
    block=(
        "You have a calculator: write <calc> expression </calc> and the result comes back in "
        "<result> ... </result>. Give the final number inside <answer> and </answer>."
    ),
)
#: Seed instructions a config may name as ``@NAME`` (``seed_instruction: "@worked"``).
NAMED_INSTRUCTIONS: dict[str, str] = {
    NAME: CALCULATOR_INSTRUCTION,
    "weak": WEAK_INSTRUCTION,
    "notool": NOTOOL_INSTRUCTION,
    "worked": WORKED_INSTRUCTION,
}


@dataclass
class CalculatorOptions(ProblemSpec):
    """The ``env:`` section of ``env.name: calculator``: the problems (the fields of
    :class:`~inspo.envs.calculator.data.ProblemSpec`) and what calc accepts."""

    accept_equals: bool = False
    """calc accepts ``expression = value`` (evaluating the expression, ignoring the rest); false:
    it refuses any ``=``, and saying so is left to the instruction (DESIGN.md's lever)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.accept_equals, bool):
            raise ValueError(f"env.accept_equals must be true or false; got {self.accept_equals!r}")


def options_from(options: dict[str, Any]) -> CalculatorOptions:
    """:class:`CalculatorOptions` from a dict, with a message naming an unknown key and the known
    ones."""
    return settings_from(CalculatorOptions, options, NAME)


def calc_tool(*, accept_equals: bool = False) -> Tool:
    """``calc`` as a tool: the value of an expression, or calc's refusal (the observation)."""

    def calc(expression: str) -> str:
        """Evaluate one arithmetic expression of numbers and + - * / ( ), exactly (e.g. 6 * 23)."""
        return format_number(evaluate_expression(expression, accept_equals=accept_equals))

    return tool(calc)


def numeric_reward(answer: str, question: Question) -> float:
    """1.0 when ``answer``'s first number equals one of the gold answers exactly, else 0.0."""
    return float(any(same_number(answer, gold) for gold in question.answers))


# ---------------------------------------------------------------------------- the reflector's rules

CALC_REFUSED = "calc_refused"
ANSWER_NOT_A_NUMBER = "answer_not_a_number"
_CALL_AND_RESULT = re.compile(r"<calc>(.*?)</calc>\s*<result>(.*?)</result>", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def detect_failure_modes(example: FailureExample, parent: str) -> list[FailureMode]:
    """The calculator's failure modes in one trajectory (never called calc, calc refused an input,
    an answer without a number), then the answer-level ones; ``wrong_answer`` (compared as numbers)
    only when nothing else explains a wrong answer."""
    resp = example.response
    modes: list[FailureMode] = []
    if "<calc>" not in resp:
        modes.append(FailureMode(NEVER_USED_TOOL, "no <calc> call in the response"))
    refused = [
        (" ".join(expr.split()), result.strip())
        for expr, result in _CALL_AND_RESULT.findall(resp)
        if is_refusal(result)
    ]
    if refused:
        expr, message = refused[0]
        modes.append(
            FailureMode(
                CALC_REFUSED,
                f"calc refused {len(refused)} call(s); the first, <calc> {expr[:60]} "
                f"</calc>, got {message[:120]!r}",
            )
        )
    answers = _ANSWER.findall(resp)
    answer = answers[-1].strip() if answers else None
    if answer is not None and parse_number(answer) is None:
        modes.append(
            FailureMode(ANSWER_NOT_A_NUMBER, f"the answer {answer[:60]!r} holds no number")
        )
    modes += [
        m for m in answer_failures(example, sorted(tags_of(parent))) if m.name != WRONG_ANSWER
    ]
    if (
        answer is not None
        and not modes
        and not any(same_number(answer, g) for g in example.answers)
    ):
        modes.append(
            FailureMode(
                WRONG_ANSWER,
                f"answered {answer[:60]!r}, the answer is {' | '.join(example.answers)[:60]!r}",
            )
        )
    return modes


#: Advice against each mode, several wordings; tags: <calc>, <result>, <answer> only, and each
#: mode has wordings without <result> (for parents that do not show it). No number, no entity.
GUIDANCE: dict[str, tuple[str, ...]] = {
    **ANSWER_RULES.guidance,
    NEVER_USED_TOOL: (
        "Never do arithmetic in your head: compute every step with <calc> expression </calc> "
        "before you give the <answer>.",
        "Use <calc> ... </calc> for each multiplication, addition, subtraction or division the "
        "problem needs, one step per call.",
        "Call <calc> expression </calc>, read the number that comes back in <result> ... "
        "</result>, and use it in the next step.",
    ),
    CALC_REFUSED: (
        "Inside <calc> and </calc> write only the expression, made of numbers, + - * / and "
        "parentheses; never write = or the result yourself: the calculator returns it.",
        "The calculator refuses anything but a bare expression: no equals sign, no words and no "
        "units inside <calc> ... </calc>.",
        "When a <result> starts with error, read it, fix the expression and call <calc> again with "
        "only numbers and + - * / ( ).",
    ),
    ANSWER_NOT_A_NUMBER: (
        "Put only the final number inside <answer> and </answer>: digits, no words and no "
        "expression.",
        "The <answer> must be a single number: the value of the last <calc> step.",
        "Copy the number from the last <result> into <answer> and </answer>.",
    ),
    WRONG_ANSWER: (
        "Follow the story step by step: one <calc> call per event, in the order the question tells "
        "them, each using the number the previous step gave.",
        "Before answering, check that every number of the question was used once in a <calc> call.",
        "Use the value in the last <result> as the final <answer>, not a number computed in your "
        "head.",
    ),
}

GENERIC: tuple[str, ...] = (
    "Compute every step with <calc> expression </calc>; never do arithmetic in your head.",
    "Write one arithmetic step per <calc> call, using only numbers and + - * / ( ).",
    "Give only the final number inside <answer> and </answer>.",
    *ANSWER_RULES.generic,
)

REWORDINGS: tuple[tuple[str, str], ...] = (
    ("Answer the question.", "Solve the word problem."),
    ("You have a calculator", "A calculator is available"),
    ("Use it for the arithmetic", "Use it for every calculation"),
)

#: The calculator's rules for the rule-based reflector.
RULES = ReflectorRules(
    detect=detect_failure_modes, guidance=GUIDANCE, generic=GENERIC, rewordings=REWORDINGS
)


# ---------------------------------------------------------------------------- the environment


class CalculatorEnv(TaggedToolEnv):
    """The calculator agent (module docstring), its problems and calc's grammar set by
    ``options``."""

    def __init__(self, options: CalculatorOptions | None = None) -> None:
        self.options = options if options is not None else CalculatorOptions()
        super().__init__(
            name=NAME,
            tools={"calc": calc_tool(accept_equals=self.options.accept_equals)},
            seed_instruction=CALCULATOR_INSTRUCTION,
            result_tag="result",
            answer_tag="answer",
            instructions={k: v for k, v in NAMED_INSTRUCTIONS.items() if k != NAME},
            reward=numeric_reward,
            metric="correct",
            required_tags=("calc", "answer"),
            reflector_rules=RULES,
            protocol=CALCULATOR_PROTOCOL,
        )
        self._splits: dict[str, list[Question]] | None = None

    def questions(self, split: str) -> list[Question]:
        if self._splits is None:
            self._splits = generate_problems(self.options)
        if split not in self._splits:
            raise ValueError(
                f"the calculator has no {split!r} questions; its splits are: "
                f"{', '.join(self._splits)}"
            )
        return list(self._splits[split])

    def _calls(self, rollout: Rollout) -> list[tuple[str, str]]:
        """(expression, what calc answered) for each calc call of the episode."""
        equals = self.options.accept_equals
        return [(args, calculate(args, accept_equals=equals)) for args in rollout.calls_of("calc")]

    def metrics(self, rollout: Rollout) -> dict[str, float]:
        calls = self._calls(rollout)
        correct = 0.0 if rollout.error else self.reward(rollout.response, rollout.question)
        return {
            "correct": correct,
            "answered": float(rollout.error is None and rollout.answer is not None),
            "calc_calls": float(len(calls)),
            "calc_errors": float(sum(is_refusal(r) for _, r in calls)),
        }

    def leak_terms(self, question: Question) -> Sequence[str]:
        """The gold answers and the problem's own text. An instruction that copies a shown problem
        whole (the 1.5B optimizer's most common miss: "Question: ... Response: ... Correct answer:
        29") teaches that problem's answer, which the answer check alone misses when the answer is
        shorter than three characters (:func:`~inspo.core.proposer.leaked_answer`)."""
        return [*question.answers, question.question]

    def names_problem(self, text: str, question: Question) -> bool:
        """Whether ``text`` spells this problem out (``coevolution.leak_scope: held-out``): every
        number of the problem (its operands) and its answer, all as whole numbers in ``text``. A
        bare number is no name: the answers are small numbers any worked example can hit by
        chance."""
        found = set(re.findall(r"\d+", text))
        operands = set(re.findall(r"\d+", question.question))
        return bool(operands) and operands <= found and any(a in found for a in question.answers)

    def feedback(self, rollout: Rollout) -> str:
        gold = " | ".join(rollout.question.answers)
        if rollout.error:
            return (
                f"The episode failed with an error ({rollout.error}). The correct answer is {gold}."
            )
        calls = self._calls(rollout)
        refused = [(expr, result) for expr, result in calls if is_refusal(result)]
        used = f"called <calc> {len(calls)} time(s)" if calls else "never called <calc>"
        if refused:
            expr = " ".join(refused[0][0].split())
            used += (
                f", {len(refused)} refused (the first, <calc> {expr[:60]} </calc>, got "
                f"{refused[0][1][:120]!r})"
            )
        if rollout.answer is None:
            return (
                f"No <answer>...</answer> was given (the agent {used}; stopped: "
                f"{rollout.finish_reason}). The correct answer is {gold}."
            )
        if numeric_reward(rollout.answer, rollout.question) >= 1.0:
            verdict = "Correct."
        elif parse_number(rollout.answer) is None:
            verdict = "Wrong: the answer holds no number."
        else:
            verdict = "Wrong."
        return (
            f"{verdict} The agent {used} and answered {rollout.answer!r}; the correct answer is "
            f"{gold}."
        )


def load_environment(**options: Any) -> CalculatorEnv:
    """The calculator environment from the ``env:`` section's settings
    (:class:`CalculatorOptions`)."""
    return CalculatorEnv(options_from(options))


__all__ = [
    "ANSWER_NOT_A_NUMBER",
    "CALCULATOR_INSTRUCTION",
    "CALCULATOR_PROTOCOL",
    "CALC_REFUSED",
    "NAME",
    "NAMED_INSTRUCTIONS",
    "NOTOOL_INSTRUCTION",
    "RULES",
    "WEAK_INSTRUCTION",
    "WORKED_INSTRUCTION",
    "CalculatorEnv",
    "CalculatorOptions",
    "calc_tool",
    "detect_failure_modes",
    "load_environment",
    "numeric_reward",
    "options_from",
]
