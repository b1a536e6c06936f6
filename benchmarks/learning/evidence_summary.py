"""Issue 63's ``summary.json``, written from the rematch results (``evidence_rematch.py --json``)
and nothing else, so the RL issue can add its own section beside ``instruction_only``.

    python benchmarks/learning/evidence_summary.py benchmarks/results/calculator/evidence/rematch-s*.json \\
        --ablation gate=benchmarks/results/calculator/evidence/ablation-gate-s0.json \\
        --handwritten 0=benchmarks/results/calculator/evidence/handwritten-s0.json \\
        --paper-inspo 0=benchmarks/results/calculator/arm5/gepa-calc-s0.json \\
        --out benchmarks/results/calculator/evidence/summary.json

Every difference is a record ``{"per_seed": [...], "mean": m, "ci95": [lo, hi], "ci95_pooled":
[lo, hi]}``: ``per_seed`` each seed's paired mean over the test problems, ``ci95`` Student's t
across seeds (None with one seed), ``ci95_pooled`` each problem's difference averaged over the
seeds, with its interval over problems. A hit rate is a share of seeds (a hit: INSPO's, or GEPA's,
returned instruction at least +0.1 over the seed instruction on the test), so its ``ci95`` is
Wilson's interval over seeds and it has no per-problem interval; ``hit_size`` gives each seed's
lift. ``detectable`` is the smallest seed-mean difference the seeds could have found at 80 % power
(two-sided 5 %), from their spread. An ablation (one mechanism changed, one seed or more) is
compared with the main run of the same seed at the same commit (``--baseline`` adds main runs at
older commits for that) by the difference of their lifts over the seed instruction, problem by
problem: each process plays its own seed instruction, so greedy drift between processes cancels.
``--paper-inspo`` pairs the main runs' INSPO with arm 5's (INSPO as the paper specifies it, the
same budget and test problems): ``instruction_only.versus_paper_inspo``, what the evidence changed.
``--rl DIR`` (repeatable) adds issue 65's ``rl`` section from the calculator campaign's results in
those folders (``evidence_rl.py`` says what it holds); ``--rl-rerun DIR`` holds reruns of stored arms
that did not reproduce, each replacing the stored run of its arm and seed (listed in ``rl.replaced``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HIT = 0.1


def record(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The difference ``a - b`` as issue 63's record (module docstring); ``a[s]``, ``b[s]``: seed
    ``s``'s per-problem scores, every seed on the same problems."""
    from inspo.eval.stats import over_seeds, paired_difference

    if len(a) == 1:
        d = paired_difference(a[0], b[0])
        return {"per_seed": [d.mean], "mean": d.mean, "ci95": None, "ci95_pooled": [d.low, d.high], "seeds": 1,
                "detectable": None}
    o = over_seeds(a, b)
    means = [d["mean"] for d in o["per_seed"]]
    return {"per_seed": means, "mean": o["seed_mean"], "ci95": [o["seed_low"], o["seed_high"]],
            "ci95_pooled": [o["pooled"]["low"], o["pooled"]["high"]], "seeds": len(means),
            "per_seed_ci95": [[d["low"], d["high"]] for d in o["per_seed"]], "detectable": detectable(means)}


def detectable(means: Sequence[float], power: float = 0.8) -> float:
    """The smallest true mean difference a two-sided 5 % t test over these seeds finds with
    ``power``, given the seeds' spread: (t_0.975 + t_power) x sd / sqrt(n), n - 1 degrees of freedom."""
    from inspo.eval.stats import t_quantile

    n = len(means)
    return (t_quantile(0.975, n - 1) + t_quantile(power, n - 1)) * statistics.stdev(means) / math.sqrt(n)


