"""HTTP client for Search-R1-compatible retrieval servers (``POST /retrieve``).

Talks to :mod:`inspo.retrieval.server` or any server speaking Search-R1's protocol (Search-R1's
own ``retrieval_server.py``, FlashRAG-style servers used by verl / SkyRL).

Rules:

- ``url`` is the server's base URL (``http://127.0.0.1:8000``); a URL ending in ``/retrieve``
  (Search-R1 configs write it that way) is accepted too.
- One ``httpx.Client`` per instance (connection reuse); close it with :meth:`close` or ``with``.
- ``search`` sends every non-empty query in one request (in chunks of ``batch_size``), always
  with ``return_scores: true``, and accepts both answer shapes (``{"document", "score"}`` hits
  or bare document dicts with ``contents``, or ``title`` / ``text``). Empty queries get ``[]``
  without a request.
- Connection errors, timeouts (``timeout`` seconds per try) and 5xx answers are retried
  ``retries`` times with exponential backoff (``backoff * 2**attempt`` seconds); then
  :class:`RetrievalUnavailable` (a :class:`RetrievalError` and an
  :class:`~inspo.records.EndpointDown`: the agent fails the whole batch with it, no replay one
  episode at a time) is raised. So a frozen server costs one call at most
  ``(retries + 1) * timeout`` seconds plus the backoff. The first failed try of a client logs a
  warning (once per client), so an outage shows at the default log level. A 4xx answer is not
  retried: :class:`RetrievalError` carries the server's message.
- :meth:`check` raises ``RetrievalUnavailable("cannot reach retrieval server at URL ...")`` when the
  server does not answer; it tries ``GET /healthz`` and falls back to a one-query ``/retrieve``
  for servers without a health route.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from inspo.records import EndpointDown, Passage

log = logging.getLogger("inspo.retrieval")


class RetrievalError(RuntimeError):
    """The retrieval server could not be reached, refused the request, or answered nonsense."""


class RetrievalUnavailable(RetrievalError, EndpointDown):
    """The retrieval server did not answer after every retry (connection, timeout or 5xx)."""


def _base_url(url: str) -> str:
    url = url.strip().rstrip("/")
    if url.endswith("/retrieve"):
        url = url[: -len("/retrieve")]
    if not url.startswith(("http://", "https://")):
        url = "http://" + url
    return url


def _server_message(response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500]
    if isinstance(body, dict) and "detail" in body:
        detail = body["detail"]
        return detail if isinstance(detail, str) else str(detail)[:500]
    return str(body)[:500]


def _passage(hit: Any, index: int) -> Passage:
    score = None
    doc = hit
    if isinstance(hit, dict) and isinstance(hit.get("document"), dict):
        doc, score = hit["document"], hit.get("score")
    if not isinstance(doc, dict):
        raise RetrievalError(f"unexpected hit in server answer: {str(hit)[:200]}")
    pid = str(doc.get("id", doc.get("doc_id", index)))
    score = float(score) if isinstance(score, (int, float)) else None
    if isinstance(doc.get("contents"), str):
        return Passage.from_contents(pid, doc["contents"], score=score)
    if isinstance(doc.get("text"), str):
        return Passage(id=pid, title=str(doc.get("title", "")), text=doc["text"], score=score)
    raise RetrievalError(f"hit has neither 'contents' nor 'text': {str(doc)[:200]}")


class HttpRetriever:
    """A :class:`~inspo.retrieval.base.Retriever` backed by a remote ``/retrieve`` endpoint."""

    backend = "http"

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        batch_size: int = 256,
    ) -> None:
        import httpx

        if timeout <= 0 or retries < 0 or backoff < 0:
            raise ValueError(
                "HttpRetriever: timeout must be > 0, retries and backoff >= 0; got "
                f"timeout={timeout}, retries={retries}, backoff={backoff}"
            )
        self.url = _base_url(url)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.batch_size = batch_size
        self._warned = False
        self._client = httpx.Client(base_url=self.url, timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpRetriever:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any):
        import httpx

        last: str = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.TransportError as e:  # connect / read errors and timeouts
                last = f"{type(e).__name__}: {e}"
                self._warn(method, path, last)
                continue
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {_server_message(response)}"
                self._warn(method, path, last)
                continue
            if response.status_code >= 400:
                raise RetrievalError(
                    f"retrieval server at {self.url} refused {method} {path} "
                    f"(HTTP {response.status_code}): {_server_message(response)}"
                )
            return response
        raise RetrievalUnavailable(
            f"cannot reach retrieval server at {self.url} ({method} {path} failed after "
            f"{self.retries + 1} tries; last error: {last})"
        )

    def _warn(self, method: str, path: str, error: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "retrieval server at %s did not answer %s %s (%s); retrying up to %d time(s), %g s "
                "timeout each (env.retriever_retries, env.retriever_timeout)",
                self.url,
                method,
                path,
                error,
                self.retries,
                self.timeout,
            )

    def check(self) -> dict[str, Any]:
        """Make sure the server answers; returns its ``/healthz`` body (or ``{}``)."""
        import httpx

        try:
            response = self._client.get("/healthz")
        except httpx.TransportError as e:
            raise RetrievalUnavailable(
                f"cannot reach retrieval server at {self.url}: {type(e).__name__}: {e}. "
                "Is it running? Start one with `inspo serve-retriever`."
            ) from e
        if response.status_code == 200:
            return response.json()
        self.search(["test"], k=1)  # a Search-R1 server has no /healthz: probe /retrieve
        return {}

    def search(self, queries: list[str], k: int = 3) -> list[list[Passage]]:
        """Top-``k`` passages per query from the server (one request per ``batch_size``)."""
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        results: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if isinstance(q, str) and q.strip()]
        for start in range(0, len(live), self.batch_size):
            chunk = live[start : start + self.batch_size]
            payload = {"queries": [queries[i] for i in chunk], "topk": k, "return_scores": True}
            body = self._request("POST", "/retrieve", json=payload).json()
            rows = body.get("result") if isinstance(body, dict) else None
            if not isinstance(rows, list) or len(rows) != len(chunk):
                raise RetrievalError(
                    f"retrieval server at {self.url} answered {len(chunk)} queries with "
                    f"{'no result list' if not isinstance(rows, list) else f'{len(rows)} results'}"
                )
            for i, hits in zip(chunk, rows, strict=True):
                results[i] = [_passage(hit, j) for j, hit in enumerate(hits)][:k]
        return results
