"""Issue 63's diagnosis of the calculator campaign and arm 5 (INSPO's instruction search against
GEPA), recomputed from the committed files alone: each count beside the issue's figure, with the
definition used and whether the files give the same number, another one, or none.

Read (nothing else, nothing written under ``benchmarks/results`` but ``--out``): the three arm-5
run folders (``arm5/gepa-calc-s{0,1,2}-run.tar.gz``, unpacked into a temporary folder), their
result JSONs, ``arm5/candidates-s*/test`` (every admitted instruction scored on the 300 test
problems), the campaign's INSPO and pre-policy run folders and its result JSONs. The calculator's
training problems are regenerated from each run's ``config.yaml`` (the generator is seeded) to
tell which problems an optimizer call was shown.

    python benchmarks/learning/evidence_diagnosis.py \
        --out benchmarks/results/calculator/evidence/diagnosis.json \
        > benchmarks/results/calculator/evidence/diagnosis.txt
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import statistics
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

import yaml

from inspo.lab.harness import load_script

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks/results/calculator"
SEEDS = (0, 1, 2)
CAMPAIGN_RUNS = ("campaign-s{s}-inspo-calculator", "campaign-s{s}-pre-policy-calculator/pre-policy")
LEFT_OUT = ("campaign-s0-inspo-weak-partial",)  # unfinished, from @weak: not in the 1,145
LIFT = 0.1  # the hit rate's bar: test minus the seed on the base policy
TOL = 1e-9
DROPPED = "drops protocol tag"  # the guard's reason for a candidate without a required tag
ADMISSIONS = ("candidates_on_test.admissions_on_test on arm 5's events and "
              "candidates-s{0,1,2}/test (greedy, 300 test problems): test mean minus the parent's")


def arm5_tools():
    """``benchmarks/learning/arm5/candidates_on_test.py`` as a module (its folder is not a package)."""
    return load_script(ROOT / "benchmarks/learning/arm5/candidates_on_test.py", "inspo_arm5_candidates")


# ------------------------------------------------------------------------------ reading the files


def unpack_arm5(arm5: Path, into: Path) -> dict[int, Path]:
    """Each seed's finished run folder (``gepa-calc-s<seed>``) unpacked under ``into``."""
    folders = {}
    for seed in SEEDS:
        with tarfile.open(arm5 / f"gepa-calc-s{seed}-run.tar.gz") as tar:
            tar.extractall(into, filter="data")
        folders[seed] = into / f"gepa-calc-s{seed}"
    return folders


def load_run(name: str, folder: Path) -> dict:
    """An INSPO run folder: its events and config (and ``summary.json`` where there is one)."""
    from inspo.core.events import read_events

    summary = folder / "summary.json"
    return {"name": name, "folder": str(folder), "events": read_events(folder / "events.jsonl"),
            "config": yaml.safe_load((folder / "config.yaml").read_text()),
            "summary": json.loads(summary.read_text()) if summary.is_file() else {}}


def train_questions(config: dict) -> dict:
    """The run's training problems by id, regenerated from its ``env`` settings (seeded)."""
    from inspo.envs import make_env

    env = dict(config["env"])
    return {q.id: q for q in make_env(env.pop("name"), env).questions("train")}


def test_means(folder: Path, seed_id: str) -> dict[str, float]:
    """Each instruction's mean on ``inspo eval``'s rows in ``folder`` (the seed by its run id)."""
    by = arm5_tools().rewards_by_instruction(json.loads((folder / "eval.json").read_text()))
    seed = arm5_tools().SEED.lstrip("@")
    return {seed_id if name == seed else name: sum(r.values()) / len(r) for name, r in by.items()}


def seed_id(events: list[dict]) -> str:
    return next((e["instruction_id"] for e in events if e["kind"] == "warmed_up"), "ins-0001")


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else float("nan")


# ------------------------------------------------------------------------- 1. verification


def verification_sizes(runs: list[dict]) -> dict:
    """How verification scores: problems and rollouts per verified candidate and per parent, the
    parents' successes there (score x problems), and the policy's sampling temperature."""
    verified = [e for r in runs for e in r["events"] if e["kind"] == "verified"]
    parents = [e for r in runs for e in r["events"] if e["kind"] == "parent_verified"]
    successes = Counter(round(e["score"] * e["n_questions"]) for e in parents)
    return {"verified": len(verified),
            "candidate_sizes": sorted({(e["n_questions"], e["n_rollouts"]) for e in verified}),
            "parent_sizes": sorted({(e["n_questions"], e["n_rollouts"]) for e in parents}),
            "parent_rounds": len(parents),
            "parent_successes": dict(sorted(successes.items())),
            "temperature": sorted({r["config"]["rl"]["temperature"] for r in runs})}


