"""The optimizer-LLM seam.

Every optimizer LLM (OpenAI-compatible endpoint, local transformers model, the offline
rule-based reflector, scripted fakes in tests) implements :class:`LLMClient`.

Rules of the seam:

- ``generate(messages, *, n, temperature, max_tokens)`` returns exactly ``n`` strings (one per
  sampled completion) for a chat given as OpenAI-style ``[{"role": ..., "content": ...}]``.
- It raises :class:`LLMError` (or a subclass) when no completion can be had — timeouts after
  retries, a malformed answer from a server, an unreachable endpoint. Callers in the core catch
  it: an optimizer failure never crashes a training run.
- ``usage`` accumulates what the client has spent (calls, prompt and completion tokens) so the
  core's cost ledger can report App. C's numbers. Clients that cannot count tokens estimate
  them and say so in ``usage.estimated``.
- API keys come from the environment or config and are never logged or put in messages.
- Optional: ``last_finish_reasons``, one entry per completion of the last ``generate`` call:
  ``"length"`` when it stopped at ``max_tokens``, ``"stop"`` when it ended by itself, None when
  the client cannot tell. A client that has the attribute sets it on every successful call.
  It is not part of :class:`LLMClient` (a client may lack it); the proposer reads it with
  ``getattr`` and, where it is missing or None, takes a call whose completion tokens reached
  ``max_tokens`` as cut off (see :class:`inspo.core.proposer.Proposer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

Message = dict[str, str]
#: Finish reasons ``last_finish_reasons`` may hold (OpenAI's words); None: not known.
FINISH_LENGTH = "length"
FINISH_STOP = "stop"


#: What :func:`redact` puts where a secret stood.
REDACTED = "***"


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every occurrence of each secret (an API key) replaced by :data:`REDACTED`.
    Secrets shorter than 4 characters and the keyless placeholder ``EMPTY`` are left alone (they
    are no secrets, and replacing them would mangle ordinary words). An endpoint that echoes the
    key in its error body must not have it copied into logs, events or the report."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret != "EMPTY":
            text = text.replace(secret, REDACTED)
    return text


class LLMError(RuntimeError):
    """An optimizer LLM could not produce a completion (after its retries)."""


@dataclass
class LLMUsage:
    """Running totals of what an LLM client has spent."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0
    estimated: bool = False

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.calls += 1
        self.prompt_tokens += int(prompt_tokens)
        self.completion_tokens += int(completion_tokens)


@runtime_checkable
class LLMClient(Protocol):
    """An optimizer LLM. See the module docstring for the rules."""

    name: str
    usage: LLMUsage

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]: ...
