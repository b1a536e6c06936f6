"""Issue 63 (b): INSPO's instruction search with the new evidence against arm 5's stored GEPA runs.

Arm 5 (``evolve_vs_gepa.py``, ``benchmarks/results/calculator/arm5/gepa-calc-sS.json``) ran
INSPO as the paper specifies it and GEPA at an equal rollout budget, on the calculator with the
frozen 0.5B, the 1.5B optimizer and the seed ``@calculator``; GEPA won every seed. This script runs
``inspo evolve`` again for seed S with the evidence settings (:data:`EVIDENCE`: paired, greedy,
raced verification on 64 training problems the optimizer did not see, the protocol block, worked
examples held out, split groups, the final choice over every admitted instruction) and **GEPA's rollouts of that seed as its budget**: every policy rollout it plays (steps, warm-up,
gate, verification, final choice) is counted, each evolution's verification is capped
(``coevolution.evolve_rollouts``) so that the planned total fits, and the total actually spent is
reported beside the budget (over it: said, never hidden). GEPA is not run again: its returned
instruction is scored beside the seed and INSPO's on the same 300 test problems, greedily, in this
process (the stored per-problem rewards come from another process, and greedy bf16 on this CPU
drifted by 3 of 300 problems between processes: so every comparison here is within this run).

    python benchmarks/learning/evidence_rematch.py --seed 0 --out runs/evidence-s0 \\
        --json benchmarks/results/calculator/evidence/rematch-s0.json
    python benchmarks/learning/evidence_rematch.py ... --resume      # continue a stopped seed
    python benchmarks/learning/evidence_rematch.py --stop runs/evidence-s0   # stop at the next save
    python benchmarks/learning/evidence_rematch.py --quick --gepa tests-written.json   # the machinery only
    python benchmarks/learning/evidence_rematch.py --seed 3 --inspo-alone ...   # a seed arm 5 never ran

``--inspo-alone`` runs a seed that has no GEPA result (issue 63 asks for seeds 3-4 for INSPO
alone): arm 5's seed-0 file gives the settings and the test problems, the budget is ``--budget``
(default: the mean of arm 5's three GEPA budgets), and only the seed and INSPO are played.

Written: the three test means, INSPO minus GEPA and each minus the seed (paired, 95% interval over
problems), a hit (INSPO's returned instruction at least +0.1 over the seed), the rollouts by kind
against the budget, optimizer calls and tokens, wall time, the candidates' fates, and provenance.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from inspo import artifacts
from inspo.lab.harness import add_common, load_script, start, write_result

HERE = Path(__file__).resolve().parent
ARM5 = HERE.parent / "results" / "calculator" / "arm5"


def _vs_gepa():
    """benchmarks/learning/evolve_vs_gepa.py (arm 5's script: its schedule, test play, rollout count)."""
    return load_script(HERE / "evolve_vs_gepa.py", "inspo_benchmark_evolve_vs_gepa")


EVOLVE_EVERY, SCHEDULE, QUICK = _vs_gepa().EVOLVE_EVERY, _vs_gepa().SCHEDULE, _vs_gepa().QUICK
#: Arm 5's INSPO side, as its command and settings record it (the optimizer, its sampling, the seed).
ARM5_SETTINGS = [
    "seed_instruction=@calculator", "optimizer.kind=local", "optimizer.local_model_path=qwen2.5-coder-1.5b",
    "coevolution.optimizer_temperature=0.7", "coevolution.optimizer_max_tokens=700",
    "coevolution.answers_per_call=4", "data.test_split=",
]
#: The new evidence (docs/choosing-on-evidence.md), every mechanism on but the gate: on three
#: failure problems it kept the wrong candidates offline (optimizer-yield-evidence.txt: 1 of the 6
#: that beat the parent on dev) and lost I* on the synthetic task (race-synthetic.txt); add
#: ``--set coevolution.gate=true`` to measure it.
EVIDENCE = [
    "coevolution.admission=paired", "coevolution.verify_greedy=true", "coevolution.validation_from=train",
    "coevolution.validation_unseen=true", "coevolution.validation_size=64",
    "coevolution.leak_scope=held-out", "coevolution.protocol_block=true", "coevolution.split_groups=true",
    "final_choice=admitted",
]
HIT = 0.1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gepa", default=None, help="arm 5's result for the seed (default ARM5/gepa-calc-sS.json)")
    p.add_argument("--evolutions", type=int, default=2,
                   help="evolutions after the initial population (arm 5: 2); sets the default --steps")
    p.add_argument("--steps", type=int, default=None, help=f"INSPO steps (default {EVOLVE_EVERY} x (evolutions + 1))")
    p.add_argument("--dev-size", type=int, default=16, help="dev problems of the final choice over every admitted")
    p.add_argument("--reserve", type=int, default=None,
                   help="rollouts kept for the final choice (default dev-size x 6: the seed and 5 admitted)")
    p.add_argument("--inspo-alone", action="store_true",
                   help="a seed with no GEPA result: settings and test from --gepa (default arm 5's seed 0), "
                        "budget --budget, no GEPA arm")
    p.add_argument("--budget", type=int, default=None,
                   help="rollouts for --inspo-alone (default: the mean of arm 5's GEPA budgets)")
    p.add_argument("--no-evidence", action="store_true", help="arm 5's settings alone (the ablation baseline)")
    p.add_argument("--set", action="append", default=[], help="extra config override, after the evidence's")
    p.add_argument("--out", default="runs/evidence-rematch")
    p.add_argument("--resume", action="store_true", help="continue the INSPO run saved in OUT")
    p.add_argument("--quick", action="store_true", help="tiny random model, a few steps: the machinery only")
    add_common(p, json_help="write the result here")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.dev_size, args.evolutions = 4, 2, 1
        args.set = [*QUICK, "optimizer.kind=rule-based", "coevolution.answers_per_call=1",
                    "coevolution.validation_size=4", "coevolution.race_chunk=2", *args.set]
    if args.steps is None:
        args.steps = EVOLVE_EVERY * (args.evolutions + 1)
    if args.budget is not None and not args.inspo_alone:
        p.error("--budget is for --inspo-alone: a rematch's budget is its GEPA seed's rollouts")
    args.gepa = Path(args.gepa) if args.gepa else ARM5 / f"gepa-calc-s{0 if args.inspo_alone else args.seed}.json"
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def overrides(args: argparse.Namespace, stored: dict) -> list[str]:
    """The config of this seed's INSPO run: arm 5's schedule and optimizer, the evidence, ``--set``."""
    s = stored["settings"]
    arm5 = [*SCHEDULE, f"coevolution.evolve_until={args.steps}", f"offline_steps={args.steps}",
            f"coevolution.max_rounds={s['max_rounds']}", f"coevolution.candidates_per_call={s['candidates_per_call']}",
            f"data.warmup_questions={s['warmup_questions']}", f"rl.seed={args.seed}", f"coevolution.seed={args.seed}",
            f"data.max_eval_questions={args.dev_size}", *ARM5_SETTINGS]
    return [*arm5, *([] if args.no_evidence else EVIDENCE), *args.set]


def fit_budget(config, budget: int, evolutions: int, reserve: int) -> tuple[int, dict]:
    """``coevolution.evolve_rollouts`` so that steps, warm-up, every evolution's verification (the
    initial population's too) and ``reserve`` for the final choice fit ``budget``; and the plan."""
    rl = config.rl
    steps = config.offline_steps * rl.questions_per_step * rl.group_size
    warmup = config.data.warmup_questions
    left = budget - steps - warmup - reserve
    per_evolution = left // (evolutions + 1)
    if per_evolution < config.coevolution.validation_size:
        raise SystemExit(f"GEPA's budget {budget} leaves {left} rollouts for {evolutions + 1} evolutions after "
                         f"{steps} step, {warmup} warm-up and {reserve} final-choice rollouts: less than one D_B "
                         f"({config.coevolution.validation_size}) each; shorten --steps or --dev-size")
    return per_evolution, {"budget": budget, "steps": steps, "warm-up": warmup, "final choice (reserved)": reserve,
                           "per evolution": per_evolution, "evolutions": evolutions + 1}


def budget_of(args: argparse.Namespace, stored: dict) -> int:
    """The rollouts INSPO may play: its GEPA seed's, or under ``--inspo-alone`` ``--budget`` (default
    the rounded mean of arm 5's GEPA budgets, read from every ``gepa-calc-s*.json`` beside ``--gepa``)."""
    if not args.inspo_alone:
        return int(stored["gepa"]["rollouts"])
    if args.budget is not None:
        return args.budget
    budgets = [json.loads(f.read_text())["gepa"]["rollouts"] for f in sorted(args.gepa.parent.glob("gepa-calc-s*.json"))]
    return round(statistics.fmean(budgets))


def main(argv: Sequence[str] | None = None) -> dict:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["--stop"]:  # the same request as arm 5's seeds: a STOP file in OUT
        return _vs_gepa().request_stop(raw[1:])
    args = parse_args(argv)
    stored = json.loads(args.gepa.read_text())
    budget = budget_of(args, stored)
    from inspo.config.train import resolve

    config = resolve("calculator", None, overrides(args, stored))
    reserve = args.reserve if args.reserve is not None else args.dev_size * 6
    evolutions = len(_vs_gepa().evolution_steps(args.steps, config.coevolution))  # what the schedule makes
    cap, plan = fit_budget(config, budget, evolutions, reserve)
    config = replace(config, coevolution=replace(config.coevolution, evolve_rollouts=cap))
    info = start("benchmarks/learning/evidence_rematch.py", args.argv, threads=args.threads, dtype=config.model.dtype)
    print("plan: " + json.dumps(plan), flush=True)
    return run(args, config, stored, plan, info)


def run(args: argparse.Namespace, config, stored: dict, plan: dict, info: dict) -> dict:
    from inspo.engines.hf import HFEngine
    from inspo.envs.evaluate import make_evaluate
    from inspo.eval.stats import paired_difference
    from inspo.models import load_model
    from inspo.models.precision import default_device
    from inspo.training.evolve import run_evolve
    from inspo.training.preflight import prepare

    inputs = prepare(config, need_optimizer=False, need_eval=True)
    by_id = {q.id: q for q in inputs.env.questions("test")}
    test_questions = [by_id[i] for i in stored["test_question_ids"] if i in by_id]
    if len(test_questions) != len(stored["test_question_ids"]):
        raise SystemExit(f"{len(stored['test_question_ids']) - len(test_questions)} of arm 5's test problems are not "
                         "in this environment's test split: not the same test, so no comparison")
    loaded = load_model(inputs.model_dir, dtype=config.model.dtype, device=default_device())
    engine = HFEngine(loaded.model, loaded.tokenizer)
    out = Path(args.out)
    started = time.perf_counter()
    evo = run_evolve(config, engine=engine, out_dir=out / "inspo", progress=True, resume=args.resume,
                     overwrite=not args.resume, stop_file=out / artifacts.STOP_FILE)
    wall = time.perf_counter() - started
    spent = _vs_gepa().rollouts_by_kind(evo.ledger, evo.selection_rollouts)
    evaluate = make_evaluate(engine, inputs.env, replace(inputs.agent, temperature=0.0), group_size=1,
                             batch_size=config.rl.micro_batch_size, progress=True)
    arms = {"seed": inputs.seed_instruction, "inspo": evo.best_instruction}
    if not args.inspo_alone:
        arms["gepa"] = stored["gepa"]["best_instruction"]
    test, shared = _vs_gepa().play_test(evaluate, arms, test_questions)
    diff = {f"{a} - {b}": paired_difference(test[a], test[b]).to_dict()
            for a, b in (("inspo", "seed"), ("gepa", "seed"), ("inspo", "gepa")) if a in arms and b in arms}
    result = {
        "provenance": info, "seed": args.seed, "gepa_result": None if args.inspo_alone else str(args.gepa),
        "settings_from": str(args.gepa), "evidence": not args.no_evidence,
        "settings": overrides(args, stored), "plan": plan, "budget_rollouts": plan["budget"],
        "inspo_rollouts": sum(spent.values()), "rollouts_by_kind": spent,
        "over_budget": sum(spent.values()) > plan["budget"],
        "optimizer_calls": {"inspo": evo.ledger["optimizer_calls"],
                            "gepa": None if args.inspo_alone else stored["gepa"]["optimizer_calls"]},
        "optimizer_tokens": evo.ledger["optimizer_prompt_tokens"] + evo.ledger["optimizer_completion_tokens"],
        "wall_s": {"inspo": wall, "gepa_arm5": None if args.inspo_alone else stored["gepa"].get("wall_s")},
        "resumed": args.resume,
        "fates": evo.fates, "final_choice": evo.evaluation, "best_instruction": evo.best_instruction,
        "test_question_ids": [q.id for q in test_questions], "test_rewards": test, "test_shared": shared,
        "test_mean": {k: statistics.fmean(v) for k, v in test.items()}, "differences": diff,
        "hit": diff["inspo - seed"]["mean"] >= HIT,
    }
    report(result)
    if (out / artifacts.STOP_FILE).exists():  # asked during the test, after the last save: nothing to stop
        (out / artifacts.STOP_FILE).unlink(missing_ok=True)
        print(f"{out / artifacts.STOP_FILE} arrived after the seed's last save: the seed finished; the file is removed")
    write_result(args.json, result)
    return result


def report(r: dict) -> None:
    print(f"\nseed {r['seed']}: rollouts INSPO {r['inspo_rollouts']} of the budget {r['budget_rollouts']} "
          f"({', '.join(f'{k} {v}' for k, v in r['rollouts_by_kind'].items())})"
          + ("  OVER BUDGET" if r["over_budget"] else ""))
    gepa = "" if r["optimizer_calls"]["gepa"] is None else f", GEPA {r['optimizer_calls']['gepa']}"
    print(f"optimizer calls: INSPO {r['optimizer_calls']['inspo']}{gepa}; "
          f"INSPO tokens {r['optimizer_tokens']}; INSPO wall {r['wall_s']['inspo']:.0f} s"
          + (" (this piece: resumed)" if r["resumed"] else ""))
    print("candidates: " + ", ".join(f"{k} {v}" for k, v in r["fates"].items()))
    for name, same in r["test_shared"].items():
        print(f"  ({name} returned the {same} arm's text: played once for both)")
    print(f"test (greedy, {len(r['test_question_ids'])} problems): "
          + ", ".join(f"{k} {v:.3f}" for k, v in r["test_mean"].items()))
    for name, d in r["differences"].items():
        print(f"  {name}: {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]")
    print(f"hit (INSPO >= +{HIT} over the seed): {r['hit']}")


if __name__ == "__main__":
    from inspo.records import RunStopped

    try:
        main()
    except RunStopped as exc:  # asked for with --stop: everything up to the save is kept
        print(f"evidence_rematch: {exc}", file=sys.stderr)
        sys.exit(3)