def admission_groups(pairs: list[tuple[Path, Path]]) -> dict:
    """``candidates_on_test.admissions_on_test`` over the runs (its printout kept aside): per
    group (above the bar, level with it), the count, mean test minus parent, better and worse."""
    with contextlib.redirect_stdout(io.StringIO()) as said:
        groups = arm5_tools().admissions_on_test(pairs)
    out = {kind: {"n": len(ds), "mean": mean(ds), "better": sum(d > TOL for d in ds),
                  "worse": sum(d < -TOL for d in ds), "differences": ds}
           for kind, ds in groups.items()}
    out["printout"] = said.getvalue().splitlines()
    return out


def step0_db(run: dict, questions: dict) -> dict:
    """Is D_B at step 0 the warm-up set? The warm-up problems are regenerated as the loop draws
    them (``inspo.training.build_core.warmup_questions``: ``derived_rng(seed, "warmup")``); before step 1
    the buffer holds only their rollouts, and D_B takes every buffer problem when there are no
    more than ``validation_size``. Also: are the problems shown at step 0 among them?"""
    from inspo.rng import derived_rng

    cfg, events = run["config"], run["events"]
    pool = list(questions.values())
    n = min(cfg["data"]["warmup_questions"], len(pool))
    warm = {q.id for q in derived_rng(cfg["coevolution"]["seed"], "warmup").sample(pool, n)}
    warmed = next(e for e in events if e["kind"] == "warmed_up")
    sizes = sorted({e["n_questions"] for e in events if e["kind"] == "verified" and e["step"] == 0})
    shown = {i for e in events if e["kind"] == "proposed" and e["step"] == 0 for i in e["failures"]}
    played_before = [e for e in events if e["kind"] == "sampled" and e["step"] == 0]
    same = (sizes == [len(warm)] and warmed["n_rollouts"] == len(warm) and not played_before
            and len(warm) <= cfg["coevolution"]["validation_size"])
    return {"warm_up": len(warm), "db_sizes_step0": sizes, "validation_size":
            cfg["coevolution"]["validation_size"], "shown_step0": len(shown),
            "shown_in_warm_up": len(shown & warm), "db_is_warm_up": same}


# ------------------------------------------------------------------------------- 2. credit


def unreturned_evidence(run: dict, returned: str) -> dict[str, int]:
    """Question groups (``sampled`` events, G rollouts each) each admitted instruction the run did
    not return was played on."""
    groups = Counter(e["instruction_id"] for e in run["events"] if e["kind"] == "sampled")
    admitted = [e["instruction"]["id"] for e in run["events"] if e["kind"] == "admitted"]
    return {ins: groups[ins] for ins in admitted if ins != returned}


def prune_decisions(events: list[dict], test: dict[str, float]) -> list[dict]:
    """Every (removed, kept) pair of every prune, both scored on the test: did it keep the worse?"""
    out = []
    for e in events:
        if e["kind"] != "pruned":
            continue
        for gone in e["removed"]:
            for kept in e["kept"]:
                if gone in test and kept in test:
                    out.append({"step": e["step"], "removed": gone, "kept": kept,
                                "removed_test": test[gone], "kept_test": test[kept],
                                "kept_evidence": e["evidence"].get(kept),
                                "kept_worse": test[kept] < test[gone] - TOL})
    return out


def best_admission(events: list[dict], test: dict[str, float]) -> dict:
    """The admitted instruction with the highest test minus its parent: that difference, the
    question groups it was played on and how it left the population."""
    from inspo.report.data import PRUNED, removals

    groups = Counter(e["instruction_id"] for e in events if e["kind"] == "sampled")
    pairs = [(e["instruction"]["id"], (e["instruction"].get("parent_ids") or [None])[0])
             for e in events if e["kind"] == "admitted"]
    diffs = {ins: test[ins] - test[par] for ins, par in pairs if ins in test and par in test}
    ins = max(diffs, key=diffs.get)
    gone = removals(events).get(ins)
    left = ("stayed" if gone is None else
            f"{'pruned' if gone[1] == PRUNED else 'not kept as a parent'} at step {gone[0]}")
    return {"id": ins, "minus_parent": diffs[ins], "groups": groups[ins], "left": left}


