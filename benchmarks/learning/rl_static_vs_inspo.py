"""Static GRPO versus INSPO at equal steps, paired per held-out question (issue 9's benchmark 2).

One seed per invocation; each arm is ``inspo.training.run.run_training`` on the same preset,
seed, data and step count, only ``mode`` differs (``static``: the Search-R1 baseline, one fixed
instruction; ``inspo``: co-evolution with the preset's evidence rules). The default setting is
the one where static GRPO was seen to learn on this CPU (BENCHMARKS.md §4, the probe):
``cpu-tiny`` with ``rl.learning_rate=1e-4``, checkpoints off, ``--steps`` steps.

Each run ends with the library's own held-out test (``final_choice``'s test: greedy decoding,
the trained policy, the test questions no choice saw): static is scored under the seed, INSPO
under the instruction it returns and under the seed. The ``untrained`` arm scores the base
policy under the seed through the same greedy evaluation, so every arm is scored on the same
questions in the same order. ``--arms`` may add ablations (benchmark 3): INSPO with one of the
preset's evidence rules turned off (``ABLATIONS``), each compared with the full INSPO arm of
the same seed. The weight-choice ablation needs no run of its own (training does not depend on
``final_choice``): the INSPO arm also scores Algorithm 1's I* with the saved trained policy.
Per arm the script also keeps, step by step, the training reward, the prompt length and the
searches per question (the paper's Fig. 2), what the run spent, and how often each evidence
rule bit (from its events).

Usage::

    python benchmarks/learning/rl_static_vs_inspo.py --seed 0 --threads 2 --json runs/rl/s0.json
    python benchmarks/learning/rl_static_vs_inspo.py --seed 1 --arms static,inspo --json runs/rl/s1.json
    python benchmarks/learning/rl_static_vs_inspo.py --seed 0 --arms top-n,no-prior,no-floor --json runs/rl/s0-ablations.json
    python benchmarks/learning/rl_static_vs_inspo.py --combine runs/rl/s0.json runs/rl/s1.json runs/rl/s2.json \
        runs/rl/s0-ablations.json
    python benchmarks/learning/rl_static_vs_inspo.py --quick      # a smoke run (tiny random model)

``--combine`` pools the seeds: for each comparison, the per-seed paired differences, the mean
over seeds with a 95% interval across seeds, and the pooled per-question difference with a 95%
interval over questions. The untrained policy decodes greedily and is not trained, so one
invocation's ``untrained`` scores stand for every seed (the others may leave that arm out).
Every result records its provenance (commit, command, library versions); the pooled result
lists each input's under ``inputs`` and the distinct commits under ``commits``, and says so
when the inputs come from more than one commit.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result

log = logging.getLogger("inspo.benchmarks")

SCRIPT = "benchmarks/learning/rl_static_vs_inspo.py"

# Ablations (benchmark 3): INSPO with one evidence rule of the preset turned off, one arm each.
ABLATIONS = {
    "no-floor": ["coevolution.min_evidence=0"],        # prune / rank on any number of rollouts
    "no-prior": ["coevolution.prior_rollouts=0"],      # rank by the raw window mean, no verification prior
    "top-n": ["coevolution.admission=top-n"],          # admit the best candidates, not only those beating the parent
    "weight-choice": ["final_choice=weight"],          # return argmax of the weights, no dev choice
}
ARMS = ("untrained", "static", "inspo", *ABLATIONS)
# (a, b): a - b, over the per-question scores named in test_rewards
COMPARISONS = (
    ("static", "untrained"),      # does static GRPO learn here at all?
    ("inspo", "untrained"),       # INSPO's policy under its returned instruction
    ("inspo", "static"),          # the paper's claim: INSPO beats static GRPO at equal steps
    ("inspo_seed", "static"),     # the policies alone, both under the seed
    ("inspo", "inspo_seed"),      # INSPO's returned instruction on its own policy
    *((name, "inspo") for name in ABLATIONS),  # what turning one rule off does
)
SETTING = ["rl.learning_rate=1e-4", "rl.save_steps=0"]
QUICK = [
    "model.name_or_path=tiny-qwen2", "model.lora=false", "rl.max_response_tokens=8", "rl.questions_per_step=2",
    "rl.group_size=2", "coevolution.evolve_every=2", "coevolution.prune_every=1", "coevolution.evolve_until=2",
    "coevolution.validation_size=2", "data.max_eval_questions=2", "data.max_test_questions=3",
    "data.warmup_questions=2",
]
CURVES = {"reward": "reward", "prompt_tokens": "rollout/prompt_tokens", "searches": "rollout/search_calls",
          "step_s": "step_time", "population": "inspo/population_size", "tool_calls": "rollout/tool_calls",
          "tool_errors": "rollout/tool_errors", "rss_gib": "system/rss_gib", "released_gib": "system/released_gib"}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-tiny")
    p.add_argument("--steps", type=int, default=12, help="training steps per arm")
    add_common(p, seed_help="rl.seed of both arms (it seeds co-evolution too)", json_help="also write the results here")
    p.add_argument("--arms", default="untrained,static,inspo",
                   help=f"comma-separated, of {', '.join(ARMS)} (the last four: ablations)")
    p.add_argument("--set", action="append", default=[], help="extra config override (every arm)")
    p.add_argument("--out", default="runs/bench-rl")
    p.add_argument("--quick", action="store_true", help="tiny random model, 2 steps: a smoke run")
    p.add_argument("--combine", nargs="+", metavar="JSON", help="pool the --json results of several seeds")
    args = p.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in args.arms if a not in ARMS]
    if unknown or not args.arms:
        p.error(f"--arms: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(ARMS)}")
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if args.quick:
        args.steps = min(args.steps, 2)
        args.set = [*QUICK, *args.set]
    return args


def overrides(args: argparse.Namespace, arm: str) -> list[str]:
    mode, ablation = ("inspo", ABLATIONS[arm]) if arm in ABLATIONS else (arm, [])
    return [*SETTING, f"mode={mode}", f"rl.steps={args.steps}", f"rl.seed={args.seed}",
            f"output_dir={Path(args.out) / f'{arm}-s{args.seed}'}", *args.set, *ablation]


def curves(metrics_path: Path) -> dict[str, list[float]]:
    """Per-step series of the run's metrics.jsonl (a key a step lacks is NaN)."""
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "step" in r]
    return {name: [float(r.get(key, float("nan"))) for r in rows] for name, key in CURVES.items()}


