"""Policy engines: the one seam through which the rollout asks a policy for text.

Rules of :class:`PolicyEngine`:

- ``generate(inputs, *, max_new_tokens, temperature, top_p, stop)`` returns exactly one
  :class:`Generation` per input, in input order. Each input holds the prompt and everything
  generated or inserted so far, both as token ids and as text; an engine uses one or the other.
- Engines that keep token ids (``keeps_token_ids = True``) feed the model EXACTLY
  ``prompt_ids + completion_ids`` (no re-tokenisation) and return the new ids, cut right after
  the first stop string or at the first EOS (the EOS id is kept, it is the policy's action);
  anything the backend produced after that is dropped. Because a token can straddle the end of
  a stop string, the last kept token is the one that completes it (its text may run a few
  characters past the tag). ``text`` is the decode of the kept ids (special tokens skipped).
- ``finish`` is ``"stop"`` (a stop string ended the turn), ``"eos"`` or ``"length"``
  (``max_new_tokens`` reached without either).
- ``temperature == 0`` means greedy decoding.
- ``encode``/``decode`` are the engine's tokenizer (no special tokens added on encode);
  ``encode`` returns ``None`` when the engine has no tokenizer (text-only engines).
- ``prompt_text(messages)`` renders an episode's chat messages (``env.messages(...)``) the way this
  policy expects them: the tokenizer's chat template with the generation prompt added, or the
  messages' contents joined by blank lines when there is no template (base models).

Engines: :class:`HFEngine` (a transformers model, CPU or GPU; accepts a live model object so
TRL can hand over its unwrapped training model), :class:`~inspo.engines.vllm_engine.VLLMEngine`
(a ``vllm.LLM``, token ids end to end; needs the optional ``vllm`` module) and
:class:`~inspo.engines.openai_engine.OpenAIEngine` (a frozen policy behind an OpenAI-compatible
completions endpoint; text only). :func:`inspo.engines.load.load_engine` starts a local one by kind
(``"hf"`` or ``"vllm"``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

log = logging.getLogger("inspo.engines")

Finish = Literal["stop", "eos", "length"]


@dataclass
class GenerationInput:
    """One row to continue: the prompt and the completion so far, as ids and as text."""

    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    seed: int | None = None
    """This row's own sampling seed for the turn (:mod:`inspo.engines.row_seeds`); None: the
    engine's ``rng`` decides."""


@dataclass
class Generation:
    """What the policy produced in one turn (see the module rules for ids, text and finish)."""

    token_ids: list[int]
    text: str
    finish: Finish
    logprobs: list[float] | None = field(default=None)


@runtime_checkable
class PolicyEngine(Protocol):
    """A policy that continues batches of contexts. See the module docstring for the rules."""

    keeps_token_ids: bool

    def prompt_text(self, messages: Sequence[dict[str, str]]) -> str: ...

    # Engines with a chat template also take ``tools=`` (JSON schemas) for native tool calls.

    def encode(self, text: str) -> list[int] | None: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def generate(
        self,
        inputs: list[GenerationInput],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
    ) -> list[Generation]: ...


def trim_generation(
    ids: Sequence[int],
    *,
    stop: Sequence[str],
    eos_ids: set[int],
    pad_id: int | None,
    decode: Callable[[Sequence[int]], str],
) -> tuple[list[int], Finish]:
    """Cut a row of new ids after its first stop string or at its first EOS (EOS kept).

    Trailing ``pad_id`` tokens (what batched generation writes after a row is done) are dropped
    when the pad is not an EOS. The cut point for a stop string is the shortest prefix whose
    decode contains it (binary search: a prefix's decode grows monotonically).
    """
    ids = list(ids)
    finish: Finish = "length"
    for i, tok in enumerate(ids):
        if tok in eos_ids:
            ids, finish = ids[: i + 1], "eos"
            break
    else:
        if pad_id is not None:
            while ids and ids[-1] == pad_id:
                ids.pop()
    body = ids[:-1] if finish == "eos" else ids
    if stop and any(s in decode(body) for s in stop):
        lo, hi = 1, len(body)
        while lo < hi:
            mid = (lo + hi) // 2
            if any(s in decode(body[:mid]) for s in stop):
                hi = mid
            else:
                lo = mid + 1
        return body[:lo], "stop"
    return ids, finish


def render_messages(
    tokenizer: Any,
    messages: Sequence[dict[str, str]],
    tools: Sequence[dict[str, Any]] | None = None,
) -> str:
    """The prompt text of ``messages``: the tokenizer's chat template with the generation prompt
    added (the text ends where the assistant's answer starts); without a template (or without a
    tokenizer), the messages' contents joined by blank lines, as Search-R1's base template.
    ``tools`` (JSON schemas, native tool calls) go to the template, which must have one."""
    messages = list(messages)
    if not messages:
        raise ValueError("the environment gave no prompt messages")
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        if tools:
            raise ValueError(
                "native tool calls need the policy's chat template, and this tokenizer has none"
            )
        return "\n\n".join(m["content"] for m in messages)
    if tools:
        return tokenizer.apply_chat_template(
            messages, tools=list(tools), tokenize=False, add_generation_prompt=True
        )
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of environment or prompt text, with no special tokens added."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def decode_ids(tokenizer: Any, ids: Sequence[int]) -> str:
    """Text of token ids, special tokens skipped, spacing left exactly as generated."""
    return tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False)


class TokenizerText:
    """The text side of a local engine, through its transformers ``tokenizer``: the chat prompt,
    encoding observations and decoding ids (shared by :class:`HFEngine` and ``VLLMEngine``)."""

    tokenizer: Any

    def prompt_text(
        self, messages: Sequence[dict[str, str]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str:
        return render_messages(self.tokenizer, messages, tools)

    def encode(self, text: str) -> list[int]:
        return encode_text(self.tokenizer, text)

    def decode(self, ids: Sequence[int]) -> str:
        return decode_ids(self.tokenizer, ids)
