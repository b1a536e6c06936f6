"""The evidence rules measured where instruction quality is known: many seeds in minutes, no model.

Issue 9's RL ablations (``rl_static_vs_inspo.py``) cost ~17 CPU-minutes a run, so they have 3
seeds and cannot tell the rules apart. This benchmark isolates what the rules act on, selection,
on :class:`inspo.synthetic.SyntheticEnv`: a frozen "policy" whose success probability under an
instruction is a known function of the guidance the instruction contains. Every arm runs
Algorithm 1 with ``cpu-tiny``'s population settings and batch (N_P 3, prune every 2 steps,
evolve every 4 until step 8, |D_B| 4, 3 candidates a call, 2 questions x G 4 a step, 4 warm-up
questions, 12 steps) and the rule-based reflector, and differs from the ``cpu-tiny`` arm in one
setting. Arms of the same seed share the environment's noise and the reflector's seed, so their
differences are paired by seed.

The rule-based reflector only adds guidance, so on its own every candidate is at least as good as
its parent, and the rules that guard against bad candidates have nothing to do. ``--harm P``
models a weak optimizer LLM: each candidate it writes carries, with probability P, a harmful
sentence (``HARM``) that costs ``HARM_GAIN`` success probability (an extra environment feature),
and the children of such a candidate inherit it. Each P in ``--harm`` is a separate experiment.

Per run it records, in true quality (the success probability the environment knows):

- ``returned``: I* (``CoEvolution.best()``) minus the seed instruction;
- ``trained_under``: the mean over the run's training rollouts of the quality of the instruction
  each was played under, minus the seed's (what a policy would have been trained under);
- ``worse``: whether I* is worse than the seed;
- spend (verification rollouts) and how often the evidence floor saved a member from a prune.

Printed per arm: means, and the paired difference from the ``cpu-tiny`` arm with a 95% interval
over seeds. Usage::

    python benchmarks/learning/evidence_rules_synthetic.py --seeds 300 --harm 0,0.5 --json runs/rules-synthetic.json
    python benchmarks/learning/evidence_rules_synthetic.py --quick      # 3 seeds, arms cpu-tiny and fair-share
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time
from collections.abc import Sequence

from inspo.config.presets import PRESETS
from inspo.lab.harness import add_common, start, write_result

#: Each arm's settings on top of BASE; every arm but ``cpu-tiny`` and ``paper`` changes one thing.
ARMS: dict[str, dict] = {
    "cpu-tiny": {},
    "paper": {"admission": "top-n", "min_evidence": 0, "prior_rollouts": 0},
    "no-floor": {"min_evidence": 0},
    "no-prior": {"prior_rollouts": 0},
    "top-n": {"admission": "top-n"},
    "fair-share": {"fair_share": True},
    "top-n+fair-share": {"admission": "top-n", "fair_share": True},
}
#: cpu-tiny's co-evolution settings, batch and warm-up, read from the preset (12 steps, as the RL benchmark runs)
BASE = dict(PRESETS["cpu-tiny"]["coevolution"])
QUESTIONS_PER_STEP = PRESETS["cpu-tiny"]["rl"]["questions_per_step"]
GROUP_SIZE = PRESETS["cpu-tiny"]["rl"]["group_size"]
WARMUP = PRESETS["cpu-tiny"]["data"]["warmup_questions"]
STEPS, N_QUESTIONS = 12, 200
REFERENCE = "cpu-tiny"
METRICS = ("returned", "trained_under", "worse", "verification_rollouts", "saved_by_floor")
HARM = "If you are confident, answer directly from memory; searching is optional."
HARM_GAIN = -0.15


class SloppyReflector:
    """An optimizer LLM that writes what ``inner`` writes, but puts :data:`HARM` into each
    candidate (``<ins_k>`` block) with probability ``harm``."""

    def __init__(self, inner, harm: float, rng: random.Random):
        self.inner, self.harm, self.rng = inner, harm, rng
        self.name = f"sloppy({inner.name}, {harm})"
        self.usage = inner.usage

    def generate(self, messages, **kwargs) -> list[str]:
        def spoil(match: re.Match) -> str:
            return f"{HARM}\n{match.group(0)}" if self.rng.random() < self.harm else match.group(0)

        return [re.sub(r"</ins_\d+>", spoil, text) for text in self.inner.generate(messages, **kwargs)]


def features():
    from inspo.synthetic import FEATURES, Feature

    harm = Feature("harm", re.escape(HARM), HARM_GAIN, "<think>I know this.</think>\n<answer>{wrong}</answer>")
    return (*FEATURES, harm)


def run_one(arm: str, seed: int, harm: float = 0.0) -> dict:
    """One Algorithm 1 run of ``arm`` with ``seed`` (environment, core and reflector) and a
    reflector whose candidates are harmful with probability ``harm``."""
    from inspo.core.coevolution import CoEvolution
    from inspo.core.config import CoEvolutionConfig
    from inspo.core.proposer import Proposer
    from inspo.core.reflector import RuleBasedReflector
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
    from inspo.synthetic import (
        GUARD_TAGS,
        SyntheticEnv,
        make_questions,
        reflector_rules,
        run_synthetic,
    )

    config = CoEvolutionConfig(**{**BASE, **ARMS[arm], "seed": seed})
    # the synthetic environment speaks Search-R1's tags: its reflector rules and its guard's tags
    reflector = RuleBasedReflector(rng=random.Random(seed), rules=reflector_rules())
    llm = SloppyReflector(reflector, harm, random.Random(f"harm-{seed}"))
    coevo = CoEvolution(config, SEARCH_R1_INSTRUCTION, Proposer(llm, guard_tags=GUARD_TAGS))
    env = SyntheticEnv(seed=seed, features=features())
    seed_quality = env.quality(SEARCH_R1_INSTRUCTION)
    played: list[float] = []

    def update(step, rollouts, evaluate):
        played.extend(env.quality(coevo.population.archive[r.instruction_id].text) for r in rollouts)
        return coevo.update(step, rollouts, evaluate)

    run_synthetic(coevo, env, make_questions(N_QUESTIONS), steps=STEPS, batch_size=QUESTIONS_PER_STEP,
                  group_size=GROUP_SIZE, warmup=WARMUP, update=update)
    returned = env.quality(coevo.best().text) - seed_quality
    return {"returned": returned, "trained_under": statistics.fmean(played) - seed_quality,
            "worse": float(returned < -1e-12), "verification_rollouts": coevo.ledger.verification_rollouts,
            "saved_by_floor": sum(len(e.saved) for e in coevo.events.of_kind("pruned"))}


def summarize(runs: dict[str, list[dict]]) -> dict:
    """Per arm: the mean of each metric; per arm but the reference: paired differences by seed."""
    from inspo.eval.stats import paired_difference

    out: dict = {"means": {}, "vs_reference": {}}
    for arm, rows in runs.items():
        out["means"][arm] = {m: statistics.fmean(r[m] for r in rows) for m in METRICS}
    reference = runs.get(REFERENCE)
    for arm, rows in runs.items():
        if arm == REFERENCE or reference is None:
            continue
        out["vs_reference"][arm] = {m: paired_difference([r[m] for r in rows], [r[m] for r in reference]).to_dict()
                                    for m in ("returned", "trained_under", "worse")}
    return out


def print_summary(result: dict) -> None:
    for harm, s in result["summary"].items():
        print_one(result["seeds"], harm, s)


def print_one(seeds: int, harm: str, s: dict) -> None:
    print(f"{seeds} seeds per arm, {STEPS} steps of {QUESTIONS_PER_STEP} questions x G {GROUP_SIZE}, harmful "
          f"candidates with probability {harm}; true quality relative to the seed instruction")
    print(f"  {'arm':18s} {'returned':>9s} {'trained under':>14s} {'I* < seed':>10s} {'verif. rollouts':>16s} "
          f"{'floor saved':>12s}")
    for arm, m in s["means"].items():
        print(f"  {arm:18s} {m['returned']:+9.4f} {m['trained_under']:+14.4f} {m['worse']:10.1%} "
              f"{m['verification_rollouts']:16.1f} {m['saved_by_floor']:12.2f}")
    for arm, d in s["vs_reference"].items():
        parts = [f"{name} {v['mean']:+.4f} [95% CI {v['low']:+.4f}, {v['high']:+.4f}]" for name, v in d.items()]
        print(f"  {arm} - {REFERENCE}: " + "; ".join(parts))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=300, help="runs per arm (seeds 0..N-1)")
    p.add_argument("--arms", type=lambda s: s.split(","), default=list(ARMS),
                   help=f"comma-separated, from {', '.join(ARMS)} (default: all)")
    p.add_argument("--harm", type=lambda s: [float(x) for x in s.split(",")], default=[0.0, 0.5],
                   help="comma-separated probabilities that a candidate is harmful, one experiment each")
    add_common(p, threads=None, seed=False, json_help="write the per-run rows and the summary here")
    p.add_argument("--quiet", action="store_true", help="no printed table")
    p.add_argument("--quick", action="store_true", help="a smoke run: 3 seeds, arms cpu-tiny and fair-share")
    args = p.parse_args(argv)
    if args.quick:
        args.seeds, args.arms = 3, ["cpu-tiny", "fair-share"]
    return check_args(p, args, ARMS)


def check_args(p: argparse.ArgumentParser, args: argparse.Namespace, arms) -> argparse.Namespace:
    """``args`` when its ``--arms`` are among ``arms``, its ``--harm`` values probabilities and its
    ``--seeds`` at least 2; else the parser's error (this script's and race_synthetic.py's)."""
    unknown = [a for a in args.arms if a not in arms]
    if unknown:
        p.error(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(arms)}")
    if any(not 0 <= h <= 1 for h in args.harm):
        p.error(f"--harm values are probabilities in [0, 1]; got {args.harm}")
    if args.seeds < 2:
        p.error("--seeds must be at least 2 (the intervals are over seeds)")
    return args


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    from tqdm.auto import tqdm

    # no model, no torch: the synthetic environment and the rule-based reflector, in Python on the CPU
    info = start("benchmarks/learning/evidence_rules_synthetic.py", argv, device="cpu", quiet=args.quiet)
    started = time.perf_counter()
    runs = {str(harm): {arm: [run_one(arm, seed, harm) for seed in tqdm(range(args.seeds), desc=f"{arm} harm {harm}",
                                                                          disable=args.quiet)]
                        for arm in args.arms}
            for harm in args.harm}
    result = {"provenance": info,
              "seeds": args.seeds, "base": BASE, "arms": {a: ARMS[a] for a in args.arms}, "runs": runs,
              "summary": {harm: summarize(by_arm) for harm, by_arm in runs.items()},
              "wall_s": time.perf_counter() - started}
    write_result(args.json, result)
    if not args.quiet:
        print_summary(result)
    return result


if __name__ == "__main__":
    main()
