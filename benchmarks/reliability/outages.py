"""Outages are counted apart and stop the run, never scored as the policy's failures (issue 21, item 1).

Two faults injected into a real evaluation (``inspo.envs.make_evaluate`` in Search-R1's
environment over an HTTP retriever),
each with the error budget off (``max_error_rate`` 1: play everything) and at the default (0.1):

- **frozen**: a retrieval server that accepts connections and never answers (a SIGSTOPped
  server). Reported: connections it received, rollouts played, seconds; and the worst case at the
  default ``env.retriever_timeout`` (30 s) and ``env.retriever_retries`` (3), computed from the
  connections seen (each attempt waits one timeout).
- **killed**: a real retrieval server (inspo's FastAPI app under uvicorn) that stops after
  ``--alive`` searches, mid-evaluation. Reported: rollouts scored, error rollouts, and the EM over
  the scored ones. The policy answers every question right once it has searched, so any EM below
  1.0 would be an outage scored as a failure.

The faults and the scripted policy are the tests' own (``tests/test_outage_endpoints.py``), so
this table measures exactly what those tests check.

Usage::

    python benchmarks/reliability/outages.py --json runs/outages.json
    python benchmarks/reliability/outages.py --quick      # fewer questions, shorter timeouts (tests)
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S, DEFAULT_RETRIES = 30.0, 3  # env.retriever_timeout / env.retriever_retries


def _fixtures():
    sys.path.insert(0, str(REPO / "tests"))
    import test_outage_endpoints as fixtures

    return fixtures


def play(evaluate, instruction, questions) -> dict:
    """Run one evaluation; a stop (TooManyErrors) is a result, with the rollouts played before it."""
    from inspo.records import TooManyErrors, scored

    started = time.perf_counter()
    try:
        rollouts, stopped = evaluate(instruction, questions), ""
    except TooManyErrors as exc:
        rollouts, stopped = list(exc.rollouts), str(exc).split(":")[0]
    kept = scored(rollouts)
    return {"seconds": round(time.perf_counter() - started, 2), "played": len(rollouts),
            "errors": len(rollouts) - len(kept), "scored": len(kept),
            "em_scored": round(sum(r.reward for r in kept) / len(kept), 3) if kept else None,
            "stopped": stopped}


def frozen(questions, *, batch: int, timeout: float, rates: Sequence[float]) -> list[dict]:
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig
    from inspo.envs.search_r1 import SearchR1Env
    from inspo.retrieval.http_client import HttpRetriever

    fx = _fixtures()
    rows = []
    for rate in rates:
        with fx.frozen_endpoint() as (url, accepted), \
                HttpRetriever(url, timeout=timeout, retries=DEFAULT_RETRIES, backoff=0.0) as retriever:
            evaluate = make_evaluate(fx.Answers(), SearchR1Env(retriever), AgentConfig(max_turns=2), batch_size=batch,
                                     max_error_rate=rate)
            row = play(evaluate, fx.GOOD, questions)
            row.update(fault="frozen", max_error_rate=rate, requests=len(accepted),
                       worst_case_s_at_defaults=len(accepted) * DEFAULT_TIMEOUT_S)
        rows.append(row)
    return rows


def killed(questions, *, batch: int, alive: int, rates: Sequence[float]) -> list[dict]:
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig
    from inspo.envs.search_r1 import SearchR1Env
    from inspo.retrieval.http_client import HttpRetriever

    fx = _fixtures()
    rows = []
    for rate in rates:
        with fx.dying_server(alive) as (url, server), \
                HttpRetriever(url, timeout=5.0, retries=1, backoff=0.0) as retriever:
            evaluate = make_evaluate(fx.Answers(), SearchR1Env(retriever), AgentConfig(max_turns=2), batch_size=batch,
                                     max_error_rate=rate)
            row = play(evaluate, fx.GOOD, questions)
            row.update(fault=f"killed after {alive} searches", max_error_rate=rate, requests=server.calls)
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--questions", type=int, default=48)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--timeout", type=float, default=0.5, help="the frozen case's retriever timeout, seconds")
    p.add_argument("--alive", type=int, default=2, help="searches the killed server answers before it stops")
    add_common(p, threads=None, seed=False)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.questions, args.batch, args.timeout, args.alive = 16, 8, 0.1, 1
    from inspo.data.sources import load_qa_source

    info = start("benchmarks/reliability/outages.py", argv, device="cpu")  # no model: a scripted policy
    questions = load_qa_source("world", split="test")[:args.questions]
    rates = (1.0, 0.1)
    rows = (frozen(questions, batch=args.batch, timeout=args.timeout, rates=rates)
            + killed(questions, batch=args.batch, alive=args.alive, rates=rates))
    result = {"provenance": info, "questions": len(questions), "batch": args.batch, "frozen_timeout_s": args.timeout,
              "retries": DEFAULT_RETRIES, "rows": rows}
    print(f"{len(questions)} questions, batches of {args.batch}; frozen: timeout {args.timeout} s, "
          f"{DEFAULT_RETRIES} retries")
    print(f"{'fault':26s} {'max_error_rate':>14s} {'requests':>8s} {'played':>6s} {'errors':>6s} "
          f"{'EM (scored)':>11s} {'seconds':>7s}  stopped")
    for r in rows:
        em = "-" if r["em_scored"] is None else f"{r['em_scored']:.3f}"
        print(f"{r['fault']:26s} {r['max_error_rate']:14g} {r['requests']:8d} {r['played']:6d} {r['errors']:6d} "
              f"{em:>11s} {r['seconds']:7.2f}  {r['stopped'] or 'no'}")
        if "worst_case_s_at_defaults" in r:
            print(f"{'':26s} at the default 30 s timeout: at most {r['worst_case_s_at_defaults']:.0f} s "
                  "(connections x timeout)")
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