# ------------------------------------------------------------------------ 3. the 1.5B's yield


def is_worked_example(text: str) -> bool:
    """A worked example: a ``Question:`` line answered with a ``<calc>`` call."""
    return "Question:" in text and "<calc>" in text


def refusals(run: dict, questions: dict) -> dict:
    """One run's candidates (every ``proposed`` event's ids), those refused for a dropped protocol
    tag, the leak refusals, the worked examples among them and those of the worked examples whose
    leaked text or gold answer is that of a problem their optimizer call was shown."""
    events = run["events"]
    call = {c: e for e in events if e["kind"] == "proposed" for c in e["candidate_ids"]}
    rejected = [e for e in events if e["kind"] == "rejected"]
    leaks = [e for e in rejected if e.get("stage") == "leak"]
    worked = [e for e in leaks if is_worked_example(e["text"])]
    shown = []
    for e in worked:
        m = re.match(r"leaks an answer: '(.*)'$", e["reason"], re.S)
        seen = [questions[i] for i in call[e["candidate_id"]]["failures"]]
        if m and any(m[1] == q.question or m[1] in q.answers for q in seen):
            shown.append(e["candidate_id"])
    return {"run": run["name"], "optimizer": run["config"]["optimizer"].get("local_model_path"),
            "candidates": len(call),
            "dropped_tag": sum(e.get("stage") == "guard" and e["reason"].startswith(DROPPED)
                               for e in rejected),
            "leak": len(leaks), "leak_worked": len(worked), "leak_worked_shown": len(shown),
            "leak_worked_not_shown": [e["candidate_id"] for e in worked
                                      if e["candidate_id"] not in shown]}


# --------------------------------------------------------------------------- 4. hit rate, cost


def hit_rates(arm5: dict[int, dict], cross: dict[int, dict], untrained: dict,
              inspo_rl: dict[int, dict], static: dict[int, dict]) -> dict:
    """Per seed, each search's test lift over the seed on the base (frozen, untrained) policy:
    GEPA and INSPO's instruction search from arm 5's ``vs_seed``; INSPO in RL, its returned
    instruction played by the untrained policy (``cross-calculator``) minus the untrained policy
    under the seed (``untrained``); beside it INSPO's trained policy minus static GRPO's."""
    base = dict(zip(untrained["test_question_ids"], untrained["test_rewards"]["calculator"],
                    strict=True))

    def lift(result: dict, which: str) -> float:
        ids = result["test_question_ids"]
        if set(ids) != set(base):
            raise SystemExit("cross-calculator and untrained scored different test problems")
        return mean(r - base[q] for q, r in zip(ids, result["test_rewards"][which], strict=True))

    out = {"gepa": {s: arm5[s]["vs_seed"]["gepa"]["mean"] for s in arm5},
           "inspo_evolve": {s: arm5[s]["vs_seed"]["inspo"]["mean"] for s in arm5},
           "inspo_rl": {s: lift(cross[s], "untrained") for s in cross},
           "inspo_rl_minus_static": {s: mean(inspo_rl[s]["test_rewards"]["returned"])
                                     - mean(static[s]["test_rewards"]["returned"])
                                     for s in inspo_rl}}
    return {k: {"lifts": v, "hits": sum(x >= LIFT - TOL for x in v.values()), "seeds": len(v)}
            for k, v in out.items()}


def gepa_cost(run_log: list[dict], result: dict) -> dict:
    """GEPA's trace (``gepa/run_log.json``): problems per minibatch and rollouts per proposal (the
    parent's and the child's minibatch scores); proposals per rollout against INSPO's optimizer
    calls per rollout, from the seed's result JSON."""
    proposals = [t for t in run_log if t.get("new_subsample_scores")]
    g, i = result["gepa"], result["inspo"]
    return {"proposals": len(proposals), "gepa_rollouts": g["rollouts"],
            "problems": sorted({len(t["subsample_ids"]) for t in proposals}),
            "rollouts_each": sorted({len(t["subsample_scores"]) + len(t["new_subsample_scores"])
                                     for t in proposals}),
            "inspo_calls": i["optimizer_calls"], "inspo_rollouts": i["rollouts"],
            "ratio": (len(proposals) / g["rollouts"]) / (i["optimizer_calls"] / i["rollouts"])}


