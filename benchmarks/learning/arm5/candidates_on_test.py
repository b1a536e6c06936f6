"""Every instruction INSPO's side of an arm-5 seed admitted, scored greedily on the 300 test
problems and the 40 written by hand beside the seed, with the frozen policy: a check on the final
choice on 8 dev problems (which did it overrule, and what did that cost?). A diagnosis, not a score
for either arm: it picks with the test set, so it never replaces the run's own test.

    # here: the admitted instructions of a run as text files (from its events)
    python benchmarks/learning/arm5/candidates_on_test.py write runs/gepa-calc-s1/inspo .device/arm5-s1
    # there (the device tool, with the 0.5B carried by gpu_campaign.py; or here on a CPU, about 16
    # minutes an instruction): inspo eval on both sets, results under $OUT
    python3 benchmarks/learning/arm5/candidates_on_test.py score .device/arm5-s1 --out "$OUT"
    # here: the paired differences from the seed, per set (--against: the seed's test rewards in a
    # finished seed's JSON beside these, problem by problem)
    python benchmarks/learning/arm5/candidates_on_test.py table DIR/test DIR/handwritten \
        --against benchmarks/results/calculator/arm5/gepa-calc-s0.json
    # here: how often a comparison on k problems (verification's D_B, the dev choice) ranks each
    # admitted instruction against its parent the way the 300 problems do
    python benchmarks/learning/arm5/candidates_on_test.py resample DIR/test \
        --events runs/gepa-calc-s1/inspo/events.jsonl --pairs ins-0078:calculator
    # here: each verified candidate's D_B score against its parent's (the beat-parent bar)
    python benchmarks/learning/arm5/candidates_on_test.py verification runs/gepa-calc-s1/inspo/events.jsonl
    # here: each admitted instruction's test difference from its parent, by whether it passed
    # verification's bar above or level (one --run EVENTS TEST a seed)
    python benchmarks/learning/arm5/candidates_on_test.py admissions \
        --run runs/gepa-calc-s1/inspo/events.jsonl DIR/test
    # here: what the final dev choice on k problems returns from the survivors (what the run
    # scores) and from every admitted instruction, held out on the rest of the 300
    python benchmarks/learning/arm5/candidates_on_test.py choose DIR/test \
        --events runs/gepa-calc-s1/inspo/events.jsonl --sizes 8,16,32,64

``score`` runs ``inspo eval`` from this checkout's ``src`` (inspo need not be installed), so
``INSPO_COMMIT`` should name the commit on a machine whose copy has no ``.git``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HANDWRITTEN = "benchmarks/learning/data/calculator-handwritten.jsonl"
SEED = "@calculator"


def write(run: Path, to: Path) -> list[str]:
    """``run/events.jsonl``'s admitted instructions as ``to/<id>.txt``; returns their ids in order."""
    to.mkdir(parents=True, exist_ok=True)
    ids = []
    for line in (run / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") == "admitted":
            ins = event["instruction"]
            (to / f"{ins['id']}.txt").write_text(ins["text"])
            ids.append(ins["id"])
    if not ids:
        raise SystemExit(f"{run / 'events.jsonl'} admits no instruction: nothing to score")
    return ids


SETS = {"test": "env@test", "handwritten": HANDWRITTEN}


def score(folder: Path, out: Path, batch_size: int, limit: int = 300, policy: str | None = None,
          sets: tuple[str, ...] = tuple(SETS)) -> None:
    """``inspo eval`` of the seed and every ``folder/*.txt`` on ``sets`` (the test split, the
    hand-written problems), one ``out/<set>`` folder each."""
    files = sorted(folder.glob("*.txt"))
    if not files:
        raise SystemExit(f"{folder} holds no instruction (*.txt): run `write` first")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])))
    launcher = "import sys; sys.argv[0] = 'inspo'; from inspo.cli import main; sys.exit(main())"
    for name in sets:
        data = SETS[name]
        cmd = [sys.executable, "-c", launcher, "eval", "--preset", "calculator", "--set",
               f"seed_instruction={SEED}", "--dataset", data, "--limit", str(limit), "--temperature", "0",
               "--batch-size", str(batch_size), "--no-progress", "--out", str(out / name), "--instruction", SEED]
        for f in files:
            cmd += ["--instruction", str(f)]
        if policy:
            cmd += ["--policy", policy]
        subprocess.run(cmd, env=env, cwd=REPO, check=True)


