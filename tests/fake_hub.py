"""A tiny stand-in for the Hugging Face hub's upload and download API (FastAPI + uvicorn on 127.0.0.1), enough
for ``huggingface_hub.HfApi().create_repo`` and ``upload_folder`` with every file sent inline:

- ``POST /api/repos/create``: records the repository, answers its URL;
- ``POST /api/validate-yaml``: accepts any card, no warnings;
- ``POST /api/models/{org}/{name}/preupload/{revision}``: every file "regular" (inline, no LFS);
- ``POST /api/models/{org}/{name}/commit/{revision}``: reads the ndjson commit and keeps each
  file's bytes in ``files[repo_id][path]``;
- and, for ``snapshot_download``, ``GET /api/models/{org}/{name}/revision/{revision}`` and
  ``.../tree/{revision}`` (the files committed) and ``HEAD``/``GET /{org}/{name}/resolve/{revision}/{path}``
  (each file, ``downloads`` records the paths).

Requests without ``Authorization: Bearer <token>`` are refused with 401, as the hub refuses
anonymous writes. Point ``HF_ENDPOINT`` at ``url`` (and ``HF_TOKEN`` at ``token``).
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


class FakeHub:
    def __init__(self, token: str = "hf_fake_token"):
        self.token = token
        self.repos: dict[str, dict] = {}
        self.files: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict] = []
        self.downloads: list[str] = []
        self.url = ""
        self._server = self._thread = self._sock = None

    def app(self) -> FastAPI:
        app = FastAPI()

        def authorized(request: Request) -> bool:
            return request.headers.get("authorization") == f"Bearer {self.token}"

        def refused() -> JSONResponse:
            return JSONResponse({"error": "Invalid credentials in Authorization header"}, status_code=401)

        @app.post("/api/repos/create")
        async def create(request: Request):
            if not authorized(request):
                return refused()
            body = await request.json()
            repo_id = f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
            self.repos[repo_id] = body
            return {"url": f"{self.url}/{repo_id}", "name": repo_id}

        @app.post("/api/validate-yaml")
        async def validate(request: Request):
            return {"errors": [], "warnings": []}

        @app.post("/api/models/{org}/{name}/preupload/{revision}")
        async def preupload(org: str, name: str, revision: str, request: Request):
            if not authorized(request):
                return refused()
            body = await request.json()
            return {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                              for f in body["files"]]}

        @app.post("/api/models/{org}/{name}/commit/{revision}")
        async def commit(org: str, name: str, revision: str, request: Request):
            if not authorized(request):
                return refused()
            repo_id = f"{org}/{name}"
            lines = [json.loads(line) for line in (await request.body()).decode().splitlines() if line.strip()]
            stored = self.files.setdefault(repo_id, {})
            for line in lines:
                if line["key"] == "file":
                    value = line["value"]
                    assert value["encoding"] == "base64"
                    stored[value["path"]] = base64.b64decode(value["content"])
            self.commits.append({"repo_id": repo_id, "revision": revision, "header": lines[0]["value"]})
            oid = f"{len(self.commits):040x}"
            return {"commitUrl": f"{self.url}/{repo_id}/commit/{oid}", "commitOid": oid}

        def commit_oid() -> str:
            return f"{len(self.commits):040x}"

        def blob(data: bytes) -> str:
            import hashlib

            return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

        @app.get("/api/models/{org}/{name}/revision/{revision}")
        async def repo_info(org: str, name: str, revision: str):
            stored = self.files.get(f"{org}/{name}")
            if stored is None:
                return JSONResponse({"error": "Repository not found"}, status_code=404,
                                    headers={"X-Error-Code": "RepoNotFound"})
            return {"id": f"{org}/{name}", "sha": commit_oid(), "siblings": [{"rfilename": p} for p in stored]}

        @app.get("/api/models/{org}/{name}/tree/{revision}")
        async def tree(org: str, name: str, revision: str):
            stored = self.files.get(f"{org}/{name}", {})
            return [{"type": "file", "path": p, "size": len(d), "oid": blob(d)} for p, d in stored.items()]

        @app.api_route("/{org}/{name}/resolve/{revision}/{path:path}", methods=["GET", "HEAD"])
        async def resolve(org: str, name: str, revision: str, path: str, request: Request):
            from fastapi.responses import Response

            data = self.files.get(f"{org}/{name}", {}).get(path)
            if data is None:
                return JSONResponse({"error": "Entry not found"}, status_code=404,
                                    headers={"X-Error-Code": "EntryNotFound"})
            headers = {"X-Repo-Commit": commit_oid(), "ETag": f'"{blob(data)}"', "Content-Length": str(len(data))}
            self.downloads.append(path)
            return Response(b"" if request.method == "HEAD" else data, headers=headers,
                            media_type="application/octet-stream")

        return app

    def __enter__(self) -> FakeHub:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._sock = sock
        self._server = uvicorn.Server(uvicorn.Config(self.app(), log_level="warning", lifespan="off",
                                                     timeout_graceful_shutdown=2))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake hub did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