# ------------------------------------------------------------------------------ putting together


def gather(results: Path, tmp: Path) -> dict:
    """Every count, from the files under ``results`` (arm 5's run folders unpacked into ``tmp``)."""
    arm5_dir, campaign = results / "arm5", results / "campaign"
    folders = unpack_arm5(arm5_dir, tmp)
    arm5 = {s: load_run(f"arm5-s{s}", folders[s] / "inspo") for s in SEEDS}
    names = [p.format(s=s) for p in CAMPAIGN_RUNS for s in SEEDS]
    others = [load_run(name, results / name) for name in names]
    questions = {r["name"]: train_questions(r["config"]) for r in [*arm5.values(), *others]}
    tests = {s: test_means(arm5_dir / f"candidates-s{s}/test", seed_id(arm5[s]["events"]))
             for s in SEEDS}
    jsons = {s: json.loads((arm5_dir / f"gepa-calc-s{s}.json").read_text()) for s in SEEDS}

    def result(name: str, s: int) -> dict:
        return json.loads((campaign / f"{name}-s{s}.json").read_text())

    def by_seed(name: str) -> dict[int, dict]:
        return {s: result(name, s) for s in SEEDS}

    pairs = [(folders[s] / "inspo/events.jsonl", arm5_dir / f"candidates-s{s}/test") for s in SEEDS]
    evidence = {s: unreturned_evidence(arm5[s], arm5[s]["summary"]["best_instruction_id"])
                for s in SEEDS}
    return {
        "verification": verification_sizes(list(arm5.values())),
        "parent_successes": {s: verification_sizes([arm5[s]])["parent_successes"] for s in SEEDS},
        "admissions": admission_groups(pairs),
        "step0": {s: step0_db(arm5[s], questions[arm5[s]["name"]]) for s in SEEDS},
        "unreturned_groups": evidence,
        "prunes": {s: prune_decisions(arm5[s]["events"], tests[s]) for s in SEEDS},
        "best_admission_s0": best_admission(arm5[0]["events"], tests[0]),
        "refusals": [refusals(r, questions[r["name"]]) for r in [*arm5.values(), *others]],
        "left_out": {name: refusals(run, train_questions(run["config"]))["candidates"]
                     for name in LEFT_OUT for run in [load_run(name, results / name)]},
        "hit_rates": hit_rates(jsons, by_seed("cross-calculator"), result("untrained", 0),
                               by_seed("inspo-calculator"), by_seed("static-calculator")),
        "gepa_cost": {s: gepa_cost(json.loads((folders[s] / "gepa/run_log.json").read_text()),
                                   jsons[s]) for s in SEEDS},
    }


def row(claim: str, issue: str, files: str, definition: str, cannot: bool = False) -> dict:
    """One figure: the issue's, the files' (formatted as the issue writes it) and their verdict."""
    status = "cannot" if cannot else ("same" if issue == files else "differs")
    return {"claim": claim, "issue": issue, "files": files, "status": status,
            "definition": definition}


