"""What co-evolution buys where the instruction can matter: the ``multihop`` preset's arms, paired
by seed and per held-out question (issue 23, item 2).

Arms (each ``inspo.training.run.run_training`` on the same preset, seed, data and steps):

- ``static-weak``: static GRPO under the weak seed (``@weak``: never says a question may need
  several searches);
- ``static-sr1``: static GRPO under Search-R1's instruction (App. F);
- ``inspo-weak``: INSPO from the weak seed;
- ``pre-policy-weak``: the instruction evolved with the frozen policy first, then static GRPO
  under it (separates co-evolution from prompt search);
- ``untrained``: the base policy, greedy, under both seeds (no training; the same for every seed).

Every run ends with the library's held-out test (greedy, the trained policy, the test questions
no choice saw): static arms under their seed, INSPO and pre-policy under the instruction they
return and under the weak seed, so "how much of INSPO's gain stays when its trained policy plays
the seed" (policy versus prompt) is a comparison of its own. Scores are reported on the two-hop
test questions (the headline: where the paper's effect lives) and on the single-hop ones.
Per arm the script also keeps, step by step, the training reward, the prompt length and the
searches per question (the paper's Fig. 2), the evidence rules' and the guard's counts from the
events, and what the run spent.

One JSON per (arm, seed) under ``--out``/results: an arm whose JSON exists is skipped, and a
run killed mid-way resumes from its last checkpoint (``rl.save_steps``) when invoked again, so a
campaign can run in pieces of a few minutes (``benchmarks/learning/gpu_campaign.py``).

Usage::

    python benchmarks/learning/multihop_coevolution.py --seed 0 --arms static-weak,inspo-weak --out runs/mh
    python benchmarks/learning/multihop_coevolution.py --combine runs/mh/results --json runs/mh/combined.json
    python benchmarks/learning/multihop_coevolution.py --quick --out /tmp/mh   # a smoke run (tiny random model)

``--combine`` pools the seeds: for each comparison, on each hop count, the per-seed paired
differences, the mean over seeds with a 95% interval across seeds (Student's t), the pooled
per-question difference, and the power: the smallest effect the seeds could detect (80% power,
two-sided 5%) and the seeds a +0.05 EM effect would need, from the seed-to-seed SD measured.

While the arms run, the library's lines (each training step, each optimizer round, the final
choice, the held-out test and each greedy scoring) go to stderr with the time, one per line: an arm-seed is up to two
hours of work that would otherwise print nothing until its result.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo.lab.harness import add_common, load_script, start, write_result

# arm -> (mode, seed instruction as a config names it)
ARMS: dict[str, tuple[str, str]] = {
    "static-weak": ("static", "@weak"),
    "static-sr1": ("static", "@search-r1"),
    "inspo-weak": ("inspo", "@weak"),
    "pre-policy-weak": ("pre-policy", "@weak"),
}
ALL_ARMS = ("untrained", *ARMS)
# (a, b): a - b over per-question test scores; names are arm[:which score]
COMPARISONS = (
    ("inspo-weak", "static-weak"),            # the claim: co-evolution beats static GRPO from the same seed
    ("inspo-weak", "static-sr1"),             # ... and a hand-written instruction
    ("inspo-weak", "pre-policy-weak"),        # co-evolution against prompt search, then RL
    ("inspo-weak:seed", "static-weak"),       # the policies alone, both under the weak seed
    ("inspo-weak", "inspo-weak:seed"),        # the evolved instruction on INSPO's own policy
    ("static-sr1", "static-weak"),            # does the seed instruction matter to static GRPO?
    ("static-weak", "untrained:weak"),        # does static GRPO learn here at all?
    ("inspo-weak", "untrained:weak"),
)
HOPS = ("2", "1")
EFFECT = 0.05  # the effect size the issue asks the seeds to be sized for (EM)
UNTRAINED = {"weak": "@weak", "search-r1": "@search-r1"}  # the base policy's scorings: name -> seed
ALL_QUESTIONS = 1_000_000  # data.max_test_questions for an extra test set: every question of it
QUICK_EXTRA = 4  # ... under --quick, its first few (a smoke run checks the plumbing, not the scores)
QUICK = [
    "model.name_or_path=tiny-qwen2", "model.lora=false", "rl.max_response_tokens=8", "rl.max_turns=2",
    "rl.questions_per_step=2", "rl.group_size=2", "rl.micro_batch_size=4", "rl.save_steps=1",
    "coevolution.evolve_every=1", "coevolution.prune_every=1", "coevolution.evolve_until=2",
    "coevolution.validation_size=2", "coevolution.population_size=2", "coevolution.min_evidence=1",
    "coevolution.prior_rollouts=1", "data.max_eval_questions=2", "data.max_test_questions=6",
    "data.warmup_questions=2", "offline_steps=2",
]


@dataclass(frozen=True)
class Setting:
    """What a campaign compares, and on which test questions (this script's is :data:`MULTIHOP`;
    ``calculator_campaign.py`` has another): the arms (``arm -> (mode, seed instruction)``), the
    seeds the untrained policy is scored under, the comparisons (``a - b`` over per-question
    test scores), the groups the test questions are reported in (``group(question)``, in
    ``groups`` order), extra test sets scored after each run (``{group: data source}``: the final
    agent, greedy, on questions phrased otherwise), the preset, the smoke run's settings and the
    effect the seeds are sized for."""

    script: str
    preset: str
    arms: dict[str, tuple[str, str]]
    untrained: dict[str, str]
    comparisons: tuple[tuple[str, str], ...]
    groups: tuple[str, ...]
    group: Callable[[Any], str]
    quick: tuple[str, ...]
    extra_tests: dict[str, str] = field(default_factory=dict)
    effect: float = EFFECT
    quick_extra: tuple[str, ...] = ()
    unit: str = ""
    """Printed after a group's name (``"-hop"``: "2-hop")."""
    untrained_labels: dict[str, str] = field(default_factory=dict)
    """The untrained policy's scorings' names (default ``untrained:<seed name>``)."""
    crosses: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    """``name -> (arm, policies)``: ``arm``'s returned instruction (same seed) played by each of
    ``policies`` (``untrained``: the base model; else an arm's trained policy), scored as
    ``policy@arm``: whether a gain is the instruction's or the policy's."""
    per_seed: Callable[[str, int], str] | None = None
    """An arm's seed instruction that differs by seed (``calculator_campaign.py``'s ``gepa``: the
    instruction GEPA returned for that seed): ``per_seed(name, seed)`` gives its text, and returns
    any other name as it is."""
    arm_settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """An arm's own config overrides (``calculator_campaign.py``'s ``inspo-evidence``: the evidence
    settings), after the arm's mode and seed and before every ``--set``, which applies to all arms."""

    @property
    def all_arms(self) -> tuple[str, ...]:
        return ("untrained", *self.arms, *self.crosses)