def wilson(k: int, n: int, z: float = 1.959964) -> list[float]:
    """Wilson's 95 % score interval for ``k`` successes in ``n`` trials."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def hit_rate(lifts: Sequence[float]) -> dict[str, Any]:
    """Seeds whose lift over the seed instruction is at least :data:`HIT`, as a record."""
    hits = [lift >= HIT for lift in lifts]
    return {"per_seed": hits, "mean": sum(hits) / len(hits), "ci95": wilson(sum(hits), len(hits)),
            "ci95_pooled": None, "hit_size": list(lifts), "bar": HIT}


def rewards(results: Sequence[dict], arm: str) -> list[list[float]]:
    return [r["test_rewards"][arm] for r in results]


def instruction_only(results: Sequence[dict]) -> dict[str, Any]:
    """The seeds' comparison: INSPO and GEPA each against the seed instruction and each other, the
    hit rates, and the cost of each seed beside its rollouts."""
    with_gepa = [r for r in results if "gepa" in r["test_rewards"]]
    out: dict[str, Any] = {
        "seeds": [r["seed"] for r in results], "seeds_with_gepa": [r["seed"] for r in with_gepa],
        "test_problems": len(results[0]["test_question_ids"]),
        "test_mean": {r["seed"]: r["test_mean"] for r in results},
        "inspo_minus_seed": record(rewards(results, "inspo"), rewards(results, "seed")),
        "hit_rate": {"inspo": hit_rate([r["differences"]["inspo - seed"]["mean"] for r in results])},
    }
    if with_gepa:
        out["inspo_minus_gepa"] = record(rewards(with_gepa, "inspo"), rewards(with_gepa, "gepa"))
        out["gepa_minus_seed"] = record(rewards(with_gepa, "gepa"), rewards(with_gepa, "seed"))
        out["hit_rate"]["gepa"] = hit_rate([r["differences"]["gepa - seed"]["mean"] for r in with_gepa])
    out["cost"] = {r["seed"]: {"budget_rollouts": r["budget_rollouts"], "inspo_rollouts": r["inspo_rollouts"],
                               "rollouts_by_kind": r["rollouts_by_kind"], "over_budget": r["over_budget"],
                               "optimizer_calls": r["optimizer_calls"], "inspo_optimizer_tokens": r["optimizer_tokens"],
                               "wall_s": r["wall_s"]} for r in results}
    return out


def lift(r: dict) -> list[float]:
    return [i - s for i, s in zip(r["test_rewards"]["inspo"], r["test_rewards"]["seed"], strict=True)]


def ablations(results: Sequence[dict], named: dict[str, list[dict]], baselines: Sequence[dict] = ()) -> dict[str, Any]:
    """Each ablation's lift minus the lift of the main run of the same seed at the same commit
    (module docstring), found among the main runs and ``baselines`` (main runs at other commits,
    kept only to be compared with)."""
    main = {(r["seed"], commit_of(r)): r for r in [*baselines, *results]}
    out = {}
    for name, runs in named.items():
        missing = [(a["seed"], commit_of(a)) for a in runs if (a["seed"], commit_of(a)) not in main]
        if missing:
            raise SystemExit(f"ablation {name!r}: no main run of (seed, commit) {missing} to compare it with; "
                             "pass the main run at that commit with --baseline FILE")
        paired = [main[a["seed"], commit_of(a)] for a in runs]
        out[name] = {"settings": runs[0]["settings"], "seeds": [a["seed"] for a in runs],
                     "commits": [commit_of(a) for a in runs],
                     "ablation_minus_main": record([lift(a) for a in runs], [lift(m) for m in paired]),
                     "test_mean": {a["seed"]: a["test_mean"] for a in runs},
                     "main_test_mean": {m["seed"]: m["test_mean"] for m in paired},
                     "fates": {a["seed"]: a["fates"] for a in runs},
                     "optimizer_calls": {a["seed"]: a["optimizer_calls"]["inspo"] for a in runs}}
    return out


def commit_of(r: dict) -> str | None:
    return r.get("provenance", {}).get("commit")


def handwritten(files: dict[int, Path]) -> dict[str, Any]:
    """The returned instructions on the 40 hand-written problems (``inspo eval --json``, one per seed,
    its instructions named ``seed``, ``inspo`` and ``gepa`` by their files): the mean per seed, and
    each arm minus the seed instruction, paired over problems."""
    from inspo.eval.stats import paired_difference

    out: dict[str, Any] = {}
    for seed, path in sorted(files.items()):
        data = json.loads(path.read_text())
        per: dict[str, dict[str, float]] = {}
        for row in data["questions"]:
            per.setdefault(row["instruction"], {})[row["question_id"]] = row["reward"]
        if "seed" not in per:
            raise SystemExit(f"{path}: no instruction named 'seed' (instructions: {sorted(per)})")
        ids = sorted(per["seed"])
        out[str(seed)] = {"mean": {k: statistics.fmean(v.values()) for k, v in per.items()}, "problems": len(ids),
                          "minus_seed": {k: paired_difference([v[i] for i in ids], [per["seed"][i] for i in ids])
                                         .to_dict() for k, v in per.items() if k != "seed"}}
    return out


def fates(results: Sequence[dict]) -> dict[str, Any]:
    total: dict[str, int] = {}
    for r in results:
        for k, v in r["fates"].items():
            if isinstance(v, int):
                total[k] = total.get(k, 0) + v
    return {"per_seed": {r["seed"]: r["fates"] for r in results}, "total": total}


def versus_paper(results: Sequence[dict], files: dict[int, Path]) -> dict[str, Any] | None:
    """The new evidence's INSPO minus INSPO as the paper specifies it (arm 5's search: beat-parent on
    16 sampled rollouts), paired by problem: what the evidence changed at the same budget. ``files``:
    each seed's arm-5 result (``evolve_vs_gepa.py``'s JSON, whose ``test_rewards["inspo"]`` is that search's
    returned instruction on the same test problems)."""
    if not files:
        return None
    by_seed = {r["seed"]: r for r in results}
    missing = sorted(set(files) - set(by_seed))
    if missing:
        raise SystemExit(f"--paper-inspo for seed(s) {missing} with no main run")
    ours, theirs = [], []
    for seed, f in sorted(files.items()):
        paper = json.loads(f.read_text())
        if paper["test_question_ids"] != by_seed[seed]["test_question_ids"]:
            raise SystemExit(f"--paper-inspo {f}: scored on other test problems than seed {seed}'s main run")
        ours.append(by_seed[seed]["test_rewards"]["inspo"])
        theirs.append(paper["test_rewards"]["inspo"])
    return {"seeds": sorted(files), "files": [str(files[s]) for s in sorted(files)],
            "evidence_minus_paper_inspo": record(ours, theirs)}


def provenance_of(results: Sequence[dict], argv: Sequence[str]) -> dict[str, Any]:
    from inspo.eval.provenance import provenance

    first = results[0]["provenance"]
    return {"summary": provenance(["benchmarks/learning/evidence_summary.py", *argv]),
            "runs": [{"seed": r["seed"], "commit": r["provenance"].get("commit"),
                      "dirty": r["provenance"].get("dirty"), "command": r["provenance"].get("command")}
                     for r in results],
            "versions": first.get("versions"), "cpu_flags": (first.get("machine") or {}).get("cpu_flags"),
            "dtype": first.get("dtype"), "device": first.get("device")}


def _rl():
    """benchmarks/learning/evidence_rl.py, the RL section's arithmetic (this folder is no package)."""
    from inspo.lab.harness import load_script

    return load_script(Path(__file__).with_name("evidence_rl.py"), "inspo_benchmark_evidence_rl")


