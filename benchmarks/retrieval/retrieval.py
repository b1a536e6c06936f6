"""Benchmark: the retrieval server versus in-process BM25, and dense versus BM25 retrieval.

Part (a), ``server``: the same BM25 index (``BM25Retriever`` over the world corpus,
``inspo.data.world.build_world(0)``) queried in process (``BM25Retriever.search``) and
through the Search-R1-compatible server (:func:`inspo.retrieval.server.build_app` under
uvicorn on 127.0.0.1) with :class:`inspo.retrieval.http_client.HttpRetriever`, on the same
world questions, in batches of ``--batch-sizes`` queries per call. Reported: queries/s of
each and the ratio server / in-process (1.0 = HTTP costs nothing). ``--server thread`` runs
uvicorn in a thread of this process (:func:`~inspo.retrieval.server.running_server`, what
tests and notebooks use: client and server share one GIL); ``--server process`` runs it in a
child process (what ``inspo serve-retriever`` does). Every loop is bounded (``--queries``
per batch size and repetition), and only 127.0.0.1 is contacted.

Part (b), ``dense``: :class:`~inspo.retrieval.dense.DenseRetriever` (the packaged
all-MiniLM-L6-v2, faiss inner product) versus BM25 on the world corpus: index build time,
query latency (one query per call, median), batched throughput, and recall@3 on world
questions. A question's hit is counted three ways (``Question.meta`` of a world question
holds its hop chain ``passage_ids``, one per hop, in reading order):

- ``first_hop``: the passage of the question's first hop (``passage_ids[0]``, the entity the
  question names) is in the top 3 — what one search with the question itself should find;
- ``answer_passage``: the passage that states the answer (``passage_ids[-1]``) is in the top 3
  (the same passage as ``first_hop`` for single-hop questions);
- ``answer_string``: a gold answer, SQuAD-normalised, appears as whole words in a top-3
  passage (lenient, the usual "answer in retrieved documents" metric: a year can also occur
  in an unrelated passage).

Recall is reported for single-hop (``hops == 1``) and multi-hop (``hops >= 2``) questions.

Arms are interleaved (order alternating between repetitions); medians are reported.
Run: ``python benchmarks/retrieval/retrieval.py`` (``--quick`` for a smoke run; ``--help``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from inspo.lab.harness import add_common, run_benchmark, start
from inspo.processes import free_local_port, stop_process

HIT_KINDS = ("first_hop", "answer_passage", "answer_string")


# --------------------------------------------------------------------------- environment


def environment(threads: int | None) -> dict[str, Any]:
    """What the numbers depend on beyond :func:`inspo.eval.provenance.provenance` (commit,
    command, Python, platform, the main libraries): threads, cores, load, and the versions of
    the server's libraries."""
    from inspo.eval.provenance import library_versions

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "versions": library_versions(("fastapi", "uvicorn", "httpx")),
        "loadavg_start": list(os.getloadavg()),
    }


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


# --------------------------------------------------------------------------- (a) server


_CHILD = """
import sys
from inspo.data.world import build_world
from inspo.retrieval.bm25 import BM25Retriever
from inspo.retrieval.server import serve
serve(BM25Retriever(build_world(int(sys.argv[2])).corpus), host="127.0.0.1",
      port=int(sys.argv[1]), log_level="warning")
"""


@contextmanager
def served(retriever: Any, mode: str, world_seed: int) -> Iterator[str]:
    """Base URL of a server over ``retriever`` on 127.0.0.1 (thread) or the same index built in
    a child process (process); stopped on exit."""
    from inspo.retrieval.http_client import HttpRetriever, RetrievalError
    from inspo.retrieval.server import running_server

    if mode == "thread":
        with running_server(retriever, host="127.0.0.1", port=0) as url:
            yield url
        return
    port = free_local_port()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, str(port), str(world_seed)])
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        with HttpRetriever(url, retries=0, timeout=5) as probe:
            while True:
                try:
                    probe.check()
                    break
                except RetrievalError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"retrieval server child did not start on {url}") from None
                    time.sleep(0.2)
        yield url
    finally:
        stop_process(proc)


def _query_loop(search: Callable[[list[str], int], Any], queries: list[str], batch: int,
                k: int) -> float:
    """Seconds to answer ``queries`` in calls of ``batch`` queries (a bounded loop)."""
    start = time.perf_counter()
    for i in range(0, len(queries), batch):
        search(queries[i : i + batch], k)
    return time.perf_counter() - start


