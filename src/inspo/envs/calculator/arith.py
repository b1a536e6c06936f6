"""A calculator that is safe on any text a model writes, and the numbers of final answers.

:func:`evaluate_expression` is the calculator tool's whole grammar (a knob of the benchmark, chosen
on purpose: DESIGN.md's 0.5B policy writes ``<calc> 6 * 23 = 138 </calc>``, and a calculator that
refuses the ``= 138`` is the lever a better instruction can pull). It never uses ``eval``, ``exec``
or sympy: the text is parsed with ``ast.parse(text, mode="eval")`` and the tree is walked against a
whitelist, with exact arithmetic (:class:`fractions.Fraction`, so ``0.1 + 0.2`` is ``0.3``).

Accepted:

- numbers: ASCII decimal integers and decimals (``23``, ``3.5``, ``.5``), scientific notation
  (``1e3``) and thousands separators in strict groups of three (``1,932`` is 1932; ``1,2`` is
  refused, since a comma means nothing else here);
- unary ``+`` and ``-``; binary ``+ - * /``; parentheses, at most :data:`MAX_DEPTH` levels deep;
- spaces and newlines anywhere (every run of whitespace reads as one space);
- with ``accept_equals=True`` only: ``expression = anything``; the part after the first ``=`` is
  ignored (``6 * 23 = 138`` is 138, ``6 * 23 = 1`` too). By default an ``=`` is refused.

Refused, each with a short observation that starts with :data:`ERROR_PREFIX` and says what calc
takes (:class:`CalcError`, a :class:`~inspo.envs.tools.ToolInputError`, so the loop shows it to
the policy as the tool's result):

- any character outside ``0-9 + - * / ( ) . , e E`` and whitespace (so ``=`` too, unless accepted):
  names, attributes, calls, subscripts, strings, lambdas, comprehensions, ``%``, ``_`` in numbers,
  non-ASCII digits (``١٢٣``, fullwidth ``１２``);
- well-formed Python that is not in the grammar: ``**`` (no powers: ``9**9**9`` never runs),
  ``//``, comparisons, tuples, ``e`` alone, booleans, complex numbers;
- more than :data:`MAX_CHARS` characters (checked first: a 1 MB text never reaches the parser);
- parentheses nested more than :data:`MAX_DEPTH` deep (counted before parsing: the parser itself
  can exhaust the recursion on deep nesting);
- a number, or any intermediate result, whose absolute value is over :data:`MAX_ABS` (also
  ``inf``/``nan``, e.g. ``1e999`` or ``(1e308)*10``); division by zero.

Results (:func:`format_number`): an integer when the value is integral (``138``), else the value
rounded to :data:`DECIMALS` places (half to even), trailing zeros dropped (``7/2`` is ``3.5``,
``1/3`` is ``0.3333333333``; a value below 5e-11 in size prints as ``0``). Each call is bounded by
the caps above (microseconds; no timeout needed, the tool keeps the default one all the same).

Final answers (:func:`parse_number`, :func:`same_number`): the FIRST number in the text, with an
optional sign and ``$``, thousands separators and a decimal part (``1,932``, ``1932.0``, ``$1932``
and ``1932 apples`` all read 1932; ``6 * 23 = 138`` reads 6). Fractions such as ``3/4`` read their
numerator, scientific notation its mantissa; ASCII digits only. Values compare exactly.
"""

from __future__ import annotations

import ast
import operator
import re
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

from inspo.envs.tools import ToolInputError

#: Longest expression calc reads, in characters (checked before anything else).
MAX_CHARS = 200
#: Deepest nesting of parentheses calc reads (checked before parsing).
MAX_DEPTH = 10
#: Largest absolute value of any number or intermediate result.
MAX_ABS = 10**15
#: Decimal places of a non-integral result.
DECIMALS = 10
#: How every refusal starts, so metrics and people can tell a refusal from a value.
ERROR_PREFIX = "error: "
#: What calc takes, in the words every grammar refusal uses.
USAGE = "calc takes one expression of numbers and + - * / ( ), e.g. 6 * 23"

_ALLOWED = frozenset("0123456789+-*/().,eE ")
_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,])")
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}
_ANSWER_NUMBER = re.compile(
    r"([-+]?)\s*\$?\s*(?<![.0-9])([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(\.[0-9]+)?(?![0-9])"
)