MULTIHOP = Setting(script="benchmarks/learning/multihop_coevolution.py", preset="multihop", arms=ARMS, untrained=UNTRAINED,
                   comparisons=COMPARISONS, groups=HOPS, group=lambda q: str(int(q.meta.get("hops", 0) or 0)),
                   quick=tuple(QUICK), unit="-hop", untrained_labels={"weak": "untrained:weak",
                                                                      "search-r1": "untrained:sr1"})


def _sibling(name: str):
    """benchmarks/learning/<name>.py as a module (this folder is no package)."""
    return load_script(Path(__file__).with_name(f"{name}.py"), f"inspo_benchmark_{name}")


def parse_args(argv: Sequence[str] | None, setting: Setting = MULTIHOP) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default=setting.preset)
    p.add_argument("--steps", type=int, default=0, help="training steps per arm (0: the preset's)")
    add_common(p, seed_help="rl.seed of every arm (it seeds co-evolution too)",
               json_help="--combine: also write the pooled result here")
    p.add_argument("--arms", default=",".join(setting.all_arms), help=f"comma-separated, of {', '.join(setting.all_arms)}")
    p.add_argument("--set", action="append", default=[], help="extra config override (every arm)")
    p.add_argument("--out", default=f"runs/{setting.preset}-bench", help="run folders and results/ go here")
    p.add_argument("--combine", metavar="DIR_OR_JSON", nargs="+", help="pool the results of several seeds")
    p.add_argument("--markdown", metavar="PATH", help="--combine: also write the tables in Markdown here")
    p.add_argument("--quick", action="store_true", help="tiny random model, 2 steps: a smoke run")
    args = p.parse_args(argv)
    args.arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in args.arms if a not in setting.all_arms]
    if unknown or not args.arms:
        p.error(f"--arms: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(setting.all_arms)}")
    if args.steps < 0:
        p.error("--steps must be >= 0")
    if args.quick:
        args.steps = min(args.steps or 2, 2)
        args.set = [*setting.quick, *args.set]
    return args