def seed_agreement(folder: Path, run_json: Path) -> None:
    """How many problems the seed's reward here differs on from the seed's in an arm-5 result JSON
    (``test_rewards.seed``, same problems by id): the same frozen policy and greedy decoding, so
    only the machine and batching differ (a GPU here, a CPU there)."""
    rows = json.loads((folder / "eval.json").read_text())["questions"]
    here = {r["question_id"]: r["reward"] for r in rows if r["instruction"] == SEED.lstrip("@")}
    run = json.loads(run_json.read_text())
    there = dict(zip(run["test_question_ids"], run["test_rewards"]["seed"], strict=True))
    if set(here) != set(there):
        raise SystemExit(f"{folder} and {run_json} scored other problems: {len(set(here) ^ set(there))} differ")
    differ = [q for q in there if here[q] != there[q]]
    print(f"  the seed here {sum(here.values()) / len(here):.3f}, in {run_json.name} {sum(there.values()) / len(there):.3f}: "
          f"{len(differ)} of {len(there)} problems differ ({sum(here[q] > there[q] for q in differ)} right only here, "
          f"{sum(there[q] > here[q] for q in differ)} only there)")


def lives(events_path: Path) -> dict[str, str]:
    """Each admitted instruction's life in the run, from its events: the step and score it was
    admitted with, its last credited score and evidence (rollouts), and how it left the
    population: pruned (lines 10-12), not kept as a parent at an evolution step (line 17), or
    still there at the end."""
    from inspo.core.events import read_events
    from inspo.report.data import PRUNED, removals

    events = read_events(events_path)
    admitted = {e["instruction"]["id"]: e for e in events if e["kind"] == "admitted"}
    parents = {e["step"]: e["parents"] for e in events if e["kind"] == "evolution_started"}
    gone = removals(events)
    out = {}
    for ins, adm in admitted.items():
        credited = [e for e in events if e["kind"] == "weights" and ins in e["scores"]]
        last = (f"last credited {credited[-1]['scores'][ins]:.3f} on {credited[-1]['evidence'][ins]} rollouts "
                f"(step {credited[-1]['step']})") if credited else "never credited"
        if ins not in gone:
            end = "in the final population"
        elif gone[ins][1] == PRUNED:
            end = f"pruned at step {gone[ins][0]}"
        else:
            end = f"not a parent at step {gone[ins][0]} (kept: {', '.join(parents[gone[ins][0]])})"
        out[ins] = f"admitted at step {adm['step']} (verification {adm['score']:.3f}); {last}; {end}"
    return out


def rewards_by_instruction(data: dict) -> dict[str, dict[str, float]]:
    """``inspo eval``'s per-question rows as {instruction: {question id: reward}}."""
    by: dict[str, dict[str, float]] = {}
    for row in data["questions"]:
        by.setdefault(row["instruction"], {})[row["question_id"]] = row["reward"]
    return by


def table(folder: Path, events: Path | None = None) -> None:
    """Each instruction's mean and its paired difference from the seed, from ``inspo eval``'s rows;
    with ``events`` (the run's ``events.jsonl``), each admitted one's life in the run too."""
    from inspo.eval.stats import paired_difference

    data = json.loads((folder / "eval.json").read_text())
    by = rewards_by_instruction(data)
    seed = SEED.lstrip("@")
    if seed not in by:
        raise SystemExit(f"{folder}: no row of the seed ({seed}); instructions there: {', '.join(by)}")
    ids = sorted(by[seed])
    life = lives(events) if events else {}
    if data["errors"] or data["stopped"]:
        print(f"{folder}: {data['errors']} errored episodes, stopped: {data['stopped'] or 'no'}")
    device = data["settings"]["precision"]
    print(f"{folder}: {len(ids)} problems, commit {data['provenance']['commit'][:12]}, {device}")
    print(f"  {seed}: {sum(by[seed].values()) / len(ids):.3f}")
    for name, rewards in by.items():
        if name == seed:
            continue
        if set(rewards) != set(ids):
            raise SystemExit(f"{folder}: {name} was scored on other problems than the seed")
        diff = paired_difference([rewards[q] for q in ids], [by[seed][q] for q in ids])
        print(f"  {name}: {sum(rewards.values()) / len(ids):.3f}; minus the seed {diff.text()}")
        if life.get(name):
            print(f"    {life[name]}")


