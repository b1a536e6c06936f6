"""Benchmark: recall versus memory versus latency of the dense index kinds, over the same vectors.

Every kind is built by :func:`inspo.retrieval.faiss_index.build_index` (what ``DenseRetriever``
and ``env.faiss_index`` use) over the same embeddings, and compared with the exact ``flat``
index on the same queries:

- ``recall@k``: the share of flat's top-k passages that the kind's top-k contains, averaged over
  queries (flat is 1 by definition); ``top-1``: the share of queries whose best passage is flat's;
- ``bytes``: the index serialised with ``faiss.serialize_index`` (what ``index.faiss`` holds),
  per vector, and as a share of flat's;
- ``build``: seconds to train and fill it; ``ms/query``: median of one-query searches;
  ``q/s``: all queries in one batched search (median over repetitions).

Sets of vectors (``--sets``):

- ``world``: the passages of ``build_world(--world-seed)`` embedded with the packaged
  all-MiniLM-L6-v2 (384 dimensions), queried with world questions embedded by the same model;
- ``wiki-lite``: the first ``--wiki-passages`` real Wikipedia lead sections of ``wiki-lite``
  embedded the same way, queried with the titles of ``--queries`` of them (short real queries);
- ``random``: ``--rows`` x ``--dim`` vectors drawn from a mixture of ``--clusters`` Gaussian
  clusters (normalised), queried with fresh draws of the same mixture: for bytes and latency at
  scale; its recall depends on the made-up cluster structure, not on text.

Kinds default to a list scaled to the set: ``ivf<nlist>`` with nlist the power of two nearest
4 x sqrt(rows), ``pq<dim/8>`` (8 dimensions per byte), HNSW with 32 links. IVF kinds are measured
at each ``--nprobes`` value and HNSW kinds at each ``--ef-searches`` value (the index is built
once). Searches are interleaved over kinds, order alternating between repetitions. faiss runs on
``--threads`` threads (default 1: this machine is shared).
Run: ``python benchmarks/retrieval/retrieval_index_kinds.py`` (``--quick`` for a smoke run; ``--help``).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from inspo.lab.harness import add_common, run_benchmark, start


@dataclass
class Arm:
    """One measured configuration: an index kind at one search setting."""

    label: str
    kind: str
    nprobe: int = 0
    ef_search: int = 0
    build_s: float = 0.0
    bytes: int = 0
    recall: float = 0.0
    top1: float = 0.0
    ms_per_query: float = 0.0
    qps_batch: float = 0.0


@dataclass
class VectorSet:
    """Database vectors and query vectors (float32, normalised) and where they came from."""

    name: str
    vectors: Any
    queries: Any
    source: str


# --------------------------------------------------------------------------------- vector sets
def embedded_set(name: str, passages: list, query_texts: list[str], source: str, threads: int) -> VectorSet:
    """``passages`` and ``query_texts`` embedded with the packaged all-MiniLM-L6-v2."""
    import torch

    from inspo.retrieval.dense import DenseRetriever

    torch.set_num_threads(threads)
    retriever = DenseRetriever(passages)  # exact: its index holds the passage embeddings
    vectors = retriever.index.reconstruct_n(0, len(passages))
    return VectorSet(name, vectors, retriever.encode_queries(query_texts), source)


def world_set(args: argparse.Namespace) -> VectorSet:
    from inspo.data.world import build_world

    world = build_world(args.world_seed)
    questions = [q.question for split in ("train", "dev", "test") for q in world.splits[split]]
    random.Random(args.seed).shuffle(questions)
    return embedded_set("world", world.corpus, questions[: args.queries],
                        f"world corpus build_world({args.world_seed}), world questions, all-MiniLM-L6-v2",
                        args.threads)


def wiki_lite_set(args: argparse.Namespace) -> VectorSet:
    from inspo.data.wiki_lite import load_wiki_lite

    passages = load_wiki_lite(limit=args.wiki_passages)
    titles = [p.title for p in random.Random(args.seed).sample(passages, min(args.queries, len(passages)))]
    return embedded_set("wiki-lite", passages, titles,
                        f"first {len(passages)} wiki-lite passages, queries = titles of {len(titles)} of them, "
                        "all-MiniLM-L6-v2", args.threads)


def random_set(args: argparse.Namespace) -> VectorSet:
    import numpy as np

    rng = np.random.default_rng(args.seed)
    centers = rng.standard_normal((args.clusters, args.dim)).astype("float32")

    def draw(n: int):
        x = centers[rng.integers(0, args.clusters, n)] + rng.standard_normal((n, args.dim)).astype("float32")
        return np.ascontiguousarray(x / np.linalg.norm(x, axis=1, keepdims=True), dtype="float32")

    return VectorSet("random", draw(args.rows), draw(args.queries),
                     f"{args.clusters} Gaussian clusters (unit-variance noise around N(0, I) centres), seed {args.seed}")


def default_kinds(rows: int, dim: int) -> list[str]:
    nlist = max(1, 2 ** round(math.log2(4 * math.sqrt(rows))))
    m = next(d for d in (dim // 8, 16, 8, 4, 2, 1) if d >= 1 and dim % d == 0)
    return ["flat", "sq8", f"pq{m}", f"ivf{nlist}", f"ivf{nlist},sq8", f"ivf{nlist},pq{m}", "hnsw32", "hnsw32,sq8"]


# ------------------------------------------------------------------------------------ measuring
def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def overlap(found, truth, k: int) -> tuple[float, float]:
    """(recall@k, top-1 agreement) of ``found`` ids against ``truth`` ids (rows = queries)."""
    recalls, firsts = [], []
    for got, want in zip(found.tolist(), truth.tolist(), strict=True):
        want_k = {i for i in want[:k] if i >= 0}
        recalls.append(len(want_k & {i for i in got[:k] if i >= 0}) / max(1, len(want_k)))
        firsts.append(got[0] == want[0])
    return statistics.fmean(recalls), statistics.fmean(firsts)


def bench_set(data: VectorSet, kinds: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    from inspo.retrieval.faiss_index import (
        IndexKind,
        IndexOptions,
        build_index,
        index_bytes,
        set_search_params,
    )

    rows, dim = data.vectors.shape
    built: dict[str, tuple[Any, float]] = {}
    arms: list[Arm] = []
    for kind in kinds:
        spec = IndexKind.parse(kind)
        try:
            seconds, index = _timed(lambda kind=kind: build_index(data.vectors, IndexOptions(kind=kind)))
        except ValueError as e:  # e.g. too few rows to train: reported, not fatal
            print(f"  skipped {kind}: {e}", file=sys.stderr)
            continue
        built[kind] = (index, seconds)
        if spec.coarse == "ivf":
            arms += [Arm(f"{spec.spec} nprobe {n}", kind, nprobe=n) for n in args.nprobes]
        elif spec.coarse == "hnsw":
            arms += [Arm(f"{spec.spec} efSearch {e}", kind, ef_search=e) for e in args.ef_searches]
        else:
            arms.append(Arm(spec.spec, kind))
    flat = built["flat"][0]
    _, truth = flat.search(data.queries, args.k)
    single = data.queries[: args.latency_queries]
    latency: dict[str, list[float]] = {a.label: [] for a in arms}
    batch: dict[str, list[float]] = {a.label: [] for a in arms}
    for arm in arms:
        index, arm.build_s = built[arm.kind]
        arm.bytes = index_bytes(index)
        set_search_params(index, IndexOptions(nprobe=arm.nprobe, ef_search=arm.ef_search))
        _, found = index.search(data.queries, args.k)
        arm.recall, arm.top1 = overlap(found, truth, args.k)
    for rep in range(args.reps):
        for arm in (arms if rep % 2 == 0 else arms[::-1]):
            index = built[arm.kind][0]
            set_search_params(index, IndexOptions(nprobe=arm.nprobe, ef_search=arm.ef_search))
            for q in single:
                latency[arm.label].append(_timed(lambda q=q, index=index: index.search(q[None, :], args.k))[0])
            seconds, _ = _timed(lambda index=index: index.search(data.queries, args.k))
            batch[arm.label].append(len(data.queries) / seconds)
    for arm in arms:
        arm.ms_per_query = 1000 * statistics.median(latency[arm.label])
        arm.qps_batch = statistics.median(batch[arm.label])
    return {"name": data.name, "source": data.source, "rows": rows, "dim": dim, "queries": len(data.queries),
            "k": args.k, "flat_bytes": index_bytes(flat), "arms": [asdict(a) for a in arms]}


# -------------------------------------------------------------------------------------- driver
def environment(args: argparse.Namespace) -> dict[str, Any]:
    """What the numbers depend on beyond :func:`inspo.eval.provenance.provenance` (commit,
    command, Python, platform, the main libraries): threads, cores, load, and the versions of
    faiss-gpu and numpy."""
    from inspo.eval.provenance import library_versions

    return {"cpu_count": os.cpu_count(), "faiss_threads": args.threads,
            "versions": library_versions(("faiss-gpu", "numpy")), "loadavg_start": list(os.getloadavg())}


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    import faiss

    faiss.omp_set_num_threads(args.threads)
    # torch's threads are set where a set is embedded (embedded_set); torch stays unloaded otherwise
    info = start("benchmarks/retrieval/retrieval_index_kinds.py", args.argv, device="cpu", dtype="float32")
    result: dict[str, Any] = {"benchmark": "retrieval_index_kinds",
                              "provenance": info,
                              "environment": environment(args), "sets": []}
    for name in args.sets:
        data = {"world": world_set, "wiki-lite": wiki_lite_set, "random": random_set}[name](args)
        kinds = args.kinds or default_kinds(*data.vectors.shape)
        if "flat" not in kinds:
            kinds = ["flat", *kinds]  # the reference
        result["sets"].append(bench_set(data, kinds, args))
    result["environment"]["loadavg_end"] = list(os.getloadavg())
    return result


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def report(result: dict[str, Any]) -> str:
    """The result as one table per vector set."""
    env, prov = result["environment"], result["provenance"]
    versions = {**prov["versions"], **env["versions"]}
    lines = [f"python {prov['python']} | {prov['platform']} | cpus {env['cpu_count']} | faiss threads "
             f"{env['faiss_threads']} | " + " ".join(f"{k} {v}" for k, v in versions.items() if v is not None),
             f"load average start {env['loadavg_start']} end {env['loadavg_end']}"]
    for s in result["sets"]:
        k = s["k"]
        lines += ["", f"set {s['name']}: {s['rows']} x {s['dim']}, {s['queries']} queries, k {k} ({s['source']})",
                  f"| kind | recall@{k} | top-1 | bytes | bytes/vector | / flat | build s | ms/query | q/s (batch) |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for a in s["arms"]:
            lines.append(f"| {a['label']} | {a['recall']:.3f} | {a['top1']:.3f} | {_size(a['bytes'])} | "
                         f"{a['bytes'] / s['rows']:.1f} | {a['bytes'] / s['flat_bytes']:.3f} | {a['build_s']:.2f} | "
                         f"{a['ms_per_query']:.3f} | {a['qps_batch']:.0f} |")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sets", nargs="+", choices=("world", "wiki-lite", "random"), default=["world", "wiki-lite", "random"])
    p.add_argument("--kinds", nargs="+", default=None, help="index kinds (default: a list scaled to each set)")
    p.add_argument("--wiki-passages", type=int, default=4000, help="wiki-lite set: its first N passages")
    p.add_argument("--rows", type=int, default=100_000, help="random set: database vectors")
    p.add_argument("--dim", type=int, default=384, help="random set: dimension (MiniLM's)")
    p.add_argument("--clusters", type=int, default=1000, help="random set: mixture components")
    p.add_argument("--queries", type=int, default=200, help="queries per set")
    p.add_argument("--latency-queries", type=int, default=50, help="one-query searches per arm and repetition")
    p.add_argument("--k", type=int, default=10, help="recall@k")
    p.add_argument("--nprobes", type=int, nargs="+", default=[16, 64], help="IVF lists searched")
    p.add_argument("--ef-searches", type=int, nargs="+", default=[64], help="HNSW candidates kept")
    p.add_argument("--reps", type=int, default=3, help="repetitions of the timed searches")
    p.add_argument("--world-seed", type=int, default=0)
    add_common(p, threads=1, threads_help="faiss (OpenMP) and torch threads",
               seed_help="random vectors and question order", json_help="also write the result as JSON to this path")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: random set only, 2000 x 32, 20 clusters, 30 queries, 1 repetition")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # recorded in the result's provenance
    if args.quick:
        args.sets, args.rows, args.dim, args.clusters = ["random"], 2000, 32, 20
        args.queries, args.latency_queries, args.reps = 30, 5, 1
    if min(args.rows, args.dim, args.clusters, args.queries, args.k, args.reps, args.threads, args.wiki_passages) < 1:
        p.error("--rows, --dim, --clusters, --queries, --k, --reps, --threads and --wiki-passages must be >= 1")
    args.latency_queries = max(1, min(args.latency_queries, args.queries))
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, return the result dict."""
    return run_benchmark(argv, parse_args, benchmark, report)


if __name__ == "__main__":
    main()
