"""A Search-R1-compatible retrieval server (FastAPI + uvicorn) around any :class:`Retriever`.

Protocol (the one Search-R1's ``retrieval_server.py`` speaks, so verl / SkyRL / Search-R1
clients work unchanged):

``POST /retrieve`` with ``{"queries": [str, ...], "topk": int (optional), "return_scores": bool
(default false)}`` answers ``{"result": [[hit, ...], ...]}``, one list per query in query order.
A hit is ``{"document": {"id", "contents": "\\"Title\\"\\ntext"}, "score": float}`` when
``return_scores`` is true and just the document dict ``{"id", "contents"}`` when it is false.

``GET /healthz`` answers ``{"status": "ok", "backend", "corpus_size", "limits"}``.

Rules:

- A request body over ``max_body_bytes`` is refused with 413 before it is parsed: at once when
  its ``Content-Length`` says so (the body is not read), else as soon as the bytes received
  (chunked transfer) pass the limit; a body is never held in memory beyond the limit
  (:class:`BodyLimit`). A ``Content-Length`` that is not a number is refused with 400.
- All queries of one request go to the retriever in one ``search`` call (batching is the
  retriever's job); calls are serialised with a lock, so backends need not be thread-safe.
- Requests are refused with a message that says what is wrong: more than ``max_queries``
  queries (400), a query longer than ``max_query_chars`` (400), ``topk`` outside
  ``1..max_topk`` (400), a malformed body or bad JSON (422, with a readable ``detail``).
  A missing ``topk`` means ``default_topk``; an empty query list answers ``{"result": []}``.
- An empty corpus is refused at startup: :func:`build_app` raises ``ValueError`` when the
  retriever has ``len() == 0``, so ``serve`` never listens with nothing to serve; so are limits
  below 1 (:class:`ServerLimits`) and a port outside 0..65535 (:func:`check_port`).
"""

# no `from __future__ import annotations`: FastAPI must see the request model class itself

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from inspo.records import Passage
from inspo.retrieval.base import Retriever

REQUEST_SHAPE = '{"queries": ["..."], "topk": 3, "return_scores": true}'
MIB = 1024 * 1024


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask of the server; every limit is at least 1."""

    max_queries: int = 512
    """Most queries in one request (400 beyond)."""
    max_query_chars: int = 2000
    """Longest query, in characters (400 beyond)."""
    max_topk: int = 50
    """Largest ``topk`` a request may ask for (400 beyond)."""
    default_topk: int = 3
    """``topk`` of a request that gives none; in ``1..max_topk``."""
    max_body_bytes: int = 8 * MIB
    """Largest request body in bytes, refused with 413 before parsing (``--max-body-mb``)."""

    def __post_init__(self) -> None:
        for name in ("max_queries", "max_query_chars", "max_topk", "max_body_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if not 1 <= self.default_topk <= self.max_topk:
            raise ValueError(
                f"default_topk must be in 1..max_topk={self.max_topk}, got {self.default_topk}"
            )


def check_port(port: int) -> int:
    """``port`` when it is one a server can listen on (0: any free port), else ``ValueError``."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535 (0: any free port), got {port!r}")
    return port


def _megabytes(n: int) -> str:
    return f"{n / MIB:.3g} MiB"