def rule_counts(events_path: Path) -> dict[str, int]:
    """How often each evidence rule bit in a run, from its events.jsonl: candidates proposed,
    refused by the guard (tags, length, duplicates, truncation), refused for holding a gold answer
    (``refused_leak``), refused because their D_B evaluation failed, refused against the parent,
    refused for a full population, admitted; members pruned, members below the evidence floor at a
    prune (``protected``) and those of them the same prune without the floor would have dropped
    (``saved_by_floor``); and the parser fallbacks needed to read the optimizer's answers, one
    ``fallback_<kind>`` per kind of :data:`inspo.core.templates.PARSE_FALLBACKS` (0 in logs written
    before they were counted). Rejections are sorted by the event's ``stage``, not by the wording
    of its reason: one count per stage of :data:`inspo.training.summary.REFUSAL_STAGES` (the
    evidence settings' gate, paired race and verification budget too)."""
    from inspo.core.templates import PARSE_FALLBACKS
    from inspo.training.summary import REFUSAL_STAGES

    named = {"parent": "refused_below_parent", "top_n": "refused_not_top"}  # the names results already use
    refused = {stage: named.get(stage, f"refused_{stage}") for stage in REFUSAL_STAGES}
    fallbacks = {kind: f"fallback_{kind}" for kind in PARSE_FALLBACKS}
    counts = dict.fromkeys(("proposed", *refused.values(), "admitted", "pruned", "protected", "saved_by_floor",
                            *fallbacks.values()), 0)
    if not events_path.is_file():
        return counts
    for line in events_path.read_text().splitlines():
        e = json.loads(line)
        kind = e.get("kind")
        if kind == "proposed":
            counts["proposed"] += len(e.get("candidate_ids", ()))
            for fallback, n in (e.get("parse_fallbacks") or {}).items():
                if fallback not in fallbacks:
                    raise SystemExit(f"{events_path}: a parse fallback {fallback!r}; this script reads logs written "
                                     f"by the inspo beside it, whose fallbacks are {sorted(fallbacks)}")
                counts[fallbacks[fallback]] += n
        elif kind == "rejected":
            stage = e.get("stage", "")
            if stage not in refused:
                raise SystemExit(f"{events_path}: a rejected event with stage {stage!r}; this script reads logs "
                                 f"written by the inspo beside it, whose stages are {sorted(refused)}")
            counts[refused[stage]] += 1
        elif kind == "admitted":
            counts["admitted"] += 1
        elif kind == "pruned":
            counts["pruned"] += len(e.get("removed", ()))
            counts["protected"] += len(e.get("protected", ()))
            counts["saved_by_floor"] += len(e.get("saved", ()))
    return counts


