"""Outages of an OpenAI-compatible policy endpoint
(:class:`~inspo.engines.openai_engine.OpenAIEngine`).

- :func:`is_outage`: a connection error, a timeout or a 5xx from the ``openai`` client (after
  its own retries) is the endpoint's failure, not the example's;
- :class:`PolicyUnavailable` (an :class:`~inspo.records.EndpointDown`) is what the engine raises
  then, so the agent fails the batch without replaying it one episode at a time;
- :func:`check_models`: the probe before any work, one ``GET /models``.

Error texts have the API key taken out (:func:`inspo.core.optimizer_llm.redact`): they are recorded.
"""

from __future__ import annotations

from typing import Any

from inspo.core.optimizer_llm import redact
from inspo.records import EndpointDown


class PolicyUnavailable(EndpointDown):
    """The policy endpoint did not answer (connection, timeout or 5xx, after the client's
    retries)."""


def is_outage(exc: BaseException) -> bool:
    """A connection error, a timeout or a 5xx from the openai client: the endpoint, not the
    example."""
    import openai

    return isinstance(
        exc, (openai.APIConnectionError, openai.InternalServerError, ConnectionError, TimeoutError)
    )


def check_models(client: Any, model: str, endpoint: str, api_key: str | None) -> None:
    """One cheap real request (``GET /models``): :class:`PolicyUnavailable` when the endpoint does
    not answer, ``ValueError`` when it refuses or does not serve ``model`` (a server without the
    route, a 404, passes: it answered)."""
    try:
        served = [m.id for m in client.models.list()]
    except Exception as exc:  # noqa: BLE001 - said as one line naming the endpoint
        clean = redact(f"{type(exc).__name__}: {exc}", api_key)
        if is_outage(exc):
            raise PolicyUnavailable(
                f"policy endpoint {endpoint} does not answer: {clean}"
            ) from None
        if getattr(exc, "status_code", None) == 404:
            return
        raise ValueError(f"policy endpoint {endpoint} refused GET /models: {clean}") from None
    if served and model not in served:
        raise ValueError(
            f"policy endpoint {endpoint} does not serve model {model!r} "
            f"(it serves: {', '.join(served[:10])}); check --policy-model"
        )