def overrides(args: argparse.Namespace, arm: str, setting: Setting = MULTIHOP) -> list[str]:
    mode, seed_instruction = setting.arms.get(arm, ("static", "@weak"))
    if setting.per_seed is not None:
        seed_instruction = setting.per_seed(seed_instruction, args.seed)
    steps = [f"rl.steps={args.steps}"] if args.steps else []
    return [f"mode={mode}", f"seed_instruction={seed_instruction}", f"rl.seed={args.seed}", *steps,
            f"output_dir={run_dir(args, arm)}", *setting.arm_settings.get(arm, ()), *args.set]


def run_dir(args: argparse.Namespace, arm: str) -> Path:
    return Path(args.out) / "runs" / f"{arm}-s{args.seed}"


def result_path(out: str | Path, arm: str, seed: int) -> Path:
    return Path(out) / "results" / f"{arm}-s{seed}.json"


def has_checkpoint(directory: Path) -> bool:
    """Whether a killed run in ``directory`` can be resumed: a GRPO checkpoint, or the state an
    offline stage (pre-/post-policy) saves after each of its steps."""
    return any(p.is_dir() and p.name.startswith("checkpoint-") for p in directory.glob("checkpoint-*")) or any(
        (directory / stage / "inspo_state.json").is_file() for stage in ("pre-policy", "post-policy"))


def test_groups(config, setting: Setting = MULTIHOP) -> dict[str, str]:
    """The group of every test question the runs are scored on (``setting.group``)."""
    from inspo.envs.build import build_env, load_questions

    data = config.data
    questions = load_questions(build_env(config), data.eval, data.test_split, data.max_test_questions,
                               field_name="data.eval", max_hops=data.max_hops)
    return {q.id: setting.group(q) for q in questions}


def test_hops(config) -> dict[str, int]:
    """Hop count of every test question the runs are scored on (from the questions' metadata)."""
    return {qid: int(group) for qid, group in test_groups(config, MULTIHOP).items()}


def extra_scores(config, policy: str, texts: Sequence[str], source: str,
                 limit: int = ALL_QUESTIONS) -> tuple[list[str], list[list[float]]]:
    """``policy``'s greedy rewards under each of ``texts`` on another test set (``source``: a file,
    or ``SOURCE@SPLIT``; its first ``limit`` questions), with ``config``'s agent: an arm's final
    agent on questions phrased otherwise. Returns the question ids and one reward list per text."""
    from dataclasses import replace

    data_source, _, split = source.partition("@")
    scored = replace(config, data=replace(config.data, eval=data_source, test_split=split or "test",
                                          eval_split="dev" if (split or "test") != "dev" else "train",
                                          max_test_questions=limit))
    return _sibling("rl_static_vs_inspo").greedy_test_scores(scored, policy, texts)


def extra_limit(args: argparse.Namespace) -> int:
    """How many questions of each extra test set a run plays (:data:`QUICK_EXTRA` under ``--quick``)."""
    return QUICK_EXTRA if args.quick else ALL_QUESTIONS


