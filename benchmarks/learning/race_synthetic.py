"""The paired race, the gate and beat-parent judged against the truth (issue 63, measurement d).

On :class:`inspo.synthetic.SyntheticEnv` every instruction's success probability is known
(``env.quality``), so each verification verdict can be checked: was the candidate truly better
than its parent? Every arm runs the initial population build and the ``calculator`` preset's two
evolutions (its co-evolution settings, batch, warm-up and 8 steps) with the rule-based reflector,
and differs in verification only:

- ``beat-parent-16``: the calculator campaign's: beat-parent on 16 D_B questions from the buffer
  (App. B; at step 0 that is the warm-up, whose failures the optimizer was shown);
- ``paired-64``: ``admission: paired`` on 64 D_B questions drawn from the training questions,
  leaving out those whose failures the optimizer call was shown;
- ``paired-64-gate``: the same, with ``gate``: parent and candidates first play the failure
  problems the optimizer was shown;
- ``paired-64-no-race``: paired with ``race_futility`` 0 (only curtailment stops a candidate):
  what the race saves.

The rule-based reflector only adds guidance, so most of its candidates are better than their
parents (a strong optimizer's case). ``--harm P`` wraps it in ``evidence_rules_synthetic``'s
``SloppyReflector``: each candidate carries, with probability P, a sentence that costs 0.15
success probability (a weak optimizer's case). Arms of one seed share the environment's noise and
the reflector's seed, so their differences are paired by seed.

For every candidate that reached verification (the gate or D_B) the event log gives its fate and
the rollouts spent on it; it is binned by its true quality minus its parent's: ``better`` (>=
+0.05), ``worse`` (<= -0.05) and ``level`` (in between). Printed per arm and harm: the admission
rate of each bin, the rollouts spent, and I*'s true quality minus the seed's (paired by seed
against ``beat-parent-16``). For the paired arms it also prints the exact race prediction
(:func:`inspo.core.race.admit_probability` from the two true qualities and the D_B size) beside the
measured share of D_B candidates that ended the race ahead. Here a rollout is an independent
Bernoulli draw, so the per-question outcomes the race sees are *sampled*, not greedy as
``verify_greedy`` makes them on a model: the win and loss probabilities are ``q_c (1 - q_p)`` and
``q_p (1 - q_c)``, which is exactly what the prediction assumes.

What 500 seeds showed (``benchmarks/results/calculator/evidence/race-synthetic.txt``):

- against the seed the prediction holds (truly better: 0.983 predicted, 0.983 measured; level
  0.440 / 0.443; truly worse at harm 0.5: 0.038 / 0.036). Against an admitted parent fewer
  candidates end ahead than predicted (better 0.889 / 0.876, level 0.429 / 0.393 at harm 0): a
  rollout's draw follows from the instruction's text and the question, as a greedy rollout on a
  model does, so a parent admitted on an overlapping D_B brings the outcomes it was selected on.
  With ``--fresh`` (no outcome reused; 250 seeds) they come back to the prediction (better 0.892
  / 0.883, level 0.429 / 0.437): the reuse makes the race stricter, not laxer;
- ``paired-64`` passes more truly better candidates than ``beat-parent-16`` (0.94 against 0.82)
  and far fewer truly worse ones (0.05 against 0.21 at harm 0.5), at about 4x the rollouts, and
  its I* is better paired by seed (+0.029 at harm 0, +0.036 at harm 0.5);
- the race costs nothing measurable in I* against playing all 64 and saves 9.5 % of the
  rollouts when most candidates are good, 17 % at harm 0.5;
- the gate refuses truly better candidates: on the 3-4 failure problems a candidate must win
  more than it loses, and against an admitted parent most are ties (40 % of truly better
  candidates pass it there). Its I* is below ``paired-64``'s (-0.043 at harm 0) and
  ``beat-parent-16``'s (-0.014). Here the gate's outcomes are sampled; at step 0 the seed's
  replay of its warm-up failures is the same draw (it fails them again), later ones are fresh.

Usage::

    python benchmarks/learning/race_synthetic.py \
        --json benchmarks/results/calculator/evidence/race-synthetic.json \
        | tee benchmarks/results/calculator/evidence/race-synthetic.txt
    python benchmarks/learning/race_synthetic.py --quick      # a smoke run: 3 seeds, every arm
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path

from inspo.config.presets import PRESETS
from inspo.core.race import RaceRule, admit_probability
from inspo.lab.harness import add_common, load_script, start, write_result

HERE = Path(__file__).resolve().parent
PAIRED = {"admission": "paired", "validation_size": 64, "validation_from": "train",
          "validation_unseen": True}
#: Each arm's verification settings on top of BASE (the calculator preset's co-evolution).
ARMS: dict[str, dict] = {
    "beat-parent-16": {},
    "paired-64": PAIRED,
    "paired-64-gate": {**PAIRED, "gate": True},
    "paired-64-no-race": {**PAIRED, "race_futility": 0},
}
REFERENCE = "beat-parent-16"
CALCULATOR = PRESETS["calculator"]
BASE = dict(CALCULATOR["coevolution"])
STEPS = CALCULATOR["rl"]["steps"]
QUESTIONS_PER_STEP = CALCULATOR["rl"]["questions_per_step"]
GROUP_SIZE = CALCULATOR["rl"]["group_size"]
WARMUP = CALCULATOR["data"]["warmup_questions"]
N_QUESTIONS = 200
GAP = 0.05
BANDS = ("better", "level", "worse")
#: The fates of a candidate that passed its arm's rule (``top_n``: it passed, no slot was left).
PASSED = ("admitted", "top_n")


def _rules():
    """benchmarks/learning/evidence_rules_synthetic.py: its SloppyReflector, features and HARM."""
    return load_script(HERE / "evidence_rules_synthetic.py", "inspo_benchmark_evidence_rules_synthetic")


@lru_cache(maxsize=1 << 16)
def _present(pattern: str, text: str) -> bool:
    return re.search(pattern, text, re.IGNORECASE | re.DOTALL) is not None


@lru_cache(maxsize=1)
def cached_features() -> tuple:
    """``evidence_rules_synthetic.features()`` (the environment's and the harmful sentence's),
    each matched once per text: the same verdicts, without the regex search per rollout that
    otherwise takes most of a run's time (long instructions, thousands of rollouts)."""
    from inspo.synthetic import Feature

    class Cached(Feature):
        def present(self, text: str) -> bool:
            return _present(self.pattern, text)

    return tuple(Cached(f.name, f.pattern, f.gain, f.failure) for f in _rules().features())


