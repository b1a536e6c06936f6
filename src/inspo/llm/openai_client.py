"""An optimizer LLM behind any OpenAI-compatible chat-completions endpoint.

One client reaches OpenAI, Gemini's OpenAI-compatible endpoint, vLLM, llama.cpp's server and
Ollama: they all speak ``POST {base_url}/chat/completions`` and ``GET {base_url}/models``.

Rules of this client:

- Settings come from explicit arguments first, then the environment:
  ``INSPO_OPTIMIZER_BASE_URL`` (else ``OPENAI_BASE_URL``, else OpenAI's own URL),
  ``INSPO_OPTIMIZER_MODEL`` and ``INSPO_OPTIMIZER_API_KEY`` (else ``OPENAI_API_KEY``; local
  servers that need no key get a placeholder).
- The API key is held in a :class:`Secret`: it never appears in ``repr``, logs or error
  messages.
- Every request has a timeout. The SDK's own retries are off (``max_retries=0``); this client
  retries itself on 408 / 409 / 429 / 5xx answers, connection errors and timeouts, with
  exponential backoff ``min(backoff_max_s, backoff_base_s * 2**attempt)`` times a jitter factor
  in [0.5, 1.5) drawn from the injected ``random.Random``, and logs each retry. Other HTTP
  errors (400, 401, 404 …) fail at once.
- A malformed answer (a body that is not JSON, no ``choices``, a choice without text content)
  raises :class:`~inspo.core.optimizer_llm.LLMError` naming what was wrong; it is not retried.
- ``n`` completions are asked for with ``n=n``; servers that return fewer choices (llama.cpp and
  Ollama ignore ``n``) get further requests until there are ``n``. A server that answers 400 to
  ``n > 1`` is asked one completion per request from then on; one that answers 400 asking for
  ``max_completion_tokens`` (OpenAI's reasoning models) gets that field instead of ``max_tokens``.
- ``last_finish_reasons`` holds each choice's ``finish_reason`` of the last ``generate`` call
  (``"length"``: cut at ``max_tokens``; None where the server sent none).
- ``usage`` adds each response's ``usage`` field; a response without one is estimated at about
  4 characters per token and ``usage.estimated`` is set. ``usage.failures`` counts the
  ``generate`` calls that raised.
- :meth:`check` verifies the endpoint before training spends time: ``GET /models``, or a
  one-token completion where the server has no ``/models``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from inspo.core.optimizer_llm import LLMError, LLMUsage, Message, redact

logger = logging.getLogger("inspo.llm")

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
NO_KEY_PLACEHOLDER = "not-needed"
RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def estimate_tokens(chars: int) -> int:
    """A rough token count for ``chars`` characters of English text (about 4 per token)."""
    return (int(chars) + 3) // 4


class Secret:
    """A string that does not show itself: ``repr``/``str`` give ``'***'`` (or ``''`` if empty)."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value or ""

    def reveal(self) -> str:
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return "'***'" if self._value else "''"

    __str__ = __repr__


def _first(*values: str | None) -> str | None:
    for v in values:
        if v:
            return v
    return None