def rank_odds(a, b, k: int, draws: int, rng) -> tuple[float, float, float]:
    """How often one reward per problem on ``k`` problems drawn at random (without replacement)
    from those ``a`` and ``b`` were scored on ranks ``a`` above, level with and below ``b``: the
    comparison verification (a child against its parent on D_B) and the final dev choice make.
    ``a`` and ``b`` are per-problem rewards in the same order; ``draws`` Monte Carlo draws."""
    import numpy as np

    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if not 0 < k <= len(d):
        raise SystemExit(f"a sample of {k} problems from {len(d)}: k must be 1 to {len(d)}")
    picks = np.argsort(rng.random((draws, len(d))), axis=1)[:, :k]  # k distinct problems a draw
    total = d[picks].sum(axis=1)
    tol = 1e-9 * k
    return float((total > tol).mean()), float((abs(total) <= tol).mean()), float((total < -tol).mean())


def parent_pairs(events_path: Path) -> list[tuple[str, str]]:
    """(child, parent) for each instruction the run admitted, named as ``inspo eval`` names them
    (the seed, the run's first instruction, as ``calculator``)."""
    from inspo.core.events import read_events

    events = read_events(events_path)
    seed_id = next((e["instruction_id"] for e in events if e["kind"] == "warmed_up"), "ins-0001")
    name = {seed_id: SEED.lstrip("@")}
    return [(e["instruction"]["id"], name.get(e["instruction"]["parent_ids"][0], e["instruction"]["parent_ids"][0]))
            for e in events if e["kind"] == "admitted" and e["instruction"].get("parent_ids")]


def resample(folder: Path, pairs: list[tuple[str, str]], sizes: list[int], draws: int, seed: int) -> dict:
    """For each (a, b) pair: its difference on every problem of ``folder``'s ``inspo eval`` and the
    odds that a comparison on k of those problems (each size in ``sizes``) ranks a above, level with
    or below b. Greedy rewards are one fixed reward per problem; a run's sampled rollouts get other
    rewards on a problem, so these odds are a best case only if sampling added nothing but noise."""
    import numpy as np

    data = json.loads((folder / "eval.json").read_text())
    by = rewards_by_instruction(data)
    rng = np.random.default_rng(seed)
    print(f"{folder}: {data['provenance']['commit'][:12]}, {data['settings']['precision']}; {draws} draws of k "
          f"problems (numpy seed {seed}); `above / level / below` = how often the k-problem means rank them so")
    if data["errors"] or data["stopped"]:
        print(f"  WARNING: {data['errors']} errored episodes, stopped: {data['stopped'] or 'no'}")
    out = {}
    for a, b in pairs:
        missing = [x for x in (a, b) if x not in by]
        if missing:
            print(f"  {a} vs {b}: {', '.join(missing)} not scored in {folder}, left out")
            continue
        ids = sorted(set(by[a]) & set(by[b]))
        if not ids or max(sizes) > len(ids):
            print(f"  {a} vs {b}: scored together on {len(ids)} problems, fewer than k={max(sizes)}, left out")
            continue
        ra, rb = [by[a][q] for q in ids], [by[b][q] for q in ids]
        odds = {k: rank_odds(ra, rb, k, draws, rng) for k in sizes}
        out[f"{a} - {b}"] = {"difference": (sum(ra) - sum(rb)) / len(ids), "problems": len(ids), "odds": odds}
        print(f"  {a} - {b}: {out[f'{a} - {b}']['difference']:+.3f} on {len(ids)} problems; "
              "above / level / below: "
              + "; ".join(f"k={k} {u:.2f}/{t:.2f}/{w:.2f}" for k, (u, t, w) in odds.items()))
    return out