def bench_server(bm25: Any, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Queries/s in process and over HTTP per batch size; ratio server / in-process."""
    from inspo.retrieval.http_client import HttpRetriever

    out: dict[str, Any] = {"mode": args.server, "queries_per_arm": len(queries), "per_batch": {}}
    with served(bm25, args.server, args.world_seed) as url, HttpRetriever(url) as http:
        probe = queries[: min(len(queries), 64)]
        out["same_results"] = [[p.id for p in ps] for ps in http.search(probe, args.k)] == [
            [p.id for p in ps] for ps in bm25.search(probe, args.k)
        ]
        arms = {"in_process": bm25.search, "server": http.search}
        for batch in args.batch_sizes:
            _query_loop(http.search, queries[: 4 * batch], batch, args.k)  # warm connection
            seconds: dict[str, list[float]] = {a: [] for a in arms}
            for rep in range(args.reps):
                order = list(arms) if rep % 2 == 0 else list(arms)[::-1]
                for arm in order:
                    seconds[arm].append(_query_loop(arms[arm], queries, batch, args.k))
            qps = {a: [len(queries) / s for s in v] for a, v in seconds.items()}
            ratios = [s / h for s, h in zip(qps["server"], qps["in_process"], strict=True)]
            out["per_batch"][str(batch)] = {
                "in_process_qps": _median(qps["in_process"]),
                "server_qps": _median(qps["server"]),
                "ratio": _median(ratios),
                "calls": -(-len(queries) // batch),
            }
    return out


# --------------------------------------------------------------------------- (b) dense vs BM25


def hits(question: Any, passages: Sequence[Any]) -> dict[str, bool]:
    """The three hit kinds of one question's top-k passages (see the module docstring)."""
    from inspo.answers import normalize_answer

    ids = {p.id for p in passages}
    chain = list(question.meta.get("passage_ids") or [])
    texts = [f" {normalize_answer(p.title + ' ' + p.text)} " for p in passages]
    golds = [normalize_answer(a) for a in question.answers]
    return {
        "first_hop": bool(chain) and chain[0] in ids,
        "answer_passage": bool(chain) and chain[-1] in ids,
        "answer_string": any(g and f" {g} " in t for g in golds for t in texts),
    }


def recall(questions: Sequence[Any], results: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Recall@k per hit kind for single-hop, multi-hop and each hop count."""
    groups: dict[str, list[dict[str, bool]]] = {}
    for q, ps in zip(questions, results, strict=True):
        h = hits(q, ps)
        hops = int(q.meta.get("hops", 1))
        for name in ("all", "single_hop" if hops == 1 else "multi_hop", f"hops_{hops}"):
            groups.setdefault(name, []).append(h)
    return {
        name: {"n": len(rows), **{k: sum(r[k] for r in rows) / len(rows) for k in HIT_KINDS}}
        for name, rows in sorted(groups.items())
    }


def bench_dense(passages: list, questions: list, args: argparse.Namespace) -> dict[str, Any]:
    """Build time, latency, throughput and recall@k of dense and BM25 (interleaved)."""
    from sentence_transformers import SentenceTransformer

    from inspo.retrieval.bm25 import BM25Retriever
    from inspo.retrieval.dense import DenseRetriever, resolve_model_path

    load_s, _ = _timed(lambda: SentenceTransformer(resolve_model_path(None), device="cpu",
                                                   local_files_only=True))
    builds: dict[str, Callable[[], Any]] = {
        "bm25": lambda: BM25Retriever(passages),
        "dense": lambda: DenseRetriever(passages, batch_size=64),
    }
    build_s: dict[str, list[float]] = {a: [] for a in builds}
    built: dict[str, Any] = {}
    for rep in range(args.build_reps):
        for arm in (list(builds) if rep % 2 == 0 else list(builds)[::-1]):
            seconds, built[arm] = _timed(builds[arm])
            build_s[arm].append(seconds)

    texts = [q.question for q in questions]
    single = texts[: args.latency_queries]
    for r in built.values():  # warm-up
        r.search(texts[:8], args.k)
    latency: dict[str, list[float]] = {a: [] for a in built}
    throughput: dict[str, list[float]] = {a: [] for a in built}
    results: dict[str, list] = {}
    for rep in range(args.reps):
        for arm in (list(built) if rep % 2 == 0 else list(built)[::-1]):
            r = built[arm]
            for q in single:
                latency[arm].append(_timed(lambda r=r, q=q: r.search([q], args.k))[0])
            seconds, out = _timed(lambda r=r: [x for i in range(0, len(texts), 128)
                                               for x in r.search(texts[i : i + 128], args.k)])
            throughput[arm].append(len(texts) / seconds)
            results[arm] = out
    arms = {}
    for arm in built:
        arms[arm] = {
            "build_s": _median(build_s[arm]),
            "latency_ms": 1000 * _median(latency[arm]),
            "qps_batch128": _median(throughput[arm]),
            "recall_at_k": recall(questions, results[arm]),
        }
    arms["dense"]["model_load_s"] = load_s
    arms["dense"]["passages_per_s"] = len(passages) / max(arms["dense"]["build_s"] - load_s, 1e-9)
    return {
        "corpus_passages": len(passages),
        "questions": len(questions),
        "k": args.k,
        "arms": arms,
        "ratios": {
            "build": arms["dense"]["build_s"] / arms["bm25"]["build_s"],
            "latency": arms["dense"]["latency_ms"] / arms["bm25"]["latency_ms"],
            "qps_batch128": arms["dense"]["qps_batch128"] / arms["bm25"]["qps_batch128"],
        },
    }


# --------------------------------------------------------------------------- driver


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    from inspo.data.world import build_world
    from inspo.retrieval.bm25 import BM25Retriever

    dense = "dense" in args.parts  # only the dense part uses torch (the encoder, float32 on the CPU)
    if dense:
        import torch  # noqa: F401  (so that start records its threads)
    info = start("benchmarks/retrieval/retrieval.py", args.argv, threads=args.threads if dense else 0,
                 device="cpu", dtype="float32" if dense else None)
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "argv")}
    result: dict[str, Any] = {"benchmark": "retrieval", "settings": settings, "provenance": info,
                              "environment": environment(info["torch_threads"] if dense else None)}
    world = build_world(args.world_seed)
    questions = [q for split in ("train", "dev", "test") for q in world.splits[split]]
    random.Random(args.seed).shuffle(questions)
    questions = questions[: args.questions]
    ratios: dict[str, float] = {}
    if "server" in args.parts:
        texts = [q.question for q in questions][: args.queries]
        result["server"] = bench_server(BM25Retriever(world.corpus), texts, args)
        for batch, row in result["server"]["per_batch"].items():
            ratios[f"server/in_process@{batch}"] = row["ratio"]
    if "dense" in args.parts:
        result["dense"] = bench_dense(world.corpus, questions, args)
        for name, value in result["dense"]["ratios"].items():
            ratios[f"dense/bm25 {name}"] = value
    result["ratios"] = ratios
    result["environment"]["loadavg_end"] = list(os.getloadavg())
    return result


def report(result: dict[str, Any]) -> str:
    """Human-readable summary of :func:`benchmark`'s result."""
    env, prov = result["environment"], result["provenance"]
    lines = [
        f"python {prov['python']} | {prov['platform']} | cpus {env['cpu_count']} | "
        f"torch threads {env['torch_threads']} | "
        + " ".join(f"{k} {v}" for k, v in {**prov["versions"], **env["versions"]}.items() if v is not None),
        f"load average start {env['loadavg_start']} end {env['loadavg_end']}",
    ]
    if "server" in result:
        s = result["server"]
        lines.append(f"(a) BM25 server ({s['mode']}) vs in-process, {s['queries_per_arm']} "
                     f"queries per arm, same results: {s['same_results']}")
        lines.append(f"  {'batch':>5} {'calls':>6} {'in-process q/s':>15} {'server q/s':>11} "
                     f"{'server/in-process':>18}")
        for batch, row in s["per_batch"].items():
            lines.append(f"  {batch:>5} {row['calls']:>6} {row['in_process_qps']:>15.0f} "
                         f"{row['server_qps']:>11.0f} {row['ratio']:>18.3f}")
    if "dense" in result:
        d = result["dense"]
        lines.append(f"(b) dense vs BM25: {d['corpus_passages']} passages, {d['questions']} "
                     f"questions, k={d['k']}")
        for arm, row in d["arms"].items():
            extra = (f" (model load {row['model_load_s']:.2f} s, ~{row['passages_per_s']:.0f} "
                     "passages/s)" if arm == "dense" else "")
            lines.append(f"  {arm:<5} build {row['build_s']:.3f} s{extra}, latency "
                         f"{row['latency_ms']:.2f} ms/query, {row['qps_batch128']:.0f} q/s "
                         "at batch 128")
            for group in ("single_hop", "multi_hop", "hops_2", "hops_3", "all"):
                rec = row["recall_at_k"].get(group)
                if rec:
                    lines.append(f"        recall@{d['k']} {group:<10} (n={rec['n']:>4}) "
                                 + "  ".join(f"{k} {rec[k]:.3f}" for k in HIT_KINDS))
    lines.append("ratios:")
    lines += [f"  {k:<26} {v:.3f}" for k, v in result["ratios"].items()]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--parts", nargs="+", choices=("server", "dense"), default=["server", "dense"])
    p.add_argument("--server", choices=("thread", "process"), default="thread",
                   help="uvicorn in a thread of this process, or in a child process")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16, 128],
                   help="queries per call in part (a)")
    p.add_argument("--queries", type=int, default=512,
                   help="queries per arm, batch size and repetition in part (a)")
    p.add_argument("--questions", type=int, default=1500,
                   help="world questions for recall in part (b) (all splits, shuffled)")
    p.add_argument("--latency-queries", type=int, default=100,
                   help="single-query calls per arm and repetition for latency in part (b)")
    p.add_argument("--k", type=int, default=3, help="passages per query (recall@k)")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each measurement")
    p.add_argument("--build-reps", type=int, default=2, help="index builds per retriever")
    p.add_argument("--world-seed", type=int, default=0)
    add_common(p, seed_help="question order", json_help="also write the result as JSON to this path")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 32 queries, 40 questions, batch sizes 1 and 16, 1 repetition")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # recorded in the result's provenance
    if args.quick:
        args.queries, args.questions, args.latency_queries = 32, 40, 8
        args.batch_sizes, args.reps, args.build_reps = [1, 16], 1, 1
    if min(args.batch_sizes) < 1 or args.queries < 1 or args.questions < 1 or args.reps < 1:
        p.error("--batch-sizes, --queries, --questions and --reps must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, return the result dict."""
    return run_benchmark(argv, parse_args, benchmark, report)


if __name__ == "__main__":
    main()
