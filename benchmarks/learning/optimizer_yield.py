"""How often a small optimizer writes a usable calculator instruction, and whether the way the
failures are shown to it changes that (issue 33): the same reflection prompts, offline, no RL.

1. The frozen policy (default the 0.5B) plays the weak seed, sampled, on ``--pool`` training
   problems; its failures (reward 0, no error) are the replay buffer.
2. ``--prompts`` draws of ``--shown`` failures each (the same draws for every presentation).
3. Each presentation renders its optimizer prompt with the library's :class:`~inspo.core.proposer.Proposer`
   (N = ``--candidates``), the optimizer (default the 1.5B) answers every prompt once (T
   ``--temperature``, ``--max-tokens``), and each answer goes through the proposer's own parser and
   guard, then the loop's leak check (the environment's ``leak_terms`` of the shown failures and of the
   scoring problems, as the loop checks D_B).
4. Every candidate that passes is scored greedily by the same frozen policy on ``--score`` dev
   problems, beside the parent. ``admitted`` counts the candidates that score strictly above the
   parent there (an improvement); the loop's ``beat-parent`` admits a tie too, and the table counts
   ties apart (``ties``: from a parent that scores 0, a tie at 0 is admitted and helps nothing).

Presentations (all are knobs a run already has):

- ``reflection``: App. E's reflection template, as the paper shows failures (question, response,
  correct answer);
- ``feedback``: the same with each failure's feedback line (``coevolution.feedback``: what the agent did
  with the tool, a refused call and its error, the verdict);
- ``paraphrase``: App. E's paraphrase template: the parent alone, no failure to copy.

Counted per presentation: prompts, candidates parsed, answers with none, each guard's refusals (tag
guard apart), leak refusals, candidates that copy a shown problem or its "Correct answer" line, usable
candidates, their scores, admitted, and the best. Per prompt the usable and admitted counts are paired
across presentations (the same failures shown): mean difference with a 95% interval over prompts.

Usage::

    VLLM_CPU_NUM_OF_RESERVED_CPU=0 .venv-vllm/bin/python benchmarks/learning/optimizer_yield.py --engine vllm \\
        --threads 2 --json benchmarks/results/calculator/optimizer-yield-1.5b.json
    python benchmarks/learning/optimizer_yield.py --quick     # tiny random models: the machinery only
    python benchmarks/learning/optimizer_yield.py --table benchmarks/results/calculator/optimizer-yield-1.5b-*.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from inspo.eval.harness import add_common, start, write_result

SCRIPT = "benchmarks/learning/optimizer_yield.py"
PRESENTATIONS = {"reflection": ("reflection", False), "feedback": ("reflection", True),
                 "paraphrase": ("paraphrase", False)}
#: The calculator preset's agent (rl.max_turns, rl.max_response_tokens, rl.max_obs_tokens).
AGENT = {"max_turns": 3, "max_response_tokens": 64, "max_obs_tokens": 32}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--policy", default="qwen2.5-coder-0.5b", help="the frozen policy (plays and scores)")
    p.add_argument("--optimizer", default="qwen2.5-coder-1.5b", help="the optimizer model")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="engine of both models")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--presentations", default=",".join(PRESENTATIONS))
    p.add_argument("--parent", default="weak", help="the calculator seed the prompts revise")
    p.add_argument("--pool", type=int, default=120, help="training problems the policy plays for failures")
    p.add_argument("--prompts", type=int, default=20)
    p.add_argument("--shown", type=int, default=3, help="failures shown per reflection prompt")
    p.add_argument("--candidates", type=int, default=4, help="N, candidates asked per prompt")
    p.add_argument("--answers", type=int, default=1,
                   help="answers sampled per prompt, read as one call (coevolution.answers_per_call)")
    p.add_argument("--temperature", type=float, default=0.7, help="the optimizer's")
    p.add_argument("--max-tokens", type=int, default=700, help="the optimizer's completion limit")
    p.add_argument("--score", type=int, default=40, help="dev problems each usable candidate is scored on")
    p.add_argument("--vllm-kv-cache-gib", type=float, default=2.0)
    p.add_argument("--quick", action="store_true", help="tiny random models, few prompts: the machinery only")
    p.add_argument("--table", nargs="+", metavar="JSON", help="print the yield table of stored results, run nothing")
    add_common(p, threads=0, json_help="where the result JSON goes")
    args = p.parse_args(argv)
    if args.quick:
        args.policy = args.optimizer = "tiny-qwen2"
        args.pool, args.prompts, args.score, args.max_tokens = 6, 2, 4, 24
    unknown = sorted(set(args.presentations.split(",")) - set(PRESENTATIONS))
    if unknown:
        p.error(f"--presentations: unknown {unknown}; choose from {', '.join(PRESENTATIONS)}")
    return args


def paired(b: Sequence[float], a: Sequence[float]) -> dict:
    """``b - a`` per prompt (:func:`inspo.eval.stats.paired_difference`: mean, se and Student's t 95%
    interval), with ``low``/``high`` None where one prompt gives no interval (JSON has no NaN)."""
    from inspo.eval.stats import paired_difference

    out = paired_difference(b, a).to_dict()
    if out["n"] < 2:
        out.update(se=None, low=None, high=None)
    return out


def copies_shown(text: str, shown: Sequence[str]) -> bool:
    """Whether a candidate copies a shown failure: its "Correct answer:" line or a problem's text."""
    flat = " ".join(text.split()).lower()
    return "correct answer:" in flat or any(" ".join(q.split()).lower() in flat for q in shown)