def run_arm(arm: str, args: argparse.Namespace) -> dict:
    """One training run; its held-out test scores per question, spend and curves."""
    from inspo.config.train import resolve
    from inspo.training.run import run_training

    config = resolve(args.preset, None, overrides(args, arm))
    started = time.perf_counter()
    summary = run_training(config, progress=False)
    wall = time.perf_counter() - started
    final = summary.evaluation or {}
    if not final.get("test_rewards"):
        raise SystemExit(f"the {arm} run scored no test questions: is data.max_test_questions 0?")
    led = summary.ledger
    return {
        "mode": arm, "wall_s": wall, "run_dir": str(config.output_dir), "returned_id": final["returned_id"],
        "by_weight_id": final["by_weight_id"],
        "returned_is_seed": final["seed_returned"], "returned_text": final["returned_text"],
        "test_question_ids": final["test_question_ids"], "test_rewards": final["test_rewards"],
        "rollouts": {k: led.get(k, 0) for k in ("training_rollouts", "verification_rollouts", "warmup_rollouts")},
        "selection_rollouts": summary.selection_rollouts, "optimizer_calls": led.get("optimizer_calls", 0),
        "curves": curves(Path(config.output_dir) / "metrics.jsonl"),
        "events": rule_counts(Path(config.output_dir) / "events.jsonl"),
    }


def greedy_scores(args: argparse.Namespace, policy: str, texts: Sequence[str]) -> tuple[list[str], list[list[float]]]:
    """The test question ids and ``policy``'s greedy rewards on them under each of ``texts`` (''
    is the seed), with this benchmark's settings (:func:`greedy_test_scores`)."""
    from inspo.config.train import resolve

    return greedy_test_scores(resolve(args.preset, None, overrides(args, "static")), policy, texts)


