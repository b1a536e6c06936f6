"""A Search-R1-compatible retrieval server (FastAPI + uvicorn) around any :class:`Retriever`.

Protocol (the one Search-R1's ``retrieval_server.py`` speaks, so verl / SkyRL / Search-R1
clients work unchanged):

``POST /retrieve`` with ``{"queries": [str, ...], "topk": int (optional), "return_scores": bool
(default false)}`` answers ``{"result": [[hit, ...], ...]}``, one list per query in query order.
A hit is ``{"document": {"id", "contents": "\\"Title\\"\\ntext"}, "score": float}`` when
``return_scores`` is true and just the document dict ``{"id", "contents"}`` when it is false.

``GET /healthz`` answers ``{"status": "ok", "backend", "corpus_size", "limits"}``.

Rules:

- All queries of one request go to the retriever in one ``search`` call (batching is the
  retriever's job); calls are serialised with a lock, so backends need not be thread-safe.
- Requests are refused with a message that says what is wrong: more than ``max_queries``
  queries (400), a query longer than ``max_query_chars`` (400), ``topk`` outside
  ``1..max_topk`` (400), a malformed body or bad JSON (422, with a readable ``detail``).
  A missing ``topk`` means ``default_topk``; an empty query list answers ``{"result": []}``.
- An empty corpus is refused at startup: :func:`build_app` raises ``ValueError`` when the
  retriever has ``len() == 0``, so ``serve`` never listens with nothing to serve.
"""

# no `from __future__ import annotations`: FastAPI must see the request model class itself

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from inspo.records import Passage
from inspo.retrieval.base import Retriever

REQUEST_SHAPE = '{"queries": ["..."], "topk": 3, "return_scores": true}'


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
    backend: str | None = None,
):
    """Build the FastAPI app serving ``retriever`` (rules in the module docstring)."""
    from fastapi import FastAPI, HTTPException
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel, ConfigDict

    if not 1 <= default_topk <= max_topk:
        raise ValueError(f"default_topk must be in 1..max_topk={max_topk}, got {default_topk}")
    size = _corpus_size(retriever)
    if size == 0:
        raise ValueError("refusing to serve an empty corpus: the retriever has 0 passages")
    backend_name = backend or getattr(retriever, "backend", type(retriever).__name__)
    limits = {"max_queries": max_queries, "max_query_chars": max_query_chars,
              "max_topk": max_topk, "default_topk": default_topk}
    lock = threading.Lock()

    class RetrieveRequest(BaseModel):
        model_config = ConfigDict(extra="ignore")
        queries: list[str]
        topk: int | None = None
        return_scores: bool = False

    app = FastAPI(title="inspo retrieval server", version="1")

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
            raise HTTPException(400, f"too many queries: {len(queries)} in one request, the limit "
                                     f"is max_queries={max_queries}; split the batch")
        for i, q in enumerate(queries):
            if len(q) > max_query_chars:
                raise HTTPException(400, f"query {i} is too long: {len(q)} characters, the limit "
                                         f"is max_query_chars={max_query_chars}")
        if not 1 <= topk <= max_topk:
            raise HTTPException(400, f"topk must be between 1 and max_topk={max_topk}, got {topk}")
        if not queries:
            return {"result": []}
        try:
            with lock:
                results = retriever.search(list(queries), k=topk)
        except Exception as e:  # the retriever failed: a server error, said plainly
            raise HTTPException(500, f"retriever {backend_name} failed: {type(e).__name__}: {e}") from e
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

    config = uvicorn.Config(build_app(retriever, **limits), host=host, port=port,
                            log_level="warning", lifespan="off")
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