def run_arm(arm: str, args: argparse.Namespace, setting: Setting = MULTIHOP) -> dict:
    """One training run (resumed when a checkpoint of it exists); its held-out test scores per
    question, spend, Fig. 2 curves and event counts; and, for each extra test set, its final agent
    scored there (greedy, under the instruction it returns and under its seed)."""
    from inspo.config.train import resolve
    from inspo.training.run import run_training

    rl = _sibling("rl_static_vs_inspo")
    config = resolve(args.preset, None, overrides(args, arm, setting))
    out = Path(config.output_dir)
    resume = has_checkpoint(out)
    if out.exists() and not resume:  # killed before its first checkpoint or saved step: nothing to resume from
        shutil.rmtree(out)
    started = time.perf_counter()
    summary = run_training(config, resume=resume, progress=False)
    final = summary.evaluation or {}
    if not final.get("test_rewards"):
        raise SystemExit(f"the {arm} run scored no test questions: is data.max_test_questions 0?")
    led = summary.ledger
    result = {
        "arm": arm, "mode": config.mode, "seed_instruction": config.seed_instruction, "resumed": resume,
        "wall_s": time.perf_counter() - started, "run_dir": str(out),
        "returned_id": final["returned_id"], "returned_is_seed": final["seed_returned"],
        "returned_text": final["returned_text"], "test_question_ids": final["test_question_ids"],
        "test_rewards": final["test_rewards"],
        "rollouts": {k: led.get(k, 0) for k in ("training_rollouts", "verification_rollouts", "warmup_rollouts")},
        "selection_rollouts": summary.selection_rollouts, "optimizer_calls": led.get("optimizer_calls", 0),
        "curves": rl.curves(out / "metrics.jsonl"), "events": rl.rule_counts(out / "events.jsonl"),
        "seed_id": final.get("seed_id", ""),  # run-seed: a pre-policy run's test played the config's seed
    }
    for name, stage in summary.stages.items():  # pre-/post-policy: the offline stage's spend counts too
        spent = stage.get("ledger", {})
        result["rollouts"]["offline_rollouts"] = result["rollouts"].get("offline_rollouts", 0) + spent.get(
            "training_rollouts", 0)
        for key in ("verification_rollouts", "warmup_rollouts"):
            result["rollouts"][key] += spent.get(key, 0)
        result["optimizer_calls"] += spent.get("optimizer_calls", 0)
        result["selection_rollouts"] += stage.get("selection_rollouts", 0)
        result.setdefault("stage_ledgers", {})[name] = spent
    offline = out / config.mode / "events.jsonl"  # pre-/post-policy: the offline stage evolved the instruction
    if config.mode in ("pre-policy", "post-policy") and offline.is_file():
        result["events"] = {k: v + rl.rule_counts(offline).get(k, 0) for k, v in result["events"].items()}
    for group, source in setting.extra_tests.items():
        texts = [final["returned_text"], ""] if config.mode in ("inspo", "pre-policy") else [""]
        ids, rewards = extra_scores(config, str(out / "model"), texts, source, extra_limit(args))
        result.setdefault("extra", {})[group] = {
            "question_ids": ids, "rewards": dict(zip(["returned", "seed"] if len(texts) == 2 else ["seed"], rewards,
                                                     strict=True))}
    return result


def run_untrained(args: argparse.Namespace, setting: Setting = MULTIHOP) -> dict:
    """The base policy, greedy, under each of ``setting.untrained`` (name -> seed), on the runs'
    test questions (their own evaluation) and on each extra test set."""
    from inspo.config.train import resolve
    from inspo.envs.build import build_env, seed_of

    started = time.perf_counter()
    config = resolve(args.preset, None, overrides(args, "untrained", setting))
    env = build_env(config)
    texts = [seed_of(env, spec) for spec in setting.untrained.values()]
    rl = _sibling("rl_static_vs_inspo")
    ids, rewards = rl.greedy_test_scores(config, "", texts)
    result = {"arm": "untrained", "wall_s": 0.0, "test_question_ids": ids,
              "test_rewards": dict(zip(setting.untrained, rewards, strict=True))}
    for group, source in setting.extra_tests.items():
        extra_ids, extra = extra_scores(config, "", texts, source, extra_limit(args))
        result.setdefault("extra", {})[group] = {"question_ids": extra_ids,
                                                 "rewards": dict(zip(setting.untrained, extra, strict=True))}
    result["wall_s"] = time.perf_counter() - started
    return result


