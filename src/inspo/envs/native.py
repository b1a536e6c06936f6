"""Native tool calls: the model's own tool-call format instead of tags (:class:`NativeToolEnv`).

A :class:`~inspo.envs.tagged.TaggedToolEnv` teaches the policy its tools in the instruction
(``<calc> ... </calc>``). A :class:`NativeToolEnv` gives the tools' JSON schemas to the policy's
chat template (``apply_chat_template(messages, tools=[...])``: the template writes them into its
system prompt), and the policy calls a tool the way it was trained to, in the Hermes format that
Qwen2.5, Qwen3 and Hermes models write::

    <tool_call>
    {"name": "convert", "arguments": {"value": 3, "unit": "km"}}
    </tool_call>

The result comes back framed exactly as the template frames a ``tool`` message (for Qwen2.5: the
assistant message closes, a ``user`` turn holds ``<tool_response>\\n...\\n</tool_response>``, and
a new assistant turn opens). The evolved instruction then carries strategy, not syntax; the final
answer is still ``<answer> ... </answer>`` (the reward reads it as for tags).

Rules:

- :meth:`NativeToolEnv.parse` takes the FIRST complete ``<tool_call>…</tool_call>`` or
  ``<answer>…</answer>`` of a turn. A tool call's content must be a JSON object with a string
  ``name`` and ``arguments`` (an object, a JSON string of one, or absent for none); anything else
  is an invalid turn (the corrective message follows). The arguments become the text
  :meth:`~inspo.envs.tools.Tool.arguments` reads: a tool of one parameter gets that parameter's
  value (from an object of exactly one key, whatever its name: small models misname it), any
  other tool the object as JSON;
- the framing (:class:`ToolCallFormat`) is read from the engine's chat template when the loop
  binds the environment to it (:meth:`NativeToolEnv.bind_engine`, before every play): a template
  that does not write ``<tool_call>`` or cannot render a tool message is refused with a message.
  Until bound, the environment frames as Qwen2.5's ChatML template does (:data:`QWEN_FORMAT`);
- the engine must render chat templates with tools: transformers and vLLM engines do, and an
  OpenAIEngine given the served model's tokenizer; an engine without one is refused when bound;
- the environment's text is read back from a decoded response with or without the template's
  special tokens (responses are decoded with them skipped), so :meth:`~TaggedToolEnv.answer`,
  :meth:`~TaggedToolEnv.split_turns` and the observations work on both;
- the protocol block (``coevolution.protocol_block``) names the answer tag only; the guard keeps
  ``<answer>`` (``required_tags``); the invalid turn and the nudge continue the assistant's message,
  as for tags.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inspo.envs.base import Action
from inspo.envs.tagged import TaggedToolEnv, tagged_rules
from inspo.envs.tool_schema import tool_schema
from inspo.envs.tools import Tool
from inspo.records import ToolCall
from inspo.tool_protocol import ToolProtocol

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
_SENTINEL = "\x00inspo-result\x00"
_PROBE_TOOL = "inspo_probe"


@dataclass(frozen=True)
class ToolCallFormat:
    """How a chat template frames a tool's result: the text between the policy's
    ``</tool_call>`` and the result, and the text after the result up to the policy's next turn;
    each also as a decoded response shows it (special tokens skipped)."""

    after_call: str
    after_result: str
    shown_after_call: str
    shown_after_result: str
    source: str = ""

    def block_pattern(self) -> str:
        """A regex of one framed result (its text the one group), raw or as decoded."""

        def either(raw: str, shown: str) -> str:
            return f"(?:{re.escape(raw)}|{re.escape(shown)})" if shown != raw else re.escape(raw)

        return (
            either(self.after_call, self.shown_after_call)
            + "(.*?)"
            + either(self.after_result, self.shown_after_result)
        )


#: Qwen2.5's ChatML framing, the default until the environment is bound to an engine.
QWEN_FORMAT = ToolCallFormat(
    after_call="<|im_end|>\n<|im_start|>user\n<tool_response>\n",
    after_result="\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    shown_after_call="\nuser\n<tool_response>\n",
    shown_after_result="\n</tool_response>\nassistant\n",
    source="Qwen2.5 ChatML (the default until bound to an engine)",
)


def probe_format(
    render: Callable[[list[dict[str, Any]], bool], str],
    shown: Callable[[str], str],
    *,
    source: str = "",
) -> ToolCallFormat:
    """The framing a chat template writes around a tool's result. ``render(messages,
    add_generation_prompt)`` is the template, ``shown(text)`` the text as a decoded response shows
    it; ValueError (saying why) when the template does not write ``<tool_call>`` or renders a tool
    message other than after the call."""
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": _PROBE_TOOL, "arguments": {}}}],
    }
    asked = [{"role": "user", "content": "probe"}, call]
    result = {"role": "tool", "name": _PROBE_TOOL, "content": _SENTINEL}
    why = ""
    try:
        before, after = render(asked, False), render([*asked, result], True)
    except Exception as exc:  # noqa: BLE001 - the template's own error, named in the message
        before, after, why = "", "", f"it raised {type(exc).__name__}: {exc}"
    if not why and CALL_CLOSE not in before:
        why = f"it does not write tool calls as {CALL_OPEN}...{CALL_CLOSE} (the Hermes format)"
    elif not why and (not after.startswith(before) or after.count(_SENTINEL) != 1):
        why = "its tool message is not rendered after the assistant's call"
    if why:
        raise ValueError(
            f"native tool calls: the policy's chat template ({source or 'unnamed'}) cannot frame "
            f"tool results: {why}. Use a model whose template takes tools (Qwen2.5, Qwen3, Hermes) "
            "or inspo.envs.TaggedToolEnv, which needs no template"
        )
    head, tail = after[len(before) :].split(_SENTINEL)
    after_call = before[before.rindex(CALL_CLOSE) + len(CALL_CLOSE) :] + head
    return ToolCallFormat(
        after_call=after_call,
        after_result=tail,
        shown_after_call=shown(after_call),
        shown_after_result=shown(tail),
        source=source,
    )


def default_native_invalid(answer_tag: str) -> str:
    return (
        f"\nMy previous action is invalid. To use a tool I should write {CALL_OPEN} with a JSON "
        f'object {{"name": ..., "arguments": {{...}}}} and {CALL_CLOSE}. If I want to give the '
        f"final answer, I should put the answer between <{answer_tag}> and </{answer_tag}>. Let me "
        "try again.\n"
    )


def native_protocol(answer_tag: str = "answer") -> ToolProtocol:
    """The protocol block of a native environment: the tools are in the system prompt already, so
    it says how to call them and where the answer goes."""
    block = (
        f"Call a tool by writing {CALL_OPEN} with its name and arguments as the tools list shows; "
        f"its result comes back to you. Give the final answer between <{answer_tag}> and "
        f"</{answer_tag}>."
    )
    return ToolProtocol(tags=(answer_tag,), block=block)


class NativeToolEnv(TaggedToolEnv):
    """An environment whose policy calls tools in its own chat template's format (rules in the
    module docstring). Arguments as :class:`~inspo.envs.tagged.TaggedToolEnv`'s, without
    ``result_tag`` (the template frames results); ``required_tags`` default to the answer's."""

    def __init__(
        self,
        *,
        name: str,
        tools: Sequence[Any] | Mapping[str, Any],
        seed_instruction: str,
        answer_tag: str = "answer",
        invalid_message: str | None = None,
        required_tags: Sequence[str] | None = None,
        protocol: ToolProtocol | None = None,
        **rest: Any,
    ) -> None:
        if "result_tag" in rest:
            raise ValueError(
                f"environment {name!r}: NativeToolEnv takes no result_tag (the chat template "
                "frames results); use TaggedToolEnv for tag results"
            )
        super().__init__(
            name=name,
            tools=tools,
            seed_instruction=seed_instruction,
            result_tag="tool_response",
            answer_tag=answer_tag,
            required_tags=required_tags if required_tags is not None else (answer_tag,),
            invalid_message=invalid_message
            if invalid_message is not None
            else default_native_invalid(answer_tag),
            protocol=protocol or native_protocol(answer_tag),
            reflector_rules=rest.pop("reflector_rules", None)
            or tagged_rules(["tool_call"], answer_tag),
            **rest,
        )
        self.stop = (CALL_CLOSE, f"</{answer_tag}>")
        a = re.escape(answer_tag)
        self._action = re.compile(rf"<(tool_call|{a})>(.*?)</\1>", re.DOTALL)
        self.bound_format(QWEN_FORMAT)

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools' JSON schemas for the chat template's ``tools=`` (named as the policy calls
        them)."""
        out = []
        for name, made in self.tools.items():
            schema = tool_schema(made)
            schema["function"]["name"] = name
            out.append(schema)
        return out

    # ----------------------------------------------------------------------- the template's framing
    def bind_engine(self, engine: Any) -> None:
        """Read the framing from ``engine``'s chat template (the loop calls this before a play)."""
        tokenizer = getattr(engine, "tokenizer", None)
        if tokenizer is not None and tokenizer is getattr(self, "_bound_tokenizer", None):
            return  # read from this template already (the loop binds before every play)
        if tokenizer is None or not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"environment {self.name!r} uses native tool calls, which need a policy engine "
                "whose tokenizer has a chat template that takes tools (transformers, vLLM, or an "
                f"OpenAIEngine given the served model's tokenizer); {type(engine).__name__} has "
                "none. Use TaggedToolEnv for this engine"
            )
        schemas = self.tool_schemas

        def render(messages: list[dict[str, Any]], generation: bool) -> str:
            return tokenizer.apply_chat_template(
                messages, tools=schemas, tokenize=False, add_generation_prompt=generation
            )

        source = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        self.bound_format(
            probe_format(
                render, lambda text: engine.decode(engine.encode(text)), source=str(source)
            )
        )
        self._bound_tokenizer = tokenizer

    def bound_format(self, fmt: ToolCallFormat) -> None:
        """Frame results as ``fmt`` does, and read them back from responses that way."""
        self.format = fmt
        self._bound_tokenizer = None
        self.read_results(fmt.block_pattern())

    # ----------------------------------------------------------------------- turns
    def call_of(self, tag: str, content: str) -> Action:
        """A ``<tool_call>``'s JSON as the call it names (None: not such a JSON object)."""
        try:
            data = json.loads(content)
        except ValueError:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return None
        name = data["name"]
        return ToolCall(name, call_text(self.tools.get(name), data.get("arguments", {})))

    def observe(self, call: ToolCall, result: str) -> str:
        return f"{self.format.after_call}{result.strip()}{self.format.after_result}"

    def closing(self, call: ToolCall) -> str:
        return self.format.after_result

    def result_of(self, call: ToolCall, observation: str) -> str:
        match = self._results.search(observation)
        return match.group(1).strip() if match else ""


def call_text(made: Tool | None, arguments: Any) -> str:
    """The text :meth:`~inspo.envs.tools.Tool.arguments` reads for a native call's ``arguments``
    (rules in the module docstring); an unknown tool gets the arguments as JSON."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    if arguments is None:
        arguments = {}
    single = made is not None and (made.batched or len(made.params) == 1)
    if single and isinstance(arguments, dict) and len(arguments) <= 1:
        if not arguments:
            return ""
        value = next(iter(arguments.values()))
        return value if isinstance(value, str) else json.dumps(value)
    if made is not None and not made.params and arguments == {}:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


__all__ = [
    "QWEN_FORMAT",
    "NativeToolEnv",
    "ToolCallFormat",
    "call_text",
    "native_protocol",
    "probe_format",
]
