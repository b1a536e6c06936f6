"""Pooling a campaign's per-(arm, seed) result JSONs (pure: no model): per comparison and test
group, the per-seed paired differences, their mean with a 95% interval across seeds (Student's t),
the pooled per-question difference and the power (the smallest effect the seeds could detect, the
seeds a ``setting.effect`` would need); the arms' step curves, event counts, wall time and memory;
printed (:func:`print_combined`) or as Markdown tables (:func:`markdown`).

``setting`` is the campaign's ``Setting`` (``multihop_coevolution.py``): its arms, comparisons,
groups, extra test sets, the untrained policy's seeds and labels, and the group unit.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path


def load_results(paths: Sequence[str]) -> list[dict]:
    """Every result JSON named, or found in a named folder (``results/`` of ``--out``)."""
    files: list[Path] = []
    for p in map(Path, paths):
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    if not files:
        raise SystemExit(f"--combine: no result JSON in {', '.join(paths)}")
    return [json.loads(f.read_text()) for f in files]


def scores(result: dict, setting) -> dict[str, list[float]]:
    """One arm's per-question score lists, named ``arm`` (its main score) and ``arm:which``; the
    extra test sets' scores are appended to the main test's, in ``setting.extra_tests`` order
    (their groups tell them apart)."""
    arm, rewards = result["arm"], result["test_rewards"]
    extra = result.get("extra", {})

    def joined(which: str) -> list[float]:
        return list(rewards[which]) + [v for group in setting.extra_tests for v in extra[group]["rewards"][which]]

    if arm == "untrained":
        names = setting.untrained_labels or {name: f"untrained:{name}" for name in setting.untrained}
        # a seed the untrained policy was not scored under (a result from before the seed was added) is left out
        return {label: joined(name) for name, label in names.items() if name in rewards}
    if arm in setting.crosses:
        return {f"{policy}@{result['instruction_arm']}": joined(policy) for policy in rewards}
    mode = setting.arms[arm][0]
    twofold = mode in ("inspo", "pre-policy")
    out = {arm: joined("returned" if twofold else "seed")}
    if mode == "inspo" or (mode == "pre-policy" and tested_run_seed(result)):
        out[f"{arm}:seed"] = joined("seed")
    return out


def tested_run_seed(result: dict) -> bool:
    """Whether a pre-policy result's "seed" scores are the config's seed: results that record the
    test's ``seed_id`` (``run-seed`` where the offline stage handed over another instruction). Before
    the library's fix (commit b4abd88) the static stage's test played its own seed, the handed-over
    instruction, a second time (seed 0: identical lists); those results are read without it."""
    return "seed_id" in result


def groups_of(result: dict, setting) -> list[str]:
    """The group of each of ``result``'s scores (:func:`scores`): the main test's, then the extra sets'."""
    main = result.get("test_groups") or [str(h) for h in result["test_hops"]]
    extra = result.get("extra", {})
    return [*main, *(group for group in setting.extra_tests for _ in extra.get(group, {}).get("question_ids", []))]


def subset(values: Sequence[float], groups: Sequence[str], group: str) -> list[float]:
    return [v for v, g in zip(values, groups, strict=True) if str(g) == group]