def summarise(results: Sequence[dict], named: dict[str, list[dict]], hand: dict[int, Path],
              argv: Sequence[str], baselines: Sequence[dict] = (), paper: dict[int, Path] | None = None,
              rl_dirs: Sequence[str] = (), rl_reruns: Sequence[str] = ()) -> dict[str, Any]:
    if not results:
        raise SystemExit("no rematch result given")
    seeds = [r["seed"] for r in results]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"two results of one seed among the main runs: {seeds}")
    ids = {tuple(r["test_question_ids"]) for r in results}
    if len(ids) != 1:
        raise SystemExit("the results were scored on different test problems: no paired comparison")
    results = sorted(results, key=lambda r: r["seed"])
    out = {"provenance": provenance_of(results, argv), "fates": fates(results),
           "instruction_only": instruction_only(results), "ablations": ablations(results, named, baselines),
           "handwritten": handwritten(hand)}
    versus = versus_paper(results, paper or {})
    if versus:
        out["instruction_only"]["versus_paper_inspo"] = versus
    if rl_reruns and not rl_dirs:
        raise SystemExit("--rl-rerun replaces runs of the --rl folders: give those with --rl")
    if rl_dirs:
        rl = _rl()
        runs, replaced = rl.load_runs(rl_dirs, rl_reruns)
        out["rl"] = rl.rl_section(runs, {r["seed"]: r for r in results}, record, hit_rate, replaced)
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="the main runs' rematch JSONs, one per seed")
    p.add_argument("--ablation", action="append", default=[], metavar="NAME=FILE",
                   help="an ablation's rematch JSON (repeat, one per seed and name)")
    p.add_argument("--baseline", action="append", default=[], metavar="FILE",
                   help="a main run at another commit, compared only with the ablations run at that commit")
    p.add_argument("--handwritten", action="append", default=[], metavar="SEED=FILE",
                   help="inspo eval's JSON of the seed's returned instructions on the 40 hand-written problems")
    p.add_argument("--paper-inspo", action="append", default=[], metavar="SEED=FILE",
                   help="arm 5's result for the seed (INSPO as the paper specifies it, same budget and test)")
    p.add_argument("--rl", action="append", default=[], metavar="DIR",
                   help="a folder of calculator_campaign.py results (repeat): adds the RL section")
    p.add_argument("--rl-rerun", action="append", default=[], metavar="DIR",
                   help="a folder of reruns of stored arms (repeat); each replaces the --rl run of its arm and seed")
    p.add_argument("--out", default=None, help="write summary.json here")
    return p.parse_args(argv)


def pairs(items: Sequence[str], what: str) -> list[tuple[str, str]]:
    bad = [i for i in items if "=" not in i]
    if bad:
        raise SystemExit(f"--{what} takes NAME=FILE, got {bad[0]!r}")
    return [tuple(i.split("=", 1)) for i in items]


