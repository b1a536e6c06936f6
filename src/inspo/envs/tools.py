"""Tools: plain typed Python functions with a docstring (TRL's convention), called by text.

A policy calls a tool by writing its arguments as text (``<calc> 3 * (4 + 5) </calc>``); the
environment parses the turn (:meth:`~inspo.envs.base.Environment.parse`) and the loop runs the
call here. :func:`tool` wraps a function (or a batched one) in a :class:`Tool`.

How the text becomes arguments (:meth:`Tool.arguments`):

- a function of one parameter gets the text, stripped, converted to the parameter's annotation
  (``str``, ``int``, ``float`` or ``bool``; ``list``/``list[int]`` and ``dict`` from JSON;
  ``Literal[...]`` one of its values; ``Optional[X]`` X or ``null``; no annotation: ``str``;
  anything else is refused when the tool is made, never read as text in silence);
- a function of several parameters gets a JSON object of them (``{"a": 2, "b": 3}``), each value
  converted the same way; a parameter with a default may be left out (so may the one parameter's
  text, when it has a default);
- an ``async def`` tool is awaited (in its call's thread, on an event loop of its own);
- text that does not convert is the policy's mistake, not the tool's: the policy gets a short
  message back as the tool's result (:class:`ToolInputError`), saying what the tool takes.

Rules of a call (:func:`run_calls`):

- a tool that raises :class:`ToolInputError` answers with its message (the policy reads it), as a
  :class:`Refusal` (a ``str``), so the loop counts the calls a tool refused (``n_tool_errors``);
- a tool that raises anything else, or runs past ``timeout_s``, fails that call
  (:class:`ToolFailed`): the loop makes the episode an error rollout, counted apart and never
  scored. A call past its timeout is abandoned in a daemon thread (Python cannot stop a thread):
  a tool that may hang should bound itself;
- an :class:`~inspo.records.EndpointDown` (a server the tool needs did not answer) propagates:
  the whole batch fails with it, as for every outage;
- a ``batched`` tool takes every call of one turn at once (``fn(list[str]) -> list[str]``, one
  result per call, in order), as a retriever does; when the batch raises (anything but an
  outage or the timeout), each call is run again on its own, so only the calls that still raise
  fail (one bad query does not fail the episodes it shared a batch with);
- results are ``str(result)`` cut to ``max_result_chars`` characters (the loop then caps the
  observation at ``rl.max_obs_tokens`` tokens): a tool that floods cannot stall tokenisation.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import threading
import time
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.records import EndpointDown

log = logging.getLogger("inspo.envs")

#: Default seconds a tool call may take.
DEFAULT_TIMEOUT_S = 30.0
#: Default cap on a result's characters, before the loop's cap in tokens.
DEFAULT_MAX_RESULT_CHARS = 20_000
_SIMPLE = {str: "text", int: "an integer", float: "a number", bool: "true or false"}


class ToolInputError(ValueError):
    """The policy's input does not fit the tool: its message is the tool's result."""


class Refusal(str):
    """A tool's answer to input it refuses (:class:`ToolInputError`'s message): the observation
    text the policy reads, marked so that the loop can count refused calls."""


class ToolFailed(RuntimeError):
    """A tool raised, or ran past its timeout: the episode becomes an error rollout."""


_NO_DEFAULT = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    name: str
    kind: Any
    """``str``, ``int``, ``float``, ``bool``, ``list`` or ``dict``, a ``list[X]``/``dict[str, X]``,
    a ``Literal[...]`` or an ``Optional[X]`` of these."""
    default: Any = _NO_DEFAULT

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT


def describe(kind: Any) -> str:
    """What a parameter of annotation ``kind`` takes, in words."""
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is typing.Literal:
        return "one of " + ", ".join(json.dumps(a) for a in args)
    if _optional(kind) is not None:
        return f"{describe(_optional(kind))} or null"
    if kind is list or origin is list:
        return "a JSON list" + (f" of {describe(args[0])}" if args else "")
    if kind is dict or origin is dict:
        return "a JSON object"
    return "text"


def _optional(kind: Any) -> Any:
    """X for ``Optional[X]`` (``X | None``), else None."""
    args = typing.get_args(kind)
    if (
        typing.get_origin(kind) in (typing.Union, types.UnionType)
        and len(args) == 2
        and type(None) in args
    ):
        return next(a for a in args if a is not type(None))
    return None


def _supported(kind: Any) -> bool:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind in _SIMPLE or kind in (list, dict):
        return True
    if origin is typing.Literal:
        return all(isinstance(a, (str, int, float, bool)) for a in args)
    if _optional(kind) is not None:
        return _supported(_optional(kind))
    if origin is list:
        return len(args) == 1 and _supported(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and _supported(args[1])
    return False


@dataclass(frozen=True)
class Tool:
    """A tool the policy calls by name (rules in the module docstring)."""

    name: str
    fn: Callable[..., Any]
    description: str = ""
    """What the tool does (the docstring's first paragraph)."""
    batched: bool = False
    """``fn`` takes every call of a turn as a list of texts and returns one result each."""
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    """Seconds one call (or one batch) may take; None: no limit, run in the calling thread."""
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    params: tuple[Param, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(
                f"tool name {self.name!r} must be letters, digits, '_' or '-' (it becomes a tag)"
            )
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(
                f"tool {self.name!r}: timeout_s must be > 0 seconds or None, got {self.timeout_s!r}"
            )
        if self.max_result_chars < 1:
            raise ValueError(
                f"tool {self.name!r}: max_result_chars must be >= 1, got {self.max_result_chars!r}"
            )

    def usage(self) -> str:
        """What the tool takes, in words (for the messages of :class:`ToolInputError`)."""
        if self.batched or len(self.params) <= 1:
            kind = describe(self.params[0].kind) if self.params else "nothing"
            optional = (
                " (or nothing)"
                if self.params and not self.params[0].required and not self.batched
                else ""
            )
            return f"{self.name} takes {kind}{optional}"
        fields_ = ", ".join(
            f'"{p.name}": {describe(p.kind)}{"" if p.required else " (optional)"}'
            for p in self.params
        )
        return f"{self.name} takes a JSON object {{{fields_}}}"

    def arguments(self, text: str) -> tuple[list[Any], dict[str, Any]]:
        """The call's arguments from the policy's text (module docstring); ToolInputError if they do
        not fit."""
        text = text.strip()
        if not self.params:
            return [], {}
        if not text and not any(p.required for p in self.params):
            return [], {}  # every parameter has a default
        if len(self.params) == 1:
            return [_convert(text, self.params[0], self)], {}
        try:
            data = json.loads(text)
        except ValueError:
            raise ToolInputError(f"{self.usage()}; got {_short(text)}") from None
        if not isinstance(data, dict):
            raise ToolInputError(f"{self.usage()}; got {_short(text)}")
        names = {p.name for p in self.params}
        required = {p.name for p in self.params if p.required}
        if not required <= set(data) <= names:
            raise ToolInputError(f"{self.usage()}; got the keys {sorted(data)}")
        return [], {p.name: _convert(data[p.name], p, self) for p in self.params if p.name in data}

    def result_text(self, value: Any) -> str:
        text = "" if value is None else str(value)
        return text[: self.max_result_chars]


def _short(text: str, n: int = 60) -> str:
    return repr(text if len(text) <= n else text[:n] + "...")


def _convert(value: Any, param: Param, tool: Tool) -> Any:
    try:
        return _as(value, param.kind)
    except (TypeError, ValueError):
        raise ToolInputError(f"{tool.usage()}; {param.name} got {_short(str(value))}") from None


def _as(value: Any, kind: Any) -> Any:
    """``value`` (text, or a JSON value) as annotation ``kind``; ValueError or TypeError when it
    is not one."""
    if kind is str:
        return value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str):
        value = value.strip()
    inner, origin, args = _optional(kind), typing.get_origin(kind), typing.get_args(kind)
    if inner is not None:
        return None if value is None or value == "null" else _as(value, inner)
    if origin is typing.Literal:
        for choice in args:
            with contextlib.suppress(TypeError, ValueError):
                if _scalar(value, type(choice)) == choice:
                    return choice
        raise ValueError(value)
    if kind in (list, dict) or origin in (list, dict):
        if isinstance(value, str):
            value = json.loads(value)
        want = list if (kind is list or origin is list) else dict
        if not isinstance(value, want):
            raise ValueError
        if args and want is list:
            return [_as(v, args[0]) for v in value]
        if args:
            return {str(k): _as(v, args[1]) for k, v in value.items()}
        return value
    return _scalar(value, kind)


def _scalar(value: Any, kind: Any) -> Any:
    try:
        if kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
    except (TypeError, ValueError):
        raise ValueError(value) from None
    return value


def _params(fn: Callable[..., Any], name: str, batched: bool) -> tuple[Param, ...]:
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # noqa: BLE001 - named in the message: a hint read as text in silence misleads
        raise ValueError(
            f"tool {name!r}: its annotations do not resolve ({type(exc).__name__}: {exc}); import "
            "the names they use at the top of the tool's module"
        ) from exc
    params = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ValueError(
                f"tool {name!r}: *args and **kwargs cannot be called by text; name each parameter"
            )
        kind = hints.get(p.name, str)
        if not batched and not _supported(kind):
            raise ValueError(
                f"tool {name!r}: parameter {p.name!r} is annotated {kind!r}, which a text call "
                "cannot give; use str, int, float, bool, list, dict, Literal[...] or Optional[...] "
                "of these"
            )
        params.append(Param(p.name, kind if _supported(kind) else str, p.default))
    if batched and len(params) != 1:
        raise ValueError(
            f"batched tool {name!r} must take one parameter (the list of the turn's call texts)"
        )
    return tuple(params)


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    batched: bool = False,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> Any:
    """A :class:`Tool` from a typed function with a docstring; usable as ``@tool`` or
    ``@tool(...)``.

    ``name`` defaults to the function's name (the policy writes ``<name> ... </name>``). Raises
    ValueError for a function without a docstring (it says what the tool does: TRL's convention)
    or with ``*args``/``**kwargs``.
    """

    def wrap(f: Callable[..., Any]) -> Tool:
        tool_name = name or getattr(f, "__name__", "")
        return Tool(
            tool_name,
            f,
            description=_description(f, tool_name),
            batched=batched,
            timeout_s=timeout_s,
            max_result_chars=max_result_chars,
            params=_params(f, tool_name, batched),
        )

    return wrap(fn) if fn is not None else wrap


def method_tool(
    fn: Callable[..., Any], name: str, *, timeout_s: float | None = DEFAULT_TIMEOUT_S
) -> Tool:
    """A :class:`Tool` for method ``fn`` of a state class (:mod:`inspo.envs.state`): its parameters
    without ``self``; ``fn`` is replaced by the bound method of each episode's instance."""
    description = _description(fn, name)
    return Tool(
        name, fn, description=description, timeout_s=timeout_s, params=_params(fn, name, False)[1:]
    )


def _description(fn: Callable[..., Any], name: str) -> str:
    """The first paragraph of ``fn``'s docstring; ValueError when it has none."""
    doc = inspect.getdoc(fn) or ""
    if not doc.strip():
        raise ValueError(
            f"tool {name!r} has no docstring: write what it does and what it takes "
            "(TRL's convention for tools; inspo shows it to people)"
        )
    return doc.split("\n\n")[0].strip()


def as_tool(obj: Any) -> Tool:
    """``obj`` as a :class:`Tool`: a Tool as it is, a function through :func:`tool`."""
    if isinstance(obj, Tool):
        return obj
    if callable(obj):
        return tool(obj)
    raise TypeError(
        f"{obj!r} is not a tool: pass a typed function with a docstring or an inspo.envs.Tool"
    )


def awaited(value: Any) -> Any:
    """``value``, or what it resolves to when an ``async def`` tool returned an awaitable: run on an
    event loop of its own (in a fresh thread when this one already runs a loop)."""
    if not inspect.isawaitable(value):
        return value

    async def wait() -> Any:
        return await value

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(wait())
        except BaseException as exc:  # noqa: BLE001 - handed back below
            box["error"] = exc

    thread = threading.Thread(target=run, name="inspo-async-tool")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _timed(work: Callable[[], Any], seconds: float | None, what: str) -> Callable[[], Any]:
    """Start ``work`` (in a daemon thread when ``seconds`` is set); the returned function waits
    for its value (re-raising what it raised) or raises ToolFailed once ``seconds`` have passed."""
    if seconds is None:
        box: dict[str, Any] = {}
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter
            box["error"] = exc
    else:
        box = {}

        def target() -> None:
            try:
                box["value"] = work()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter
                box["error"] = exc

        thread = threading.Thread(target=target, daemon=True, name=f"inspo-{what}")
        deadline = time.monotonic() + seconds
        thread.start()

    def wait() -> Any:
        if seconds is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                raise ToolFailed(f"{what} ran past its timeout of {seconds:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    return wait


def run_calls(tool: Tool, texts: Sequence[str]) -> list[str | ToolFailed]:
    """The results of one turn's calls of ``tool`` (rules in the module docstring): a text for
    each call (a :class:`Refusal` when the tool refused its input), or the :class:`ToolFailed`
    that fails its episode. EndpointDown propagates."""
    if not texts:
        return []
    what = f"tool {tool.name!r}"
    if tool.batched:
        wait = _timed(lambda: awaited(tool.fn([t.strip() for t in texts])), tool.timeout_s, what)
        try:
            values = list(wait())
        except EndpointDown:
            raise
        except ToolFailed as exc:
            return [exc] * len(texts)
        except ToolInputError as exc:
            if len(texts) > 1:  # find the call(s) the tool refused
                return [r for t in texts for r in run_calls(tool, [t])]
            return [Refusal(str(exc))]
        except Exception as exc:  # noqa: BLE001 - a failing tool fails its episodes, counted apart
            if (
                len(texts) > 1
            ):  # isolate the call(s) that fail, as the evaluate seam isolates examples
                return [r for t in texts for r in run_calls(tool, [t])]
            return [_failed(what, exc, set())]
        if len(values) != len(texts):
            failed = ToolFailed(
                f"batched {what} returned {len(values)} results for {len(texts)} calls"
            )
            return [failed] * len(texts)
        return [tool.result_text(v) for v in values]

    def one(text: str) -> Any:
        args, kwargs = tool.arguments(text)
        return awaited(tool.fn(*args, **kwargs))

    waiters = [_timed(lambda t=t: one(t), tool.timeout_s, what) for t in texts]
    out: list[str | ToolFailed] = []
    logged: set[str] = set()
    for wait in waiters:
        try:
            out.append(tool.result_text(wait()))
        except ToolInputError as exc:
            out.append(Refusal(str(exc)))
        except EndpointDown:
            raise
        except ToolFailed as exc:
            out.append(exc)
        except Exception as exc:  # noqa: BLE001 - a failing tool fails its episode, counted apart
            out.append(_failed(what, exc, logged))
    return out


def _failed(what: str, exc: Exception, logged: set[str]) -> ToolFailed:
    """The :class:`ToolFailed` of a tool that raised ``exc``; its traceback goes to the log (once
    per message among the calls of a turn: the rollout keeps the message only)."""
    failed = ToolFailed(f"{what} raised {type(exc).__name__}: {exc}")
    if str(failed) not in logged:
        logged.add(str(failed))
        log.warning("%s (the episode becomes an error rollout)", failed, exc_info=exc)
    return failed