def greedy_test_scores(config, policy: str, texts: Sequence[str]) -> tuple[list[str], list[list[float]]]:
    """The test question ids of ``config`` and ``policy``'s greedy rewards on them under each of
    ``texts`` ('' is the config's seed; ``policy`` '' its base model), through the evaluation a
    run ends with (``greedy_evaluate``, the config's agent and reward); the instructions are
    played together (``play_all``), the policy loaded once."""
    import torch

    from inspo.core.verifier import play_all
    from inspo.engines.load import load_engine
    from inspo.records import Instruction
    from inspo.training.evaluators import greedy_evaluate
    from inspo.training.preflight import prepare

    inputs = prepare(config, need_optimizer=False, need_eval=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # where the runs trained and tested
    engine = load_engine(policy or inputs.model_dir, dtype=config.model.dtype, device=device)
    evaluate = greedy_evaluate(engine, inputs.env, inputs.agent,
                               batch_size=max(config.rl.micro_batch_size, config.rl.trajectories_per_step))
    instructions = [Instruction(id=f"scored-{i}", text=text or inputs.seed_instruction) for i, text in enumerate(texts)]
    who = policy or "the base policy"
    log.info("scoring %s greedily under %d instruction(s) on %d test question(s)", who, len(instructions),
             len(inputs.test_questions))
    started = time.perf_counter()
    rewards = [[r.reward for r in rollouts] for rollouts in play_all(evaluate, instructions, inputs.test_questions)]
    means = ", ".join(f"{statistics.fmean(r):.3f}" if r else "-" for r in rewards)
    log.info("scored %s: mean reward %s (%.0f s)", who, means, time.perf_counter() - started)
    return [q.id for q in inputs.test_questions], rewards


def run_untrained(args: argparse.Namespace) -> dict:
    """The base policy under the seed, greedy, on the runs' test questions (the runs' own evaluation)."""
    started = time.perf_counter()
    ids, (rewards,) = greedy_scores(args, "", [""])
    return {"mode": "untrained", "wall_s": time.perf_counter() - started, "test_question_ids": ids,
            "test_rewards": {"seed": rewards}}


def add_by_weight(arm: dict, args: argparse.Namespace) -> None:
    """The weight-choice ablation without a second run: training is the same whatever
    ``final_choice`` says, so score Algorithm 1's I* (argmax of the weights) with the saved
    trained policy. When it differs from the returned instruction, the returned one is scored
    again from the saved policy too (``returned_reloaded``): its agreement with the run's own
    test scores says whether the reloaded policy is the one the run tested."""
    rewards = arm["test_rewards"]
    if arm["by_weight_id"] == arm["returned_id"]:
        rewards["by_weight"] = list(rewards["returned"])
        return
    state = json.loads((Path(arm["run_dir"]) / "inspo_state.json").read_text())
    texts = {m["instruction"]["id"]: m["instruction"]["text"] for m in state["population"]["members"]}
    model = str(Path(arm["run_dir"]) / "model")
    _, (rewards["by_weight"], rewards["returned_reloaded"]) = greedy_scores(
        args, model, [texts[arm["by_weight_id"]], arm["returned_text"]])


def scores(result: dict) -> dict[str, list[float]]:
    """The per-question test scores of one seed's arms, named as COMPARISONS names them."""
    arms, out = result["arms"], {}
    if "untrained" in arms:
        out["untrained"] = arms["untrained"]["test_rewards"]["seed"]
    if "static" in arms:
        out["static"] = arms["static"]["test_rewards"]["seed"]
    if "inspo" in arms:
        out["inspo"] = arms["inspo"]["test_rewards"]["returned"]
        out["inspo_seed"] = arms["inspo"]["test_rewards"]["seed"]
    for name in ABLATIONS:
        if name in arms:
            out[name] = arms[name]["test_rewards"]["returned"]
    if "weight-choice" not in out and "by_weight" in arms.get("inspo", {}).get("test_rewards", {}):
        out["weight-choice"] = arms["inspo"]["test_rewards"]["by_weight"]
    return out


def by_seed(results: Sequence[dict]) -> list[dict]:
    """One result per seed: invocations of the same seed (say, the ablations run later) merged."""
    merged: dict[int, dict] = {}
    for r in results:
        if r["seed"] not in merged:
            merged[r["seed"]] = {**r, "arms": dict(r["arms"])}
            continue
        into = merged[r["seed"]]
        twice = set(into["arms"]) & set(r["arms"])
        if twice:
            raise SystemExit(f"seed {r['seed']}: arm(s) {', '.join(sorted(twice))} given twice")
        if r["test_question_ids"] != into["test_question_ids"] or r["steps"] != into["steps"] or r["set"] != into["set"]:
            raise SystemExit(f"seed {r['seed']}: two invocations ran different settings or test questions")
        into["arms"].update(r["arms"])
    return list(merged.values())


def combine(results: Sequence[dict]) -> dict:
    """Pool several seeds (module docstring); pure, no model needed. Several results of one seed
    are merged first (:func:`by_seed`)."""
    from inspo.eval.stats import over_seeds, paired_difference

    inputs = [{"seed": r["seed"], "arms": sorted(r["arms"]), "provenance": r.get("provenance")} for r in results]
    results = by_seed(results)
    if len(results) < 2:
        raise SystemExit("--combine needs the results of at least 2 seeds")
    ids = [r["test_question_ids"] for r in results]
    if any(i != ids[0] for i in ids):
        raise SystemExit("--combine needs every seed scored on the same test questions, in the same order")
    per_seed = [scores(r) for r in results]
    untrained = [s["untrained"] for s in per_seed if "untrained" in s]
    if untrained and any(u != untrained[0] for u in untrained):
        raise SystemExit("the untrained policy scored differently in two invocations (it should be greedy and "
                         "identical): were the settings the same?")
    for s in per_seed:
        if untrained:
            s.setdefault("untrained", untrained[0])
    seeds = [r["seed"] for r in results]
    out: dict = {"seeds": seeds, "test_questions": len(ids[0]), "inputs": inputs, "commits": commits_of(inputs),
                 "means": {}, "seeds_of": {}, "comparisons": {}, "curves": {}, "wall_s": {}, "rollouts": {}}
    names = sorted({k for s in per_seed for k in s})
    for name in names:  # an ablation may have run on fewer seeds than the main arms: seeds_of says which
        out["means"][name] = [statistics.fmean(s[name]) for s in per_seed if name in s]
        out["seeds_of"][name] = [seed for seed, s in zip(seeds, per_seed, strict=True) if name in s]
    for a, b in COMPARISONS:  # on the seeds that ran both arms; one seed gives its paired difference only
        both = [(seed, s) for seed, s in zip(seeds, per_seed, strict=True) if a in s and b in s]
        if len(both) >= 2:
            d = over_seeds([s[a] for _, s in both], [s[b] for _, s in both])
        elif both:
            one = paired_difference(both[0][1][a], both[0][1][b]).to_dict()
            d = {"per_seed": [one], "seed_mean": one["mean"], "seed_low": math.nan, "seed_high": math.nan,
                 "pooled": one}
        else:
            continue
        out["comparisons"][f"{a} - {b}"] = {**d, "seeds": [seed for seed, _ in both]}
    for mode in ("static", "inspo", *ABLATIONS):
        runs = [r["arms"][mode] for r in results if mode in r["arms"]]
        if not runs:
            continue
        shared = [name for name in CURVES if all(name in run["curves"] for run in runs)]  # older results lack some
        out["curves"][mode] = {name: [statistics.fmean(v) for v in zip(*(run["curves"][name] for run in runs), strict=True)]
                               for name in shared}
        out["wall_s"][mode] = [run["wall_s"] for run in runs]
        out["rollouts"][mode] = [{**run["rollouts"], "selection": run["selection_rollouts"],
                                  "optimizer_calls": run["optimizer_calls"]} for run in runs]
        out.setdefault("returned_is_seed", {})[mode] = [run["returned_is_seed"] for run in runs]
        out.setdefault("events", {})[mode] = [run.get("events", {}) for run in runs]
    return out


def commits_of(inputs: Sequence[dict]) -> list[str | None]:
    """The distinct commits behind ``inputs`` (each ``{"provenance": ...}``), in first-seen order;
    None for an input that records none (a result written before provenance was kept)."""
    commits: list[str | None] = []
    for i in inputs:
        commit = (i.get("provenance") or {}).get("commit")
        if commit not in commits:
            commits.append(commit)
    return commits


def print_combined(c: dict) -> None:
    commits = c.get("commits", [])
    if len(commits) > 1:
        print(f"WARNING: the inputs come from {len(commits)} different commits (None: not recorded), "
              "so these figures pool results of different code:")
        for i in c["inputs"]:
            prov = i["provenance"] or {}
            print(f"  seed {i['seed']} arms {','.join(i['arms'])}: commit {prov.get('commit')}"
                  + (" with uncommitted changes" if prov.get("dirty") else ""))
    elif commits:
        dirty = any((i["provenance"] or {}).get("dirty") for i in c["inputs"])
        print(f"commit {commits[0]}" + (" (with uncommitted changes in some inputs)" if dirty else ""))
    print(f"{len(c['seeds'])} seeds ({', '.join(map(str, c['seeds']))}) x {c['test_questions']} test questions, "
          "one greedy rollout per question")
    for name, means in c["means"].items():
        print(f"  test score {name:13s} per seed " + ", ".join(
            f"{seed}: {m:.3f}" for seed, m in zip(c["seeds_of"][name], means, strict=True)))
    for name, d in c["comparisons"].items():
        p = d["pooled"]
        seeds = ", ".join(f"{seed}: {s['mean']:+.3f}" for seed, s in zip(d["seeds"], d["per_seed"], strict=True))
        print(f"  {name:24s} per seed {seeds}; over seeds "
              f"{d['seed_mean']:+.3f} [95% CI {d['seed_low']:+.3f}, {d['seed_high']:+.3f}]; pooled per question "
              f"{p['mean']:+.3f} [95% CI {p['low']:+.3f}, {p['high']:+.3f}]")
    for mode, series in c["curves"].items():
        print(f"  {mode}: wall s per run " + ", ".join(f"{w:.0f}" for w in c["wall_s"][mode])
              + f"; returned the seed in {sum(c['returned_is_seed'][mode])} of {len(c['wall_s'][mode])} runs")
        for counts in c["events"][mode]:
            if counts.get("proposed"):
                print("    events: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        print("    step  " + "  ".join(f"{name:>13s}" for name in series))
        for t, row in enumerate(zip(*series.values(), strict=True), start=1):
            print(f"    {t:4d}  " + "  ".join(f"{v:13.3f}" for v in row))


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.combine:
        combined = combine([json.loads(Path(p).read_text()) for p in args.combine])
        combined["provenance"] = start(SCRIPT, argv, device="cpu")  # the pooling's own; each input's is in inputs
        print_combined(combined)
        write_result(args.json, combined)
        return combined
    from inspo.config.train import resolve

    config = resolve(args.preset, None, [*SETTING, *args.set])
    info = start(SCRIPT, argv, threads=args.threads, dtype=config.model.dtype)
    result: dict = {"seed": args.seed, "steps": args.steps, "preset": args.preset, "set": [*SETTING, *args.set],
                    "provenance": info, "arms": {}}
    # alternate which training arm goes first, so drift in machine load does not always hit the same one
    order = [a for a in ARMS if a in args.arms]
    if args.seed % 2 and "static" in order and "inspo" in order:
        i, j = order.index("static"), order.index("inspo")
        order[i], order[j] = order[j], order[i]
    for mode in order:
        arm = run_untrained(args) if mode == "untrained" else run_arm(mode, args)
        if mode == "inspo":
            add_by_weight(arm, args)
        result["arms"][mode] = arm
        mean = {k: round(statistics.fmean(v), 4) for k, v in arm["test_rewards"].items()}
        print(json.dumps({"mode": mode, "wall_s": round(arm["wall_s"], 1), "test_mean": mean}), flush=True)
        write_result(args.json, result)  # after each arm, so a stopped invocation keeps what it finished
    ids = {tuple(arm["test_question_ids"]) for arm in result["arms"].values()}
    if len(ids) != 1:
        raise SystemExit("the arms were scored on different test questions")
    result["test_question_ids"] = list(ids.pop())
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
