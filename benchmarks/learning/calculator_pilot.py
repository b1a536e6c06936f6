"""Does the instruction decide how the policy uses its calculator? A frozen-policy pilot (issue 32).

Before any RL seed is spent in the ``calculator`` environment, two things must hold, or a
comparison of co-evolution with static instructions cannot show anything:

1. **The instruction moves reward.** A seed the run starts from (``weak``: it names the tool and
   nothing more) must leave room, at least 0.10 of reward, below the best of the environment's
   default seed (``calculator``) and a hand-written one with a worked example (``worked``); else
   there is nothing for instruction evolution to find.
2. **The weak seed earns some reward under sampling.** GRPO learns from groups whose G rollouts
   differ; a seed with pass@G = 0 everywhere gives it nothing.

This script plays the frozen policy on ``--problems`` held-out (test) problems under each seed
(``notool``: never names the tool; ``weak``; ``calculator``; ``worked``): once greedily and
``--group`` times sampled at ``--temperature``, and prints per seed: mean reward, tool calls and
calls the calculator refused per episode, format failures (episodes with no answer or with an
invalid turn), pass@G and the share of groups with mixed rewards; then each seed's paired
per-problem difference from ``weak`` with its 95% interval over problems. Sampled episodes share
their seeds across instructions (common random numbers). Rollouts that failed on an error (not
the policy's fault) are counted apart and left out of every score; the script stops when they are
more than a tenth of the rollouts.

The environment's settings (``--set env.KEY=VALUE``: steps, ops, number ranges, what calc accepts)
and the agent's (``--max-turns``, ``--tokens``) are the knobs the pilot chooses.

Usage::

    python benchmarks/learning/calculator_pilot.py --threads 2 --problems 200 --json benchmarks/results/calculator/pilot.json
    python benchmarks/learning/calculator_pilot.py --engine vllm ...   # in the vLLM venv: rollouts through vLLM
    python benchmarks/learning/calculator_pilot.py --quick              # a smoke run (tiny random model)
    python benchmarks/learning/calculator_pilot.py --table RESULT.json  # a stored result as a Markdown table
    python benchmarks/learning/calculator_pilot.py --combine A.json B.json --json ALL.json  # runs of some seeds each, as one

A run of one seed at a time (``--seeds worked``) writes its JSON when it ends, so a long sampled
pilot can run in pieces; ``--combine`` joins them (same policy, engine, environment, problems, G,
temperature and sampling seed, or it refuses) and computes the paired differences from ``weak``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result

SCRIPT = "benchmarks/learning/calculator_pilot.py"
SEEDS = ("notool", "weak", "calculator", "worked")
REFERENCE = "weak"
MAX_ERROR_SHARE = 0.1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="the frozen policy (a registered name or a folder)")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"])
    p.add_argument("--dtype", default="auto", help="the policy's weights dtype (auto: as inspo picks for this device)")
    p.add_argument("--seeds", default=",".join(SEEDS), help=f"comma-separated named seeds (default {','.join(SEEDS)})")
    p.add_argument("--problems", type=int, default=200, help="held-out test problems (default 200)")
    p.add_argument("--group", type=int, default=8, help="sampled episodes per problem (G; 0: greedy only)")
    p.add_argument("--temperature", type=float, default=1.0, help="the sampled episodes' temperature")
    p.add_argument("--max-turns", type=int, default=3, help="tool turns; one final answer turn follows")
    p.add_argument("--tokens", type=int, default=64, help="new tokens per turn")
    p.add_argument("--obs-tokens", type=int, default=32, help="tokens per observation")
    p.add_argument("--set", action="append", default=[], metavar="env.KEY=VALUE",
                   help="a calculator setting, e.g. env.steps=3 or env.accept_equals=true")
    p.add_argument("--batch", type=int, default=64, help="episodes per generate call")
    add_common(p, seed_help="sampling seed (paired across instructions)", json_help="write the result here")
    p.add_argument("--vllm-kv-cache-gib", type=float, default=1.0)
    p.add_argument("--episodes", default=None, help="write every episode here (JSONL)")
    p.add_argument("--quick", action="store_true", help="smoke run: tiny random model, 4 problems, G 2")
    p.add_argument("--table", default=None, metavar="JSON",
                   help="print a stored result as BENCHMARKS.md's Markdown table and exit (plays nothing)")
    p.add_argument("--combine", nargs="+", default=None, metavar="JSON",
                   help="join stored runs of disjoint seeds into one result (plays nothing); --json writes it")
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.problems, args.group, args.tokens, args.max_turns = "tiny-qwen2", 4, 2, 6, 1
        args.dtype = "float32"
    return args


def format_failure(rollout) -> bool:
    """No answer, or a turn that was neither a tool call nor an answer."""
    return rollout.answer is None or rollout.metrics.get("n_invalid", 0.0) > 0


def summarise(rollouts: Sequence, group: int) -> dict:
    """One seed's rollouts, problem-major (``group`` per problem). Error rollouts are counted
    apart; a problem's group is scored on what remains of it."""
    errors = sum(r.finish_reason == "error" for r in rollouts)
    groups = [rollouts[i:i + group] for i in range(0, len(rollouts), group)]
    kept = [[r for r in g if r.finish_reason != "error"] for g in groups]
    played = [r for g in kept for r in g]
    out = {"problems": len(groups), "rollouts": len(rollouts), "errors": errors}
    if not played:
        return out
    out.update({
        "reward": statistics.fmean(r.reward for r in played),
        "tool_calls": statistics.fmean(len(r.tool_calls) for r in played),
        "tool_errors": statistics.fmean(r.metrics.get("n_tool_errors", 0.0) for r in played),
        "format_failures": statistics.fmean(format_failure(r) for r in played),
        "no_answer": statistics.fmean(r.answer is None for r in played),
        "pass_at_g": sum(any(r.reward > 0 for r in g) for g in kept if g) / sum(1 for g in kept if g),
        "mixed_groups": sum(len({r.reward for r in g}) > 1 for g in kept if g) / sum(1 for g in kept if g),
        "problem_means": [statistics.fmean(r.reward for r in g) if g else None for g in kept],
    })
    return out