def run_cross(name: str, args: argparse.Namespace, setting: Setting) -> dict:
    """``setting.crosses[name]``: one arm's returned instruction (its result JSON of this seed)
    played greedily by other policies of the same seed, on the runs' test questions and on each
    extra test set."""
    from inspo.config.train import resolve

    arm, policies = setting.crosses[name]
    source = result_path(args.out, arm, args.seed)
    if not source.is_file():
        raise SystemExit(f"{name} seed {args.seed} plays {arm}'s instruction: run --arms {arm} first (no {source})")
    text = json.loads(source.read_text())["returned_text"]
    started = time.perf_counter()
    config = resolve(args.preset, None, overrides(args, arm, setting))
    result: dict = {"arm": name, "instruction_arm": arm, "instruction_text": text, "wall_s": 0.0,
                    "test_rewards": {}, "extra": {group: {"rewards": {}} for group in setting.extra_tests}}
    for policy in policies:
        model = "" if policy == "untrained" else str(run_dir(args, policy) / "model")
        if model and not Path(model).is_dir():
            raise SystemExit(f"{name} seed {args.seed}: no trained policy of {policy} in {model}; run --arms {policy} first")
        ids, (rewards,) = _sibling("rl_static_vs_inspo").greedy_test_scores(config, model, [text])
        result["test_question_ids"], result["test_rewards"][policy] = ids, rewards
        for group, data in setting.extra_tests.items():
            data_ids, (extra,) = extra_scores(config, model, [text], data, extra_limit(args))
            result["extra"][group]["question_ids"] = data_ids
            result["extra"][group]["rewards"][policy] = extra
    result["wall_s"] = time.perf_counter() - started
    return result


def main(argv: Sequence[str] | None = None, setting: Setting = MULTIHOP) -> dict:
    args = parse_args(argv, setting)
    if args.combine:
        combined = combine(load_results(args.combine), setting)
        combined["provenance"] = start(setting.script, argv, device="cpu")  # the pooling's own
        print_combined(combined, setting)
        write_result(args.json, combined)
        if args.markdown:
            Path(args.markdown).write_text(_sibling("campaign_pooling").markdown(combined, setting), encoding="utf-8")
            print(f"tables: {args.markdown}")
        return combined
    from inspo.config.train import resolve

    config = resolve(args.preset, None, overrides(args, next(iter(setting.arms)), setting))
    info = start(setting.script, argv, threads=args.threads, dtype=config.model.dtype)
    with _lines_to_stderr():
        return _run_arms(args, setting, info, test_groups(config, setting))


@contextlib.contextmanager
def _lines_to_stderr():
    """The ``inspo`` loggers' INFO lines on stderr, stamped with the time, while the arms run (the
    runs go without tqdm bars, which would fill a log file); the handler goes when they end."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    logger = logging.getLogger("inspo")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _run_arms(args: argparse.Namespace, setting: Setting, info: dict, groups: dict) -> dict:
    """Each arm of ``args.arms`` not done before, in the setting's order; its JSON written when it ends."""
    done = {}
    for arm in [a for a in setting.all_arms if a in args.arms]:
        path = result_path(args.out, arm, args.seed)
        if path.is_file():
            print(f"{arm} seed {args.seed}: done before ({path})", flush=True)
            done[arm] = json.loads(path.read_text())
            continue
        print(f"{arm} seed {args.seed}: running", flush=True)
        result = (run_untrained(args, setting) if arm == "untrained" else
                  run_cross(arm, args, setting) if arm in setting.crosses else run_arm(arm, args, setting))
        result.update(seed=args.seed, preset=args.preset, steps=args.steps, set=args.set, provenance=info,
                      test_groups=[groups[q] for q in result["test_question_ids"]])
        if arm in setting.arm_settings:
            result["arm_settings"] = list(setting.arm_settings[arm])
        if setting is MULTIHOP:  # results of this script before the groups were general
            result["test_hops"] = [int(g) for g in result["test_groups"]]
        write_result(path, result)  # after each arm: a stopped invocation keeps it
        means = {k: round(statistics.fmean(v), 4) for k, v in result["test_rewards"].items()}
        print(json.dumps({"arm": arm, "seed": args.seed, "wall_s": round(result["wall_s"], 1), "test": means}),
              flush=True)
        done[arm] = result
    return done


# ----------------------------------------------------------------------------- pooling (campaign_pooling.py)
def load_results(paths: Sequence[str]) -> list[dict]:
    return _sibling("campaign_pooling").load_results(paths)


def scores(result: dict, setting: Setting = MULTIHOP) -> dict[str, list[float]]:
    return _sibling("campaign_pooling").scores(result, setting)


def combine(results: Sequence[dict], setting: Setting = MULTIHOP) -> dict:
    return _sibling("campaign_pooling").combine(results, setting)


def print_combined(c: dict, setting: Setting = MULTIHOP) -> None:
    _sibling("campaign_pooling").print_combined(c, setting)

if __name__ == "__main__":
    main()
