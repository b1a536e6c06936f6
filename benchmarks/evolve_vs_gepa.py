"""Instruction-only INSPO (``inspo evolve``) versus the ``gepa`` package's optimizer at an
equal rollout budget, on the same frozen policy and task (benchmark 4, second half).

Shared by both arms: the preset's policy (loaded once, never trained), retriever, agent
settings, reward, training questions and optimizer LLM (``config.optimizer``; by default the
offline rule-based reflector). INSPO runs first with the preset's schedule and evidence rules over ``--steps``
steps, then (``final_choice: dev``, as in ``cpu-tiny``) chooses its returned instruction among
its final population and the seed on ``--val-size`` dev questions; every policy rollout it plays
(step rollouts + verification + warm-up + that choice) is counted, and the total becomes GEPA's
``max_metric_calls`` (one metric call = one rollout). GEPA reflects
either through INSPO's App. E reflection prompt (``--gepa-prompt inspo``, the default: the same
reflection step on both sides, only the search differs; the only choice with the rule-based
reflector, which reads App. E prompts only) or through its own prompt (``--gepa-prompt gepa``,
for a real LLM). GEPA's Pareto validation set is ``--val-size`` training questions; its
training set is the rest.

Then the seed, INSPO's returned instruction and GEPA's best are scored with greedy decoding on
the same ``--test-questions`` questions of the test split (never seen by either choice). Printed:
each instruction's test score and its paired difference from the seed (mean and 95% interval
over questions), rollouts and optimizer calls per arm, and the wall-time ratio GEPA / INSPO.

Usage::

    python benchmarks/evolve_vs_gepa.py --threads 2 --test-questions 100 --json runs/gepa.json
    python benchmarks/evolve_vs_gepa.py --quick      # a smoke run (tiny random model)
    python benchmarks/evolve_vs_gepa.py --combine runs/gepa-s0.json runs/gepa-s1.json runs/gepa-s2.json

``--combine`` reads the ``--json`` results of several seeds on the same test questions and
prints, for each comparison, the per-seed paired differences, the mean over seeds with a 95%
interval across seeds (Student's t, seeds - 1 degrees of freedom), and the pooled paired
difference: each question's difference averaged over the seeds, with a 95% interval over
questions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

# The schedule both arms are measured on (overridable with --set): the cpu-tiny preset's
# population settings, evolving every 4 steps until the last step.
SCHEDULE = ["coevolution.evolve_every=4", "coevolution.prune_every=2"]
QUICK = [
    "model.name_or_path=tiny-qwen2", "rl.max_response_tokens=8", "rl.questions_per_step=2",
    "rl.group_size=2", "data.warmup_questions=2", "coevolution.evolve_every=2",
    "coevolution.prune_every=1", "coevolution.validation_size=2", "coevolution.candidates_per_call=2",
]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-tiny")
    p.add_argument("--steps", type=int, default=16, help="INSPO evolve steps (sets the shared budget)")
    p.add_argument("--gepa-prompt", choices=("inspo", "gepa"), default="inspo",
                   help="GEPA's reflection prompt: INSPO's App. E template or GEPA's own")
    p.add_argument("--val-size", type=int, default=8, help="GEPA's Pareto validation questions")
    p.add_argument("--minibatch", type=int, default=3, help="GEPA's reflection minibatch")
    p.add_argument("--test-questions", type=int, default=48)
    p.add_argument("--test-fraction", type=float, default=0.0,
                   help="rebuild the built-in world with this share of its questions in the test split "
                        "(dev stays 0.1) and use it for both arms: more held-out questions, same corpus")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--set", action="append", default=[], help="extra config override (both arms)")
    p.add_argument("--out", default="runs/bench-gepa")
    p.add_argument("--json", default=None, help="also write the results here")
    p.add_argument("--quick", action="store_true", help="tiny random model, 2 steps: a smoke run")
    args = p.parse_args(argv)
    for name in ("steps", "val_size", "minibatch", "test_questions"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.quick:
        args.steps, args.val_size, args.minibatch, args.test_questions = 2, 2, 2, 2
        args.set = [*QUICK, *args.set]
    args.command = shlex.join([sys.executable, os.path.relpath(__file__), *(sys.argv[1:] if argv is None else argv)])
    return args


def split_for_gepa(questions: list, val_size: int, seed: int) -> tuple[list, list]:
    """(trainset, valset): ``val_size`` questions of a seeded shuffle for GEPA's Pareto set."""
    if len(questions) <= val_size:
        raise SystemExit(f"{len(questions)} training questions leave none for GEPA's trainset after --val-size {val_size}")
    order = list(questions)
    random.Random(seed).shuffle(order)
    return order[val_size:], order[:val_size]


