"""Benchmark: reliability of the retrieval server and the CLI under bad input (issue 21, items 2-5).

Three parts, each bounded in count and time, contacting only 127.0.0.1:

``bodies`` - oversized request bodies against ``inspo serve-retriever`` (a child process over
the world corpus, started fresh for each case), once with no effective limit
(``--max-body-mb 1000000``: the server as it was before the limit, which read and parsed any
body) and once with the default limit (8 MiB). Cases: one big body sent with a Content-Length,
the same body chunked (1 MiB pieces, no Content-Length), several big bodies at once, and one
body just under the limit made of tiny queries (allowed in, refused after parsing for its
query count: what a body under the limit can still cost). Reported per case: the answers'
status codes, seconds, and the server's resident memory (RSS, sampled every 5 ms with psutil)
before the case and at its peak.

``load`` - mixed good and bad requests from ``--load-clients`` threads against one server with
the default limits, until ``--load-requests`` are sent or ``--load-seconds`` pass. Kinds: good
(world questions; the answer must equal in-process BM25's top 3, id for id), malformed JSON
(422), too many queries (400), a query too long (400), topk 0 (400), a body over the limit with a
Content-Length and chunked (413), and a client that sends half its declared body and hangs up
(no answer possible; the server must carry on). Reported per kind: sent, answered as expected,
what else came back, latency; lost = good requests not answered correctly; the server's peak
RSS and whether it is still healthy at the end.

``cli`` - bad inputs through ``inspo`` (a subprocess each, ``--cli-timeout`` seconds at most):
resumes without a saved state or from damaged files, unknown models, bad flags, files that are
not UTF-8, duplicate corpus ids, non-boolean settings. Reported: exit code, whether a traceback
was printed, and the first line of the message; ``ok`` means exit 2, no traceback, and the
message names what the case expects.

Run: ``python benchmarks/reliability/reliability.py`` (``--quick`` for a smoke run; ``--help``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.lab.harness import add_common, run_benchmark, start
from inspo.processes import free_local_port, stop_process

MIB = 1024 * 1024
NO_LIMIT_MB = 1_000_000  # --max-body-mb that no body here reaches: the server before the limit
DEFAULT_LIMIT_MB = 8.0
#: The servers compared: (label, --max-body-mb).
ARMS = (("no limit (before)", NO_LIMIT_MB), (f"limit {DEFAULT_LIMIT_MB:g} MiB (default)", DEFAULT_LIMIT_MB))


# --------------------------------------------------------------------------- the server


@dataclass
class Server:
    url: str
    pid: int


@contextmanager
def serve_world(max_body_mb: float, *, startup_timeout: float = 60.0) -> Iterator[Server]:
    """``inspo serve-retriever --corpus world`` in a child process on 127.0.0.1; stopped on exit."""
    import httpx

    port = free_local_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "inspo.cli", "serve-retriever", "--corpus", "world", "--host", "127.0.0.1",
         "--port", str(port), "--max-body-mb", str(max_body_mb)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"inspo serve-retriever did not start on {url}")
            time.sleep(0.05)
        yield Server(url, proc.pid)
    finally:
        stop_process(proc)


class RssSampler:
    """The resident memory of process ``pid`` sampled every ``interval`` s in a thread (psutil);
    ``None`` values where psutil is missing."""

    def __init__(self, pid: int, interval: float = 0.005):
        try:
            import psutil

            self._proc = psutil.Process(pid)
        except ImportError:
            self._proc = None
        self.interval = interval
        self.before = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _rss(self) -> int | None:
        if self._proc is None:
            return None
        try:
            return int(self._proc.memory_info().rss)
        except Exception:  # noqa: BLE001 - the process ended: keep what was seen
            return None

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self._rss()
            if rss is not None and (self.peak is None or rss > self.peak):
                self.peak = rss
            time.sleep(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        rss = self._rss()
        if rss is not None and (self.peak is None or rss > self.peak):
            self.peak = rss


def _mb(n: int | None) -> float | None:
    return None if n is None else round(n / MIB, 1)


def _healthy(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


# --------------------------------------------------------------------------- part: bodies


def queries_body(n_bytes: int, query: bytes = b"ab") -> bytes:
    """``{"queries": ["ab", "ab", ...]}`` of about ``n_bytes`` bytes (at most), built as bytes."""
    item = b'"' + query + b'", '
    head, tail = b'{"queries": [', b'"' + query + b'"]}'
    count = max(0, (n_bytes - len(head) - len(tail)) // len(item))
    return head + item * count + tail


def _chunks(body: bytes, size: int = MIB) -> Iterator[bytes]:
    yield from (body[i:i + size] for i in range(0, len(body), size))


def _post(url: str, body: bytes, *, chunked: bool, timeout: float) -> tuple[str, float]:
    """(status or error name, seconds) of one POST /retrieve."""
    import httpx

    start = time.perf_counter()
    try:
        response = httpx.post(f"{url}/retrieve", content=_chunks(body) if chunked else body,
                              headers={"content-type": "application/json"}, timeout=timeout)
        status = str(response.status_code)
    except httpx.HTTPError as exc:
        status = type(exc).__name__
    return status, time.perf_counter() - start


def body_cases(args: argparse.Namespace) -> list[tuple[str, str, list[bytes], bool]]:
    """(case, what is sent, bodies sent at once, chunked)."""
    big = queries_body(int(args.big_mb * 1e6))
    each = queries_body(int(args.concurrent_mb * 1e6))
    under = queries_body(int(DEFAULT_LIMIT_MB * MIB) - 1024)
    return [
        ("content-length", f"1 x {len(big) / 1e6:.0f} MB", [big], False),
        ("chunked", f"1 x {len(big) / 1e6:.0f} MB chunked", [big], True),
        ("concurrent", f"{args.concurrent} x {len(each) / 1e6:.0f} MB at once", [each] * args.concurrent, False),
        ("under-limit", f"1 x {len(under) / 1e6:.1f} MB, {(len(under) - 15) // 6:,} queries", [under], False),
    ]


def run_sampled(threads: list[threading.Thread], pid: int) -> tuple[float, RssSampler]:
    """Start ``threads``, wait for them, and return the wall time and the server's RSS samples."""
    start = time.perf_counter()
    with RssSampler(pid) as rss:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return time.perf_counter() - start, rss