def classify(reason: str) -> str:
    """A refusal's stage as the yield table counts it."""
    if reason.startswith("drops protocol tag"):
        return "tag_guard"
    if reason.startswith("leaks an answer"):
        return "leak_guard"
    if reason.startswith("truncated"):
        return "truncated"
    return "other_guard"


def propose_all(optimizer, prompts: list[str], *, temperature: float, max_tokens: int, seed: int,
                answers: int = 1) -> list[list[tuple[str, str]]]:
    """``answers`` (answer, finish) of the optimizer engine for every prompt, all in one batch; each
    row has its own seed (answer 0 of prompt i the same whatever ``answers``)."""
    from inspo.agent.engines import GenerationInput

    inputs = []
    for i, prompt in enumerate(prompts):
        text = optimizer.prompt_text([{"role": "user", "content": prompt}])
        ids = optimizer.encode(text) or []
        inputs += [GenerationInput(prompt_ids=ids, completion_ids=[], text=text, seed=seed * 100_003 + i + 1000 * j)
                   for j in range(answers)]
    out = optimizer.generate(inputs, max_new_tokens=max_tokens, temperature=temperature, top_p=1.0, stop=[])
    rows = [(g.text, "length" if g.finish == "length" else "stop") for g in out]
    return [rows[i * answers:(i + 1) * answers] for i in range(len(prompts))]


def read_answer(outputs: Sequence[tuple[str, str]], proposer_args: dict, parent, failures, ids) -> object:
    """The proposer's own parse and guard of one call's stored (answer, finish) pairs, read as one
    call with ``answers_per_call`` = their number (a scripted client that hands them back)."""
    from inspo.core.proposer import Proposer
    from inspo.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(lambda messages, n: [answer for answer, _ in outputs],
                      finish_reason=[finish for _, finish in outputs])
    proposer = Proposer(llm, **proposer_args, answers=len(outputs))
    return proposer.propose(parent, failures, new_id=lambda: f"c{next(ids):04d}")