COMPARISONS = (("inspo", "seed"), ("gepa", "seed"), ("gepa", "inspo"))


def combine(results: Sequence[dict]) -> dict:
    """Pool several seeds' results (see the module docstring); pure, no model needed."""
    from inspo.eval.stats import over_seeds

    if len(results) < 2:
        raise SystemExit("--combine needs the results of at least 2 seeds")
    ids = [r.get("test_question_ids") for r in results]
    sizes = {len(r["test_rewards"]["seed"]) for r in results}
    if len(sizes) != 1 or (all(ids) and any(i != ids[0] for i in ids)):
        raise SystemExit("--combine needs every seed scored on the same test questions, in the same order")
    out: dict = {"seeds": len(results), "test_questions": sizes.pop(), "comparisons": {}}
    for a, b in COMPARISONS:
        out["comparisons"][f"{a} - {b}"] = over_seeds([r["test_rewards"][a] for r in results],
                                                      [r["test_rewards"][b] for r in results])
    return out


def print_combined(combined: dict) -> None:
    print(f"{combined['seeds']} seeds x {combined['test_questions']} test questions")
    for name, c in combined["comparisons"].items():
        seeds = ", ".join(f"{d['mean']:+.3f}" for d in c["per_seed"])
        p = c["pooled"]
        print(f"  {name:13s} per seed {seeds}; over seeds {c['seed_mean']:+.3f} "
              f"[95% CI {c['seed_low']:+.3f}, {c['seed_high']:+.3f}]; pooled per question "
              f"{p['mean']:+.3f} [95% CI {p['low']:+.3f}, {p['high']:+.3f}]")