class OpenAICompatibleClient:
    """Chat completions from an OpenAI-compatible endpoint, with retries and cost accounting.

    Args:
        base_url: the API root (``http://127.0.0.1:8080/v1``); see the module docstring for the
            environment fallbacks.
        model: the model name the server knows (required, here or in ``INSPO_OPTIMIZER_MODEL``).
        api_key: the key; environment fallback, placeholder for servers that need none.
        timeout_s: seconds per request (connect + read).
        max_retries: retries after the first attempt on retryable failures (0 = one attempt).
        backoff_base_s, backoff_max_s: the exponential backoff schedule.
        rng: draws the backoff jitter (a fresh ``random.Random(0)`` when omitted).
        sleep: how to wait between retries (tests pass a recorder instead of ``time.sleep``).
        env: where to read the environment variables (``os.environ`` when omitted).
        extra_body: extra JSON fields for every request (e.g. vLLM's ``top_k``).
    """

    name = "openai"

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] = time.sleep,
        env: Mapping[str, str] | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.base_url = (
            _first(base_url, env.get("INSPO_OPTIMIZER_BASE_URL"), env.get("OPENAI_BASE_URL"))
            or OPENAI_DEFAULT_BASE_URL
        ).rstrip("/")
        model = _first(model, env.get("INSPO_OPTIMIZER_MODEL"))
        if not model:
            raise LLMError(
                f"no optimizer model name for the endpoint at {self.base_url}: pass model=... "
                "or set INSPO_OPTIMIZER_MODEL (e.g. gpt-4o-mini, gemini-2.5-flash, or the name "
                "your vLLM / llama.cpp / Ollama server serves)"
            )
        self.model = model
        self._api_key = Secret(
            _first(api_key, env.get("INSPO_OPTIMIZER_API_KEY"), env.get("OPENAI_API_KEY"))
        )
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self._rng = rng if rng is not None else random.Random(0)
        self._sleep = sleep
        self._extra_body = dict(extra_body or {})
        self._n_supported = True
        self._max_tokens_field = "max_tokens"
        self._sdk: Any = None
        self.usage = LLMUsage()
        self.last_finish_reasons: list[str | None] = []

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleClient(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={self._api_key!r}, timeout_s={self.timeout_s}, "
            f"max_retries={self.max_retries})"
        )

    # ------------------------------------------------------------------ public API

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        """``n`` completions of ``messages`` (see the module docstring for retries and errors)."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        if not messages:
            raise ValueError("messages is empty: pass at least one {'role', 'content'} message")
        try:
            return self._generate(messages, n=n, temperature=temperature, max_tokens=max_tokens)
        except LLMError as exc:
            self.usage.failures += 1
            self._raise_redacted(exc)
            raise

    def check(self) -> list[str]:
        """Verify the endpoint answers; return the model ids it lists (may be empty).

        Raises:
            LLMError: "cannot reach optimizer endpoint at URL: ..." when nothing answers, or a
                message naming the HTTP status when the server refuses (bad key, wrong URL).
        """
        try:
            return self._check()
        except LLMError as exc:
            self._raise_redacted(exc)
            raise

    def _check(self) -> list[str]:
        openai = self._openai()
        try:
            page = self._client().models.list()
            ids = [m.id for m in getattr(page, "data", []) or []]
        except openai.APIConnectionError as exc:  # includes timeouts
            raise LLMError(
                f"cannot reach optimizer endpoint at {self.base_url}: {_describe(exc)}. "
                "Is the server running, and is the URL (with its /v1 suffix) right?"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise LLMError(
                    f"optimizer endpoint at {self.base_url} refused the API key "
                    f"(HTTP {exc.status_code}); set INSPO_OPTIMIZER_API_KEY or the variable named "
                    "by api_key_env"
                ) from exc
            if exc.status_code not in (404, 405):
                raise LLMError(
                    f"optimizer endpoint at {self.base_url} answered GET /models with "
                    f"HTTP {exc.status_code}: {_body_snippet(exc)}"
                ) from exc
            logger.info("%s has no /models; checking with a one-token completion", self.base_url)
            self.generate(
                [{"role": "user", "content": "Say OK."}], n=1, temperature=0.0, max_tokens=1
            )
            return []
        if ids and self.model not in ids:
            logger.warning(
                "optimizer endpoint %s does not list model %r (it lists %s); requests may fail",
                self.base_url,
                self.model,
                ", ".join(ids[:10]),
            )
        logger.info("optimizer endpoint %s is reachable (model %s)", self.base_url, self.model)
        return ids

    ping = check

    def _raise_redacted(self, exc: LLMError) -> None:
        """Raise ``exc`` again without the API key when its message holds it (an endpoint may echo
        the key in an error body; the message is recorded in events and the report); the cause,
        which holds the raw body too, is dropped then. Returns when there is nothing to hide."""
        clean = redact(str(exc), self._api_key.reveal())
        if clean != str(exc):
            raise LLMError(clean) from None

    # ------------------------------------------------------------------ internals

    def _openai(self):
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise LLMError(
                "the OpenAI-compatible optimizer needs the openai package: pip install 'inspo[llm]'"
            ) from exc
        return openai

    def _client(self):
        if self._sdk is None:
            openai = self._openai()
            self._sdk = openai.OpenAI(
                api_key=self._api_key.reveal() or NO_KEY_PLACEHOLDER,
                base_url=self.base_url,
                timeout=self.timeout_s,
                max_retries=0,
            )
        return self._sdk

    def _generate(
        self, messages: list[Message], *, n: int, temperature: float, max_tokens: int
    ) -> list[str]:
        outputs: list[str] = []
        reasons: list[str | None] = []
        requests = 0
        while len(outputs) < n:
            if requests >= n:  # every request yields >= 1 choice, so this never loops forever
                raise LLMError(
                    f"{self.base_url} returned only {len(outputs)} of {n} completions after "
                    f"{requests} requests"
                )
            want = n - len(outputs)
            body = self._request_with_retries(messages, want, temperature, max_tokens)
            texts = self._texts_from(body)
            self._record_usage(body, messages, texts)
            if len(texts) < want:
                logger.debug(
                    "%s returned %d of %d choices; asking again", self.base_url, len(texts), want
                )
            outputs.extend(texts[:want])
            reasons.extend(_finish_reasons(body)[:want])
            requests += 1
        self.last_finish_reasons = reasons
        return outputs

    def _request_with_retries(
        self, messages: list[Message], n: int, temperature: float, max_tokens: int
    ) -> dict[str, Any]:
        openai = self._openai()
        attempt = 0
        while True:
            try:
                return self._request_once(messages, n, temperature, max_tokens)
            except openai.APIStatusError as exc:
                status = exc.status_code
                if (
                    status == 400
                    and self._max_tokens_field == "max_tokens"
                    and "max_completion_tokens" in _body_snippet(exc)
                ):
                    logger.warning(
                        "%s wants max_completion_tokens instead of max_tokens; switching",
                        self.base_url,
                    )
                    self._max_tokens_field = "max_completion_tokens"
                    continue
                if status == 400 and n > 1 and self._n_supported:
                    logger.warning(
                        "%s answered 400 to n=%d; asking one completion per request from now on "
                        "(%s)",
                        self.base_url,
                        n,
                        _body_snippet(exc),
                    )
                    self._n_supported = False
                    n = 1
                    continue
                if status not in RETRYABLE_STATUS:
                    raise LLMError(
                        f"optimizer endpoint {self.base_url} answered HTTP {status} "
                        f"for model {self.model!r}: {_body_snippet(exc)}"
                    ) from exc
                reason = f"HTTP {status}"
                error: Exception = exc
            except openai.APITimeoutError as exc:
                reason, error = f"timed out after {self.timeout_s:g} s", exc
            except openai.APIConnectionError as exc:
                reason, error = f"connection error ({_describe(exc)})", exc
            if attempt >= self.max_retries:
                raise LLMError(
                    f"optimizer request to {self.base_url} failed after {attempt + 1} attempt(s): "
                    f"{reason}"
                ) from error
            delay = self._backoff(attempt)
            attempt += 1
            logger.warning(
                "optimizer request to %s %s; retry %d/%d in %.2f s",
                self.base_url,
                reason,
                attempt,
                self.max_retries,
                delay,
            )
            self._sleep(delay)

    def _backoff(self, attempt: int) -> float:
        base = min(self.backoff_max_s, self.backoff_base_s * (2**attempt))
        return base * (0.5 + self._rng.random())

    def _request_once(
        self, messages: list[Message], n: int, temperature: float, max_tokens: int
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            self._max_tokens_field: max_tokens,
        }
        if n > 1 and self._n_supported:
            kwargs["n"] = n
        if self._extra_body:
            kwargs["extra_body"] = self._extra_body
        raw = self._client().chat.completions.with_raw_response.create(**kwargs)
        text = raw.text
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise LLMError(
                f"malformed answer from {self.base_url}: the body is not valid JSON "
                f"({exc.msg} at char {exc.pos}); it starts with {text[:120]!r}"
            ) from exc
        if not isinstance(body, dict):
            raise LLMError(
                f"malformed answer from {self.base_url}: expected a JSON object, got "
                f"{type(body).__name__}"
            )
        return body

    def _texts_from(self, body: dict[str, Any]) -> list[str]:
        if "error" in body and "choices" not in body:
            raise LLMError(
                f"optimizer endpoint {self.base_url} returned an error: {str(body['error'])[:300]}"
            )
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise LLMError(
                f"malformed answer from {self.base_url}: no 'choices' in the response "
                f"(keys: {sorted(body)})"
            )
        texts = []
        for i, choice in enumerate(choices):
            message = choice.get("message") if isinstance(choice, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, str):
                raise LLMError(
                    f"malformed answer from {self.base_url}: choice {i} has no text "
                    f"message.content (got {json.dumps(choice)[:200]})"
                )
            texts.append(content)
        return texts

    def _record_usage(
        self, body: dict[str, Any], messages: list[Message], texts: list[str]
    ) -> None:
        usage = body.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
            self.usage.add(usage["prompt_tokens"], int(usage.get("completion_tokens") or 0))
            return
        self.usage.estimated = True
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        self.usage.add(estimate_tokens(prompt_chars), sum(estimate_tokens(len(t)) for t in texts))


def _finish_reasons(body: dict[str, Any]) -> list[str | None]:
    """Each choice's ``finish_reason`` (None where a server sends none or a non-string)."""
    reasons = []
    for choice in body.get("choices") or []:
        reason = choice.get("finish_reason") if isinstance(choice, dict) else None
        reasons.append(reason if isinstance(reason, str) else None)
    return reasons


def _describe(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    text = str(exc)
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text}: {cause}"
    return text


def _body_snippet(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if body is None:
        response = getattr(exc, "response", None)
        body = getattr(response, "text", "") if response is not None else ""
    return str(body)[:300] or str(exc)[:300]