def tally(answers: Sequence[Sequence[tuple[str, str]]], shown_sets: Sequence[Sequence], parent, env, proposer_args: dict,
          scoring_terms: Sequence[str], ids) -> tuple[Counter, list[dict], list[tuple[int, object]]]:
    """Read every prompt's (answer, finish) pairs as a run would read one call: the proposer's parse and guard, then the loop's
    leak check against the shown failures' and the scoring problems' ``leak_terms``. Returns the
    counts, one row per prompt, and the usable candidates as (prompt index, candidate)."""
    from inspo.core.proposer import leaked_answer

    counts: Counter = Counter()
    rows, usable = [], []
    for k, (outputs, shown) in enumerate(zip(answers, shown_sets, strict=True)):
        proposal = read_answer(outputs, proposer_args, parent, shown, ids)
        counts["prompts"] += 1
        counts["cut_off"] += sum(finish == "length" for _, finish in outputs)
        counts["no_candidate"] += bool(proposal.error)
        texts = [c.text for c in proposal.candidates + proposal.rejected]
        counts["candidates"] += len(texts)
        counts["copies_shown"] += sum(copies_shown(t, [f.question.question for f in shown]) for t in texts)
        for cand in proposal.rejected:
            counts[classify(cand.rejected)] += 1
        terms = [t for f in shown for t in env.leak_terms(f.question)] + list(scoring_terms)
        for cand in proposal.candidates:
            leaked = leaked_answer(cand.text, terms, parent.text)
            if leaked is not None:
                cand.rejected = f"leaks an answer: {leaked!r}"
                counts["leak_guard"] += 1
            else:
                usable.append((k, cand))
                counts["usable"] += 1
        rows.append({"prompt": k, "answers": [a for a, _ in outputs], "finishes": [f for _, f in outputs],
                     "error": proposal.error,
                     "candidates": [{"id": c.id, "text": c.text, "refused": c.rejected}
                                    for c in proposal.candidates + proposal.rejected]})
    return counts, rows, usable


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.table:
        stored = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.table]
        print(markdown(stored))
        return {"results": stored}
    import itertools
    from dataclasses import replace

    from inspo.agent.load import load_engine
    from inspo.core.proposer import Proposer
    from inspo.core.verifier import play_all
    from inspo.envs.calculator import load_environment
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig
    from inspo.models.precision import default_device, resolve_precision
    from inspo.records import Instruction

    device = default_device()
    precision = resolve_precision(args.dtype, device=device, dtype_key="--dtype")
    info = start(SCRIPT, argv, threads=args.threads, device=device, dtype=precision.dtype)
    env = load_environment(test_size=300)  # the calculator preset's problems (its dev split scores)
    pool = env.questions("train")[: args.pool]
    scoring = env.questions("dev")[: args.score]
    parent = Instruction(id=args.parent, text=env.instructions[args.parent])
    vllm = None
    if args.engine == "vllm":
        from inspo.agent.vllm_engine import VLLMOptions

        vllm = VLLMOptions(kv_cache_gib=args.vllm_kv_cache_gib, enforce_eager=device == "cpu", max_model_len=4096)
    t0 = time.perf_counter()
    policy = load_engine(args.policy, kind=args.engine, dtype=precision.dtype, device=device, vllm=vllm)
    greedy = AgentConfig(**AGENT, temperature=0.0)
    play = make_evaluate(policy, env, replace(greedy, temperature=1.0), paired_seed=("optimizer-yield", args.seed),
                         progress=True)
    played = play(parent, pool)
    errors = sum(r.error is not None for r in played)
    failures = [r for r in played if r.error is None and r.reward <= 0.0]
    if errors > len(played) // 2:
        raise SystemExit(f"{errors} of {len(played)} pool episodes failed on an error: nothing to show the optimizer")
    if len(failures) < args.shown:
        raise SystemExit(f"only {len(failures)} failures in {len(played)} episodes: raise --pool")
    rng = random.Random(args.seed)
    draws = [rng.sample(range(len(failures)), args.shown) for _ in range(args.prompts)]
    result: dict = {"provenance": info, "precision": precision.describe(), "engine": args.engine,
                    "policy": args.policy, "optimizer": args.optimizer, "parent_name": args.parent,
                    "parent": parent.text,
                    "pool": {"episodes": len(played), "errors": errors, "failures": len(failures),
                             "reward": statistics.fmean(r.reward for r in played if r.error is None)},
                    "settings": {k: getattr(args, k) for k in ("prompts", "shown", "candidates", "answers",
                                                               "temperature", "max_tokens", "score", "seed")},
                    "presentations": {}, "timing": {"pool_s": time.perf_counter() - t0}}
    optimizer = load_engine(args.optimizer, kind=args.engine, dtype=precision.dtype, device=device, vllm=vllm)
    ids = itertools.count(1)
    shown_terms = [t for q in scoring for t in env.leak_terms(q)]
    per_prompt: dict[str, list[dict]] = {}
    candidates: list[tuple[str, int, object]] = []  # (presentation, prompt index, candidate)
    for name in args.presentations.split(","):
        template, with_feedback = PRESENTATIONS[name]
        proposer_args = {"template": template, "n_candidates": args.candidates, "max_tokens": args.max_tokens,
                         "temperature": args.temperature, "guard_tags": env.required_tags,
                         "feedback": env.feedback if with_feedback else None}
        renderer = Proposer(None, **proposer_args)
        shown_sets = [[failures[i] for i in draw] for draw in draws]
        prompts = [renderer.render(parent, shown, ()) for shown in shown_sets]
        t1 = time.perf_counter()
        answers = propose_all(optimizer, prompts, temperature=args.temperature, max_tokens=args.max_tokens,
                              seed=args.seed, answers=args.answers)
        result["timing"][f"{name}_optimizer_s"] = time.perf_counter() - t1
        counts, rows, usable = tally(answers, shown_sets, parent, env, proposer_args, shown_terms, ids)
        candidates += [(name, k, c) for k, c in usable]
        result["presentations"][name] = {"counts": dict(counts), "example_prompt": prompts[0], "rows": rows}
        per_prompt[name] = rows
    t2 = time.perf_counter()
    scorer = make_evaluate(policy, env, greedy, progress=True)
    instructions = [parent] + [Instruction(id=c.id, text=c.text) for _, _, c in candidates]
    scored = play_all(scorer, instructions, scoring)
    result["timing"]["scoring_s"] = time.perf_counter() - t2
    score_errors = sum(r.error is not None for rs in scored for r in rs)
    if score_errors > sum(map(len, scored)) // 10:
        raise SystemExit(f"{score_errors} scoring episodes failed on an error: no yield is reported")
    score = {ins.id: statistics.fmean(r.reward for r in rs if r.error is None) 
             for ins, rs in zip(instructions, scored, strict=True)}
    result["parent_score"] = score[parent.id]
    result["score_errors"] = score_errors  # scoring episodes that failed on an error, left out of every score
    for name in per_prompt:
        stats = result["presentations"][name]
        mine = [(k, c) for n, k, c in candidates if n == name]
        admitted = [(k, c) for k, c in mine if score[c.id] > score[parent.id]]
        stats["counts"]["admitted"] = len(admitted)
        stats["scores"] = sorted((score[c.id] for _, c in mine), reverse=True)
        stats["best"] = max(((score[c.id], c.text) for _, c in mine), default=None)
        for row in stats["rows"]:
            row["usable"] = sum(1 for k, _ in mine if k == row["prompt"])
            row["admitted"] = sum(1 for k, _ in admitted if k == row["prompt"])
            for cand in row["candidates"]:
                cand["score"] = score.get(cand["id"])
    names = list(per_prompt)
    result["paired"] = {}
    for other in names[1:]:
        for what in ("usable", "admitted"):
            result["paired"][f"{other} - {names[0]}: {what} per prompt"] = paired(
                [row[what] for row in per_prompt[other]], [row[what] for row in per_prompt[names[0]]])
    for engine in (policy, optimizer):
        if hasattr(engine, "shutdown"):
            engine.shutdown()
    print_result(result)
    write_result(args.json, result)
    return result