def differences(cells: dict[str, dict], reference: str) -> dict[str, dict]:
    """Each seed's paired per-problem difference from ``reference`` (problems scored on both)."""
    from inspo.eval.stats import paired_difference

    out = {}
    base = cells[reference].get("problem_means")
    for name, cell in cells.items():
        if name == reference or base is None or cell.get("problem_means") is None:
            continue
        pairs = [(x, y) for x, y in zip(cell["problem_means"], base, strict=True) if x is not None and y is not None]
        out[f"{name} - {reference}"] = paired_difference([x for x, _ in pairs], [y for _, y in pairs]).to_dict()
    return out


def markdown(result: dict) -> str:
    """A stored result as one Markdown table: per seed, greedy and sampled reward with the paired
    difference from ``weak``, and the sampled episodes' calls, refusals, format failures, pass@G
    and mixed groups (greedy's where the run had no sampled episodes)."""
    def diff(mode: str, name: str) -> str:
        d = result.get("differences", {}).get(mode, {}).get(f"{name} - {REFERENCE}")
        if d is None:
            return "-"
        return f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]" if d["n"] > 1 else f"{d['mean']:+.3f}"

    g = result["group"] or "-"
    rows = [f"| seed | greedy reward | greedy - weak | sampled reward (G {g}) | sampled - weak | calls / episode | "
            f"refused / episode | format failures | pass@{g} | mixed groups |", "|---" * 10 + "|"]
    for name, cell in result["seeds"].items():
        greedy, sampled = cell.get("greedy", {}), cell.get("sampled", {})
        shown = sampled if "reward" in sampled else greedy

        def reward(c: dict) -> str:
            return f"{c['reward']:.3f}" if "reward" in c else "-"

        rows.append(f"| {name} | {reward(greedy)} | {diff('greedy', name)} | {reward(sampled)} | {diff('sampled', name)} | "
                    f"{shown.get('tool_calls', 0):.2f} | {shown.get('tool_errors', 0):.2f} | "
                    f"{shown.get('format_failures', 0):.1%} | "
                    + (f"{sampled['pass_at_g']:.1%} | {sampled['mixed_groups']:.1%} |" if "reward" in sampled else "- | - |"))
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.table:
        stored = json.loads(Path(args.table).read_text(encoding="utf-8"))
        print(markdown(stored))
        return stored
    if args.combine:
        combined = combine([json.loads(Path(f).read_text(encoding="utf-8")) for f in args.combine])
        combined["provenance"] = start(SCRIPT, argv, device="cpu")  # the joining's own; each run's is in parts
        return finish(combined, args.json)
    import torch

    from inspo.config.files import parse_override
    from inspo.core.verifier import play_all
    from inspo.engines.load import load_engine
    from inspo.envs.calculator import load_environment
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig
    from inspo.models.precision import default_device, resolve_precision
    from inspo.records import Instruction

    settings: dict = {}
    for text in args.set:
        parsed = parse_override(text)
        if set(parsed) != {"env"}:
            raise SystemExit(f"--set {text}: give the calculator's settings as env.KEY=VALUE")
        settings.update(parsed["env"])
    settings.setdefault("test_size", max(args.problems, 1))
    env = load_environment(**settings)
    problems = env.questions("test")[: args.problems]
    names = [s for s in args.seeds.split(",") if s]
    unknown = [n for n in names if n not in env.instructions]
    if unknown:
        raise SystemExit(f"unknown seed(s) {unknown}; the calculator's are: {', '.join(env.instructions)}")
    instructions = [Instruction(id=n, text=env.instructions[n]) for n in names]
    device = default_device()
    precision = resolve_precision(args.dtype, device=device, dtype_key="--dtype")
    info = start(SCRIPT, argv, threads=args.threads, device=device, dtype=precision.dtype)
    print(f"precision: {precision.describe()}", flush=True)
    vllm = None
    if args.engine == "vllm":
        from inspo.engines.vllm_engine import VLLMOptions

        vllm = VLLMOptions(kv_cache_gib=args.vllm_kv_cache_gib, enforce_eager=device == "cpu", max_model_len=4096)
    started = time.perf_counter()
    engine = load_engine(args.model, kind=args.engine, dtype=precision.dtype, device=device, vllm=vllm)
    load_s = time.perf_counter() - started
    agent = AgentConfig(max_turns=args.max_turns, max_response_tokens=args.tokens, max_obs_tokens=args.obs_tokens,
                        temperature=0.0)
    result: dict = {"provenance": info, "precision": precision.describe(), "engine": args.engine, "model": args.model,
                    "env": env.options.to_dict(), "problems": len(problems), "group": args.group,
                    "temperature": args.temperature, "agent": vars(agent).copy(), "seed": args.seed,
                    "threads": torch.get_num_threads(), "load_s": load_s, "seeds": {}, "timing": {}}
    played_all: dict[str, list] = {}
    for mode, group in (("greedy", 1), ("sampled", args.group)):
        if group < 1:
            continue
        from dataclasses import replace

        config = agent if mode == "greedy" else replace(agent, temperature=args.temperature)
        evaluate = make_evaluate(engine, env, config, group_size=group, batch_size=args.batch,
                                 paired_seed=("calculator-pilot", args.seed), progress=True)
        t0 = time.perf_counter()
        played = play_all(evaluate, instructions, problems)
        wall = time.perf_counter() - t0
        episodes = sum(map(len, played))
        generated = sum(r.metrics.get("n_policy_tokens", 0.0) for rs in played for r in rs)
        result["timing"][mode] = {"wall_s": wall, "episodes": episodes, "episodes_per_s": episodes / wall,
                                  "policy_tokens_per_s": generated / wall}
        for ins, rollouts in zip(instructions, played, strict=True):
            result["seeds"].setdefault(ins.id, {"text": ins.text})[mode] = summarise(rollouts, group)
            played_all[f"{mode}:{ins.id}"] = rollouts
    total = sum(len(v) for v in played_all.values())
    errors = sum(r.finish_reason == "error" for v in played_all.values() for r in v)
    result["errors"] = errors
    if hasattr(engine, "shutdown"):
        engine.shutdown()
    if args.episodes:
        write_episodes(args.episodes, played_all)
    if errors > MAX_ERROR_SHARE * total:
        print(json.dumps(result, indent=2), file=sys.stderr)
        raise SystemExit(f"{errors} of {total} rollouts failed on an error (not the policy): no score is reported")
    return finish(result, args.json)