def combine(results: Sequence[dict], setting) -> dict:
    """Pool per-(arm, seed) results: means, paired comparisons by group, power, Fig. 2 curves."""
    from inspo.eval.stats import over_seeds, paired_difference
    from inspo.lab.power import detectable_effect, seeds_needed

    ids = {tuple(r["test_question_ids"]) for r in results}
    if len(ids) != 1:
        raise SystemExit("--combine needs every arm and seed scored on the same test questions, in the same order")
    groups = groups_of(results[0], setting)
    per_seed: dict[int, dict[str, list[float]]] = {}
    commits = sorted({str(r.get("provenance", {}).get("commit")) for r in results})
    for r in results:
        if groups_of(r, setting) != groups:
            raise SystemExit("--combine needs every arm and seed scored on the same test questions, in the same order")
        named = scores(r, setting)
        seeds = [r["seed"]] if r["arm"] != "untrained" else sorted({x["seed"] for x in results})
        for seed in seeds:  # the untrained policy is greedy and untrained: one scoring stands for every seed
            into = per_seed.setdefault(seed, {})
            twice = set(into) & set(named) if r["arm"] != "untrained" else set()
            if twice:
                raise SystemExit(f"seed {seed}: {', '.join(sorted(twice))} given twice")
            into.update({k: v for k, v in named.items() if k not in into})
    seeds = sorted(per_seed)
    order = [g for g in (*setting.groups, *setting.extra_tests) if g in groups]
    out: dict = {"seeds": seeds, "commits": commits, "test_questions": {g: sum(x == g for x in groups) for g in order},
                 "means": {}, "comparisons": {}, "curves": {}, "events": {}, "returned_is_seed": {}, "wall_s": {},
                 "memory": {}, "steps_s": {}, "resumed": {}, "run_seeds": {}}
    for name in sorted({k for s in per_seed.values() for k in s}):
        have = [seed for seed in seeds if name in per_seed[seed]]
        out["means"][name] = {g: {str(seed): statistics.fmean(subset(per_seed[seed][name], groups, g)) for seed in have}
                              for g in order}
    for a, b in setting.comparisons:
        both = [seed for seed in seeds if a in per_seed[seed] and b in per_seed[seed]]
        if not both:
            continue
        by_group = {}
        for g in order:
            xa = [subset(per_seed[s][a], groups, g) for s in both]
            xb = [subset(per_seed[s][b], groups, g) for s in both]
            if len(both) >= 2:
                d = over_seeds(xa, xb)
                sd = statistics.stdev(x["mean"] for x in d["per_seed"])
                d["seed_sd"] = sd
                if sd > 0:
                    d["detectable_effect"] = detectable_effect(sd, len(both))
                    d["seeds_for_effect"] = seeds_needed(sd, setting.effect)
                else:  # the seeds agree exactly (a deterministic pair): a zero-width interval would claim certainty
                    d.update(seed_low=math.nan, seed_high=math.nan, detectable_effect=math.nan, seeds_for_effect=None)
            else:
                one = paired_difference(xa[0], xb[0]).to_dict()
                d = {"per_seed": [one], "seed_mean": one["mean"], "seed_low": math.nan, "seed_high": math.nan,
                     "pooled": one, "seed_sd": math.nan, "detectable_effect": math.nan, "seeds_for_effect": None}
            by_group[g] = d
        out["comparisons"][f"{a} - {b}"] = {"seeds": both, "hops": by_group}
    for arm in setting.arms:
        runs = [r for r in results if r["arm"] == arm]
        if not runs:
            continue
        curves = [r["curves"] for r in runs]
        shared = [k for k in curves[0] if all(k in c for c in curves)]  # results written before a curve was kept
        out["curves"][arm] = {k: [_nanmean(v) for v in zip(*(c[k] for c in curves), strict=False)] for k in shared}
        out["events"][arm] = [r.get("events", {}) for r in runs]
        out["run_seeds"][arm] = [r["seed"] for r in runs]
        # pre-policy before the fix (tested_run_seed): the static stage returned its own seed, the handed-over one
        out["returned_is_seed"][arm] = [r["returned_is_seed"] for r in runs
                                        if setting.arms[arm][0] != "pre-policy" or tested_run_seed(r)]
        out["wall_s"][arm] = [r["wall_s"] for r in runs]  # of the last piece where a run was resumed
        out["resumed"][arm] = [bool(r.get("resumed")) for r in runs]
        out["steps_s"][arm] = [math.fsum(x for x in r["curves"].get("step_s", []) if not math.isnan(x)) for r in runs]
        # resident memory after each step's release and what the release gave back (runs from 6209747 on)
        out["memory"][arm] = {str(r["seed"]): [r["curves"]["rss_gib"], r["curves"]["released_gib"]] for r in runs
                              if not all(math.isnan(x) for x in r["curves"].get("rss_gib", [math.nan]))}
    return out


def _nanmean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return statistics.fmean(kept) if kept else math.nan


def _curve_names(series: dict[str, list[float]]) -> list[str]:
    """The step curves a table shows: not the memory readings (printed per run, never averaged),
    nor a curve with no value (e.g. searches: no search tool)."""
    return [n for n in series if n not in ("rss_gib", "released_gib") and not all(math.isnan(v) for v in series[n])]


def print_combined(c: dict, setting) -> None:
    unit = setting.unit
    print(f"{len(c['seeds'])} seeds ({', '.join(map(str, c['seeds']))}); test questions "
          + ", ".join(f"{h}{unit} {n}" for h, n in c["test_questions"].items()) + f"; commits {', '.join(c['commits'])}")
    for name, by_hop in c["means"].items():
        print(f"  reward {name:22s} " + "; ".join(
            f"{h}{unit} " + ", ".join(f"s{seed} {m:.3f}" for seed, m in cells.items()) for h, cells in by_hop.items()))
    for name, comp in c["comparisons"].items():
        for h, d in comp["hops"].items():
            p = d["pooled"]
            per = ", ".join(f"{x['mean']:+.3f}" for x in d["per_seed"])
            power = ("" if math.isnan(d["detectable_effect"]) else
                     f"; seed SD {d['seed_sd']:.3f}, detectable {d['detectable_effect']:.3f}, "
                     f"seeds for +{setting.effect}: {d['seeds_for_effect']}")
            label = f"{h}{unit}"
            if len(d["per_seed"]) == 1:
                over = "no interval across seeds (one seed)"
            elif math.isnan(d["seed_low"]):
                over = (f"over seeds {d['seed_mean']:+.3f}, the {len(d['per_seed'])} seeds agree exactly "
                        "(no spread to make an interval or size seeds from)")
            else:
                over = f"over seeds {d['seed_mean']:+.3f} [{d['seed_low']:+.3f}, {d['seed_high']:+.3f}]"
            print(f"  {name:34s} {label}: per seed {per}; {over}; pooled per question {p['mean']:+.3f} "
                  f"[{p['low']:+.3f}, {p['high']:+.3f}]{power}")
    for arm, series in c["curves"].items():
        returned = (f"returned the seed in {sum(c['returned_is_seed'][arm])} of {len(c['returned_is_seed'][arm])} runs"
                    if c["returned_is_seed"][arm] else "returned what its offline stage handed over")
        print(f"  {arm}: {returned}; wall s " + ", ".join(f"{w:.0f}" + (" (resumed: last piece only)" if resumed else "")
                                           for w, resumed in zip(c["wall_s"][arm], c["resumed"][arm], strict=True))
              + "; training steps s " + ", ".join(f"{t:.0f}" for t in c["steps_s"][arm]))
        for counts in c["events"][arm]:
            if counts.get("proposed"):
                print("    events: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        for seed, (rss, released) in c.get("memory", {}).get(arm, {}).items():
            print(f"    memory s{seed} (GiB after each step's release / released): "
                  + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(rss, released, strict=True)))
        names = _curve_names(series)
        print("    step  " + "  ".join(f"{n:>13s}" for n in names))
        for t, row in enumerate(zip(*(series[n] for n in names), strict=True), start=1):
            print(f"    {t:4d}  " + "  ".join(f"{v:13.3f}" for v in row))


