"""A scripted optimizer LLM for tests: it answers from a list or a function, never from a model.

Rules:

- With a list of responses, each completion takes the next one in order; when the list runs out
  :class:`~inspo.core.optimizer_llm.LLMError` is raised (or the list starts again with
  ``cycle=True``).
  A list item that is an exception instance is raised instead of returned (one completion's
  worth), which scripts optimizer failures.
- With a callable, it is called once per ``generate`` as ``fn(messages, n)`` and must return
  either one string (repeated ``n`` times) or a list of exactly ``n`` strings; whatever it
  raises propagates (an :class:`LLMError` stays one, anything else is wrapped in one).
- ``prompts`` records every chat it was asked, in order, so tests can assert on them.
- ``last_finish_reasons`` is ``finish_reason`` for every completion of the last call: ``"stop"``
  by default (a scripted answer is complete), ``"length"`` to script an answer cut off at
  ``max_tokens`` (the text is returned as scripted, not cut); a list gives each completion of a
  call its own (its length must be the call's ``n``).
- ``usage`` counts one call per ``generate`` and estimates tokens (about 4 characters per token,
  ``usage.estimated`` is True).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inspo.core.optimizer_llm import FINISH_STOP, LLMError, LLMUsage, Message
from inspo.llm.openai_client import estimate_tokens

ScriptFn = Callable[[list[Message], int], "str | list[str]"]


class ScriptedLLM:
    """Returns scripted responses in order, or whatever ``fn(messages, n)`` returns."""

    def __init__(
        self,
        responses: Sequence[str | BaseException] | ScriptFn,
        *,
        cycle: bool = False,
        name: str = "scripted",
        finish_reason: str | None | Sequence[str | None] = FINISH_STOP,
    ) -> None:
        if callable(responses):
            self._fn: ScriptFn | None = responses
            self._responses: list[str | BaseException] = []
        else:
            self._fn = None
            self._responses = list(responses)
            if cycle and not self._responses:
                raise ValueError(
                    "ScriptedLLM(cycle=True) needs at least one response to cycle over"
                )
        self._cycle = cycle
        self._next = 0
        self.name = name
        self.usage = LLMUsage(estimated=True)
        self.prompts: list[list[Message]] = []
        self.finish_reason = finish_reason
        self.last_finish_reasons: list[str | None] = []

    def __repr__(self) -> str:
        return f"ScriptedLLM(name={self.name!r}, calls={self.usage.calls})"

    def check(self) -> None:
        """Nothing to reach: always fine."""

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.prompts.append([dict(m) for m in messages])
        try:
            outputs = self._from_fn(messages, n) if self._fn else self._from_list(n)
            reasons = self._finish_reasons(len(outputs))
        except LLMError:
            self.usage.failures += 1
            raise
        except Exception as exc:  # a script's own bug or scripted failure: keep the seam's rule
            self.usage.failures += 1
            raise LLMError(f"scripted LLM failed: {exc}") from exc
        prompt_chars = sum(len(m.get("content", "")) for m in messages)
        self.usage.add(estimate_tokens(prompt_chars), sum(estimate_tokens(len(o)) for o in outputs))
        self.last_finish_reasons = reasons
        return outputs

    def _finish_reasons(self, n: int) -> list[str | None]:
        if self.finish_reason is None or isinstance(self.finish_reason, str):
            return [self.finish_reason] * n
        if len(self.finish_reason) != n:
            raise LLMError(
                f"scripted LLM has {len(self.finish_reason)} finish reasons for {n} completions"
            )
        return list(self.finish_reason)

    def _from_fn(self, messages: list[Message], n: int) -> list[str]:
        assert self._fn is not None
        out = self._fn(messages, n)
        if isinstance(out, str):
            return [out] * n
        out = list(out)
        if len(out) != n or not all(isinstance(o, str) for o in out):
            raise LLMError(
                f"scripted function returned {len(out)} items for n={n}; it must return one str or "
                "a list of n str"
            )
        return out

    def _from_list(self, n: int) -> list[str]:
        outputs: list[str] = []
        for _ in range(n):
            if self._next >= len(self._responses):
                if not self._cycle:
                    raise LLMError(
                        f"ScriptedLLM ran out of responses after {len(self._responses)}; "
                        "script more responses or pass cycle=True"
                    )
                self._next = 0
            item = self._responses[self._next]
            self._next += 1
            if isinstance(item, BaseException):
                raise item
            outputs.append(item)
        return outputs
