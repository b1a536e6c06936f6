"""Benchmark: the multi-turn rollout engine versus raw batched ``model.generate``.

What is compared (same model object, so same dtype, device and torch threads):

- ``engine``: :func:`inspo.envs.loop.run_rollouts` with :class:`inspo.engines.hf.HFEngine`
  on ``--batch`` world questions (``inspo.data.world.build_world(0)``, test split), in Search-R1's
  environment (:class:`inspo.envs.search_r1.SearchR1Env`, top 3) over BM25 on the world corpus
  (in process, or behind the retrieval server on 127.0.0.1 with ``--retriever http``),
  ``AgentConfig(prefill=--prefill)`` so that real searches happen (SmolLM2 never writes tags on
  its own). Sampling is seeded, so every repetition plays the
  same episodes token for token.
- ``raw_turns``: for every turn the engine played, one plain batched ``model.generate`` on the
  SAME contexts (the ids the engine fed, left-padded the same way), forcing each row to write
  ``round(policy tokens of that turn / rows)`` new tokens (no early stop: EOS disabled).
  Same batch, same contexts, same total new tokens: the engine's overhead per token.
- ``raw_same_steps``: like ``raw_turns`` but every row writes as many tokens as the engine's
  batched generate ran decoding steps in that turn (the longest row), and the arm is credited
  with the engine's policy tokens only. Same decoding work, no stop strings, no retrieval, no
  bookkeeping: ``engine/raw_same_steps`` is the engine's own overhead, and the gap between
  ``raw_same_steps`` and ``raw_turns`` is the cost of rows that stopped early but stay in the
  batch (``transformers`` generate batches statically) - see ``padding_waste``.
- ``raw_single`` (skip with ``--no-single``): ONE ``model.generate`` of the same rows from the
  first-turn prompts, each row writing the engine's mean policy tokens per row. What the same
  number of tokens costs without any multi-turn structure (no re-reading of observations).

Tokens/s counts policy-generated tokens only (``env_mask == 1``; the prefill, observations
and environment messages are not generated). Ratios are taken per repetition (arms
interleaved, order alternating between repetitions) and the median is reported.

Where the engine's time goes (wrapping, nothing changed in the library):
``model_generate`` (``HFEngine._generate_ids`` minus the stop check: prefill + decoding +
sampling in transformers), ``stop_check`` (the per-step stop-string criterion),
``trim_decode`` (trimming each row at its stop and decoding it), ``retrieval``
(``retriever.search``) and ``bookkeeping`` (the rest: prompts, tokenising observations,
parsing actions, building Rollouts). ``padding_waste`` is the share of decoding slots spent
on rows that had already stopped while others in the batch were still writing.

Run: ``python benchmarks/speed/rollout_throughput.py`` (``--quick`` for a smoke run; ``--help``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from inspo.lab.harness import add_common, run_benchmark, start

ARMS = ("engine", "raw_turns", "raw_same_steps", "raw_single")
PHASES = ("model_generate", "stop_check", "trim_decode", "retrieval", "bookkeeping")


# --------------------------------------------------------------------------- environment


def environment(threads: int) -> dict[str, Any]:
    """What the numbers depend on beyond :func:`inspo.eval.provenance.provenance` (commit,
    command, Python, platform, library versions): threads, cores, load."""
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "torch_threads": threads,
        "torch_interop_threads": torch.get_num_interop_threads(),
        "loadavg_start": list(os.getloadavg()),
    }


# --------------------------------------------------------------------------- instrumentation


@dataclass
class Timers:
    """Seconds per phase, accumulated."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, value: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + value

    @contextmanager
    def time(self, key: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(key, time.perf_counter() - start)


@dataclass
class Turn:
    """One engine turn as the model saw it: the contexts fed and what each row kept."""

    contexts: list[list[int]]
    kept: list[int]  # policy tokens kept per row
    steps: int  # decoding steps the batched generate ran (width of its raw output)


class TimedRetriever:
    """Times ``search`` of the wrapped retriever."""

    def __init__(self, inner: Any, timers: Timers) -> None:
        self.inner = inner
        self.timers = timers

    def search(self, queries: list[str], k: int = 3) -> list:
        with self.timers.time("retrieval"):
            return self.inner.search(queries, k)


class RecordingEngine:
    """Wraps an :class:`HFEngine`: times ``generate`` and records every turn's contexts."""

    keeps_token_ids = True

    def __init__(self, inner: Any, timers: Timers) -> None:
        self.inner = inner
        self.timers = timers
        self.turns: list[Turn] = []
        self._steps = 0
        raw = inner._generate_ids

        def timed_generate_ids(sequences: list[list[int]], **kwargs: Any) -> list[list[int]]:
            with timers.time("generate_ids"):
                rows = raw(sequences, **kwargs)
            self._steps = max((len(r) for r in rows), default=0)
            return rows

        inner._generate_ids = timed_generate_ids  # instance attribute shadows the method

    def prompt_text(self, messages: Sequence[dict[str, str]]) -> str:
        return self.inner.prompt_text(messages)

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.inner.decode(ids)

    def generate(self, inputs: list, **kwargs: Any) -> list:
        contexts = [list(x.prompt_ids) + list(x.completion_ids) for x in inputs]
        with self.timers.time("generate"):
            generations = self.inner.generate(inputs, **kwargs)
        self.turns.append(Turn(contexts, [len(g.token_ids) for g in generations], self._steps))
        return generations


@contextmanager
def timed_stop_check(timers: Timers) -> Iterator[None]:
    """Temporarily wrap ``inspo.engines.hf._stop_criteria`` so each check is timed."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    from inspo.engines import hf as engines

    original = engines._stop_criteria

    def wrapped(tokenizer: Any, stop: Sequence[str], start: int, finished: Any = None) -> Any:
        inner = original(tokenizer, stop, start, finished)

        class TimedStop(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                done = inner(input_ids, scores, **kwargs)
                timers.add("stop_check", time.perf_counter() - t0)
                return done

        return StoppingCriteriaList([TimedStop()])

    engines._stop_criteria = wrapped
    try:
        yield
    finally:
        engines._stop_criteria = original


# --------------------------------------------------------------------------- arms


@dataclass
class Setup:
    """Everything both arms share."""

    model: Any
    tokenizer: Any
    retriever: Any
    config: Any  # AgentConfig
    episodes: list
    seed: int


def run_engine(setup: Setup) -> dict[str, Any]:
    """One engine run: tokens, seconds, phase breakdown and the recorded turns."""
    from inspo.engines.hf import HFEngine
    from inspo.envs.loop import run_rollouts
    from inspo.envs.search_r1 import SearchR1Env

    timers = Timers()
    engine = RecordingEngine(
        HFEngine(setup.model, setup.tokenizer, rng=random.Random(setup.seed)), timers
    )
    env = SearchR1Env(TimedRetriever(setup.retriever, timers), topk=3)
    with timed_stop_check(timers):
        start = time.perf_counter()
        rollouts = run_rollouts(engine, env, setup.config, setup.episodes)
        total = time.perf_counter() - start
    s = timers.seconds
    phases = {
        "model_generate": s.get("generate_ids", 0.0) - s.get("stop_check", 0.0),
        "stop_check": s.get("stop_check", 0.0),
        "trim_decode": s.get("generate", 0.0) - s.get("generate_ids", 0.0),
        "retrieval": s.get("retrieval", 0.0),
    }
    phases["bookkeeping"] = total - s.get("generate", 0.0) - s.get("retrieval", 0.0)
    tokens = int(sum(sum(r.env_mask) for r in rollouts))
    slots = sum(len(t.kept) * t.steps for t in engine.turns)
    finish: dict[str, int] = {}
    for r in rollouts:
        finish[r.finish_reason] = finish.get(r.finish_reason, 0) + 1
    return {
        "tokens": tokens,
        "seconds": total,
        "phases": phases,
        "turns": engine.turns,
        "padding_waste": 1 - sum(sum(t.kept) for t in engine.turns) / slots if slots else 0.0,
        "searches": int(sum(len(r.calls_of("search")) for r in rollouts)),
        "finish": finish,
    }


def _raw_generate(setup: Setup, contexts: list[list[int]], new_tokens: int, seed: int) -> float:
    """Plain left-padded batched ``model.generate`` writing exactly ``new_tokens`` per row;
    returns seconds (tensor building included, as a plain caller would pay it)."""
    import torch
    from transformers import GenerationConfig

    tok = setup.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    cfg = setup.config
    sample = cfg.temperature > 0
    start = time.perf_counter()
    width = max(len(c) for c in contexts)
    device = next(setup.model.parameters()).device
    input_ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=device)
    attention = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts],
                             device=device)
    # Exactly ``new_tokens`` per row: the EOS id is one the model cannot emit (= vocab size),
    # so no row stops early. (``min_new_tokens`` would do it too, but its logits processor
    # runs ``torch.isin`` over the whole vocabulary every step: a cost the engine does not pay.)
    never = int(setup.model.get_output_embeddings().weight.shape[0])
    gen = GenerationConfig(
        max_new_tokens=new_tokens, do_sample=sample,
        temperature=cfg.temperature if sample else 1.0, top_p=cfg.top_p if sample else 1.0,
        top_k=0 if sample else 50, min_p=None, repetition_penalty=1.0, pad_token_id=pad,
        eos_token_id=never, use_cache=True,
    )
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(seed)
        out = setup.model.generate(input_ids=input_ids, attention_mask=attention,
                                   generation_config=gen)
    seconds = time.perf_counter() - start
    if out.shape[1] - width != new_tokens:
        raise RuntimeError(f"raw generate wrote {out.shape[1] - width} tokens, wanted {new_tokens}")
    return seconds


def raw_plan(turns: list[Turn]) -> list[tuple[list[list[int]], int]]:
    """Per engine turn: (contexts, new tokens per row) so rows x tokens = the turn's policy tokens."""
    return [(t.contexts, max(1, round(sum(t.kept) / len(t.kept)))) for t in turns if t.kept]


def run_raw_turns(setup: Setup, plan: list[tuple[list[list[int]], int]]) -> dict[str, Any]:
    seconds = sum(_raw_generate(setup, ctx, n, setup.seed + i) for i, (ctx, n) in enumerate(plan))
    return {"tokens": sum(len(ctx) * n for ctx, n in plan), "seconds": seconds}


def run_raw_same_steps(setup: Setup, turns: list[Turn]) -> dict[str, Any]:
    live = [t for t in turns if t.kept and t.steps > 0]
    seconds = sum(_raw_generate(setup, t.contexts, t.steps, setup.seed + i)
                  for i, t in enumerate(live))
    return {"tokens": sum(sum(t.kept) for t in live), "seconds": seconds}


def run_raw_single(setup: Setup, contexts: list[list[int]], new_tokens: int) -> dict[str, Any]:
    seconds = _raw_generate(setup, contexts, new_tokens, setup.seed)
    return {"tokens": len(contexts) * new_tokens, "seconds": seconds}


# --------------------------------------------------------------------------- driver


def build_setup(args: argparse.Namespace) -> Setup:
    from inspo.data.world import build_world
    from inspo.envs.loop import AgentConfig, Episode
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
    from inspo.models import load_model
    from inspo.records import Instruction
    from inspo.retrieval.bm25 import BM25Retriever

    world = build_world(0)
    questions = world.splits["test"]
    if args.batch > len(questions):
        raise SystemExit(f"--batch {args.batch} exceeds the {len(questions)} test questions")
    rng = random.Random(args.seed)
    picked = rng.sample(questions, args.batch)
    loaded = load_model(args.model, dtype=args.dtype)
    config = AgentConfig(
        max_turns=args.max_turns, max_response_tokens=args.max_response_tokens,
        max_obs_tokens=args.max_obs_tokens, temperature=args.temperature, prefill=args.prefill,
    )
    instruction = Instruction("seed", SEARCH_R1_INSTRUCTION)
    return Setup(
        model=loaded.model, tokenizer=loaded.tokenizer, retriever=BM25Retriever(world.corpus),
        config=config, episodes=[Episode(q, instruction) for q in picked], seed=args.seed,
    )


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


@contextmanager
def retriever_kind(setup: Setup, kind: str) -> Iterator[None]:
    """``kind == "http"``: serve the BM25 index on 127.0.0.1 (uvicorn in a thread) and let the
    engine reach it through :class:`HttpRetriever` for the duration; ``"bm25"``: in process."""
    if kind == "bm25":
        yield
        return
    from inspo.retrieval.http_client import HttpRetriever
    from inspo.retrieval.server import running_server

    local = setup.retriever
    with running_server(local, host="127.0.0.1", port=0) as url, HttpRetriever(url) as http:
        setup.retriever = http
        try:
            yield
        finally:
            setup.retriever = local


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    """Warm up, then ``args.reps`` interleaved repetitions; returns the result dict."""
    import torch

    info = start("benchmarks/speed/rollout_throughput.py", args.argv, threads=args.threads, device="cpu",
                 dtype=args.dtype)
    env = environment(torch.get_num_threads())
    setup = build_setup(args)
    arms = [a for a in ARMS if a != "raw_single" or args.single]
    reps: list[dict[str, dict[str, Any]]] = []
    with retriever_kind(setup, args.retriever):
        warm = run_engine(setup)  # also fixes the plan: seeded sampling replays the same tokens
        plan = raw_plan(warm["turns"])
        first = warm["turns"][0]
        per_row = max(1, round(warm["tokens"] / len(first.contexts)))
        runners: dict[str, Callable[[], dict[str, Any]]] = {
            "engine": lambda: run_engine(setup),
            "raw_turns": lambda: run_raw_turns(setup, plan),
            "raw_same_steps": lambda: run_raw_same_steps(setup, warm["turns"]),
            "raw_single": lambda: run_raw_single(setup, first.contexts, per_row),
        }
        for rep in range(args.reps):
            order = arms if rep % 2 == 0 else arms[::-1]
            reps.append({arm: runners[arm]() for arm in order})

    def tps(run: dict[str, Any]) -> float:
        return run["tokens"] / run["seconds"] if run["seconds"] > 0 else float("nan")

    result: dict[str, Any] = {
        "benchmark": "rollout_throughput",
        "provenance": info,
        "environment": env,
        "settings": {k: v for k, v in vars(args).items() if k not in ("json", "argv")},
        "engine_run": {
            "retriever": args.retriever,
            "rows": len(first.contexts),
            "turns": len(warm["turns"]),
            "rows_per_turn": [len(t.kept) for t in warm["turns"]],
            "policy_tokens": warm["tokens"],
            "searches": warm["searches"],
            "finish": warm["finish"],
            "padding_waste": warm["padding_waste"],
            "replayed_identically": all(r["engine"]["tokens"] == warm["tokens"] for r in reps),
        },
        "tokens_per_s": {a: _median([tps(r[a]) for r in reps]) for a in arms},
        "ratios": {
            f"engine/{a}": _median([tps(r["engine"]) / tps(r[a]) for r in reps])
            for a in arms if a != "engine"
        },
        "per_rep": [{a: {"tokens": r[a]["tokens"], "seconds": r[a]["seconds"]} for a in arms}
                    for r in reps],
        "engine_time_share": {},
        "engine_seconds": {},
    }
    for phase in PHASES:
        seconds = [r["engine"]["phases"][phase] for r in reps]
        shares = [r["engine"]["phases"][phase] / r["engine"]["seconds"] for r in reps]
        result["engine_seconds"][phase] = _median(seconds)
        result["engine_time_share"][phase] = _median(shares)
    result["engine_seconds"]["total"] = _median([r["engine"]["seconds"] for r in reps])
    result["environment"]["loadavg_end"] = list(os.getloadavg())
    return result


def report(result: dict[str, Any]) -> str:
    """Human-readable summary of :func:`benchmark`'s result."""
    env, run, prov = result["environment"], result["engine_run"], result["provenance"]
    lines = [
        f"python {prov['python']} | {prov['platform']} | cpus {env['cpu_count']} | "
        f"torch threads {env['torch_threads']} | "
        + " ".join(f"{k} {v}" for k, v in prov["versions"].items() if v is not None),
        f"load average start {env['loadavg_start']} end {env['loadavg_end']}",
        f"engine run ({run['retriever']} retriever): {run['rows']} rows, {run['turns']} turns (rows per turn "
        f"{run['rows_per_turn']}), {run['policy_tokens']} policy tokens, {run['searches']} "
        f"searches, finish {run['finish']}, padding waste {run['padding_waste']:.1%}, "
        f"replayed identically: {run['replayed_identically']}",
        "tokens/s (median over repetitions):",
        *(f"  {arm:<15} {v:8.1f}" for arm, v in result["tokens_per_s"].items()),
        "ratios (median of per-repetition ratios):",
        *(f"  {k:<22} {v:.3f}" for k, v in result["ratios"].items()),
        "engine time (median seconds, share of the engine's wall time):",
        *(f"  {p:<15} {result['engine_seconds'][p]:7.3f} s  {result['engine_time_share'][p]:6.1%}"
          for p in PHASES),
        f"  {'total':<15} {result['engine_seconds']['total']:7.3f} s",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", default="smollm2-135m",
                   help="inspo.models name or HF directory (smollm2-135m, qwen2.5-coder-0.5b, tiny-qwen2)")
    p.add_argument("--dtype", default="bfloat16", help="model dtype, shared by every arm")
    p.add_argument("--batch", type=int, default=8, help="episodes played at once (rows)")
    p.add_argument("--max-turns", type=int, default=3,
                   help="search turns per episode; one final answer turn follows")
    p.add_argument("--max-response-tokens", type=int, default=48, help="new tokens per turn cap")
    p.add_argument("--max-obs-tokens", type=int, default=500)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--retriever", choices=("bm25", "http"), default="bm25",
                   help="BM25 in process, or the same index behind the HTTP server on 127.0.0.1")
    p.add_argument("--prefill", default="<search>",
                   help="forced start of the response (SmolLM2 writes no tags on its own)")
    p.add_argument("--reps", type=int, default=3, help="measured repetitions (after a warm-up)")
    add_common(p, json_help="also write the result as JSON to this path")
    p.add_argument("--no-single", dest="single", action="store_false",
                   help="skip the raw_single arm")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: batch 2, max-turns 2, 8 tokens per turn, 1 repetition")
    args = p.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else list(argv)  # recorded in the result's provenance
    if args.quick:
        args.batch, args.max_turns, args.max_response_tokens, args.reps = 2, 2, 8, 1
    if args.batch < 1 or args.reps < 1:
        p.error("--batch and --reps must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report, return the result dict."""
    return run_benchmark(argv, parse_args, benchmark, report)


if __name__ == "__main__":
    main()