def finish(result: dict, path: str | None) -> dict:
    """Paired differences from ``weak`` (where the run played it) and the lever checks; print; write."""
    seeds = result["seeds"]
    result["differences"] = {mode: differences({n: c[mode] for n, c in seeds.items()}, REFERENCE)
                             for mode in ("greedy", "sampled") if mode in seeds.get(REFERENCE, {})}
    result["lever"] = lever(result)
    print_result(result)
    write_result(path, result)
    return result


#: What two runs must share for their per-problem rewards to be paired.
SHARED = ("model", "engine", "precision", "env", "problems", "group", "temperature", "agent", "seed")


def combine(parts: Sequence[dict]) -> dict:
    """Stored runs of disjoint seeds as one result. Refuses runs that differ in anything the pairing
    rests on (:data:`SHARED`) or that played a seed twice; each part's provenance and timing is kept."""
    first = parts[0]
    out = {key: first[key] for key in SHARED}
    out.update({"parts": [], "seeds": {}, "errors": 0})
    for i, part in enumerate(parts):
        differ = [key for key in SHARED if part.get(key) != first.get(key)]
        if differ:
            raise SystemExit(f"--combine: run {i + 1} differs from run 1 in {', '.join(differ)}; "
                             "only runs of one setting can be paired")
        twice = sorted(set(part["seeds"]) & set(out["seeds"]))
        if twice:
            raise SystemExit(f"--combine: seed(s) {twice} appear in more than one run; give each seed once")
        out["seeds"].update(part["seeds"])
        out["errors"] += part.get("errors", 0)
        out["parts"].append({"seeds": list(part["seeds"]), "provenance": part["provenance"],
                             "timing": part["timing"], "threads": part.get("threads"), "load_s": part.get("load_s")})
    out["timing"] = {}
    return out