def band(delta: float) -> str:
    """A candidate's bin by its true quality minus its parent's."""
    if delta >= GAP - 1e-9:
        return "better"
    if delta <= -GAP + 1e-9:
        return "worse"
    return "level"


@cache
def predicted(q_cand: float, q_parent: float, n: int, futility: int, chunk: int) -> float:
    """The race's exact chance of ending ahead on a D_B of ``n`` when each question is an
    independent draw of both instructions (the synthetic environment's sampled outcomes)."""
    rule = RaceRule(futility, chunk)
    return admit_probability(q_cand * (1 - q_parent), q_parent * (1 - q_cand), n, rule).admit


def make_env(seed: int, fresh: bool = False):
    """The synthetic environment with :func:`cached_features`. ``fresh``: every verification call
    draws anew (salted by a call counter), so no instruction's outcome on a question is ever
    reused: the control for the bias of reusing an admitted parent's outcomes."""
    from inspo.synthetic import SyntheticEnv

    class Fresh(SyntheticEnv):
        calls_made = 0

        def evaluate(self, instruction, questions):
            self.calls_made += 1
            salt = ("eval", self.calls_made)
            return [self.rollout(instruction, q, 0, salt=salt) for q in questions]

    return (Fresh if fresh else SyntheticEnv)(seed=seed, features=cached_features())