class CalcError(ToolInputError):
    """calc refused its input; the message (starting with :data:`ERROR_PREFIX`) is the
    observation."""


def _short(text: str, n: int = 40) -> str:
    return repr(text if len(text) <= n else text[:n] + "...")


def _refuse(text: str) -> CalcError:
    return CalcError(f"{ERROR_PREFIX}{USAGE}; got {_short(text)}")


def _depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def _too_large() -> CalcError:
    return CalcError(f"{ERROR_PREFIX}a number is too large (calc works up to 1e15 in size)")


def _bounded(value: Fraction) -> Fraction:
    if abs(value) > MAX_ABS:
        raise _too_large()
    return value


def evaluate_expression(text: str, *, accept_equals: bool = False) -> Fraction:
    """The exact value of the arithmetic expression ``text``; :class:`CalcError` when calc refuses
    it (the grammar and the caps are in the module docstring)."""
    if not isinstance(text, str):
        raise CalcError(f"{ERROR_PREFIX}{USAGE}; got {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise CalcError(
            f"{ERROR_PREFIX}the expression is too long ({len(text)} characters; calc takes at most "
            f"{MAX_CHARS})"
        )
    given = text
    if accept_equals:
        text = text.split("=", 1)[0]
    text = " ".join(text.split())
    if not text or not set(text) <= _ALLOWED:
        raise _refuse(given.strip())
    if _depth(text) > MAX_DEPTH:
        raise CalcError(
            f"{ERROR_PREFIX}too many nested parentheses (calc takes at most {MAX_DEPTH} levels)"
        )
    text = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), text)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _refuse(given.strip()) from None
    try:
        return _value(tree.body, given.strip())
    except ZeroDivisionError:
        raise CalcError(f"{ERROR_PREFIX}division by zero") from None


def _value(node: ast.AST, given: str) -> Fraction:
    """The value of one node of the whitelisted grammar (anything else is refused)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        number = node.value
        if isinstance(number, float) and not abs(number) <= MAX_ABS:  # also inf and nan
            raise _too_large()
        return _bounded(Fraction(repr(number)) if isinstance(number, float) else Fraction(number))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = _value(node.operand, given)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _bounded(_BINARY[type(node.op)](_value(node.left, given), _value(node.right, given)))
    raise _refuse(given)


def format_number(value: Fraction) -> str:
    """``value`` as calc prints it: an integer when integral, else :data:`DECIMALS` places at
    most."""
    if value.denominator == 1:
        return str(value.numerator)
    context = Context(prec=60, rounding=ROUND_HALF_EVEN)
    decimal = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    rounded = decimal.quantize(Decimal(1).scaleb(-DECIMALS), context=context)
    if rounded.is_zero():
        return "0"
    return format(rounded.normalize(context), "f")


def calculate(text: str, *, accept_equals: bool = False) -> str:
    """What calc answers to ``text``: the formatted value, or the refusal message (never raises)."""
    try:
        return format_number(evaluate_expression(text, accept_equals=accept_equals))
    except CalcError as exc:
        return str(exc)


def is_refusal(result: str) -> bool:
    """Whether a calc result is a refusal rather than a value."""
    return result.strip().startswith(ERROR_PREFIX.strip())


def parse_number(text: str) -> Fraction | None:
    """The first number in ``text`` (rules in the module docstring); None when there is none."""
    if not isinstance(text, str):
        return None
    match = _ANSWER_NUMBER.search(text)
    if match is None:
        return None
    sign, whole, fraction = match.groups()
    # through Decimal: Fraction(str) of more than 4,300 digits raises (Python's int-from-text
    # limit), and a reward must never raise on what a policy writes
    value = Fraction(Decimal(whole.replace(",", "") + (fraction or "")))
    return -value if sign == "-" else value


def same_number(answer: str, gold: str) -> bool:
    """Whether ``answer``'s first number equals ``gold``'s, exactly (``1,932`` == ``1932.0``)."""
    a, g = parse_number(answer), parse_number(gold)
    return a is not None and g is not None and a == g


__all__ = [
    "DECIMALS",
    "ERROR_PREFIX",
    "MAX_ABS",
    "MAX_CHARS",
    "MAX_DEPTH",
    "USAGE",
    "CalcError",
    "calculate",
    "evaluate_expression",
    "format_number",
    "is_refusal",
    "parse_number",
    "same_number",
]