def verification_rows(f: dict) -> list[dict]:
    v, a = f["verification"], f["admissions"]
    sizes = {n for n, _ in v["candidate_sizes"] + v["parent_sizes"]}
    one_each = all(n == k for n, k in v["candidate_sizes"] + v["parent_sizes"])
    lo, hi = min(v["parent_successes"]), max(v["parent_successes"])
    dist = ", ".join(f"{k}: {n}" for k, n in v["parent_successes"].items())
    s0 = f["step0"]
    return [
        row("problems per verification (one sampled rollout each)", "16",
            "/".join(map(str, sorted(sizes))) + ("" if one_each else " (not one rollout each)"),
            f"arm 5's verified and parent_verified events, 3 seeds "
            f"(policy temperature {v['temperature']})"),
        row("parents' successes on D_B, of 16", "0-3", f"{lo}-{hi}",
            f"round(score x 16) of arm 5's {v['parent_rounds']} parent_verified events "
            f"(successes: rounds = {dist}; per seed "
            + ", ".join(f"s{s} {min(x)}-{max(x)}" for s, x in f["parent_successes"].items())
            + ")"),
        row("admissions judged against a parent", "20", str(a["above"]["n"] + a["level"]["n"]),
            "arm 5's admitted instructions whose round had a parent_verified bar"),
        row("above the bar: count, mean test minus parent, better/worse", "10, -0.034, 5/5",
            f"{a['above']['n']}, {a['above']['mean']:+.3f}, {a['above']['better']}/"
            f"{a['above']['worse']}", ADMISSIONS),
        row("level with the bar (ties): count, mean test minus parent", "10, -0.025",
            f"{a['level']['n']}, {a['level']['mean']:+.3f}", ADMISSIONS
            + f"; better/worse {a['level']['better']}/{a['level']['worse']} "
            "(the issue gives none)"),
        row("step 0: D_B is the warm-up set, holding the problems shown", "yes",
            "yes" if all(x["db_is_warm_up"] and x["shown_in_warm_up"] == x["shown_step0"]
                         for x in s0.values()) else "no",
            "per seed: " + "; ".join(f"s{s} warm-up {x['warm_up']}, D_B {x['db_sizes_step0']}, "
                                     f"shown {x['shown_in_warm_up']}/{x['shown_step0']} in it"
                                     for s, x in s0.items())),
    ]


def credit_rows(f: dict) -> list[dict]:
    groups = [n for ev in f["unreturned_groups"].values() for n in ev.values()]
    prunes = [d for ds in f["prunes"].values() for d in ds]
    worse = [d for d in prunes if d["kept_worse"]]
    gap = max(worse, key=lambda d: d["removed_test"] - d["kept_test"]) if worse else None
    best = f["best_admission_s0"]
    return [
        row("median question groups of an admitted, not returned instruction", "2",
            f"{statistics.median(groups):g}" if groups else "none",
            f"sampled events naming it (one a question group of G rollouts), arm 5's "
            f"{len(groups)} admitted instructions other than summary.json's best_instruction_id"),
        row("prunes that kept the worse instruction on the test", "11 of 31",
            f"{len(worse)} of {len(prunes)}",
            "every (removed, kept) pair of arm 5's pruned events, both in candidates-s*/test; "
            "worse = lower greedy test mean"),
        row("widest such decision: pruned, kept (test), kept's rollouts", "0.403, 0.003, 0",
            f"{gap['removed_test']:.3f}, {gap['kept_test']:.3f}, {gap['kept_evidence']}"
            if gap else "none",
            f"the pair with the largest gap ({gap['removed']} removed at step {gap['step']}, "
            f"{gap['kept']} kept)" if gap else "no prune kept the worse"),
        row("seed 0's best admission: test minus parent, groups before it left", "+0.197, 2",
            f"{best['minus_parent']:+.3f}, {best['groups']}",
            f"{best['id']}, the highest test minus parent of seed 0's admissions; {best['left']}"),
    ]


def yield_rows(f: dict) -> list[dict]:
    r = f["refusals"]
    total = {k: sum(x[k] for x in r) for k in
             ("candidates", "dropped_tag", "leak", "leak_worked", "leak_worked_shown")}
    odd = [c for x in r for c in x["leak_worked_not_shown"]]
    runs = ", ".join(f"{x['run']} {x['candidates']}" for x in r)
    models = sorted({str(x["optimizer"]) for x in r})
    return [
        row("the 1.5B optimizer's candidates", "1,145", f"{total['candidates']:,}",
            f"candidate ids of every proposed event in arm 5's 3 INSPO runs and the campaign's "
            f"INSPO and pre-policy (offline stage) runs, seeds 0-2 (optimizer {models}): {runs}; "
            "left out: " + ", ".join(f"{k} {n}" for k, n in f["left_out"].items())),
        row("refused for a dropped protocol tag", "62 %",
            f"{100 * total['dropped_tag'] / total['candidates']:.0f} %",
            f"guard refusals whose reason starts 'drops protocol tag': {total['dropped_tag']}"),
        row("leak refusals", "39", str(total["leak"]), "rejected events with stage 'leak'"),
        row("leak refusals that are worked examples", "32", str(total["leak_worked"]),
            "the refused text holds a 'Question:' line and a <calc> call"),
        row("... built on a problem the optimizer call was shown", "32",
            str(total["leak_worked_shown"]),
            "the leaked text or gold answer is that of a problem in the call's failures (the "
            "training problems regenerated from each run's config.yaml); not so: "
            + (", ".join(odd) or "none") + " (its leak is of D_B, which the check also covers)"),
    ]