def verified_rows(events_path: Path) -> list[dict]:
    """Each verified candidate of a run, in order: step, id, D_B score, its round's bar (the
    parent's score there, from ``parent_verified``; None in a round without one), problems, and
    whether it was admitted."""
    from inspo.core.events import read_events

    events = read_events(events_path)
    admitted = {e["instruction"]["id"] for e in events if e["kind"] == "admitted"}
    bar, rows = None, []
    for e in events:
        if e["kind"] == "proposed":
            bar = None  # a new round: its parent is scored again
        elif e["kind"] == "parent_verified":
            bar = e["score"]
        elif e["kind"] == "verified":
            rows.append({"step": e["step"], "candidate": e["candidate_id"], "score": e["score"], "bar": bar,
                         "problems": e["n_questions"], "admitted": e["candidate_id"] in admitted})
    return rows


def admissions_on_test(runs: list[tuple[Path, Path]]) -> dict[str, list[float]]:
    """Does passing verification's bar say anything about the test? For each run (its events, and
    an ``inspo eval`` folder that scored the seed and every admitted instruction), each instruction
    admitted against a bar, its greedy test difference from its parent, grouped by whether its D_B
    score was above the bar or level with it; each group summed up over all the runs."""
    groups: dict[str, list[float]] = {"above": [], "level": []}
    for events_path, folder in runs:
        by = rewards_by_instruction(json.loads((folder / "eval.json").read_text()))
        parent = dict(parent_pairs(events_path))
        print(f"{events_path}, tested in {folder}:")
        for r in verified_rows(events_path):
            if not r["admitted"] or r["bar"] is None:
                continue
            child, par = r["candidate"], parent.get(r["candidate"])
            missing = [x for x in (child, par) if x not in by]
            if missing:
                raise SystemExit(f"{folder}: {', '.join(map(str, missing))} not scored there; score every admitted one")
            ids = sorted(by[child])
            if set(by[par]) != set(ids):
                raise SystemExit(f"{folder}: {child} and {par} were scored on different problems")
            d = sum(by[child][q] - by[par][q] for q in ids) / len(ids)
            kind = "above" if r["score"] > r["bar"] + 1e-9 else "level"
            groups[kind].append(d)
            print(f"  {child}: {kind} its parent {par} on D_B ({r['score']:.3f} against {r['bar']:.3f}); "
                  f"on the test {d:+.3f}")
    for kind, ds in groups.items():
        mean = f"{sum(ds) / len(ds):+.3f}" if ds else "none"
        print(f"admitted {kind} the bar: {len(ds)}; test minus parent, mean {mean}; better than the parent "
              f"{sum(d > 0 for d in ds)}, worse {sum(d < 0 for d in ds)}, equal {sum(d == 0 for d in ds)}")
    return groups