#: The optimizer's yield, from the events: column -> event count (``rl_static_vs_inspo.rule_counts``).
YIELD = {"proposed": "proposed", "refused by the guard (tags, length, copies)": "refused_guard", "by the leak guard": "refused_leak",
         "at the gate": "refused_gate", "lost the paired race": "refused_race", "below the parent": "refused_below_parent",
         "not in the top n": "refused_not_top", "over the verification budget": "refused_budget", "admitted": "admitted"}


def markdown(c: dict, setting) -> str:
    """:func:`combine`'s result as Markdown tables: each score's test reward per seed and group;
    each comparison per group (per-seed differences, their mean with a 95% interval across seeds,
    the pooled per-question difference with its interval, the seed SD and the power); the
    optimizer's yield per run (rows of runs that proposed nothing are left out); and each arm's
    step curves (reward, tool calls and errors, prompt length...: Fig. 2 / 3), averaged over seeds."""
    def signed(x: float) -> str:
        return "-" if math.isnan(x) else f"{x:+.3f}"

    groups = list(c["test_questions"])
    lines = [f"{len(c['seeds'])} seed(s) ({', '.join(map(str, c['seeds']))}); test questions "
             + ", ".join(f"{g}{setting.unit} {n}" for g, n in c["test_questions"].items()), "",
             "| score | " + " | ".join(f"{g}{setting.unit} (per seed)" for g in groups) + " |",
             "|---|" + "---|" * len(groups)]
    for name, by_group in c["means"].items():
        lines.append(f"| {name} | " + " | ".join(
            ", ".join(f"s{seed} {m:.3f}" for seed, m in by_group[g].items()) for g in groups) + " |")
    lines += ["", "| comparison | group | per seed | over seeds [95% CI] | pooled per question [95% CI] | seed SD | "
              f"detectable (80% power) | seeds for +{setting.effect} |", "|---|---|---|---|---|---|---|---|"]
    for name, comp in c["comparisons"].items():
        for g, d in comp["hops"].items():
            p = d["pooled"]
            over = ("one seed" if len(d["per_seed"]) == 1 else
                    f"{d['seed_mean']:+.3f} (the seeds agree exactly)" if math.isnan(d["seed_low"]) else
                    f"{d['seed_mean']:+.3f} [{d['seed_low']:+.3f}, {d['seed_high']:+.3f}]")
            lines.append(f"| {name} | {g}{setting.unit} | " + ", ".join(signed(x["mean"]) for x in d["per_seed"])
                         + f" | {over} | {signed(p['mean'])} [{signed(p['low'])}, {signed(p['high'])}] | "
                         + ("-" if math.isnan(d["seed_sd"]) else f"{d['seed_sd']:.3f}")
                         + f" | {'-' if math.isnan(d['detectable_effect']) else format(d['detectable_effect'], '.3f')}"
                         + f" | {d['seeds_for_effect'] if d['seeds_for_effect'] is not None else '-'} |")
    runs = [(arm, seed, counts) for arm, per_run in c["events"].items()
            for seed, counts in zip(c["run_seeds"][arm], per_run, strict=True) if counts.get("proposed")]
    if runs:
        lines += ["", "| arm | seed | " + " | ".join(YIELD) + " |", "|---|---|" + "---|" * len(YIELD)]
        lines += [f"| {arm} | {seed} | " + " | ".join(str(counts.get(k, 0)) for k in YIELD.values()) + " |"
                  for arm, seed, counts in runs]
    for arm, series in c["curves"].items():  # Fig. 2 / 3: per step, the mean over the arm's seeds
        names = _curve_names(series)
        if not names:
            continue
        lines += ["", f"{arm}, per step (mean over seeds {', '.join(map(str, c['run_seeds'][arm]))}):", "",
                  "| step | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        lines += [f"| {t} | " + " | ".join("-" if math.isnan(v) else f"{v:.3f}" for v in row) + " |"
                  for t, row in enumerate(zip(*(series[n] for n in names), strict=True), start=1)]
    return "\n".join(lines) + "\n"