def hit_rows(f: dict) -> list[dict]:
    h, c = f["hit_rates"], f["gepa_cost"]

    def lifts(key: str) -> str:
        return ", ".join(f"s{s} {x:+.3f}" for s, x in h[key]["lifts"].items())

    ratios = [x["ratio"] for x in c.values()]
    problems = sorted({n for x in c.values() for n in x["problems"]})
    each = sorted({n for x in c.values() for n in x["rollouts_each"]})
    return [
        *[row(f"hit rate (test lift >= +{LIFT}): {name}", f"{issue} of 3",
              f"{h[key]['hits']} of {h[key]['seeds']}", f"{definition}: {lifts(key)}{beside}")
          for name, key, issue, definition, beside in (
              ("GEPA", "gepa", 3, "gepa-calc-s*.json vs_seed.gepa (frozen 0.5B)", ""),
              ("INSPO's instruction search", "inspo_evolve", 1,
               "gepa-calc-s*.json vs_seed.inspo (frozen 0.5B)", ""),
              ("INSPO in RL", "inspo_rl", 1,
               "campaign cross-calculator-s*.json 'untrained' (INSPO's returned instruction "
               "played by the base policy) minus untrained-s0.json 'calculator', paired",
               f"; beside it, INSPO's trained policy minus static GRPO's (inspo- minus "
               f"static-calculator-s*.json), {h['inspo_rl_minus_static']['hits']} of 3: "
               + lifts("inspo_rl_minus_static")))],
        row("GEPA's problems / rollouts per proposal", "3 / 6",
            "/".join(map(str, problems)) + " / " + "/".join(map(str, each)),
            "gepa/run_log.json iterations with a child score: minibatch size, parent's plus "
            "child's scores"),
        row("GEPA's proposals per rollout over INSPO's calls per rollout", "10-13x",
            f"{min(ratios):.0f}-{max(ratios):.0f}x",
            "rounded to whole numbers; per seed (GEPA proposals/rollouts)/"
            "(INSPO optimizer calls/rollouts): "
            + ", ".join(f"s{s} {x['proposals']}/{x['gepa_rollouts']} vs {x['inspo_calls']}/"
                        f"{x['inspo_rollouts']} = {x['ratio']:.2f}" for s, x in c.items())),
    ]


SECTIONS = (("Verification is a coin", verification_rows),
            ("The credit compares different questions", credit_rows),
            ("The 1.5B optimizer's yield", yield_rows),
            ("Hit rate and GEPA's cost", hit_rows))


def render(sections: dict[str, list[dict]], prov: dict) -> str:
    """The readable table: per claim, the issue's figure, the files' and the verdict, then how."""
    lines = [f"Issue 63's counts from the committed files (commit {str(prov.get('commit'))[:12]}, "
             f"{prov.get('utc')})", f"command: {prov.get('command')}", ""]
    for title, rows in sections.items():
        lines.append(f"## {title}")
        width = max(len(r["claim"]) for r in rows)
        for r in rows:
            lines.append(f"  {r['claim']:<{width}}  issue {r['issue']:<16} files {r['files']:<16} "
                         f"{r['status']}")
        lines += [f"    - {r['claim']}: {r['definition']}" for r in rows]
        lines.append("")
    counts = Counter(r["status"] for rows in sections.values() for r in rows)
    lines.append("verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write the counts, definitions and provenance as JSON")
    p.add_argument("--results", type=Path, default=RESULTS, help="benchmarks/results/calculator")
    args = p.parse_args(argv)
    from inspo.eval.provenance import provenance

    argv = sys.argv[1:] if argv is None else argv
    prov = provenance([str(Path(__file__).relative_to(ROOT)), *argv], repo=ROOT)
    with tempfile.TemporaryDirectory(prefix="evidence-diagnosis-") as tmp:
        facts = gather(args.results, Path(tmp))
    sections = {title: build(facts) for title, build in SECTIONS}
    print(render(sections, prov))
    out = {"provenance": prov, "issue": 63, "claims": sections, "facts": facts}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return out


if __name__ == "__main__":
    main()
