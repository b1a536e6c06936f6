"""The calculator agent: multi-step arithmetic word problems, a safe ``calc`` tool whose results
come in ``<result>``, an exact numeric reward on ``<answer>`` (DESIGN.md's setting where the
instruction decides tool use).

- :mod:`.arith`: the calculator (its grammar is a knob of the benchmark) and reading a number from
  an answer;
- :mod:`.data`: the seeded word-problem generator, its splits and :func:`write_splits`;
- :mod:`.env`: :class:`CalculatorEnv`, its ``env:`` settings (:class:`CalculatorOptions`), the
  named seed instructions and the rule-based reflector's rules; :func:`load_environment` is the
  factory ``env.name: calculator`` names.
"""

from inspo.envs.calculator.arith import (
    CalcError,
    calculate,
    evaluate_expression,
    format_number,
    parse_number,
    same_number,
)
from inspo.envs.calculator.data import ProblemSpec, generate_problems, write_splits
from inspo.envs.calculator.env import (
    NAME,
    NAMED_INSTRUCTIONS,
    CalculatorEnv,
    CalculatorOptions,
    load_environment,
    options_from,
)

__all__ = [
    "NAME",
    "NAMED_INSTRUCTIONS",
    "CalcError",
    "CalculatorEnv",
    "CalculatorOptions",
    "ProblemSpec",
    "calculate",
    "evaluate_expression",
    "format_number",
    "generate_problems",
    "load_environment",
    "options_from",
    "parse_number",
    "same_number",
    "write_splits",
]
