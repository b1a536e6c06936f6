"""A frozen policy behind an OpenAI-compatible completions endpoint: :class:`OpenAIEngine`, one of
the :class:`~inspo.engines.base.PolicyEngine` s (the rules every engine keeps are there)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from inspo.core.optimizer_llm import redact
from inspo.engines.base import Generation, GenerationInput, decode_ids, encode_text, render_messages
from inspo.engines.endpoint import PolicyUnavailable, check_models, is_outage

log = logging.getLogger("inspo.engines")


class OpenAIEngine:
    """A frozen policy behind an OpenAI-compatible completions endpoint (vLLM, llama.cpp …).

    Text only: ``keeps_token_ids = False`` and rollouts from it have empty ``prompt_ids``,
    ``completion_ids`` and ``env_mask`` (the endpoint's tokenisation is not ours to copy; use it
    for evaluation, not for training). Each turn sends the whole context text as ``prompt`` to
    the completions API with the environment's stop strings (Search-R1: ``</search>``,
    ``</answer>``).

    The API strips the matched stop string from the text; the engine puts it back: from
    ``choice.stop_reason`` when the server reports that field (vLLM does; ``None`` there means
    EOS), otherwise when the text has an unclosed opening tag for one of the stops.
    ``finish_reason == "length"`` -> ``"length"``, any other stop -> ``"eos"``.

    ``tokenizer`` (optional, a transformers tokenizer of the served model) renders the chat
    template and counts observation tokens exactly; without it prompts are the messages' plain
    text and observations are capped at ~4 characters per token. The API key comes from ``api_key``
    or ``$OPENAI_API_KEY`` ("EMPTY" for local servers) and is never logged.

    Outages: the client waits ``timeout`` seconds per request and retries ``max_retries`` times
    (connection errors, timeouts, 408/409/429/5xx); what still fails on the connection, a timeout
    or a 5xx raises :class:`PolicyUnavailable` (an :class:`~inspo.records.EndpointDown`: the
    agent fails the batch, no replay), and the first such failure logs a warning. :meth:`check`
    asks the endpoint for its model list once, before work starts.
    """

    keeps_token_ids = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        tokenizer: Any = None,
        client: Any = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        batch_size: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("OpenAIEngine: model name is empty; pass the served model's name")
        if client is None:
            from openai import OpenAI

            client = OpenAI(
                base_url=base_url,
                api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                timeout=timeout,
                max_retries=max_retries,
            )
        self.client = client
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self._api_key = getattr(client, "api_key", None)  # kept only to take it out of error texts
        self._warned = False

    def check(self) -> None:
        """One ``GET /models`` before work starts (:func:`inspo.engines.endpoint.check_models`)."""
        check_models(self.client, self.model, self.endpoint, self._api_key)

    @property
    def endpoint(self) -> str:
        """The base URL requests go to (for messages)."""
        return str(getattr(self.client, "base_url", "") or "(unknown URL)")

    def prompt_text(
        self, messages: Sequence[dict[str, str]], tools: Sequence[dict[str, Any]] | None = None
    ) -> str:
        return render_messages(self.tokenizer, messages, tools)

    def encode(self, text: str) -> list[int] | None:
        if self.tokenizer is None:
            return None
        return encode_text(self.tokenizer, text)

    def decode(self, ids: Sequence[int]) -> str:
        if self.tokenizer is None:
            raise ValueError("OpenAIEngine.decode: no tokenizer was given to this engine")
        return decode_ids(self.tokenizer, ids)

    def generate(
        self,
        inputs: list[GenerationInput],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
    ) -> list[Generation]:
        size = self.batch_size or max(len(inputs), 1)
        out: list[Generation] = []
        for start in range(0, len(inputs), size):
            chunk = inputs[start : start + size]
            try:
                response = self.client.completions.create(
                    model=self.model,
                    prompt=[x.text for x in chunk],
                    max_tokens=max_new_tokens,
                    temperature=temperature,
                    top_p=top_p,
                    stop=list(stop) or None,
                )
            except (
                Exception
            ) as exc:  # an error body may echo the key; the text is recorded in rollouts
                clean = redact(f"{type(exc).__name__}: {exc}", self._api_key)
                if is_outage(exc):
                    if not self._warned:
                        self._warned = True
                        log.warning(
                            "policy endpoint %s failed after its retries: %s", self.endpoint, clean
                        )
                    raise PolicyUnavailable(
                        f"policy endpoint {self.endpoint} failed: {clean}"
                    ) from None
                if clean != f"{type(exc).__name__}: {exc}":
                    raise RuntimeError(f"policy endpoint error: {clean}") from None
                raise
            choices = sorted(response.choices, key=lambda c: c.index)
            if len(choices) != len(chunk):
                raise RuntimeError(
                    f"OpenAIEngine: the endpoint returned {len(choices)} choices for "
                    f"{len(chunk)} prompts"
                )
            out.extend(_choice_to_generation(c, stop) for c in choices)
        return out


def _choice_to_generation(choice: Any, stop: Sequence[str]) -> Generation:
    text = choice.text or ""
    if choice.finish_reason == "length":
        return Generation(token_ids=[], text=text, finish="length")
    extra = getattr(choice, "model_extra", None) or {}
    if "stop_reason" in extra:  # the server says what stopped it (vLLM): trust it
        reason = extra["stop_reason"]
        if isinstance(reason, str) and reason in stop:
            return Generation(token_ids=[], text=text + reason, finish="stop")
        return Generation(token_ids=[], text=text, finish="eos")
    for s in stop:
        opening = "<" + s[2:] if s.startswith("</") else None
        if opening and text.rfind(opening) > text.rfind(s):
            return Generation(token_ids=[], text=text + s, finish="stop")
    return Generation(token_ids=[], text=text, finish="eos")