def run_one(arm: str, seed: int, harm: float = 0.0, fresh: bool = False) -> dict:
    """One run of ``arm`` with ``seed`` (environment, core and reflector): I* against the seed,
    the verification spend, and every candidate that reached verification (:func:`fates`);
    ``fresh``: see :func:`make_env`."""
    from inspo.core.coevolution import CoEvolution
    from inspo.core.config import CoEvolutionConfig
    from inspo.core.proposer import Proposer
    from inspo.core.reflector import RuleBasedReflector
    from inspo.synthetic import (
        GUARD_TAGS,
        SEED_INSTRUCTION,
        make_questions,
        reflector_rules,
        run_synthetic,
    )

    rules = _rules()
    config = CoEvolutionConfig(**{**BASE, **ARMS[arm], "seed": seed})
    reflector = RuleBasedReflector(rng=random.Random(seed), rules=reflector_rules())
    llm = rules.SloppyReflector(reflector, harm, random.Random(f"harm-{seed}"))
    questions = make_questions(N_QUESTIONS)
    coevo = CoEvolution(config, SEED_INSTRUCTION, Proposer(llm, guard_tags=GUARD_TAGS),
                        validation_pool=questions)
    env = make_env(seed, fresh)
    run_synthetic(coevo, env, questions, steps=STEPS, batch_size=QUESTIONS_PER_STEP,
                  group_size=GROUP_SIZE, warmup=WARMUP)
    candidates, parent_rollouts = fates(coevo, env)
    return {"returned": env.quality(coevo.best().text) - env.quality(SEED_INSTRUCTION),
            "verification_rollouts": coevo.ledger.verification_rollouts,
            "parent_rollouts": parent_rollouts, "candidates": candidates}


def fates(coevo, env) -> tuple[list[dict], int]:
    """Every candidate that reached the gate or D_B, read from the event log in order: its step,
    true qualities (its parent's and its own), gate and D_B rollouts, race record, D_B size,
    whether it was admitted and, if not, the stage that refused it. Also the rollouts its
    parents spent being played beside it (gate and D_B)."""
    parent_of: dict[str, str] = {}
    rows: dict[str, dict] = {}
    texts: dict[str, str] = {}
    db_size, parent_rollouts = 0, 0
    for e in coevo.events.events:
        if e.kind == "proposed":
            parent_of.update(dict.fromkeys(e.candidate_ids, e.parent_id))
        elif e.kind == "gated" and e.parent:
            parent_rollouts += e.n_rollouts
        elif e.kind == "gated":
            row = rows.setdefault(e.candidate_id, _row(e.step))
            row.update(gate_rollouts=e.n_rollouts, gate_passed=e.passed)
        elif e.kind == "parent_verified":
            db_size, parent_rollouts = e.n_questions, parent_rollouts + e.n_rollouts
        elif e.kind == "verified":
            row = rows.setdefault(e.candidate_id, _row(e.step))
            row.update(db_rollouts=e.n_rollouts, db_size=db_size, played=e.n_questions,
                       wins=e.wins, losses=e.losses, stopped=e.stopped)
        elif e.kind == "admitted":
            texts[e.instruction["id"]] = e.instruction["text"]
            if e.instruction["id"] in rows:
                rows[e.instruction["id"]]["fate"] = "admitted"
        elif e.kind == "rejected":
            texts[e.candidate_id] = e.text
            if e.candidate_id in rows:
                rows[e.candidate_id]["fate"] = e.stage
    archive = coevo.population.archive
    for cid, row in rows.items():
        parent = archive[parent_of[cid]]
        q_parent = env.quality(parent.text)
        q_cand = env.quality(texts[cid]) if cid in texts else None
        row.update(parent="seed" if parent.origin == "seed" else "admitted", q_parent=q_parent,
                   q_cand=q_cand,
                   delta=None if q_cand is None else round(q_cand - q_parent, 6))
    return list(rows.values()), parent_rollouts


def _row(step: int) -> dict:
    return {"step": step, "fate": None, "gate_rollouts": 0, "gate_passed": None, "db_rollouts": 0,
            "db_size": 0, "played": 0, "wins": None, "losses": None, "stopped": False}


def ci_dict(values: Sequence[float], against: Sequence[float] | None = None) -> dict:
    """The mean of ``values`` (minus ``against``, paired by seed), 95% interval over seeds."""
    from inspo.eval.stats import paired_difference

    return paired_difference(list(values), list(against or [0.0] * len(values))).to_dict()


