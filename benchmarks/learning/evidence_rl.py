"""The RL section of issue 63's ``summary.json`` (issue 65), from the calculator campaign's result
JSONs (``calculator_campaign.py``: one ``ARM-sS.json`` per arm and seed) and the instruction-only
rematches. ``evidence_summary.py --rl DIR`` writes it; this module holds its arithmetic.

INSPO here is ``inspo-evidence`` (INSPO in RL with the new evidence). Each comparison pairs its test
rewards (under the instruction it returns, its trained policy, greedy) with another arm's of the
same seed, problem by problem, as :func:`evidence_summary.record` does. ``pre_policy`` is static GRPO
under the evidence search's instruction (``pre-policy-evidence``); where that search returned the
seed instruction, the arm is static GRPO under ``@calculator``, so ``static-calculator``'s run of that
seed stands for it (listed in ``pre_policy_is_static``). A seed an arm has no result for is left
out of that comparison and named in its ``missing``, never filled in.

A hit is a search's returned instruction lifting the untrained policy by at least +0.1 over
``@calculator`` on the test: INSPO's and the paper INSPO's from their cross scorings (the base policy
playing the instruction their RL run returned), GEPA's and the evidence search's from the rematch
(the same 300 problems, scored in the rematch's process).

``rl_lift`` splits each arm's score into its instruction and its training: the arm's trained policy
under the instruction it returns minus the untrained policy under that same instruction, problem by
problem. The untrained scores come from where that instruction was scored with the base policy: the
rematch of the seed for ``@calculator`` (static), GEPA's and the evidence search's instructions, the
cross scorings for INSPO's and the paper INSPO's (a cross run on another CPU than the rematch can
differ from it by greedy bf16's drift, about one problem in 300).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ARMS = {"inspo": "inspo-evidence", "static": "static-calculator", "gepa_then_grpo": "gepa-then-grpo",
        "pre_policy": "pre-policy-evidence", "paper_inspo": "inspo-calculator"}
COMPARISONS = (("inspo_minus_static", "static"), ("inspo_minus_gepa_then_grpo", "gepa_then_grpo"),
               ("inspo_minus_pre_policy", "pre_policy"), ("inspo_minus_paper_inspo", "paper_inspo"))
CROSSES = {"inspo": "cross-inspo-evidence", "paper_inspo": "cross-calculator"}
FROZEN = {"static": "seed", "gepa_then_grpo": "gepa", "pre_policy": "inspo"}
"""The rematch's test rewards (the untrained policy) under the instruction each arm trained under."""


def _read(dirs: Sequence[str | Path], flag: str) -> tuple[dict[tuple[str, int], dict], dict[tuple[str, int], Path]]:
    """The results under ``dirs`` by (arm, seed), and the file each came from."""
    runs: dict[tuple[str, int], dict] = {}
    where: dict[tuple[str, int], Path] = {}
    for d in dirs:
        files = sorted(Path(d).glob("*-s*.json"))
        if not files:
            raise SystemExit(f"{flag} {d}: no campaign result (ARM-sS.json) there")
        for f in files:
            r = json.loads(f.read_text())
            if "arm" not in r or "seed" not in r:
                continue  # a pooled or other JSON beside the results
            key = (r["arm"], int(r["seed"]))
            if key in runs:
                raise SystemExit(f"{r['arm']} seed {key[1]} twice: {where[key]} and {f}; keep one")
            runs[key], where[key] = r, f
    return runs, where


