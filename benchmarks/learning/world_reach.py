"""How often one BM25 search on a question's own text reaches each passage of its chain.

The question behind ``world-chain`` (issue 23): in ``world-multihop`` a passage also names what
points at it ("Rot founded the Kel Museum"), so a search for a two-hop question's text often
returns its second passage too, and a policy needs no second search. For each named world and
hop count, over the first ``--questions`` training questions of that hop count: how many have
their first passage, and their last, in the top ``--k`` of a search for the question's text;
and how many reach the last passage when searched by the last entity's name (the second
search a policy would write); and, of the chains whose last passage one search reached, how
many start with each relation (a symmetric one, spouse, names the first entity in both passages).

Usage::

    python benchmarks/learning/world_reach.py --json benchmarks/results/multihop/world-reach.json
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

from inspo.lab.harness import add_common, start, write_result


def _found(questions: list, position: int, results: list) -> int:
    """How many ``questions`` have the passage at ``position`` of their chain among ``results``."""
    return sum(q.meta["passage_ids"][position] in {p.id for p in r}
               for q, r in zip(questions, results, strict=True))


def reach(world_name: str, *, seed: int, k: int, questions: int) -> dict[int, dict[str, int]]:
    """Per hop count: ``{"questions", "first", "last", "last_by_name"}`` counts (see module doc)."""
    from inspo.data.world import build_world, world_config
    from inspo.retrieval.bm25 import BM25Retriever

    world = build_world(seed, world_config(world_name))
    retriever = BM25Retriever(world.corpus)
    out: dict[int, dict[str, int]] = {}
    for hops in sorted({q.meta["hops"] for q in world.splits["train"]}):
        qs = [q for q in world.splits["train"] if q.meta["hops"] == hops][:questions]
        by_text = retriever.search([q.question for q in qs], k=k)
        by_name = retriever.search([world.entities[q.meta["entity_ids"][-1]].name for q in qs], k=k)

        reached = [q for q, r in zip(qs, by_text, strict=True) if q.meta["passage_ids"][-1] in {p.id for p in r}]
        out[hops] = {"questions": len(qs), "first": _found(qs, 0, by_text), "last": len(reached),
                     "last_by_name": _found(qs, -1, by_name),
                     # why the last passage came back: the first relation of those chains
                     "last_by_first_relation": dict(Counter(q.meta["relations"][0] for q in reached).most_common())}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="world-multihop,world-chain", help="comma-separated built-in worlds")
    p.add_argument("--k", type=int, default=3, help="passages per search (rl.topk)")
    p.add_argument("--questions", type=int, default=400, help="training questions per hop count")
    add_common(p, threads=None)  # BM25 only: no torch
    args = p.parse_args(argv)
    info = start("benchmarks/learning/world_reach.py", argv, device="cpu")  # BM25 only: no model, no torch
    results = {name: reach(name, seed=args.seed, k=args.k, questions=args.questions)
               for name in args.worlds.split(",")}
    print(f"one BM25 search (top {args.k}) on the question's text, seed {args.seed}:")
    print(f"{'world':16} hops  questions  first  last  last by the last entity's name")
    for name, by_hops in results.items():
        for hops, r in by_hops.items():
            print(f"{name:16} {hops:4}  {r['questions']:9}  {r['first']:5}  {r['last']:4}  {r['last_by_name']:5}")
    for name, by_hops in results.items():
        two = by_hops.get(2)
        if two:
            print(f"{name}: two-hop chains whose last passage one search reached, by their first relation: "
                  + ", ".join(f"{rel} {n}" for rel, n in two["last_by_first_relation"].items()))
    write_result(args.json, {"provenance": info, "seed": args.seed, "k": args.k, "worlds": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