class BodyLimit:
    """ASGI middleware: a request body over ``max_bytes`` answers 413 before the app parses it.

    A ``Content-Length`` over the limit is refused without reading the body; otherwise the body
    is read here, counting bytes as they arrive (chunked transfer too), refused as soon as the
    count passes the limit, and replayed to the app when it does not. At most ``max_bytes`` of a
    body is ever held.
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await _send_json(
                    send, 400, f"Content-Length {declared[:40].decode('latin-1')!r} is not a number"
                )
                return
            if length > self.max_bytes:
                await _send_json(send, 413, self._message(f"{length} bytes (its Content-Length)"))
                return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _send_json(
                    send,
                    413,
                    self._message(
                        f"over {self.max_bytes} bytes (refused at {size} bytes received)"
                    ),
                )
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body, replayed = b"".join(chunks), False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    def _message(self, size: str) -> str:
        return (
            f"request body too large: {size}; the limit is max_body_bytes={self.max_bytes} "
            f"({_megabytes(self.max_bytes)}, set by inspo serve-retriever --max-body-mb); "
            "send fewer queries per request"
        )


async def _send_json(send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _corpus_size(retriever: Retriever) -> int | None:
    try:
        return len(retriever)  # type: ignore[arg-type]
    except TypeError:
        return None


def _hit(p: Passage, with_score: bool) -> dict[str, Any]:
    doc = {"id": p.id, "contents": p.contents}
    return {"document": doc, "score": p.score} if with_score else doc


def _validation_message(errors: list[dict[str, Any]]) -> str:
    parts = []
    for err in errors:
        if err.get("type") == "json_invalid":
            where = err.get("loc", ("body", "?"))[-1]
            reason = (err.get("ctx") or {}).get("error", "JSON decode error")
            parts.append(f"the body is not valid JSON ({reason} at character {where})")
            continue
        loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body") or "body"
        parts.append(f"field {loc!r}: {err.get('msg', 'invalid')}")
    return "malformed request: " + "; ".join(parts) + f"; expected JSON like {REQUEST_SHAPE}"


def build_app(
    retriever: Retriever,
    *,
    max_queries: int = 512,
    max_query_chars: int = 2000,
    max_topk: int = 50,
    default_topk: int = 3,
    max_body_bytes: int = ServerLimits.max_body_bytes,
    backend: str | None = None,
):
    """Build the FastAPI app serving ``retriever`` (rules in the module docstring); the limits
    are :class:`ServerLimits`' (``ValueError`` for one below 1)."""
    from fastapi import FastAPI, HTTPException
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict

    checked = ServerLimits(
        max_queries=max_queries,
        max_query_chars=max_query_chars,
        max_topk=max_topk,
        default_topk=default_topk,
        max_body_bytes=max_body_bytes,
    )
    size = _corpus_size(retriever)
    if size == 0:
        raise ValueError("refusing to serve an empty corpus: the retriever has 0 passages")
    backend_name = backend or getattr(retriever, "backend", type(retriever).__name__)
    limits = asdict(checked)
    lock = threading.Lock()

    class RetrieveRequest(BaseModel):
        model_config = ConfigDict(extra="ignore")
        queries: list[str]
        topk: int | None = None
        return_scores: bool = False

    app = FastAPI(title="inspo retrieval server", version="1")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)

    @app.exception_handler(RequestValidationError)
    async def _malformed(request, exc: RequestValidationError):  # noqa: ARG001
        return JSONResponse(status_code=422, content={"detail": _validation_message(exc.errors())})

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "backend": backend_name, "corpus_size": size, "limits": limits}

    @app.post("/retrieve")
    def retrieve(request: RetrieveRequest) -> dict[str, Any]:
        queries = request.queries
        topk = default_topk if request.topk is None else request.topk
        if len(queries) > max_queries:
            raise HTTPException(
                400,
                f"too many queries: {len(queries)} in one request, the limit "
                f"is max_queries={max_queries}; split the batch",
            )
        for i, q in enumerate(queries):
            if len(q) > max_query_chars:
                raise HTTPException(
                    400,
                    f"query {i} is too long: {len(q)} characters, the limit "
                    f"is max_query_chars={max_query_chars}",
                )
        if not 1 <= topk <= max_topk:
            raise HTTPException(400, f"topk must be between 1 and max_topk={max_topk}, got {topk}")
        if not queries:
            return {"result": []}
        try:
            with lock:
                results = retriever.search(list(queries), k=topk)
        except Exception as e:  # the retriever failed: a server error, said plainly
            raise HTTPException(
                500, f"retriever {backend_name} failed: {type(e).__name__}: {e}"
            ) from e
        return {"result": [[_hit(p, request.return_scores) for p in ps[:topk]] for ps in results]}

    return app


def serve(
    retriever: Retriever,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    **limits: Any,
) -> None:
    """Serve ``retriever`` with uvicorn until interrupted (``limits`` go to :func:`build_app`)."""
    import uvicorn

    check_port(port)
    uvicorn.run(build_app(retriever, **limits), host=host, port=port, log_level=log_level)


@contextmanager
def running_server(
    retriever: Retriever,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    startup_timeout: float = 30.0,
    **limits: Any,
) -> Iterator[str]:
    """Run a real uvicorn server in a background thread; yields its base URL, stops on exit.

    ``port=0`` picks a free port. Meant for tests and notebooks::

        with running_server(BM25Retriever(passages)) as url:
            HttpRetriever(url).search(["query"])
    """
    import uvicorn

    check_port(port)
    config = uvicorn.Config(
        build_app(retriever, **limits), host=host, port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="inspo-retrieval-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"retrieval server did not start on {host}:{port}")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
