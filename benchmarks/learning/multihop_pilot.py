"""Can the instruction matter in the ``multihop`` setting? A frozen-policy pilot (issue 23, item 1).

Before any seed of an RL comparison is spent, two things must hold, or the comparison cannot
show co-evolution's effect whatever it is:

1. **Multi-hop questions earn reward under sampling.** GRPO learns nothing from a group whose G
   rollouts all score the same (all 0), so a question type with pass@G = 0 is invisible to it.
2. **The instruction moves reward or tool use.** If every instruction scores alike, there is
   nothing for instruction evolution to find.

This script samples the preset's policy (frozen, never trained) G times per question, under each
instruction, on ``--questions`` single-hop and as many two-hop training questions, with the
preset's agent settings (turns, tokens, prefill, temperature), and prints per instruction and hop:
mean EM, pass@G (share of questions with at least one success), the share of groups with mixed
rewards (the groups GRPO learns from), searches per rollout, the share of rollouts with no
answer, and the paired per-question difference from the first instruction (95% interval over
questions). Episodes share sampling seeds across instructions (common random numbers). Rollouts
that failed on an error (not the policy's fault) are counted apart and left out of every score;
the script stops when they are more than a tenth of the rollouts.

Instructions are named (``weak``, ``search-r1``: ``inspo.envs.search_r1.protocol.NAMED_INSTRUCTIONS``),
``weak+hops`` (the weak seed plus the rule-based reflector's sentence on multi-part questions: what
an evolved instruction can add) or ``file:PATH`` (a hand-written probe). ``--hops`` picks the hop
counts played (``2`` alone for a two-hop probe).

Usage::

    python benchmarks/learning/multihop_pilot.py --threads 2 --questions 24 --json runs/pilot.json
    python benchmarks/learning/multihop_pilot.py --quick      # a smoke run (tiny random model)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result

QUICK = ["model.name_or_path=tiny-qwen2", "model.lora=false", "rl.max_response_tokens=8", "rl.max_turns=2"]
MAX_ERROR_SHARE = 0.1


def instruction_text(name: str) -> str:
    from inspo.core.reflector import WRONG_ANSWER
    from inspo.envs.search_r1.protocol import NAMED_INSTRUCTIONS, WEAK_INSTRUCTION
    from inspo.envs.search_r1.reflector_rules import GUIDANCE

    if name == "weak+hops":  # the rule-based reflector's own sentence on multi-part questions
        return f"{WEAK_INSTRUCTION} {GUIDANCE[WRONG_ANSWER][1]}"
    if name.startswith("file:"):  # a hand-written probe
        path = Path(name[5:])
        if not path.is_file():
            raise SystemExit(f"instruction {name!r}: {path} is not a file")
        return path.read_text(encoding="utf-8").strip()
    if name not in NAMED_INSTRUCTIONS:
        raise SystemExit(f"unknown instruction {name!r}: choose from {', '.join([*NAMED_INSTRUCTIONS, 'weak+hops'])}")
    return NAMED_INSTRUCTIONS[name]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="multihop")
    p.add_argument("--instructions", default="weak,search-r1,weak+hops",
                   help="comma-separated; the first is the reference of the paired differences")
    p.add_argument("--questions", type=int, default=24, help="training questions per hop count")
    p.add_argument("--hops", default="1,2", help="hop counts to play, of 1 and 2 (comma-separated)")
    p.add_argument("--group-size", type=int, default=0, help="G samples per question (0: the preset's rl.group_size)")
    add_common(p, seed_help="picks the questions and the sampling seeds", json_help="also write the results here")
    p.add_argument("--temperature", type=float, default=None,
                   help="decoding temperature (default: the preset's rl.temperature); 0 decodes greedily, "
                        "one rollout a question (a cheap probe where sampling G a question is too slow)")
    p.add_argument("--batch", type=int, default=64, help="episodes per generate call")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"],
                   help="policy engine: transformers, or vLLM (needs the vllm module: 3-4x faster on CPU, "
                        "BENCHMARKS.md §2; episodes keep their paired seeds on both)")
    p.add_argument("--vllm-kv-cache-gib", type=float, default=2.0, help="vLLM's KV cache (RAM on CPU), GiB")
    p.add_argument("--set", action="append", default=[], help="extra config override")
    p.add_argument("--episodes", metavar="JSONL", default=None,
                   help="also write every rollout (response with its observations, reward, searches) here")
    p.add_argument("--quick", action="store_true", help="tiny random model, 2 questions a hop: a smoke run")
    p.add_argument("--show", metavar="JSON", help="print a stored result (its --json) again, and exit")
    p.add_argument("--against", metavar="JSON",
                   help="with --show: also the paired per-question difference of --show minus this stored "
                        "result, per instruction and hop (same questions and seed: e.g. two models)")
    args = p.parse_args(argv)
    args.instructions = [n for n in args.instructions.split(",") if n]
    args.hops = sorted({int(h) for h in args.hops.split(",") if h})
    if not args.hops or not set(args.hops) <= {1, 2}:
        p.error("--hops: 1, 2 or 1,2")
    if args.questions < 1:
        p.error("--questions must be >= 1")
    if args.quick:
        args.questions = min(args.questions, 2)
        args.group_size = args.group_size or 2
        args.set = [*QUICK, *args.set]
    return args


def group_stats(rewards: Sequence[Sequence[float]]) -> dict[str, float]:
    """Per-question groups of rewards -> mean, pass@G (a group with a reward > 0) and the share of
    groups whose rewards differ (those GRPO's group-relative advantage is non-zero for)."""
    n = len(rewards)
    return {
        "mean": statistics.fmean(r for g in rewards for r in g),
        "pass_at_g": sum(any(r > 0 for r in g) for g in rewards) / n,
        "mixed_groups": sum(len(set(g)) > 1 for g in rewards) / n,
    }


def summarise(rollouts: Sequence, group_size: int) -> dict:
    """One instruction's rollouts on one hop count, question-major (G per question). Error
    rollouts are counted apart and their questions' groups are scored on what remains."""
    errors = sum(r.finish_reason == "error" for r in rollouts)
    groups = [rollouts[i:i + group_size] for i in range(0, len(rollouts), group_size)]
    kept = [[r for r in g if r.finish_reason != "error"] for g in groups]
    scored = [g for g in kept if g]
    played = [r for g in scored for r in g]
    out = {"questions": len(groups), "rollouts": len(rollouts), "errors": errors}
    if not played:
        return out
    out.update(group_stats([[r.reward for r in g] for g in scored]))
    out["successes"] = sum(r.reward > 0 for r in played)  # of len(played) scored rollouts
    out["scored"] = len(played)
    searches = [len(r.calls_of("search")) for r in played]
    out["searches"] = statistics.fmean(searches)
    out["searches_hist"] = {str(k): sum(n == k for n in searches) for k in range(0, 6)}
    out["no_answer"] = sum(r.answer is None for r in played) / len(played)
    out["question_means"] = [statistics.fmean(r.reward for r in g) if g else None for g in kept]
    return out


def pick_questions(questions: Sequence, per_hop: int, seed: int, hop_counts: Sequence[int] = (1, 2)) -> dict[int, list]:
    """``per_hop`` training questions of each of ``hop_counts``: the same ones for a seed whichever
    hop counts are asked for (both are always drawn, 1-hop first, from one stream)."""
    rng = random.Random(seed)
    out = {}
    for hops in (1, 2):
        pool = [q for q in questions if int(q.meta.get("hops", 0) or 0) == hops]
        if len(pool) < per_hop:
            raise SystemExit(f"only {len(pool)} {hops}-hop training questions; lower --questions")
        out[hops] = rng.sample(pool, per_hop)
    return {h: out[h] for h in hop_counts}


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.show:
        result = json.loads(Path(args.show).read_text())
        print_result(result)
        if args.against:
            result["against"] = print_against(result, json.loads(Path(args.against).read_text()))
        return result
    from inspo.config.train import resolve
    from inspo.core.verifier import play_all
    from inspo.engines.load import load_engine
    from inspo.envs.evaluate import make_evaluate
    from inspo.eval.stats import paired_difference
    from inspo.records import Instruction
    from inspo.training.preflight import prepare

    config = resolve(args.preset, None, ["mode=static", *args.set])
    group_size = args.group_size or config.rl.group_size
    if args.temperature is not None and args.temperature <= 0:
        group_size = 1  # greedy: every sample of a question would be the same
    info = start("benchmarks/learning/multihop_pilot.py", argv, threads=args.threads, dtype=config.model.dtype)
    inputs = prepare(config, need_optimizer=False)
    if args.temperature is not None:
        from dataclasses import replace

        inputs.agent = replace(inputs.agent, temperature=max(args.temperature, 0.0))
    by_hop = pick_questions(inputs.questions, args.questions, args.seed, args.hops)
    device = info["device"]  # CUDA where present, else the CPU
    vllm = None
    if args.engine == "vllm":
        from inspo.engines.vllm_engine import VLLMOptions

        vllm = VLLMOptions(kv_cache_gib=args.vllm_kv_cache_gib, enforce_eager=device == "cpu")
    engine = load_engine(inputs.model_dir, kind=args.engine, dtype=config.model.dtype, device=device, vllm=vllm)
    evaluate = make_evaluate(engine, inputs.env, inputs.agent, group_size=group_size,
                             batch_size=args.batch, paired_seed=("pilot", args.seed), progress=True)
    instructions = [Instruction(id=name, text=instruction_text(name)) for name in args.instructions]
    questions = [q for h in args.hops for q in by_hop[h]]
    started = time.perf_counter()
    played = play_all(evaluate, instructions, questions)
    wall = time.perf_counter() - started
    result: dict = {"provenance": info, "preset": args.preset, "set": args.set, "group_size": group_size,
                    "engine": args.engine, "model": config.model.name_or_path,
                    "temperature": inputs.agent.temperature, "max_turns": inputs.agent.max_turns,
                    "questions_per_hop": args.questions, "seed": args.seed, "wall_s": wall,
                    "rollouts_per_s": sum(map(len, played)) / wall,
                    "question_ids": {str(h): [q.id for q in qs] for h, qs in by_hop.items()},
                    "instructions": {}, "differences": {}}
    total_errors = 0
    for ins, rollouts in zip(instructions, played, strict=True):
        cells, first = {}, 0
        for h in args.hops:
            end = first + len(by_hop[h]) * group_size
            cells[str(h)] = summarise(rollouts[first:end], group_size)
            first = end
        total_errors += sum(c["errors"] for c in cells.values())
        result["instructions"][ins.id] = {"text": ins.text, "hops": cells}
    total = sum(map(len, played))
    result["errors"] = total_errors
    if total_errors > MAX_ERROR_SHARE * total:
        print(json.dumps(result, indent=2), file=sys.stderr)
        raise SystemExit(f"{total_errors} of {total} rollouts failed on an error (not the policy): no score is "
                         "reported; see the errors in the rollouts")
    ref = instructions[0].id
    for ins in instructions[1:]:
        for hop in map(str, args.hops):
            a = result["instructions"][ins.id]["hops"][hop]["question_means"]
            b = result["instructions"][ref]["hops"][hop]["question_means"]
            pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
            d = paired_difference([x for x, _ in pairs], [y for _, y in pairs])
            result["differences"][f"{ins.id} - {ref} ({hop}-hop)"] = d.to_dict()
    if hasattr(engine, "shutdown"):
        engine.shutdown()
    if args.episodes:
        write_episodes(args.episodes, played)
    print_result(result)
    write_result(args.json, result)
    return result


def write_episodes(path: str, played: Sequence[Sequence]) -> None:
    """Every rollout (question, instruction, response with its observations, reward, searches),
    one JSON line each, to read what the policy did."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with Path(path).open("w", encoding="utf-8") as f:
        for rollouts in played:
            for r in rollouts:
                f.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")


def print_against(result: dict, other: dict) -> dict:
    """Per instruction and hop, the paired per-question difference ``result`` minus ``other``
    (two stored pilots on the same questions, e.g. two models); refuses results on other questions."""
    from inspo.eval.stats import paired_difference

    if result["question_ids"] != other["question_ids"]:
        raise SystemExit("--against: the two results were played on different questions (question_ids differ)")
    names = f"{result.get('model', '?')} - {other.get('model', '?')}"
    out = {}
    for ins, cell in result["instructions"].items():
        for hop, c in cell["hops"].items():
            o = other["instructions"].get(ins, {}).get("hops", {}).get(hop)
            if o is None or "question_means" not in c or "question_means" not in o:
                continue
            pairs = [(x, y) for x, y in zip(c["question_means"], o["question_means"], strict=True)
                     if x is not None and y is not None]
            d = paired_difference([x for x, _ in pairs], [y for _, y in pairs])
            out[f"{ins} ({hop}-hop)"] = d.to_dict()
            print(f"  {names}, {ins} ({hop}-hop): {d.mean:+.3f} [95% CI {d.low:+.3f}, {d.high:+.3f}] over {d.n} questions")
    return out


def print_result(result: dict) -> None:
    print(f"{result['questions_per_hop']} questions a hop x G {result['group_size']}, temperature "
          f"{result['temperature']}, {result['max_turns']} search turns; {result['wall_s']:.0f} s, "
          f"{result['rollouts_per_s']:.2f} rollouts/s; errors (counted apart) {result['errors']}")
    print(f"{'instruction':12s} hops  {'EM':>6s} {'wins':>9s} {'pass@G':>7s} {'mixed':>6s} {'searches':>8s} {'no answer':>9s}  searches 0/1/2/3/4")
    for name, cell in result["instructions"].items():
        for hop, c in cell["hops"].items():
            if "mean" not in c:
                print(f"{name:12s} {hop:>4s}  (no rollout scored: {c['errors']} errors)")
                continue
            hist = "/".join(str(c["searches_hist"][str(k)]) for k in range(5))
            scored = c.get("scored", c["rollouts"] - c["errors"])  # results before these fields: EM is 0 or 1
            wins = f"{c.get('successes', round(c['mean'] * scored))}/{scored}"
            print(f"{name:12s} {hop:>4s}  {c['mean']:6.3f} {wins:>9s} {c['pass_at_g']:7.3f} {c['mixed_groups']:6.3f} "
                  f"{c['searches']:8.2f} {c['no_answer']:9.3f}  {hist}")
    for name, d in result["differences"].items():
        print(f"  {name}: {d['mean']:+.3f} [95% CI {d['low']:+.3f}, {d['high']:+.3f}] over {d['n']} questions")


if __name__ == "__main__":
    main()
