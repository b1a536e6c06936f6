"""A tool's JSON schema, as chat templates take it (``tokenizer.apply_chat_template(tools=[...])``).

Native tool calls (:mod:`inspo.envs.native`) show the policy each tool's schema through its chat
template, in the OpenAI function format TRL and transformers use::

    {"type": "function", "function": {"name": ..., "description": ...,
                                      "parameters": {"type": "object", "properties": {...},
                                                     "required": [...]}}}

Rules (pure, no heavy imports):

- the description is the tool's (its docstring's first paragraph); each parameter's description
  comes from the docstring's Google-style ``Args:`` section (``name: text`` or ``name (type):
  text``, continuation lines indented deeper), and is left out when the docstring has none;
- annotations map as :mod:`inspo.envs.tools` reads them: ``str`` string, ``int`` integer,
  ``float`` number, ``bool`` boolean, ``list``/``list[X]`` array (of X's schema),
  ``dict``/``dict[str, X]`` object (values X), ``Literal[...]`` an ``enum`` of its values (typed
  when they share a type), ``Optional[X]`` X's schema with ``"nullable": true``;
- a parameter with a default is left out of ``required`` (its default is given as ``default`` when
  JSON can write it); a batched tool's one parameter is a string (one call's text).
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from typing import Any

from inspo.envs.tools import Tool, _optional

_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^(\s*)(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def kind_schema(kind: Any) -> dict[str, Any]:
    """The JSON schema of a parameter annotated ``kind`` (rules in the module docstring)."""
    if kind in _JSON_TYPES:
        return {"type": _JSON_TYPES[kind]}
    inner, origin, args = _optional(kind), typing.get_origin(kind), typing.get_args(kind)
    if inner is not None:
        return {**kind_schema(inner), "nullable": True}
    if origin is typing.Literal:
        types_ = {_JSON_TYPES.get(type(a)) for a in args}
        typed = {"type": types_.pop()} if len(types_) == 1 and None not in types_ else {}
        return {**typed, "enum": list(args)}
    if kind is list or origin is list:
        return {"type": "array", **({"items": kind_schema(args[0])} if args else {})}
    if kind is dict or origin is dict:
        return {
            "type": "object",
            **({"additionalProperties": kind_schema(args[1])} if args else {}),
        }
    return {"type": "string"}


def arg_descriptions(fn: Any) -> dict[str, str]:
    """``{parameter: description}`` from the Google-style ``Args:`` section of ``fn``'s docstring
    (empty when it has none)."""
    lines = (inspect.getdoc(fn) or "").splitlines()
    out: dict[str, str] = {}
    inside, indent, current = False, None, None
    for line in lines:
        if _ARGS_HEADER.match(line):
            inside, indent, current = True, None, None
            continue
        if not inside:
            continue
        if not line.strip():
            current = None
            continue
        match = _ARG_LINE.match(line)
        depth = len(line) - len(line.lstrip())
        if match and (indent is None or depth == indent):
            indent, current = depth, match.group(2)
            out[current] = match.group(3).strip()
        elif current is not None and indent is not None and depth > indent:
            out[current] = f"{out[current]} {line.strip()}".strip()
        elif indent is not None and depth < indent or line.rstrip().endswith(":"):
            inside = False  # the next section (Returns:, Raises:) or the end of Args
    return out


def tool_schema(tool: Tool) -> dict[str, Any]:
    """The chat template's schema of ``tool`` (rules in the module docstring)."""
    described = arg_descriptions(tool.fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in tool.params:
        schema = {"type": "string"} if tool.batched else kind_schema(param.kind)
        if param.name in described and described[param.name]:
            schema["description"] = described[param.name]
        if param.required:
            required.append(param.name)
        elif _json_writable(param.default):
            schema["default"] = param.default
        properties[param.name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
    }


def _json_writable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


__all__ = ["arg_descriptions", "kind_schema", "tool_schema"]