COLUMNS = ("prompts", "candidates", "no_candidate", "cut_off", "tag_guard", "other_guard", "truncated",
           "leak_guard", "copies_shown", "usable", "ties", "admitted")


def ties(result: dict, stats: dict) -> int:
    """Usable candidates that scored exactly their parent's score (the loop's beat-parent admits them)."""
    return sum(1 for row in stats["rows"] for c in row["candidates"]
               if c.get("score") is not None and c["score"] == result["parent_score"])


def markdown(results: Sequence[dict]) -> str:
    """One table row per (parent, presentation) of ``results``, then the paired per-prompt differences."""
    lines = ["| parent (score) | presentation | " + " | ".join(COLUMNS) + " | prompts admitting | best |",
             "|---" * (len(COLUMNS) + 4) + "|"]
    paired = []
    for result in results:
        parent = f"{result.get('parent_name') or repr(result['parent'][:40])} ({result['parent_score']:.3f})"
        for name, stats in result["presentations"].items():
            best = stats["best"]
            shown = f"{best[0]:.3f}: {' '.join(best[1].split())[:50]!r}" if best else "-"
            hits = sum(1 for row in stats["rows"] if row.get("admitted"))
            counts = {**stats["counts"], "ties": ties(result, stats)}
            lines.append(f"| {parent} | {name} | " + " | ".join(str(counts.get(c, 0)) for c in COLUMNS)
                         + f" | {hits} | {shown} |")
        for key, iv in result["paired"].items():
            low = "-" if iv["low"] is None else f"[{iv['low']:+.2f}, {iv['high']:+.2f}]"
            paired.append(f"{parent} {key}: {iv['mean']:+.2f} {low} over {iv['n']} prompts")
    return "\n".join(lines + [""] + paired)


def print_result(result: dict) -> None:
    print(markdown([result]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