def main(argv: Sequence[str] | None = None) -> dict:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["--combine"]:
        combined = combine([json.loads(Path(f).read_text()) for f in raw[1:]])
        print_combined(combined)
        return combined
    args = parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from inspo.agent.engines import HFEngine
    from inspo.agent.evaluate import make_evaluate
    from inspo.baselines.gepa_adapter import SearchAgentAdapter, optimize_instruction
    from inspo.eval.stats import paired_difference
    from inspo.models import load_model
    from inspo.records import Instruction
    from inspo.train.config import resolve
    from inspo.train.evolve import run_evolve
    from inspo.train.setup import build_optimizer, load_questions, prepare

    print(f"command: {args.command}")
    print(f"python {platform.python_version()}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    out = Path(args.out)
    data = []
    if args.test_fraction:
        from inspo.data.world import WorldConfig, build_world, write_world

        fractions = (round(0.9 - args.test_fraction, 6), 0.1, args.test_fraction)
        write_world(build_world(seed=0, config=WorldConfig(split_fractions=fractions)), out / "world", bm25_index=False)
        data = [f"data.train={out / 'world'}", f"data.eval={out / 'world'}", f"data.corpus={out / 'world'}"]
    config = resolve(args.preset, None, [*data,
        *SCHEDULE, f"coevolution.evolve_until={args.steps}", f"offline_steps={args.steps}",
        f"rl.seed={args.seed}", f"coevolution.seed={args.seed}", "data.test_split=",
        f"data.max_eval_questions={args.val_size}", *args.set,
    ])
    inputs = prepare(config, need_optimizer=False, need_eval=True)
    test_questions = load_questions(config.data.eval or config.data.train, "test", args.test_questions,
                                    field_name="--test-questions", max_hops=config.data.max_hops)
    loaded = load_model(inputs.model_dir, dtype=config.model.dtype, device="cpu")
    engine = HFEngine(loaded.model, loaded.tokenizer)
    policy = f"{config.model.name_or_path} ({config.model.dtype}, frozen)"

    # ---- INSPO: run_evolve on the preset's schedule; its rollouts set the budget
    started = time.perf_counter()
    evo = run_evolve(config, engine=engine, out_dir=out / "inspo", progress=False)
    inspo_wall = time.perf_counter() - started
    led = evo.ledger
    # every policy rollout INSPO played, its final choice on val_size dev questions included
    budget = led["training_rollouts"] + led["verification_rollouts"] + led["warmup_rollouts"] + evo.selection_rollouts
    choice = evo.evaluation or {}
    inspo = {"best_instruction": evo.best_instruction, "rollouts": budget, "optimizer_calls": led["optimizer_calls"],
             "selection_score": (choice.get("dev_scores") or {}).get(evo.best_instruction_id, evo.best_weight),
             "final_choice": choice.get("rule", config.final_choice), "seed_returned": choice.get("seed_returned"),
             "selection_rollouts": evo.selection_rollouts, "wall_s": inspo_wall, "ledger": led}
    print(json.dumps({"arm": "inspo", **{k: v for k, v in inspo.items() if k not in ("best_instruction", "ledger")}}))

    # ---- GEPA: the same policy, questions and optimizer LLM, max_metric_calls = INSPO's rollouts
    trainset, valset = split_for_gepa(inputs.questions, args.val_size, args.seed)
    llm, optimizer_note = build_optimizer(config)
    adapter = SearchAgentAdapter(engine, inputs.retriever, inputs.agent,
                                 batch_size=max(config.rl.micro_batch_size, args.minibatch), seed=args.seed)
    started = time.perf_counter()
    outcome = optimize_instruction(
        adapter, inputs.seed_instruction, trainset, valset, max_rollouts=budget, llm=llm,
        reflection=args.gepa_prompt, minibatch_size=args.minibatch,
        n_candidates=config.coevolution.candidates_per_call, temperature=config.coevolution.optimizer_temperature,
        max_tokens=config.coevolution.optimizer_max_tokens, guard_tags=config.coevolution.guard_tags,
        seed=args.seed, run_dir=str(out / "gepa"),
    )
    gepa_wall = time.perf_counter() - started
    stats = outcome.proposer
    gepa = {"best_instruction": outcome.best_instruction, "rollouts": outcome.rollouts,
            "optimizer_calls": stats.calls if stats else llm.usage.calls, "selection_score": outcome.best_val_score,
            "candidates": outcome.candidates, "full_val_evals": outcome.full_val_evals, "wall_s": gepa_wall,
            "proposals_accepted_by_guard": stats.accepted if stats else None,
            "proposer_rejections": list(stats.rejected) if stats else None}
    print(json.dumps({"arm": "gepa", **{k: v for k, v in gepa.items() if k not in ("best_instruction", "proposer_rejections")}}))

    # ---- held-out test: greedy, the same questions for the three instructions
    greedy = replace(inputs.agent, temperature=0.0)
    evaluate = make_evaluate(engine, inputs.retriever, greedy, group_size=1, batch_size=config.rl.micro_batch_size)
    test = {}
    for name, text in (("seed", inputs.seed_instruction), ("inspo", evo.best_instruction),
                       ("gepa", outcome.best_instruction)):
        rollouts = evaluate(Instruction(id=f"test-{name}", text=text), test_questions)
        test[name] = [r.reward for r in rollouts]

    n = len(test_questions)
    result = {
        "command": args.command,
        "policy": policy,
        "optimizer": optimizer_note,
        "gepa_prompt": args.gepa_prompt,
        "metric": config.rl.reward,
        "test_questions": n,
        "test_question_ids": [q.id for q in test_questions],
        "budget_rollouts": budget,
        "test_mean": {k: statistics.fmean(v) for k, v in test.items()},
        "vs_seed": {k: paired_difference(test[k], test["seed"]).to_dict() for k in ("inspo", "gepa")},
        "gepa_minus_inspo": paired_difference(test["gepa"], test["inspo"]).to_dict(),
        "wall_ratio_gepa_over_inspo": gepa_wall / inspo_wall,
        "inspo": inspo,
        "gepa": gepa,
        "test_rewards": test,
    }
    print()
    print(f"policy {policy}; optimizer LLM: {optimizer_note}; GEPA reflects with the {args.gepa_prompt} prompt")
    print(f"rollouts (budget {budget}): INSPO {inspo['rollouts']}, GEPA {gepa['rollouts']}")
    print(f"optimizer calls:           INSPO {inspo['optimizer_calls']}, GEPA {gepa['optimizer_calls']}")
    print(f"wall time GEPA / INSPO:    {result['wall_ratio_gepa_over_inspo']:.2f} ({gepa_wall:.0f} s / {inspo_wall:.0f} s)")
    print(f"test {config.rl.reward} on {n} questions (greedy); paired difference from the seed, 95% CI")
    for name in ("seed", "inspo", "gepa"):
        line = f"  {name:6s} {result['test_mean'][name]:.3f}"
        if name != "seed":
            line += "   " + paired_difference(test[name], test["seed"]).text()
        print(line)
    print("  GEPA - INSPO: " + paired_difference(test["gepa"], test["inspo"]).text())
    for name in ("inspo", "gepa"):
        print(f"\n{name} best instruction:\n{result[name]['best_instruction']}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    main()