def summarize_arm(arm: str, rows: list[dict]) -> dict:
    """Per bin: candidates, the share that passed the arm's rule (admitted, or refused only for
    want of a free slot) and the share admitted, gate and D_B rollouts per candidate; spend per
    candidate and per admitted truly-better candidate (the parents' rollouts included); for the
    paired arms the race's exact prediction beside what it did (:func:`race_check`)."""
    cands = [c for r in rows for c in r["candidates"]]
    out: dict = {"candidates": len(cands), "bands": {}}
    for name in BANDS:
        mine = [c for c in cands if band(c["delta"]) == name]
        out["bands"][name] = {
            "n": len(mine),
            "passed": _mean([c["fate"] in PASSED for c in mine]),
            "admitted": _mean([c["fate"] == "admitted" for c in mine]),
            "gate_rollouts": _mean([c["gate_rollouts"] for c in mine]),
            "db_rollouts": _mean([c["db_rollouts"] for c in mine]),
            "db_played": _mean([c["played"] for c in mine if c["wins"] is not None]),
        }
    total = sum(r["verification_rollouts"] for r in rows)
    good = sum(c["fate"] == "admitted" and band(c["delta"]) == "better" for c in cands)
    out["rollouts_per_candidate"] = total / len(cands) if cands else None
    out["rollouts_per_admitted_better"] = total / good if good else None
    out["race_check"] = race_check(cands, _config(arm))
    return out


def _kind(c: dict) -> tuple:
    return c["q_parent"], c["q_cand"], c["db_size"]


def _ahead(c: dict) -> bool:
    return not c["stopped"] and c["wins"] > c["losses"]


def race_check(cands: list[dict], cfg) -> list[dict]:
    """For each bin and parent (``seed``, or ``admitted``: a parent that was itself admitted on
    a D_B, whose outcomes on the questions of that D_B are reused, since a rollout's draw follows
    from the instruction's text and the question): the share of raced candidates that ended
    ahead, the mean exact prediction for them, and the same for the bin's most common (parent
    quality, candidate quality, D_B size), a typical candidate. Empty outside the paired arms."""
    out = []
    for name in BANDS:
        for parent in ("seed", "admitted"):
            raced = [c for c in cands if c["wins"] is not None and band(c["delta"]) == name
                     and c["parent"] == parent]
            if not raced:
                continue
            key = Counter(_kind(c) for c in raced).most_common(1)[0][0]
            same = [c for c in raced if _kind(c) == key]
            out.append({
                "band": name, "parent": parent, "n": len(raced),
                "measured": _mean([_ahead(c) for c in raced]),
                "predicted": _mean([predicted(c["q_cand"], c["q_parent"], c["db_size"],
                                              cfg.race_futility, cfg.race_chunk) for c in raced]),
                "typical": {"q_parent": key[0], "q_cand": key[1], "db_size": key[2], "n": len(same),
                            "predicted": predicted(key[1], key[0], key[2], cfg.race_futility,
                                                   cfg.race_chunk),
                            "measured": _mean([_ahead(c) for c in same])}})
    return out


def _config(arm: str):
    from inspo.core.config import CoEvolutionConfig

    return CoEvolutionConfig(**{**BASE, **ARMS[arm]})


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize(by_arm: dict[str, list[dict]]) -> dict:
    """Per arm: the candidate summary and I* against the seed; against the reference arm, paired
    by seed."""
    out: dict = {}
    reference = by_arm.get(REFERENCE)
    for arm, rows in by_arm.items():
        returned = [r["returned"] for r in rows]
        out[arm] = {**summarize_arm(arm, rows), "returned": ci_dict(returned)}
        if reference is not None and arm != REFERENCE:
            against = [r["returned"] for r in reference]
            out[arm]["returned_vs_reference"] = ci_dict(returned, against)
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_one(seeds: int, harm: str, summary: dict) -> None:
    print(f"\n{seeds} seeds per arm; harmful candidates with probability {harm}. Candidates that "
          "reached verification (gate or D_B), by true quality minus their parent's: better >= "
          "+0.05, level between, worse <= -0.05. passed: the arm's rule said yes (admitted, or "
          "no slot left); adm.: admitted.")
    print(f"  {'arm':18s} {'n b/l/w':>13s} {'passed b/l/w':>17s} {'adm. b/l/w':>17s} "
          f"{'D_B roll. b/w':>13s} {'gate b/w':>9s} {'roll./cand':>10s} {'roll./adm.b':>11s}")
    for arm, s in summary.items():
        b = s["bands"]
        print(f"  {arm:18s} {'/'.join(str(b[k]['n']) for k in BANDS):>13s} "
              f"{_triple(b, 'passed', '.2f'):>17s} {_triple(b, 'admitted', '.2f'):>17s} "
              f"{_pair(b, 'db_rollouts'):>13s} {_pair(b, 'gate_rollouts'):>9s} "
              f"{_fmt(s['rollouts_per_candidate'], '.1f'):>10s} "
              f"{_fmt(s['rollouts_per_admitted_better'], '.1f'):>11s}")
    print("  I* true quality minus the seed's, mean [95% interval over seeds]; paired by seed:")
    for arm, s in summary.items():
        r = s["returned"]
        line = f"    {arm:18s} {r['mean']:+.4f} [{r['low']:+.4f}, {r['high']:+.4f}]"
        if "returned_vs_reference" in s:
            d = s["returned_vs_reference"]
            line += f"   minus {REFERENCE}: {d['mean']:+.4f} [{d['low']:+.4f}, {d['high']:+.4f}]"
        print(line)
    print_predictions(summary)