def part_bodies(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for case, sent, bodies, chunked in body_cases(args):
        for arm, limit in ARMS:
            with serve_world(limit) as server:
                results: list[tuple[str, float]] = [("", 0.0)] * len(bodies)

                def send(i: int, body: bytes, url: str = server.url, chunked: bool = chunked,
                         results: list = results) -> None:
                    results[i] = _post(url, body, chunked=chunked, timeout=args.body_timeout)

                threads = [threading.Thread(target=send, args=(i, b)) for i, b in enumerate(bodies)]
                wall, rss = run_sampled(threads, server.pid)
                rows.append({
                    "case": case, "sent": sent, "arm": arm, "max_body_mb": limit,
                    "statuses": dict(Counter(s for s, _ in results)), "seconds": round(wall, 3),
                    "rss_before_mb": _mb(rss.before), "rss_peak_mb": _mb(rss.peak),
                    "rss_added_mb": None if rss.peak is None or rss.before is None else _mb(rss.peak - rss.before),
                    "healthy_after": _healthy(server.url),
                })
            print(f"  bodies: {case:<15} {arm:<26} {rows[-1]['statuses']} {rows[-1]['seconds']:.2f} s "
                  f"peak {rows[-1]['rss_peak_mb']} MB", flush=True)
    return rows


# --------------------------------------------------------------------------- part: load

#: kind -> (share of requests, the status expected; None: no answer is possible)
LOAD_KINDS: dict[str, tuple[float, int | None]] = {
    "good": (0.60, 200),
    "malformed-json": (0.05, 422),
    "too-many-queries": (0.05, 400),
    "query-too-long": (0.05, 400),
    "topk-0": (0.05, 400),
    "oversized": (0.08, 413),
    "oversized-chunked": (0.07, 413),
    "abort-mid-body": (0.05, None),
}


def _abort_mid_body(url: str) -> str:
    """Declare 1000 bytes, send 500, hang up: what a crashed client does."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b'{"queries": ["' + b"a" * 486)
    return "closed"


def part_load(args: argparse.Namespace, arm: str, limit_mb: float) -> dict[str, Any]:
    import httpx

    from inspo.data.world import build_world
    from inspo.retrieval.bm25 import BM25Retriever

    world = build_world(0)
    questions = [q.question for split in world.splits.values() for q in split]
    reference = BM25Retriever(world.corpus)
    oversized = queries_body(int(DEFAULT_LIMIT_MB * MIB) + MIB)  # 1 MiB over the default limit
    kinds, weights = list(LOAD_KINDS), [share for share, _ in LOAD_KINDS.values()]
    lock = threading.Lock()
    outcomes: dict[str, Counter] = {k: Counter() for k in kinds}
    latency: dict[str, list[float]] = {k: [] for k in kinds}
    wrong_answers = Counter()
    sent = 0

    with serve_world(limit_mb) as server:
        url = server.url
        deadline = time.monotonic() + args.load_seconds

        def client(seed: int) -> None:
            nonlocal sent
            rng = random.Random(seed)
            with httpx.Client(timeout=args.body_timeout) as http:
                while True:
                    with lock:
                        if sent >= args.load_requests or time.monotonic() > deadline:
                            return
                        sent += 1
                    kind = rng.choices(kinds, weights)[0]
                    batch = rng.sample(questions, rng.randint(1, 8))
                    start = time.perf_counter()
                    try:
                        outcome, answer = _load_request(http, url, kind, batch, oversized)
                    except Exception as exc:  # noqa: BLE001 - every failure is an outcome to count
                        outcome, answer = type(exc).__name__, None
                    seconds = time.perf_counter() - start
                    correct = None
                    if kind == "good" and answer is not None:
                        expected = [[p.id for p in hits] for hits in reference.search(batch, k=3)]
                        try:
                            correct = [[h["id"] for h in hits] for hits in answer["result"]] == expected
                        except (KeyError, TypeError):
                            correct = False
                    with lock:
                        outcomes[kind][outcome] += 1
                        latency[kind].append(seconds)
                        if correct is False:
                            wrong_answers[kind] += 1

        threads = [threading.Thread(target=client, args=(args.seed * 1000 + i,)) for i in range(args.load_clients)]
        wall, rss = run_sampled(threads, server.pid)
        healthy = _healthy(url)

    rows = []
    for kind in kinds:
        expected = LOAD_KINDS[kind][1]
        expected_outcome = "closed" if expected is None else str(expected)
        got = outcomes[kind]
        n = sum(got.values())
        as_expected = got.get(expected_outcome, 0) - wrong_answers[kind]
        lat = sorted(latency[kind])
        rows.append({
            "kind": kind, "expected": expected_outcome, "sent": n, "as_expected": as_expected,
            "other": {k: v for k, v in got.items() if k != expected_outcome},
            "wrong_answers": wrong_answers[kind],
            "p50_ms": round(1000 * statistics.median(lat), 1) if lat else None,
            "p95_ms": round(1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))], 1) if lat else None,
        })
    good = next(r for r in rows if r["kind"] == "good")
    return {
        "arm": arm, "max_body_mb": limit_mb, "clients": args.load_clients, "requests": sent, "seconds": round(wall, 2),
        "requests_per_s": round(sent / wall, 1) if wall else None, "kinds": rows,
        "lost_good": good["sent"] - good["as_expected"],
        "bad_answered_wrongly": sum(r["sent"] - r["as_expected"] for r in rows if r["kind"] != "good"),
        "rss_before_mb": _mb(rss.before), "rss_peak_mb": _mb(rss.peak), "healthy_after": healthy,
    }


def _load_request(http, url: str, kind: str, batch: list[str], oversized: bytes) -> tuple[str, Any]:
    headers = {"content-type": "application/json"}
    if kind == "abort-mid-body":
        return _abort_mid_body(url), None
    if kind == "good":
        response = http.post(f"{url}/retrieve", json={"queries": batch, "topk": 3})
        return str(response.status_code), response.json() if response.status_code == 200 else None
    if kind == "malformed-json":
        response = http.post(f"{url}/retrieve", content=b'{"queries": [', headers=headers)
    elif kind == "too-many-queries":
        response = http.post(f"{url}/retrieve", json={"queries": ["q"] * 513})
    elif kind == "query-too-long":
        response = http.post(f"{url}/retrieve", json={"queries": ["x" * 2001]})
    elif kind == "topk-0":
        response = http.post(f"{url}/retrieve", json={"queries": batch, "topk": 0})
    elif kind == "oversized":
        response = http.post(f"{url}/retrieve", content=oversized, headers=headers)
    else:  # oversized-chunked
        response = http.post(f"{url}/retrieve", content=_chunks(oversized), headers=headers)
    return str(response.status_code), None


# --------------------------------------------------------------------------- part: cli


@dataclass
class CliCase:
    name: str
    argv: list[str]
    expect: str
    """A fragment the message must hold."""
    quick: bool = False


TINY = ["--set", "model.name_or_path=tiny-qwen2", "--set", "rl.steps=4"]


def _state(step: int = 2) -> dict[str, Any]:
    from inspo.config.schedule import core_config
    from inspo.config.train import resolve
    from inspo.core.coevolution import CoEvolution
    from inspo.core.proposer import Proposer
    from inspo.core.reflector import RuleBasedReflector
    from inspo.envs.search_r1.reflector_rules import RULES

    config = resolve("cpu-tiny", overrides=["model.name_or_path=tiny-qwen2", "rl.steps=4"])
    coevo = CoEvolution(core_config(config.coevolution, static=False), "Use <search> and <answer>.",
                        Proposer(RuleBasedReflector(seed=0, rules=RULES), guard_tags=("search", "answer")))
    coevo.last_step = step
    return coevo.state_dict()


def _checkpoint(run: Path, step: int = 2) -> Path:
    """A checkpoint as inspo train leaves it, with small stand-ins for TRL's files."""
    import torch
    from safetensors.torch import save_file

    from inspo import artifacts
    from inspo.config.train import dump, resolve

    config = resolve("cpu-tiny", overrides=["model.name_or_path=tiny-qwen2", "rl.steps=4", f"output_dir={run}"])
    ckpt = run / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    artifacts.write_json(ckpt / artifacts.STEP_FILE, {"inspo_step": step, "global_step": step, "mini_batches": 1,
                                                      "config": config.to_dict()})
    artifacts.write_json(ckpt / artifacts.STATE_FILE, _state(step))
    torch.save({"state": {0: {"exp_avg": torch.zeros(64)}}, "param_groups": [{"lr": 1e-5}]}, ckpt / "optimizer.pt")
    save_file({"base_model.layers.0.q_proj.lora_A.weight": torch.zeros(4, 64)}, ckpt / "adapter_model.safetensors")
    (run / "config.yaml").write_text(dump(config))
    return ckpt


def _cut(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def cli_cases(work: Path) -> list[CliCase]:
    """The cases and the files they need, written under ``work``."""
    (work / "afile").write_text("a file, not a folder")
    killed = work / "killed-before-step-1"
    killed.mkdir()
    (killed / "events.jsonl").write_text('{"kind": "warmed_up", "step": 0}\n{"kind": "evolution_started", "step": 0}\n')
    for name, text in (("state-empty", b"{}"), ("state-not-utf8", b"\x80\x81garbage"),
                       ("state-saved", json.dumps(_state()).encode())):
        (work / name).mkdir()
        (work / name / "inspo_state.json").write_bytes(text)
    damaged = {"optimizer-cut": lambda c: _cut(c / "optimizer.pt"),
               "adapter-cut": lambda c: _cut(c / "adapter_model.safetensors"),
               "trainer-state-cut": lambda c: _cut(c / "trainer_state.json"),
               "step-file-cut": lambda c: _cut(c / "inspo_step.json", 0.3)}
    for name, damage in damaged.items():
        _checkpoint(work / name, step=1)
        damage(_checkpoint(work / name, step=2))
    (work / "qa.jsonl").write_bytes(b'{"id": "a", "question": "q?", "golden_answers": ["x"]}\n'
                                    b'{"id": "b", "question": "caf\xe9?", "golden_answers": ["y"]}\n')
    (work / "run.yaml").write_bytes(b"rl:\n  steps: 3 # \xe9\n")
    rows = [{"id": "d1", "contents": '"A"\nalpha'}, {"id": "d2", "contents": '"B"\nbeta'},
            {"id": "d1", "contents": '"C"\ngamma'}]
    (work / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def resume(name: str, command: str = "evolve") -> list[str]:
        return [command, "--resume", "--output-dir", str(work / name), "--no-progress", *TINY]

    return [
        CliCase("evolve --resume, no such folder", resume("typo"), "does not exist", quick=True),
        CliCase("evolve --resume, killed before step 1", resume(killed.name), "inspo_state.json is missing", quick=True),
        CliCase("evolve --resume, state {}", resume("state-empty"), "is not an INSPO state: it lacks"),
        CliCase("evolve --resume, state not UTF-8", resume("state-not-utf8"), "not UTF-8 at byte offset 0"),
        CliCase("evolve (new) over a saved run", ["evolve", "--output-dir", str(work / "state-saved"), *TINY],
                "already holds an inspo evolve run"),
        CliCase("train --resume, optimizer.pt cut", resume("optimizer-cut", "train"), "optimizer.pt is damaged",
                quick=True),
        CliCase("train --resume, adapter cut", resume("adapter-cut", "train"), "adapter_model.safetensors is damaged"),
        CliCase("train --resume, trainer_state.json cut", resume("trainer-state-cut", "train"),
                "trainer_state.json is not valid JSON"),
        CliCase("train --resume, inspo_step.json cut", resume("step-file-cut", "train"),
                "inspo_step.json is not valid JSON"),
        CliCase("eval --policy /nope/model", ["eval", "--policy", "/nope/model", "--dataset", "world@test"],
                "unknown model '/nope/model'", quick=True),
        CliCase("eval --limit -1", ["eval", "--limit", "-1", "--dataset", "world@test"], "--limit must be >= 0"),
        CliCase("eval, JSONL line not UTF-8", ["eval", "--dataset", str(work / "qa.jsonl"), "--policy", "tiny-qwen2"],
                "qa.jsonl line 2: not UTF-8"),
        CliCase("serve-retriever --port -1", ["serve-retriever", "--corpus", "world", "--port", "-1"],
                "port must be in 0..65535", quick=True),
        CliCase("serve-retriever --max-queries 0", ["serve-retriever", "--corpus", "world", "--max-queries", "0"],
                "max_queries must be a whole number >= 1"),
        CliCase("serve-retriever --max-body-mb 0", ["serve-retriever", "--corpus", "world", "--max-body-mb", "0"],
                "--max-body-mb must be > 0"),
        CliCase("serve-retriever, duplicate corpus ids", ["serve-retriever", "--corpus", str(work / "corpus.jsonl"),
                                                          "--port", "0"], "passage id 'd1' is already the id of"),
        CliCase("data world --out <a file>", ["data", "world", "--out", str(work / "afile")], "is a file, not a folder"),
        CliCase("train --set model.lora=maybe", ["train", "--dry-run", "--set", "model.lora=maybe"],
                "model.lora must be true or false; got 'maybe'"),
        CliCase("train --config <not UTF-8>", ["train", "--dry-run", "--config", str(work / "run.yaml")],
                "not UTF-8 at byte offset 17"),
        CliCase("demo --steps 0", ["demo", "--steps", "0", "--out", str(work / "demo")], "--steps must be >= 1"),
        CliCase("demo --validation-size 0", ["demo", "--validation-size", "0", "--out", str(work / "demo")],
                "--validation-size must be >= 1"),
    ]


def part_cli(args: argparse.Namespace) -> list[dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INSPO_OPTIMIZER", "OPENAI_"))}
    rows = []
    with tempfile.TemporaryDirectory(prefix="inspo-reliability-") as tmp:
        work = Path(tmp)
        for case in cli_cases(work):
            if args.quick and not case.quick:
                continue
            start = time.perf_counter()
            try:
                done = subprocess.run([sys.executable, "-m", "inspo.cli", *case.argv], cwd=work, env=env,
                                      capture_output=True, text=True, timeout=args.cli_timeout)
                code, err = done.returncode, done.stderr
            except subprocess.TimeoutExpired as exc:
                code, err = None, (exc.stderr or b"").decode("utf-8", "replace") if isinstance(exc.stderr, bytes) \
                    else (exc.stderr or "")
            message = next((line for line in err.splitlines()
                            if line.strip() and " INFO " not in line and " WARNING " not in line), "")
            traceback = "Traceback (most recent call last)" in err
            rows.append({
                "case": case.name, "exit_code": code, "traceback": traceback,
                "message": message.removeprefix("inspo: error: ").replace(str(work), "<tmp>"),
                "seconds": round(time.perf_counter() - start, 2),
                "ok": code == 2 and not traceback and case.expect in message,
            })
            print(f"  cli: {case.name:<42} exit {code} {'ok' if rows[-1]['ok'] else 'NOT OK'}", flush=True)
    return rows


# --------------------------------------------------------------------------- report


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from inspo.eval.provenance import library_versions

    result: dict[str, Any] = {
        "benchmark": "reliability",
        # no model, no torch: servers, clients and the CLI on the CPU
        "provenance": start("benchmarks/reliability/reliability.py", args.argv, device="cpu"),
        "environment": {"cpu_count": os.cpu_count(), "loadavg_start": list(os.getloadavg()),
                        "versions": library_versions(("fastapi", "uvicorn", "httpx", "psutil"))},
        "settings": {k: v for k, v in vars(args).items() if k not in ("argv", "json")},
    }
    started = time.perf_counter()
    if "bodies" in args.parts:
        result["bodies"] = part_bodies(args)
    if "load" in args.parts:
        result["load"] = [part_load(args, arm, limit) for arm, limit in ARMS]
    if "cli" in args.parts:
        result["cli"] = part_cli(args)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def report(result: dict[str, Any]) -> str:
    lines = [f"{result['environment']['cpu_count']} CPUs, load {result['environment']['loadavg_start'][0]:.2f}"]
    if "bodies" in result:
        lines += ["", "(a) oversized bodies: server RSS in MB (before -> peak), answers, seconds",
                  "| case | sent | server | answers | seconds | RSS before | RSS peak | added | healthy after |",
                  "|---|---|---|---|---:|---:|---:|---:|---|"]
        for r in result["bodies"]:
            answers = ", ".join(f"{n} x {s}" for s, n in r["statuses"].items())
            lines.append(f"| {r['case']} | {r['sent']} | {r['arm']} | {answers} | {r['seconds']:.2f} | "
                         f"{r['rss_before_mb']} | {r['rss_peak_mb']} | {r['rss_added_mb']} | {r['healthy_after']} |")
    for load in result.get("load", []):
        lines += ["", f"(b) mixed load, server {load['arm']}: {load['requests']} requests from {load['clients']} "
                      f"clients in {load['seconds']} s ({load['requests_per_s']}/s); server RSS {load['rss_before_mb']} "
                      f"-> peak {load['rss_peak_mb']} MB; healthy after: {load['healthy_after']}; lost good requests: "
                      f"{load['lost_good']}; bad requests answered wrongly: {load['bad_answered_wrongly']}",
                  "| kind | expected | sent | as expected | other outcomes | p50 ms | p95 ms |",
                  "|---|---|---:|---:|---|---:|---:|"]
        for r in load["kinds"]:
            other = ", ".join(f"{n} x {k}" for k, n in r["other"].items())
            if r["wrong_answers"]:
                other = (other + ", " if other else "") + f"{r['wrong_answers']} wrong answers"
            lines.append(f"| {r['kind']} | {r['expected']} | {r['sent']} | {r['as_expected']} | {other or '-'} | "
                         f"{r['p50_ms']} | {r['p95_ms']} |")
    if "cli" in result:
        ok = sum(r["ok"] for r in result["cli"])
        lines += ["", f"(c) bad inputs through the CLI: {ok} of {len(result['cli'])} refused with exit 2, no "
                      "traceback, and the expected message",
                  "| input | exit | traceback | first line of the message | ok |", "|---|---:|---|---|---|"]
        for r in result["cli"]:
            message = r["message"] if len(r["message"]) <= 150 else r["message"][:147] + "..."
            lines.append(f"| {r['case']} | {r['exit_code']} | {'yes' if r['traceback'] else 'no'} | "
                         f"{message.replace('|', '/')} | {'yes' if r['ok'] else 'NO'} |")
    lines.append(f"\ntotal {result['seconds']} s")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--parts", nargs="+", choices=("bodies", "load", "cli"), default=["bodies", "load", "cli"])
    p.add_argument("--big-mb", type=float, default=120.0, help="size of the big body in MB (10^6 bytes)")
    p.add_argument("--concurrent", type=int, default=4, help="bodies sent at once in the concurrent case")
    p.add_argument("--concurrent-mb", type=float, default=30.0, help="size of each of those in MB")
    p.add_argument("--body-timeout", type=float, default=120.0, help="seconds a client waits for one answer")
    p.add_argument("--load-requests", type=int, default=3000, help="most requests sent in the load part")
    p.add_argument("--load-seconds", type=float, default=90.0, help="most seconds of sending in the load part")
    p.add_argument("--load-clients", type=int, default=8, help="client threads in the load part")
    p.add_argument("--cli-timeout", type=float, default=120.0, help="most seconds of one CLI case")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 12 MB and 4 x 3 MB bodies, 150 requests from 4 clients, 5 CLI cases")
    add_common(p, threads=None, seed_help="the load part's choice of request kinds",
               json_help="also write the result as JSON to this path")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # recorded in the result's provenance
    if args.quick:
        args.big_mb, args.concurrent_mb = 12.0, 3.0
        args.load_requests, args.load_seconds, args.load_clients = 150, 30.0, 4
        args.cli_timeout = min(args.cli_timeout, 60.0)
    if args.big_mb <= 0 or args.concurrent < 1 or args.concurrent_mb <= 0 or args.load_requests < 1 \
            or args.load_seconds <= 0 or args.load_clients < 1 or args.cli_timeout <= 0 or args.body_timeout <= 0:
        p.error("sizes, counts and times must be > 0")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, return the result dict."""
    return run_benchmark(argv, parse_args, benchmark, report)


if __name__ == "__main__":
    main()