def verification(events_path: Path) -> dict:
    """Each verified candidate's D_B score against its parent's on the same problems (the bar of
    ``admission: beat-parent``), from the run's events: how many scored above, level with and below
    it, and each admitted one's score and bar. A round's bar is its ``parent_verified`` event (None
    where the round had none: plain top-n)."""
    rows = verified_rows(events_path)
    barred = [r for r in rows if r["bar"] is not None]
    counts = {"verified": len(rows), "without a bar": len(rows) - len(barred),
              "above": sum(r["score"] > r["bar"] + 1e-9 for r in barred),
              "level": sum(abs(r["score"] - r["bar"]) <= 1e-9 for r in barred),
              "below": sum(r["score"] < r["bar"] - 1e-9 for r in barred),
              "level at zero": sum(r["score"] == r["bar"] == 0 for r in barred)}
    print(f"{events_path}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for r in rows:
        if r["admitted"]:
            print(f"  admitted {r['candidate']} at step {r['step']}: {r['score']:.3f} on {r['problems']} problems, "
                  f"its parent's {'none' if r['bar'] is None else format(r['bar'], '.3f')}")
    print(f"  the bars (the parent's sampled score on D_B): {sorted({r['bar'] for r in barred})}")
    return {"counts": counts, "rows": rows}


def pools(events_path: Path) -> dict[str, list[str]]:
    """The instructions a final dev choice scores, by ``inspo eval``'s names, the seed first (it
    wins ties), the rest in admission order: ``final``, the seed and the final population (what
    ``final_choice: dev`` scores); ``admitted``, the seed and every instruction the run admitted."""
    from inspo.core.events import read_events
    from inspo.report.data import removals

    events = read_events(events_path)
    admitted = [e["instruction"]["id"] for e in events if e["kind"] == "admitted"]
    gone = removals(events)
    seed = SEED.lstrip("@")
    return {"final": [seed] + [i for i in admitted if i not in gone], "admitted": [seed, *admitted]}


def choose(folder: Path, pools: dict[str, list[str]], sizes: list[int], draws: int, seed: int) -> dict:
    """What a final choice on k problems returns, pool by pool: ``draws`` times, ``folder``'s
    problems split at random into k "dev" problems and the rest; the pool member with the highest
    mean on the k (the first of ties: the seed on a tie), scored on the rest. Per k and pool: the
    mean held-out score of what it returns, how often that is the seed, and the pool's best on every
    problem (what a perfect choice returns); per k, one pool minus another, draw by draw."""
    import numpy as np

    by = rewards_by_instruction(json.loads((folder / "eval.json").read_text()))
    names = list(dict.fromkeys(n for pool in pools.values() for n in pool))
    missing = [n for n in names if n not in by]
    if missing:
        raise SystemExit(f"{folder}: {', '.join(missing)} not scored there; score every admitted instruction first")
    ids = sorted(by[names[0]])
    if any(set(by[n]) != set(ids) for n in names):
        raise SystemExit(f"{folder}: the pools' instructions were scored on different problems")
    r = np.array([[by[n][q] for q in ids] for n in names], dtype=float)  # instruction x problem
    index, means = {n: i for i, n in enumerate(names)}, r.mean(axis=1)
    best = {name: max(pool, key=lambda x: means[index[x]]) for name, pool in pools.items()}  # on every problem
    rng = np.random.default_rng(seed)
    print(f"{folder}: {len(ids)} problems; {draws} random splits into k dev problems and the rest "
          f"(numpy seed {seed}); each pool returns its best on the k, the seed on a tie")
    out: dict = {}
    for k in sizes:
        if not 0 < k < len(ids):
            raise SystemExit(f"a choice on {k} of {len(ids)} problems: k must be 1 to {len(ids) - 1}")
        picks = np.argsort(rng.random((draws, len(ids))), axis=1)[:, :k]
        dev = r[:, picks].sum(axis=2)  # instruction x draw
        held = (r.sum(axis=1, keepdims=True) - dev) / (len(ids) - k)
        got = {}
        for name, pool in pools.items():
            rows = np.array([index[x] for x in pool])
            chosen = rows[np.argmax(dev[rows], axis=0)]  # argmax keeps the first of ties
            got[name] = held[chosen, np.arange(draws)]
            out.setdefault(k, {})[name] = {"held_out": float(got[name].mean()),
                                          "seed": float((chosen == rows[0]).mean()),
                                          "best": best[name], "best_score": float(means[index[best[name]]])}
        print(f"  k={k}: " + "; ".join(
            f"{name} ({len(pools[name])}) returns {v['held_out']:.3f} held out, the seed in {v['seed']:.0%} "
            f"(its best {v['best']} {v['best_score']:.3f})" for name, v in out[k].items()))
        first, *rest = pools
        for name in rest:
            d = got[name] - got[first]
            out[k][f"{name} - {first}"] = {"mean": float(d.mean()), "above": float((d > 1e-9).mean()),
                                           "below": float((d < -1e-9).mean())}
            print(f"    {name} minus {first}: {d.mean():+.3f} on average, above in {(d > 1e-9).mean():.0%} "
                  f"of splits, below in {(d < -1e-9).mean():.0%}")
    return out


def sizes_arg(text: str) -> list[int]:
    """``--sizes``: problems per comparison, positive whole numbers separated by commas."""
    sizes = [k for k in text.split(",") if k]
    if not sizes or not all(k.isdigit() and int(k) > 0 for k in sizes):
        raise SystemExit(f"--sizes: problems per comparison, positive whole numbers like 8,16,32; not {text!r}")
    return [int(k) for k in sizes]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("write", help="a run's admitted instructions as text files")
    a.add_argument("run", type=Path, help="INSPO's run folder (its events.jsonl)")
    a.add_argument("to", type=Path)
    a = sub.add_parser("score", help="inspo eval of the seed and those files on both problem sets")
    a.add_argument("folder", type=Path)
    a.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "runs/arm5-candidates")))
    a.add_argument("--batch-size", type=int, default=300, help="300 on a GPU; 8 (the preset's) on a CPU")
    a.add_argument("--limit", type=int, default=300, help="problems per set (a quick check: 2)")
    a.add_argument("--policy", help="default: the calculator preset's (the frozen 0.5B)")
    a.add_argument("--sets", default=",".join(SETS), help="test, handwritten or both (test,handwritten)")
    a = sub.add_parser("table", help="paired differences from the seed")
    a.add_argument("folders", type=Path, nargs="+", help="inspo eval's --out folders")
    a.add_argument("--against", type=Path, help="an arm-5 result JSON: the seed's test rewards there, compared")
    a.add_argument("--events", type=Path, help="the run's inspo/events.jsonl: each admitted instruction's life there")
    a = sub.add_parser("resample", help="odds that a comparison on k problems ranks two instructions right")
    a.add_argument("folder", type=Path, help="an inspo eval --out folder (test: 300 problems)")
    a.add_argument("--pairs", default="", help="A:B,... by inspo eval's names (the seed: calculator)")
    a.add_argument("--events", type=Path, help="the run's inspo/events.jsonl: add each admitted one against its parent")
    a.add_argument("--sizes", default="8,16,32,64,128", help="problems per comparison (D_B 16, the dev choice 8)")
    a.add_argument("--draws", type=int, default=20000)
    a.add_argument("--seed", type=int, default=0)
    a = sub.add_parser("verification", help="each verified candidate against its parent's score on D_B")
    a.add_argument("events", type=Path, help="the run's inspo/events.jsonl")
    a = sub.add_parser("admissions", help="each admitted instruction's test difference from its parent, by how it passed")
    a.add_argument("--run", nargs=2, action="append", required=True, type=Path, metavar=("EVENTS", "TEST"),
                   help="a run's inspo/events.jsonl and the inspo eval folder that scored its admitted ones; repeat")
    a = sub.add_parser("choose", help="what a final choice on k problems returns from the survivors or every admitted one")
    a.add_argument("folder", type=Path, help="an inspo eval --out folder that scored the seed and every admitted one")
    a.add_argument("--events", type=Path, required=True, help="the run's inspo/events.jsonl (its pools)")
    a.add_argument("--sizes", default="8,16,32,64", help="dev problems per choice (the run's: 8)")
    a.add_argument("--draws", type=int, default=20000)
    a.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.cmd == "write":
        print(" ".join(write(args.run, args.to)))
    elif args.cmd == "score":
        sets = tuple(args.sets.split(","))
        if not sets or not set(sets) <= set(SETS):
            raise SystemExit(f"--sets: a comma-separated choice of {', '.join(SETS)}, not {args.sets!r}")
        score(args.folder, args.out, args.batch_size, args.limit, args.policy, sets)
    elif args.cmd == "verification":
        verification(args.events)
    elif args.cmd == "admissions":
        admissions_on_test([tuple(r) for r in args.run])
    elif args.cmd == "choose":
        choose(args.folder, pools(args.events), sizes_arg(args.sizes), args.draws, args.seed)
    elif args.cmd == "resample":
        pairs = [tuple(x.split(":")) for x in args.pairs.split(",") if x]
        if any(len(x) != 2 for x in pairs):
            raise SystemExit(f"--pairs: A:B,... (two names a pair), not {args.pairs!r}")
        pairs = list(dict.fromkeys(pairs + (parent_pairs(args.events) if args.events else [])))  # once each
        if not pairs:
            raise SystemExit("resample: name --pairs or --events (each admitted instruction against its parent)")
        resample(args.folder, pairs, sizes_arg(args.sizes), args.draws, args.seed)
    else:
        for folder in args.folders:
            table(folder, args.events)
        if args.against:
            seed_agreement(args.folders[0], args.against)


if __name__ == "__main__":
    main()