def _triple(bands: dict, key: str, spec: str) -> str:
    return "/".join(_fmt(bands[k][key], spec) for k in BANDS)


def _pair(bands: dict, key: str) -> str:
    return "/".join(_fmt(bands[k][key], ".1f") for k in ("better", "worse"))


def print_predictions(summary: dict) -> None:
    print("  The race's exact prediction (admit_probability from the two true qualities and |D_B|, "
          "per-question outcomes sampled) beside the measured share of raced candidates ending "
          "ahead, by the parent raced (the seed, or an admitted instruction):")
    for arm, s in summary.items():
        for r in s["race_check"]:
            t = r["typical"]
            print(f"    {arm:18s} {r['band']:6s} {r['parent']:8s} n {r['n']:5d}: predicted "
                  f"{r['predicted']:.3f} measured {r['measured']:.3f} | typical "
                  f"{t['q_parent']:.2f} "
                  f"-> {t['q_cand']:.2f} on {t['db_size']} (n {t['n']}): predicted "
                  f"{t['predicted']:.3f} measured {t['measured']:.3f}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=500, help="runs per arm and harm (seeds 0..N-1)")
    p.add_argument("--arms", type=lambda s: s.split(","), default=list(ARMS),
                   help=f"comma-separated, from {', '.join(ARMS)} (default: all)")
    p.add_argument("--harm", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 0.5],
                   help="comma-separated probabilities that a candidate is harmful, one run each")
    add_common(p, threads=None, seed=False, json_help="write the per-run rows and the summary here")
    p.add_argument("--candidates", action="store_true",
                   help="keep every candidate's row in the JSON (large)")
    p.add_argument("--fresh", action="store_true",
                   help="the control: every verification call draws anew (no outcome reused)")
    p.add_argument("--quiet", action="store_true", help="no printed table")
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 seeds")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds = 3
    return _rules().check_args(p, args, ARMS)


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    from tqdm.auto import tqdm

    info = start("benchmarks/learning/race_synthetic.py", argv, device="cpu", quiet=args.quiet)
    started = time.perf_counter()
    runs = {str(harm): {arm: [run_one(arm, seed, harm, args.fresh)
                              for seed in tqdm(range(args.seeds), desc=f"{arm} harm {harm}",
                                               disable=args.quiet)]
                        for arm in args.arms}
            for harm in args.harm}
    summary = {harm: summarize(by_arm) for harm, by_arm in runs.items()}
    if not args.candidates:
        runs = {h: {a: [{k: v for k, v in r.items() if k != "candidates"} for r in rows]
                    for a, rows in by_arm.items()} for h, by_arm in runs.items()}
    result = {"provenance": info, "seeds": args.seeds, "fresh": args.fresh, "steps": STEPS,
              "base": BASE,
              "arms": {a: ARMS[a] for a in args.arms}, "gap": GAP, "runs": runs,
              "summary": summary, "wall_s": time.perf_counter() - started}
    write_result(args.json, result)
    if not args.quiet:
        for harm, s in summary.items():
            print_one(args.seeds, harm, s)
        print(f"\nwall {result['wall_s']:.0f} s")
    return result


if __name__ == "__main__":
    main()
