"""A real OpenAI-compatible chat server for tests (FastAPI + uvicorn on 127.0.0.1).

It speaks the OpenAI wire format — ``POST /v1/chat/completions`` and ``GET /v1/models`` — and
answers from a backend: a real chat model (SmolLM2 through
:class:`inspo.llm.local.LocalTransformersClient`) or, for tests of failure handling, a canned
echo. The request's ``model`` name selects a failure mode:

- ``slow``: sleeps ``slow_s`` seconds before answering (past a client's timeout);
- ``flaky-K``: the first K requests for that name get HTTP 503, later ones are answered;
- ``malformed-json``: HTTP 200 whose body is not valid JSON;
- ``malformed-no-choices``: HTTP 200, a JSON object without ``choices``;
- ``malformed-no-content``: HTTP 200, a choice whose message has no ``content``;
- ``n-ignored``: one choice whatever ``n`` (as llama.cpp's server and Ollama do);
- ``no-usage``: no ``usage`` field;
- ``bad-request``: HTTP 400 always;
- ``echo-key``: HTTP 400 whose error message repeats the request's ``Authorization`` header (as
  some proxies do), for the redaction of keys from recorded errors;
- ``new-style``: HTTP 400 for ``max_tokens`` (wants ``max_completion_tokens``, as OpenAI's
  reasoning models do);
- anything else: a normal answer.

``calls`` counts the requests per model name, ``requests`` keeps their bodies. With
``api_key`` set, requests without ``Authorization: Bearer <api_key>`` get HTTP 401. With
``models_route=False`` there is no ``GET /v1/models`` (HTTP 404, as on some servers).

Run by hand: ``python tests/openai_compat_server.py --model smollm2 --port 8080``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse, Response

# A backend answers (messages, n, temperature, max_tokens) with (texts, prompt_tokens,
# completion_tokens).
Backend = Callable[[list[dict[str, str]], int, float, int], tuple[list[str], int, int]]


def echo_backend(messages: list[dict[str, str]], n: int, temperature: float, max_tokens: int) -> tuple[list[str], int, int]:
    """A canned backend: 'echo i: <last message>'; tokens counted as words."""
    last = messages[-1]["content"] if messages else ""
    texts = [f"echo {i}: {last[:60]}" for i in range(n)]
    prompt = sum(len(m.get("content", "").split()) for m in messages)
    return texts, prompt, sum(len(t.split()) for t in texts)


def model_backend(client: Any) -> Backend:
    """A backend over an in-process LLM client (e.g. LocalTransformersClient); exact token counts."""
    lock = threading.Lock()

    def answer(messages, n, temperature, max_tokens):
        with lock:
            before_p, before_c = client.usage.prompt_tokens, client.usage.completion_tokens
            texts = client.generate(messages, n=n, temperature=temperature, max_tokens=max_tokens)
            return texts, client.usage.prompt_tokens - before_p, client.usage.completion_tokens - before_c

    return answer


class OpenAICompatServer:
    """The server, run in a background thread; use as a context manager or start()/stop()."""

    def __init__(
        self,
        backend: Backend = echo_backend,
        *,
        served_model: str = "smollm2",
        api_key: str | None = None,
        slow_s: float = 1.0,
        models_route: bool = True,
    ) -> None:
        self.backend = backend
        self.models_route = models_route
        self.served_model = served_model
        self.api_key = api_key
        self.slow_s = slow_s
        self.calls: Counter[str] = Counter()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None
        self.base_url = ""

    # ------------------------------------------------------------------ app

    def app(self) -> FastAPI:
        app = FastAPI()

        def unauthorized(authorization: str | None) -> JSONResponse | None:
            if self.api_key and authorization != f"Bearer {self.api_key}":
                return JSONResponse({"error": {"message": "invalid api key", "type": "auth"}}, status_code=401)
            return None

        if self.models_route:

            @app.get("/v1/models")
            def models(authorization: str | None = Header(default=None)):
                denied = unauthorized(authorization)
                if denied:
                    return denied
                data = [{"id": self.served_model, "object": "model", "owned_by": "tests"}]
                return {"object": "list", "data": data}

        @app.post("/v1/chat/completions")
        def chat(body: dict[str, Any], authorization: str | None = Header(default=None)):
            denied = unauthorized(authorization)
            if denied:
                return denied
            model = str(body.get("model", ""))
            with self._lock:
                self.calls[model] += 1
                self.requests.append(body)
                seen = self.calls[model]
            if model == "echo-key":
                message = f"bad request from {authorization}"
                return JSONResponse({"error": {"message": message, "type": "invalid_request"}}, status_code=400)
            return self._answer(model, seen, body)

        return app

    def _answer(self, model: str, seen: int, body: dict[str, Any]):
        if model == "slow":
            time.sleep(self.slow_s)
        if model.startswith("flaky-") and seen <= int(model.split("-", 1)[1]):
            return JSONResponse({"error": {"message": "overloaded, try again", "type": "server"}}, status_code=503)
        if model == "bad-request":
            return JSONResponse({"error": {"message": "unsupported parameter", "type": "invalid_request"}}, status_code=400)
        if model == "new-style" and "max_tokens" in body:
            message = "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."
            return JSONResponse({"error": {"message": message, "type": "invalid_request"}}, status_code=400)
        if model == "malformed-json":
            return Response(content='{"id": "x", "choices": [', media_type="application/json")
        if model == "malformed-no-choices":
            return {"id": "chatcmpl-x", "object": "chat.completion", "created": int(time.time()), "model": model}
        n = int(body.get("n") or 1)
        if model == "n-ignored":
            n = 1
        texts, prompt_tokens, completion_tokens = self.backend(
            body["messages"], n, float(body.get("temperature", 1.0)), int(body.get("max_tokens") or body.get("max_completion_tokens") or 64)
        )
        choices = [
            {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
            for i, t in enumerate(texts)
        ]
        if model == "malformed-no-content":
            for c in choices:
                del c["message"]["content"]
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{seen}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
        }
        if model != "no-usage":
            answer["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
        return answer

    # ------------------------------------------------------------------ lifecycle

    def start(self, port: int = 0) -> str:
        """Serve on 127.0.0.1 (a free port unless ``port``); returns the base URL ending in /v1."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        self._sock = sock
        config = uvicorn.Config(self.app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the OpenAI-compatible test server did not start")
            time.sleep(0.02)
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def __enter__(self) -> OpenAICompatServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:  # pragma: no cover - manual use
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="a checkpoint folder, a .gguf file, 'smollm2', or 'echo'")
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    backend: Backend = echo_backend
    if args.model != "echo":
        from inspo.llm.local import LocalTransformersClient

        backend = model_backend(LocalTransformersClient(args.model))
    server = OpenAICompatServer(backend)
    print("serving on", server.start(args.port), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