def load_runs(dirs: Sequence[str | Path], reruns: Sequence[str | Path] = ()) -> tuple[dict[tuple[str, int], dict],
                                                                                      list[dict[str, Any]]]:
    """Every campaign result under ``dirs`` as ``{(arm, seed): result}``; one (arm, seed) in two
    folders is refused (which would count?). A result under ``reruns`` replaces the stored run of
    its arm and seed (a stored arm that did not reproduce, run again: ``campaign_reproduce.py``),
    which must exist; each replacement is returned, ``{"arm", "seed", "stored", "rerun"}``."""
    runs, where = _read(dirs, "--rl")
    again, again_where = _read(reruns, "--rl-rerun")
    replaced = []
    for key, r in sorted(again.items()):
        if key not in runs:
            raise SystemExit(f"--rl-rerun {again_where[key]}: no stored {key[0]} seed {key[1]} in the --rl folders "
                             "to replace; a new arm's result goes in an --rl folder")
        replaced.append({"arm": key[0], "seed": key[1], "stored": str(where[key]), "rerun": str(again_where[key])})
        runs[key] = r
    return runs, replaced


def rl_section(runs: dict[tuple[str, int], dict], rematches: dict[int, dict], record: Callable,
               hit_rate: Callable, replaced: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The RL comparisons, hit rates, hand-written scores and provenance (module docstring);
    ``record`` and ``hit_rate`` are ``evidence_summary``'s; ``replaced``, :func:`load_runs`' reruns."""
    seeds = sorted(seed for arm, seed in runs if arm == ARMS["inspo"])
    if not seeds:
        raise SystemExit(f"--rl: no {ARMS['inspo']} result among the campaign results given")
    as_static = sorted(s for s in seeds if (ARMS["pre_policy"], s) not in runs
                       and rematches.get(s, {}).get("final_choice", {}).get("seed_returned"))

    def run_of(key: str, seed: int) -> dict | None:
        name = ARMS["static"] if key == "pre_policy" and seed in as_static else ARMS[key]
        return runs.get((name, seed))

    ids = runs[ARMS["inspo"], seeds[0]]["test_question_ids"]
    out: dict[str, Any] = {"seeds": seeds, "test_problems": len(ids), "pre_policy_is_static": as_static,
                           "test_mean": {}, "handwritten_mean": {}, "provenance": [], "replaced": list(replaced)}
    for key in ARMS:
        for seed in seeds:
            r = run_of(key, seed)
            if r is None:
                continue
            if r["test_question_ids"] != ids:
                raise SystemExit(f"{r['arm']} seed {seed} was scored on other test problems than "
                                 f"{ARMS['inspo']} seed {seeds[0]}: no paired comparison")
            out["test_mean"].setdefault(key, {})[seed] = statistics.fmean(r["test_rewards"]["returned"])
            hand = (r.get("extra") or {}).get("handwritten", {}).get("rewards", {})
            if hand:
                out["handwritten_mean"].setdefault(key, {})[seed] = statistics.fmean(hand.get("returned", hand.get("seed")))
            out["provenance"].append({"arm": r["arm"], "seed": seed, "commit": r["provenance"].get("commit"),
                                      "command": r["provenance"].get("command"),
                                      "cpu": (r["provenance"].get("machine") or {}).get("cpu")})
    for name, key in COMPARISONS:
        have = [s for s in seeds if run_of(key, s) is not None]
        mine = [runs[ARMS["inspo"], s]["test_rewards"]["returned"] for s in have]
        theirs = [run_of(key, s)["test_rewards"]["returned"] for s in have]
        out[name] = {**(record(mine, theirs) if have else {}), "seed_ids": have,
                     "missing": [s for s in seeds if s not in have]}
    own = [runs[ARMS["inspo"], s]["test_rewards"] for s in seeds]
    out["policy_versus_prompt"] = record([r["returned"] for r in own], [r["seed"] for r in own])
    out["hit_rate"] = hit_rates(runs, rematches, seeds, hit_rate)
    out["rl_lift"] = rl_lifts(runs, rematches, seeds, run_of, as_static, record)
    return out


def rl_lifts(runs: dict[tuple[str, int], dict], rematches: dict[int, dict], seeds: Sequence[int],
             run_of: Callable, as_static: Sequence[int], record: Callable) -> dict[str, Any]:
    """Per arm, what its RL added on top of its instruction (module docstring): trained minus
    untrained under the arm's returned instruction, on the seeds where both were scored."""
    out: dict[str, Any] = {}
    for key in ARMS:
        trained, frozen, have = [], [], []
        for seed in seeds:
            r = run_of(key, seed)
            if r is None:
                continue
            if key in CROSSES:
                base = runs.get((CROSSES[key], seed), {}).get("test_rewards", {}).get("untrained")
            else:
                which = FROZEN["static" if key == "pre_policy" and seed in as_static else key]
                base = rematches.get(seed, {}).get("test_rewards", {}).get(which)
            if base is None:
                continue
            trained.append(r["test_rewards"]["returned"])
            frozen.append(base)
            have.append(seed)
        if have:
            out[key] = {**record(trained, frozen), "seed_ids": have, "trained_mean": [statistics.fmean(t) for t in trained],
                        "untrained_mean": [statistics.fmean(f) for f in frozen]}
    return out


def hit_rates(runs: dict[tuple[str, int], dict], rematches: dict[int, dict], seeds: Sequence[int],
              hit_rate: Callable) -> dict[str, Any]:
    """Each searching arm's hit rate over ``seeds`` where its lift was measured (module docstring)."""
    untrained = [r for (arm, _), r in sorted(runs.items()) if arm == "untrained"]
    out: dict[str, Any] = {}
    if untrained:
        base = statistics.fmean(untrained[0]["test_rewards"]["calculator"])
        for key, cross in CROSSES.items():
            lifts = {s: statistics.fmean(runs[cross, s]["test_rewards"]["untrained"]) - base
                     for s in seeds if (cross, s) in runs}
            if lifts:
                out[key] = {**hit_rate(list(lifts.values())), "seed_ids": list(lifts)}
    for key, which in (("gepa", "gepa - seed"), ("evidence_search", "inspo - seed")):
        lifts = {s: rematches[s]["differences"][which]["mean"] for s in seeds
                 if s in rematches and which in rematches[s]["differences"]}
        if lifts:
            out[key] = {**hit_rate(list(lifts.values())), "seed_ids": list(lifts)}
    return out


def print_rl(rl: dict[str, Any], interval: Callable) -> None:
    print(f"RL, seeds {rl['seeds']}, {rl['test_problems']} test problems"
          + (f"; pre-policy is static GRPO under @calculator for seeds {rl['pre_policy_is_static']}"
             if rl["pre_policy_is_static"] else ""))
    for r in rl["replaced"]:
        print(f"  {r['arm']} seed {r['seed']}: the rerun {r['rerun']} replaces the stored {r['stored']}")
    for key, means in rl["test_mean"].items():
        print(f"  {key}: " + ", ".join(f"s{s} {m:.3f}" for s, m in means.items()))
    for name, _ in (*COMPARISONS, ("policy_versus_prompt", "")):
        r = rl[name]
        if "mean" not in r:
            print(f"  {name}: no seed has both arms (missing {r['missing']})")
            continue
        print(f"  {name}: " + ", ".join(f"{x:+.3f}" for x in r["per_seed"]) + f"; {r['mean']:+.3f} across seeds "
              f"{interval(r['ci95'])}, pooled {interval(r['ci95_pooled'])}"
              + (f"; missing seeds {r['missing']}" if r.get("missing") else ""))
    for key, r in rl.get("rl_lift", {}).items():
        print(f"  RL under {key}'s own instruction (trained - untrained): " + ", ".join(
            f"s{s} {u:.3f} -> {t:.3f}" for s, u, t in zip(r["seed_ids"], r["untrained_mean"], r["trained_mean"], strict=True))
            + f"; {r['mean']:+.3f}" + (f" across seeds {interval(r['ci95'])}" if r["ci95"] else "")
            + f", pooled {interval(r['ci95_pooled'])}")
    for key, h in rl["hit_rate"].items():
        print(f"  hit rate {key}: {sum(h['per_seed'])} of {len(h['per_seed'])} (seeds {h['seed_ids']}); lifts "
              + ", ".join(f"{x:+.3f}" for x in h["hit_size"]))