def seed_files(items: Sequence[str], what: str) -> dict[int, Path]:
    """``SEED=FILE`` options as ``{seed: path}``, refusing a seed that is not an integer."""
    out = {}
    for seed, f in pairs(items, what):
        if not seed.strip().lstrip("-").isdigit():
            raise SystemExit(f"--{what} takes SEED=FILE with an integer seed, got {seed!r}={f!r}")
        out[int(seed)] = Path(f)
    return out


def main(argv: Sequence[str] | None = None) -> dict:
    import sys

    raw = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw)
    ablation, hand = pairs(args.ablation, "ablation"), seed_files(args.handwritten, "handwritten")
    paper = seed_files(args.paper_inspo, "paper-inspo")
    results = [json.loads(Path(f).read_text()) for f in args.results]
    named: dict[str, list[dict]] = {}
    for name, f in ablation:
        named.setdefault(name, []).append(json.loads(Path(f).read_text()))
    baselines = [json.loads(Path(f).read_text()) for f in args.baseline]
    summary = summarise(results, named, hand, raw, baselines, paper, args.rl, args.rl_rerun)
    print_summary(summary)
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def _interval(ci: Sequence[float] | None) -> str:
    return "no interval (1 seed)" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def fate_line(f: dict[str, int]) -> str:
    """``admitted of proposed (refusals)``: where a run's candidates went, the nonzero refusals only."""
    refused = ", ".join(f"{k} {v}" for k, v in f.items() if k not in ("proposed", "admitted") and v)
    return f"{f.get('admitted', 0)} of {f.get('proposed', 0)}" + (f" ({refused})" if refused else "")


def print_summary(s: dict) -> None:
    io = s["instruction_only"]
    print(f"seeds {io['seeds']} (GEPA stored for {io['seeds_with_gepa']}), {io['test_problems']} test problems")
    print("| seed | seed instr. | INSPO | GEPA | INSPO - GEPA | rollouts (budget) | optimizer calls INSPO / GEPA "
          "| admitted (refused) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for seed in io["seeds"]:
        m, c = io["test_mean"][seed], io["cost"][seed]
        gepa = f"{m['gepa']:.3f}" if "gepa" in m else "-"
        diff = f"{m['inspo'] - m['gepa']:+.3f}" if "gepa" in m else "-"
        calls = c["optimizer_calls"]
        print(f"| {seed} | {m['seed']:.3f} | {m['inspo']:.3f} | {gepa} | {diff} | {c['inspo_rollouts']} "
              f"({c['budget_rollouts']}) | {calls['inspo']} / {calls['gepa'] if calls['gepa'] is not None else '-'} "
              f"| {fate_line(s['fates']['per_seed'][seed])} |")
    for key in ("inspo_minus_gepa", "inspo_minus_seed", "gepa_minus_seed"):
        if key in io:
            r = io[key]
            print(f"{key}: {r['mean']:+.3f} across seeds {_interval(r['ci95'])}, pooled {_interval(r['ci95_pooled'])}"
                  + (f"; detectable at 80% power: {r['detectable']:.3f}" if r["detectable"] is not None else ""))
    for arm, h in io["hit_rate"].items():
        print(f"hit rate {arm}: {sum(h['per_seed'])} of {len(h['per_seed'])} seeds, Wilson 95% "
              f"[{h['ci95'][0]:.2f}, {h['ci95'][1]:.2f}]; lifts " + ", ".join(f"{x:+.3f}" for x in h["hit_size"]))
    versus = io.get("versus_paper_inspo")
    if versus:
        r = versus["evidence_minus_paper_inspo"]
        print(f"evidence minus INSPO as the paper specifies it (seeds {versus['seeds']}): "
              + ", ".join(f"{x:+.3f}" for x in r["per_seed"])
              + f"; {r['mean']:+.3f} across seeds {_interval(r['ci95'])}, pooled {_interval(r['ci95_pooled'])}")
    for name, a in s["ablations"].items():
        r = a["ablation_minus_main"]
        print(f"ablation {name} (seeds {a['seeds']}): lift minus the main run's {r['mean']:+.3f}, "
              f"pooled {_interval(r['ci95_pooled'])}")
        for seed in a["seeds"]:
            print(f"  seed {seed}: INSPO {a['test_mean'][seed]['inspo']:.3f} against the main run's {a['main_test_mean'][seed]['inspo']:.3f}; "
                  f"{a['optimizer_calls'][seed]} optimizer calls; admitted {fate_line(a['fates'][seed])}")
    for seed, h in s["handwritten"].items():
        print(f"hand-written 40, seed {seed}: " + ", ".join(f"{k} {v:.3f}" for k, v in h["mean"].items()))
    print("candidates: " + ", ".join(f"{k} {v}" for k, v in s["fates"]["total"].items()))
    if "rl" in s:
        _rl().print_rl(s["rl"], _interval)


if __name__ == "__main__":
    main()