def lever(result: dict) -> dict:
    """The pilot's two checks (module docstring), on the greedy and the sampled rewards."""
    seeds = result["seeds"]
    out = {}
    for mode in ("greedy", "sampled"):
        if mode not in seeds.get(REFERENCE, {}):
            continue
        best = max((n for n in ("calculator", "worked") if n in seeds and "reward" in seeds[n][mode]),
                   key=lambda n: seeds[n][mode]["reward"], default=None)
        if best is None or "reward" not in seeds[REFERENCE][mode]:
            continue
        gap = seeds[best][mode]["reward"] - seeds[REFERENCE][mode]["reward"]
        out[mode] = {"best": best, "gap": gap, "gap_at_least_0.10": gap >= 0.10,
                     "weak_reward": seeds[REFERENCE][mode]["reward"]}
        if mode == "sampled":
            out[mode]["weak_pass_at_g"] = seeds[REFERENCE][mode]["pass_at_g"]
            out[mode]["weak_mixed_groups"] = seeds[REFERENCE][mode]["mixed_groups"]
    return out


def write_episodes(path: str, played: dict[str, list]) -> None:
    """Every rollout (mode:seed, problem, response with its results, reward, calls), one a line."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with Path(path).open("w", encoding="utf-8") as fh:
        for key, rollouts in played.items():
            for r in rollouts:
                row = {"cell": key, **r.to_dict()}
                for field in ("prompt_ids", "completion_ids", "env_mask", "logprobs"):
                    row.pop(field, None)
                fh.write(json.dumps(row) + "\n")


def print_result(result: dict) -> None:
    print(f"\n{result['model']} ({result['engine']}, {result['precision']}); {result['problems']} test problems; "
          f"G {result['group']} at T {result['temperature']}; env {result['env']}")
    head = (f"{'seed':<11} {'mode':<8} {'reward':>7} {'calls':>6} {'refused':>8} {'format':>7} {'pass@G':>7} "
            f"{'mixed':>6}")
    print(head)
    for name, cell in result["seeds"].items():
        for mode in ("greedy", "sampled"):
            c = cell.get(mode)
            if not c or "reward" not in c:
                continue
            print(f"{name:<11} {mode:<8} {c['reward']:7.3f} {c['tool_calls']:6.2f} {c['tool_errors']:8.2f} "
                  f"{c['format_failures']:7.1%} {c['pass_at_g']:7.1%} {c['mixed_groups']:6.1%}")
    for mode, diffs in result.get("differences", {}).items():
        for key, d in diffs.items():
            interval = f"[{d['low']:+.3f}, {d['high']:+.3f}]" if d["n"] > 1 else "(no interval)"
            print(f"{mode:<8} {key:<22} {d['mean']:+.3f} {interval} over {d['n']} problems")
    for mode, t in result["timing"].items():
        print(f"{mode:<8} {t['episodes']} episodes in {t['wall_s']:.0f} s: {t['episodes_per_s']:.2f} episodes/s, "
              f"{t['policy_tokens_per_s']:.1f} policy tokens/s")
    for mode, check in result.get("lever", {}).items():
        print(f"lever ({mode}): best {check['best']} - weak = {check['gap']:+.3f} "
              f"({'>=' if check['gap_at_least_0.10'] else '<'} 0.10)")


if __name__ == "__main__":
    main()
