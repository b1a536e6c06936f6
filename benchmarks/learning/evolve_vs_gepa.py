"""Instruction-only INSPO (``inspo evolve``) versus the ``gepa`` package's optimizer at an
equal rollout budget, on the same frozen policy and task (benchmark 4, second half).

Shared by both arms: the preset's policy (loaded once, never trained), environment (Search-R1's
retriever, top-k and reward), agent settings, training questions and optimizer LLM
(``config.optimizer``; by default the offline rule-based reflector, with Search-R1's rules), and
the candidates asked per optimizer call (``--candidates``). INSPO runs first with the preset's population settings and evidence rules, evolving every 4
steps for ``--evolutions`` evolutions (the initial population aside; ``--steps`` is 4 x
(evolutions + 1) unless given), at most ``--max-rounds`` generate-and-verify rounds each (the
paper's 5), verifying on a D_B of ``--db-size`` questions (the warm-up plays as many, so the
initial population's D_B is full too). It then (``final_choice: dev``, as in ``cpu-tiny``)
chooses its returned instruction among its final population and the seed on ``--val-size`` dev
questions; every policy rollout it plays (step rollouts + verification + warm-up + that choice)
is counted, and the total becomes GEPA's ``max_metric_calls`` (one metric call = one rollout).
GEPA reflects either through INSPO's App. E reflection prompt and guard (``--gepa-prompt inspo``,
the default: the same reflection step on both sides, only the search differs; the only choice
with the rule-based reflector, which reads App. E prompts only) or through its own prompt
(``--gepa-prompt gepa``, for a real LLM). GEPA's Pareto validation set is ``--val-size``
training questions; its training set is the rest. ``--no-tag-check`` turns INSPO's (and the
``inspo`` prompt's) protocol-tag check off (``coevolution.guard_tags=[]``; the evidence rules
stay on; by default the check keeps the environment's required tags, ``<search>`` and
``<answer>``); INSPO's answer-leak guard stays on (``coevolution.leak_guard``), GEPA has none.

Then the seed, INSPO's returned instruction and GEPA's best are scored with greedy decoding on
the same ``--test-questions`` questions of the test split (never seen by either choice; by
default 120, from ``world`` rebuilt with a quarter of its questions held out, ``--test-fraction``);
a text two arms returned (INSPO's dev choice may return the seed) is played once for both, and
``test_shared`` in the JSON names each such arm.
Printed and written to ``--json``: each instruction's test score and its paired difference from
the seed (mean and 95% interval over questions), rollouts and optimizer calls per arm, the
wall-time ratio GEPA / INSPO, what became of INSPO's candidates (refusals by stage, the leaks
refused, parser fallbacks by kind, candidates cut at the completion limit, the D_B sizes used),
GEPA's proposer rejections by kind, what INSPO's guard and leak check would have made of each
proposal GEPA evaluated (``proposal_yield``; GEPA has neither), the test questions whose gold
answer each winner names and the differences without them (``without_named``: a gain that is not
an answer copied into the instruction survives it), and the provenance (commit, command, library
versions).

Usage::

    # the issue-23 rematch, for S in 0 1 2: the 0.5B local LLM as both optimizers' reflector,
    # with the tag check (first line) and without it (second line)
    OMP_NUM_THREADS=1 python benchmarks/learning/evolve_vs_gepa.py --threads 1 --gepa-prompt gepa \
        --set optimizer.kind=local --set optimizer.local_model_path=qwen2.5-coder-0.5b \
        --set coevolution.optimizer_max_tokens=400 --set coevolution.optimizer_temperature=0.7 \
        --seed S --out runs/gepa-R-sS --json runs/gepa-R-sS.json
    OMP_NUM_THREADS=1 python benchmarks/learning/evolve_vs_gepa.py ... --no-tag-check --seed S \
        --out runs/gepa-R-notag-sS --json runs/gepa-R-notag-sS.json
    # a stopped seed: the same command + --resume continues INSPO's saved arm (only its final
    # choice is played again) and GEPA's from its last iteration, then runs the test
    python benchmarks/learning/evolve_vs_gepa.py ... --seed S --out runs/gepa-R-sS --resume
    # issue 33's arm 5, on the calculator (the generated test split, 300 problems; the campaign's
    # optimizer, calculator_campaign.OPTIMIZER); a quick check of this path ran with --quick --preset
    # calculator --test-fraction 0
    python benchmarks/learning/evolve_vs_gepa.py --preset calculator --test-fraction 0 --test-questions 300 \
        --threads 2 --gepa-prompt gepa --evolutions 2 --set seed_instruction=@calculator \
        --set optimizer.kind=local --set optimizer.local_model_path=qwen2.5-coder-1.5b \
        --set coevolution.optimizer_temperature=0.7 --set coevolution.optimizer_max_tokens=700 \
        --set coevolution.answers_per_call=4 --seed S --out runs/gepa-calc-sS --json runs/gepa-calc-sS.json
    python benchmarks/learning/evolve_vs_gepa.py --threads 2                  # the rule-based reflector
    python benchmarks/learning/evolve_vs_gepa.py --quick      # a smoke run (tiny random model)
    python benchmarks/learning/evolve_vs_gepa.py --combine runs/gepa-R-s0.json runs/gepa-R-s1.json runs/gepa-R-s2.json
    python benchmarks/learning/evolve_vs_gepa.py --progress runs/gepa-R-sS   # where a stopped seed stands
    python benchmarks/learning/evolve_vs_gepa.py --stop runs/gepa-R-sS       # stop a running seed at its next save

``--combine`` reads the ``--json`` results of several seeds on the same test questions and
prints, for each comparison, the per-seed paired differences, the mean over seeds with a 95%
interval across seeds (Student's t, seeds - 1 degrees of freedom), and the pooled paired
difference: each question's difference averaged over the seeds, with a 95% interval over
questions; the commits the inputs were produced at; and each optimizer's candidates summed over
the seeds (:func:`optimizer_yield`: proposed, refused by the guard and by the leak check, kept);
and the same comparisons without the questions whose gold answer any seed's winner names.

``--progress OUT`` reads the arms saved in ``OUT`` (nothing is played, a running seed can be read):
INSPO's last saved step (or initial-population round) and the rollouts it spent by kind, and once
it finished what it returned and the budget; GEPA's iteration, rollouts spent, programs kept and
best validation aggregate; and a stop still pending (``STOP``, or GEPA's own ``gepa/gepa.stop``).

``--stop OUT`` puts a ``STOP`` file in ``OUT``: the seed running there stops right after its next
save (INSPO: after its current step or round of the initial population; GEPA: before its next
iteration), removes the file and exits with status 3; ``--resume`` continues it. Asked during the
test (after the last save) it has nothing to stop: the seed finishes and removes the file. Stopped
any other way, a seed loses what it did since its last save.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from inspo import artifacts
from inspo.lab.harness import add_common, start, write_result

# The schedule both arms are measured on (overridable with --set): the cpu-tiny preset's
# population settings, evolving every EVOLVE_EVERY steps until the last step.
EVOLVE_EVERY = 4
SCHEDULE = [f"coevolution.evolve_every={EVOLVE_EVERY}", "coevolution.prune_every=2"]
QUICK = [
    "model.name_or_path=tiny-qwen2", "rl.max_response_tokens=8", "rl.questions_per_step=2",
    "rl.group_size=2", "coevolution.evolve_every=2", "coevolution.prune_every=1",
]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-tiny")
    p.add_argument("--evolutions", type=int, default=5,
                   help=f"INSPO evolutions after the initial population (one every {EVOLVE_EVERY} steps)")
    p.add_argument("--steps", type=int, default=None,
                   help=f"INSPO evolve steps (sets the shared budget); default {EVOLVE_EVERY} x (evolutions + 1)")
    p.add_argument("--max-rounds", type=int, default=5,
                   help="most generate-and-verify rounds per evolution (coevolution.max_rounds; the paper's 5)")
    p.add_argument("--candidates", type=int, default=3,
                   help="candidates asked per optimizer call, both arms (coevolution.candidates_per_call, 1-6)")
    p.add_argument("--db-size", type=int, default=16,
                   help="|D_B|: questions each INSPO candidate is verified on (also the warm-up's questions)")
    p.add_argument("--no-tag-check", action="store_true",
                   help="no protocol-tag check in the guard (coevolution.guard_tags=[]); the evidence rules stay on")
    p.add_argument("--gepa-prompt", choices=("inspo", "gepa"), default="inspo",
                   help="GEPA's reflection prompt: INSPO's App. E template or GEPA's own")
    p.add_argument("--val-size", type=int, default=8, help="GEPA's Pareto validation questions")
    p.add_argument("--minibatch", type=int, default=3, help="GEPA's reflection minibatch")
    p.add_argument("--test-questions", type=int, default=120)
    p.add_argument("--test-fraction", type=float, default=0.25,
                   help="rebuild the built-in world with this share of its questions in the test split "
                        "(dev stays 0.1) and use it for both arms: more held-out questions, same corpus; "
                        "0 keeps the data the preset names")
    add_common(p, json_help="also write the results here")
    p.add_argument("--set", action="append", default=[], help="extra config override (both arms)")
    p.add_argument("--out", default="runs/bench-gepa")
    p.add_argument("--quick", action="store_true", help="tiny random model, 2 steps: a smoke run")
    p.add_argument("--resume", action="store_true",
                   help="continue the arms saved in OUT instead of starting them over: INSPO's from its state (its "
                        "finished steps are not replayed; its final choice is), GEPA's from the state it saves each "
                        "iteration (started when none was saved); the wall-time ratio is then not measured")
    args = p.parse_args(argv)
    for name in ("evolutions", "max_rounds", "candidates", "db_size", "val_size", "minibatch", "test_questions"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be >= 1")
    if args.quick:
        args.steps, args.max_rounds, args.candidates, args.db_size = 2, 2, 2, 2
        args.val_size, args.minibatch, args.test_questions, args.test_fraction = 2, 2, 2, 0.0
        args.set = [*QUICK, *args.set]
    args.derived_steps = args.steps is None
    if args.steps is None:
        args.steps = EVOLVE_EVERY * (args.evolutions + 1)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def rematch_settings(args: argparse.Namespace) -> list[str]:
    """The config overrides the options stand for (before ``--set``, which may override them)."""
    return [
        *SCHEDULE, f"coevolution.evolve_until={args.steps}", f"offline_steps={args.steps}",
        f"coevolution.max_rounds={args.max_rounds}", f"coevolution.candidates_per_call={args.candidates}",
        f"coevolution.validation_size={args.db_size}", f"data.warmup_questions={args.db_size}",
        *(["coevolution.guard_tags=[]"] if args.no_tag_check else []),
        f"rl.seed={args.seed}", f"coevolution.seed={args.seed}", "data.test_split=",
        f"data.max_eval_questions={args.val_size}",
    ]


def evolution_steps(steps: int, coevolution) -> list[int]:
    """The steps of a ``steps``-step run at which the co-evolution config evolves."""
    from inspo.core.schedule import is_evolve_step

    return [t for t in range(1, steps + 1) if is_evolve_step(t, coevolution)]


def optimizer_outcomes(events_path: Path) -> dict:
    """What became of INSPO's optimizer calls, from its events.jsonl: calls and calls that
    yielded no candidate, candidates proposed and admitted, refusals by stage (``guard``,
    ``leak``, ``verify``, ``parent``, ``top_n``), the leak refusals' reasons, the guard refusals
    of candidates cut at the completion limit (``truncated``), parser fallbacks by kind, and the
    D_B sizes candidates were verified on."""
    from inspo.core.events import (
        Admitted,
        Proposed,
        Rejected,
        Verified,
        event_from_dict,
        read_events,
    )
    from inspo.core.templates import PARSE_FALLBACKS

    out: dict = {"optimizer_calls": 0, "calls_without_candidate": 0, "proposed": 0, "admitted": 0,
                 "refused": dict.fromkeys(("guard", "leak", "verify", "parent", "top_n"), 0), "leaks": [],
                 "truncated": 0, "parse_fallbacks": dict.fromkeys(PARSE_FALLBACKS, 0), "db_sizes": []}
    for event in map(event_from_dict, read_events(events_path) if events_path.is_file() else []):
        if isinstance(event, Proposed):
            out["optimizer_calls"] += 1
            out["calls_without_candidate"] += bool(event.error)
            out["proposed"] += len(event.candidate_ids)
            for kind, n in event.parse_fallbacks.items():
                out["parse_fallbacks"][kind] = out["parse_fallbacks"].get(kind, 0) + n
        elif isinstance(event, Rejected):
            out["refused"][event.stage] = out["refused"].get(event.stage, 0) + 1
            if event.stage == "leak":
                out["leaks"].append(event.reason)
            out["truncated"] += event.reason.startswith("truncated:")
        elif isinstance(event, Admitted):
            out["admitted"] += 1
        elif isinstance(event, Verified) and event.n_questions not in out["db_sizes"]:
            out["db_sizes"].append(event.n_questions)
    out["db_sizes"].sort()
    return out


GUARD_REASONS = ("truncated", "too long", "drops protocol tag", "duplicate", "empty", "prompt too long")


def reason_kinds(reasons: Sequence[str]) -> dict[str, int]:
    """Guard reasons counted by their kind (the words they start with; ``other`` for the rest)."""
    return dict(Counter(next((k for k in GUARD_REASONS if r.startswith(k)), "other") for r in reasons))


def answers_named(text: str, questions: Sequence, seed_instruction: str) -> list[str]:
    """The ids of ``questions`` whose gold answer ``text`` names (the leak guard's comparison,
    :func:`inspo.core.proposer.leaked_answer`; answers the seed already holds do not count)."""
    from inspo.core.proposer import leaked_answer

    return [q.id for q in questions if leaked_answer(text, q.answers, parent=seed_instruction)]


def play_test(evaluate, arms: dict[str, str], questions: Sequence) -> tuple[dict[str, list[float]], dict[str, str]]:
    """Each arm's greedy rewards on the test ``questions``, played by ``evaluate(instruction,
    questions)``. Arms that returned the same text (INSPO's dev choice may return the seed) share one
    play: on one machine, greedy decoding of the same prompts in the same batches gives the same
    episodes (barring an errored rollout, such as a tool's timeout), so playing them again costs a
    third of the test and tells nothing. Returns (rewards per arm, {arm: the
    earlier arm whose play it shares}); the second names every shared play, so none is hidden."""
    from inspo.records import Instruction

    test: dict[str, list[float]] = {}
    first: dict[str, str] = {}  # text -> the first arm that played it
    shared: dict[str, str] = {}
    for name, text in arms.items():
        if text in first:
            shared[name] = first[text]
            test[name] = list(test[first[text]])
            continue
        first[text] = name
        test[name] = [r.reward for r in evaluate(Instruction(id=f"test-{name}", text=text), questions)]
    return test, shared


def split_for_gepa(questions: list, val_size: int, seed: int) -> tuple[list, list]:
    """(trainset, valset): ``val_size`` questions of a seeded shuffle for GEPA's Pareto set."""
    if len(questions) <= val_size:
        raise SystemExit(f"{len(questions)} training questions leave none for GEPA's trainset after --val-size {val_size}")
    order = list(questions)
    random.Random(seed).shuffle(order)
    return order[val_size:], order[:val_size]


COMPARISONS = (("inspo", "seed"), ("gepa", "seed"), ("gepa", "inspo"))


def without_named(results: Sequence[dict]) -> tuple[list[str], list[dict[str, list[float]]]] | None:
    """Each result's test rewards without the questions whose gold answer a returned instruction
    names (``test_answers_named``, any arm, any seed): a gain that is not an answer copied into the
    instruction survives this. Returns the ids left out and the rewards left; None where a result
    does not record the question ids or the names."""
    if not all(r.get("test_question_ids") and "test_answers_named" in r for r in results):
        return None
    named = {q for r in results for ids in r["test_answers_named"].values() for q in ids}
    keep = [i for i, q in enumerate(results[0]["test_question_ids"]) if q not in named]
    if not keep:
        return None  # every question named: nothing left to compare
    return sorted(named), [{k: [v[i] for i in keep] for k, v in r["test_rewards"].items()} for r in results]


def combine(results: Sequence[dict]) -> dict:
    """Pool several seeds' results (see the module docstring); pure, no model needed."""
    from inspo.eval.stats import over_seeds

    if len(results) < 2:
        raise SystemExit("--combine needs the results of at least 2 seeds")
    ids = [r.get("test_question_ids") for r in results]
    sizes = {len(r["test_rewards"]["seed"]) for r in results}
    if len(sizes) != 1 or (all(ids) and any(i != ids[0] for i in ids)):
        raise SystemExit("--combine needs every seed scored on the same test questions, in the same order")
    commits = list(dict.fromkeys((r.get("provenance") or {}).get("commit") for r in results))
    out: dict = {"seeds": len(results), "test_questions": sizes.pop(), "commits": commits, "comparisons": {}}
    for a, b in COMPARISONS:
        out["comparisons"][f"{a} - {b}"] = over_seeds([r["test_rewards"][a] for r in results],
                                                      [r["test_rewards"][b] for r in results])
    left = without_named(results)
    if left is not None:
        named, rewards = left
        out["without_named"] = {"left_out": named, "comparisons": {
            f"{a} - {b}": over_seeds([r[a] for r in rewards], [r[b] for r in rewards]) for a, b in COMPARISONS}}
    out["yield"] = optimizer_yield(results)
    # arms that returned the same text (one test play for both): their difference is 0 by construction
    out["shared"] = [r.get("test_shared") for r in results]  # None: a result from before the record
    return out


def optimizer_yield(results: Sequence[dict]) -> dict:
    """Each optimizer's candidates, per seed and summed: INSPO's by what its guard, leak check and
    verification did; GEPA's evaluated proposals by what INSPO's guard and leak check would have
    done (``proposal_yield``) and by GEPA's own acceptance. A seed whose result lacks the counts
    (GEPA's before proposals were kept) is None and left out of the sum, which says how many
    seeds it covers."""
    per_seed: dict[str, list] = {"inspo": [], "gepa": []}
    for r in results:
        oc = (r.get("inspo") or {}).get("outcomes")
        per_seed["inspo"].append(None if oc is None else {
            "proposed": oc["proposed"], "guard": oc["refused"]["guard"], "leak": oc["refused"]["leak"],
            "kept": oc["admitted"]})
        y = (r.get("gepa") or {}).get("proposal_yield")
        per_seed["gepa"].append(None if y is None else {
            "proposed": y["proposals"], "guard": sum(y["guard_refusals"].values()), "leak": y["leaks"],
            "kept": y["accepted"], "log_errors": len(y.get("log_errors", ()))})
    out = {}
    for name, rows in per_seed.items():
        present = [row for row in rows if row is not None]
        total = {k: sum(row[k] for row in present) for k in ("proposed", "guard", "leak", "kept")}
        if name == "gepa":  # events the proposal log lost (results from before the count: none known)
            total["log_errors"] = sum(row.get("log_errors", 0) for row in present)
        out[name] = {"per_seed": rows, "total": {**total, "seeds": len(present)}}
    return out


def print_comparisons(comparisons: dict) -> None:
    for name, c in comparisons.items():
        seeds = ", ".join(f"{d['mean']:+.3f}" for d in c["per_seed"])
        p = c["pooled"]
        print(f"  {name:13s} per seed {seeds}; over seeds {c['seed_mean']:+.3f} "
              f"[95% CI {c['seed_low']:+.3f}, {c['seed_high']:+.3f}]; pooled per question "
              f"{p['mean']:+.3f} [95% CI {p['low']:+.3f}, {p['high']:+.3f}]")


def print_combined(combined: dict) -> None:
    commits = combined.get("commits", [])
    if len(commits) > 1:
        print(f"WARNING: the inputs come from {len(commits)} commits (None: not recorded): {commits}")
    print(f"{combined['seeds']} seeds x {combined['test_questions']} test questions")
    for i, shared in enumerate(combined.get("shared", [])):
        for name, same in (shared or {}).items():
            print(f"  result {i + 1}: {name} returned the {same} arm's text, so its difference from it is 0")
    print_comparisons(combined["comparisons"])
    if "without_named" in combined:
        w = combined["without_named"]
        print(f"without the {len(w['left_out'])} questions whose gold answer a returned instruction names:")
        print_comparisons(w["comparisons"])
    print("candidates over the seeds (GEPA's under INSPO's checks, which it does not apply; kept: INSPO "
          "admitted, GEPA accepted)")
    for name, y in combined.get("yield", {}).items():
        t = y["total"]
        print(f"  {name:5s} {t['proposed']} proposed, guard {t['guard']}, leak {t['leak']}, kept {t['kept']} "
              f"({t['seeds']} of {len(y['per_seed'])} seeds counted)"
              + (f"; WARNING: {t['log_errors']} GEPA events lost by the proposal log" if t.get("log_errors") else ""))


def rollouts_by_kind(ledger: dict, selection_rollouts: int | None = None) -> dict[str, int]:
    """Every policy rollout INSPO's side played, by kind, from its ledger; with the final choice's
    (``selection_rollouts``, known once it finished) their sum is GEPA's budget."""
    spent = {"step": ledger["training_rollouts"], "verification": ledger["verification_rollouts"],
             "warm-up": ledger["warmup_rollouts"]}
    if selection_rollouts is not None:
        spent["final choice"] = selection_rollouts
    return spent


def progress(out: Path) -> dict:
    """Where the arms saved in ``out`` stand, from their files: INSPO's state (and its summary once
    it finished) and GEPA's (:func:`~inspo.baselines.gepa_saved.saved_progress`)."""
    from inspo.baselines.gepa_saved import GEPA_STOP_FILE, STATE_FILE, saved_progress
    from inspo.core.state import read_state

    state_file, summary_file = out / "inspo" / artifacts.STATE_FILE, out / "inspo" / artifacts.SUMMARY_FILE
    gepa = saved_progress(out / "gepa")
    if not state_file.is_file() and gepa is None:
        started = "" if not (out / "inspo").is_dir() else (
            " (INSPO's folder is there: it started but saved nothing yet (its first save follows the warm-up, "
            "if any): --resume has nothing to continue, run the command without it)")
        raise SystemExit(f"{out}: no arm saved there (neither inspo/{artifacts.STATE_FILE} nor "
                         f"gepa/{STATE_FILE}){started}")
    stops = [out / artifacts.STOP_FILE, out / "gepa" / GEPA_STOP_FILE]  # --stop's, GEPA's own
    report: dict = {"out": str(out), "inspo": None, "gepa": None if gepa is None else asdict(gepa), "budget": None,
                    "stop_pending": [str(f) for f in stops if f.exists()]}
    if state_file.is_file():
        state = read_state(state_file)
        led = state["ledger"]
        summary = json.loads(summary_file.read_text()) if summary_file.is_file() else None
        spent = rollouts_by_kind(led, summary["selection_rollouts"] if summary else None)
        if summary is not None:
            report["budget"] = sum(spent.values())
        init = state.get("init")  # set in a state saved inside the initial population
        report["inspo"] = {"last_step": state["last_step"], "finished": summary is not None, "rollouts": spent,
                           "initial_round": init["rounds"] if init else None,
                           "population": len(state["population"]["members"]),
                           "population_size": state["config"]["population_size"],
                           "candidates_proposed": led["candidates_proposed"],
                           "candidates_admitted": led["candidates_admitted"],
                           "returned": summary["best_instruction_id"] if summary else None,
                           "seed_returned": bool((summary or {}).get("evaluation", {}).get("seed_returned"))}
    return report


def print_progress(report: dict) -> None:
    print(report["out"])
    i, g = report["inspo"], report["gepa"]
    if i is None:
        print("  INSPO: nothing saved (no inspo/inspo_state.json)")
    else:
        kinds = ", ".join(f"{v} {k}" for k, v in i["rollouts"].items())
        seed = " (the seed)" if i["seed_returned"] else ""
        done = f"finished after step {i['last_step']}, returned {i['returned']}{seed}" if i["finished"] else \
            f"step {i['last_step']} saved, not finished"
        if i["initial_round"] is not None:
            saved = f"round {i['initial_round']}" if i["initial_round"] else "no optimizer round yet"
            done = (f"initial population: {saved} saved, {i['population']} of {i['population_size']} "
                    "instructions, not finished")
        print(f"  INSPO: {done}; {sum(i['rollouts'].values())} rollouts ({kinds}); "
              f"{i['candidates_admitted']} of {i['candidates_proposed']} candidates admitted")
    if g is None:
        print("  GEPA: not started (no gepa/gepa_state.bin)")
    else:
        of = f" of {report['budget']}" if report["budget"] is not None else ""
        print(f"  GEPA: iteration {g['iteration']} saved; {g['rollouts']}{of} rollouts spent; {g['programs']} "
              f"programs ({g['programs'] - 1} accepted); best validation {g['best_val']:.3f} "
              f"(program {g['best_program']}; the seed {g['seed_val']:.3f})")
    for stop in report["stop_pending"]:
        print(f"  a stop is pending: {stop} is there; a run going on here stops after its next save (one that "
              "ended first left it: remove it, or the next --resume stops at its first save)")


def main(argv: Sequence[str] | None = None) -> dict:
    raw = list(sys.argv[1:] if argv is None else argv)
    if raw[:1] == ["--combine"]:
        combined = combine([json.loads(Path(f).read_text()) for f in raw[1:]])
        print_combined(combined)
        return combined
    if raw[:1] == ["--progress"]:
        if len(raw) != 2:
            raise SystemExit("--progress takes one folder: the --out of a run")
        report = progress(Path(raw[1]))
        print_progress(report)
        return report
    if raw[:1] == ["--stop"]:
        return request_stop(raw[1:])
    args = parse_args(argv)
    import torch

    from inspo.baselines.gepa_adapter import AgentAdapter, optimize_instruction
    from inspo.baselines.gepa_proposals import proposal_yield
    from inspo.config.train import resolve
    from inspo.engines.hf import HFEngine
    from inspo.envs.build import load_questions
    from inspo.envs.evaluate import make_evaluate
    from inspo.eval.stats import paired_difference
    from inspo.models import load_model
    from inspo.models.precision import default_device
    from inspo.training.evolve import run_evolve
    from inspo.training.preflight import build_optimizer, prepare

    out = Path(args.out)
    stop_file = out / artifacts.STOP_FILE
    if stop_file.exists():
        print(f"WARNING: {stop_file} is there (a stop asked of a run that ended first?): this run stops at its "
              "first save; remove the file to run on", flush=True)
    data = []
    if args.test_fraction:
        from inspo.data.world import WorldConfig, build_world, write_world

        fractions = (round(0.9 - args.test_fraction, 6), 0.1, args.test_fraction)
        write_world(build_world(seed=0, config=WorldConfig(split_fractions=fractions)), out / "world")
        data = [f"data.train={out / 'world'}", f"data.eval={out / 'world'}", f"env.corpus={out / 'world'}"]
    config = resolve(args.preset, None, [*data, *rematch_settings(args), *args.set])
    if config.model.engine != "hf":  # both arms share one transformers engine, built below
        raise SystemExit(f"model.engine={config.model.engine}: evolve_vs_gepa plays both arms with the frozen "
                         "policy in transformers (HFEngine) only; drop that --set (vLLM: run `inspo evolve` "
                         "with model.engine=vllm for INSPO's side alone)")
    info = start("benchmarks/learning/evolve_vs_gepa.py", args.argv, threads=args.threads, dtype=config.model.dtype)
    print(f"python {info['python']}, torch {torch.__version__}")
    evolutions = evolution_steps(args.steps, config.coevolution)
    if args.derived_steps and len(evolutions) != args.evolutions:
        raise SystemExit(f"{args.steps} steps evolve at steps {evolutions} under evolve_every "
                         f"{config.coevolution.evolve_every}, not {args.evolutions} times: pass --steps")
    co = config.coevolution
    inputs = prepare(config, need_optimizer=False, need_eval=True)
    env = inputs.env
    # the tags INSPO's guard keeps: coevolution.guard_tags, or (null) the environment's required tags
    guard_tags = list(co.guard_tags) if co.guard_tags is not None else list(env.required_tags)
    settings = {"steps": args.steps, "evolution_steps": evolutions, "max_rounds": co.max_rounds,
                "candidates_per_call": co.candidates_per_call, "validation_size": co.validation_size,
                "warmup_questions": config.data.warmup_questions, "guard_tags": guard_tags,
                "leak_guard": co.leak_guard, "admission": co.admission, "min_evidence": co.min_evidence,
                "prior_rollouts": co.prior_rollouts, "final_choice": config.final_choice,
                "optimizer_max_tokens": co.optimizer_max_tokens, "test_fraction": args.test_fraction}
    print("settings: " + json.dumps(settings))
    test_questions = load_questions(env, config.data.eval or config.data.train, "test", args.test_questions,
                                    field_name="--test-questions", max_hops=config.data.max_hops)
    loaded = load_model(inputs.model_dir, dtype=config.model.dtype, device=default_device())
    engine = HFEngine(loaded.model, loaded.tokenizer)
    weights = str(next(loaded.model.parameters()).dtype).removeprefix("torch.")
    policy = f"{config.model.name_or_path} ({weights} on {loaded.model.device}, frozen)"

    # ---- INSPO: run_evolve on the preset's schedule; its rollouts set the budget
    started = time.perf_counter()
    # --out is scratch: a rerun replaces it, unless --resume continues the arms saved there
    evo = run_evolve(config, engine=engine, out_dir=out / "inspo", progress=False, resume=args.resume,
                     overwrite=not args.resume, stop_file=stop_file)
    inspo_wall = time.perf_counter() - started
    led = evo.ledger
    # every policy rollout INSPO played, its final choice on val_size dev questions included
    budget = sum(rollouts_by_kind(led, evo.selection_rollouts).values())
    choice = evo.evaluation or {}
    inspo = {"best_instruction": evo.best_instruction, "rollouts": budget, "optimizer_calls": led["optimizer_calls"],
             "selection_score": (choice.get("dev_scores") or {}).get(evo.best_instruction_id, evo.best_weight),
             "final_choice": choice.get("rule", config.final_choice), "seed_returned": choice.get("seed_returned"),
             "selection_rollouts": evo.selection_rollouts, "wall_s": inspo_wall, "resumed": args.resume,
             "ledger": led,
             "outcomes": optimizer_outcomes(out / "inspo" / "events.jsonl")}
    print(json.dumps({"arm": "inspo", **{k: v for k, v in inspo.items() if k not in ("best_instruction", "ledger")}}))

    # ---- GEPA: the same policy, questions and optimizer LLM, max_metric_calls = INSPO's rollouts
    trainset, valset = split_for_gepa(inputs.questions, args.val_size, args.seed)
    llm, optimizer_note = build_optimizer(config, env)  # the rule-based reflector gets Search-R1's rules
    adapter = AgentAdapter(engine, env, inputs.agent,
                           batch_size=max(config.rl.micro_batch_size, args.minibatch), seed=args.seed)
    started = time.perf_counter()
    outcome = optimize_instruction(
        adapter, inputs.seed_instruction, trainset, valset, max_rollouts=budget, llm=llm,
        reflection=args.gepa_prompt, minibatch_size=args.minibatch,
        n_candidates=config.coevolution.candidates_per_call, temperature=config.coevolution.optimizer_temperature,
        max_tokens=config.coevolution.optimizer_max_tokens, guard_tags=guard_tags,
        seed=args.seed, run_dir=str(out / "gepa"), resume=args.resume, stop_file=stop_file,
    )
    gepa_wall = time.perf_counter() - started
    stats = outcome.proposer
    gepa = {"best_instruction": outcome.best_instruction, "rollouts": outcome.rollouts,
            "optimizer_calls": outcome.reflection_calls, "selection_score": outcome.best_val_score,
            "candidates": outcome.candidates, "full_val_evals": outcome.full_val_evals, "wall_s": gepa_wall,
            "resumed": outcome.resumed, "resume_exact": outcome.resume_exact,
            "replayed_rollouts": outcome.replayed_rollouts,
            "proposals_accepted_by_guard": stats.accepted if stats else None,
            "proposer_rejections": list(stats.rejected) if stats else None,
            "proposer_rejections_by_kind": reason_kinds(stats.rejected) if stats else None,
            "proposer_errors": len(stats.errors) if stats else None}
    # what INSPO's guard and leak check would have made of the proposals GEPA evaluated
    seen = proposal_yield(outcome.proposals, guard_tags, config.coevolution.max_instruction_chars)
    # a hook of the proposal log that failed (any piece of the run): counted apart, never silent
    gepa["proposal_yield"] = {**seen, "guard_refusals": reason_kinds(seen["guard_refusals"]),
                              "log_errors": outcome.proposal_log_errors}
    print(json.dumps({"arm": "gepa", **{k: v for k, v in gepa.items() if k not in ("best_instruction", "proposer_rejections")}}))

    # ---- held-out test: greedy, the same questions for the three instructions
    greedy = replace(inputs.agent, temperature=0.0)
    evaluate = make_evaluate(engine, env, greedy, group_size=1, batch_size=config.rl.micro_batch_size,
                             progress=True)  # up to 3 x --test-questions greedy episodes: minutes on a CPU
    test, shared = play_test(evaluate, {"seed": inputs.seed_instruction, "inspo": evo.best_instruction,
                                        "gepa": outcome.best_instruction}, test_questions)

    n = len(test_questions)
    metric = config.env.options.get("reward", env.metric)
    named = {name: answers_named(text, test_questions, inputs.seed_instruction)
             for name, text in (("inspo", evo.best_instruction), ("gepa", outcome.best_instruction))}
    result = {
        "provenance": info,
        "settings": settings,
        "policy": policy,
        "optimizer": optimizer_note,
        "gepa_prompt": args.gepa_prompt,
        "metric": metric,
        "test_questions": n,
        "test_question_ids": [q.id for q in test_questions],
        "budget_rollouts": budget,
        "test_mean": {k: statistics.fmean(v) for k, v in test.items()},
        "vs_seed": {k: paired_difference(test[k], test["seed"]).to_dict() for k in ("inspo", "gepa")},
        "gepa_minus_inspo": paired_difference(test["gepa"], test["inspo"]).to_dict(),
        "wall_ratio_gepa_over_inspo": None if args.resume else gepa_wall / inspo_wall,
        "test_answers_named": named,
        "inspo": inspo,
        "gepa": gepa,
        "test_rewards": test,
        "test_shared": shared,
    }
    left = without_named([result])  # None only when every test question is named
    kept = left[1][0] if left else None
    result["without_named"] = None if kept is None else {
        "left_out": left[0], "gepa_minus_inspo": paired_difference(kept["gepa"], kept["inspo"]).to_dict(),
        "vs_seed": {k: paired_difference(kept[k], kept["seed"]).to_dict() for k in ("inspo", "gepa")}}
    print()
    print(f"policy {policy}; optimizer LLM: {optimizer_note}; GEPA reflects with the {args.gepa_prompt} prompt")
    print(f"rollouts (budget {budget}): INSPO {inspo['rollouts']}, GEPA {gepa['rollouts']}")
    print(f"optimizer calls:           INSPO {inspo['optimizer_calls']}, GEPA {gepa['optimizer_calls']}")
    if args.resume:
        how = (f"continued its saved run, replaying {outcome.replayed_rollouts} rollouts" if outcome.resumed
               else "started anew")
        print(f"wall time GEPA / INSPO:    not measured (resumed: INSPO {inspo_wall:.0f} s, GEPA {gepa_wall:.0f} s in this "
              f"run; GEPA {how})")
    else:
        print(f"wall time GEPA / INSPO:    {result['wall_ratio_gepa_over_inspo']:.2f} ({gepa_wall:.0f} s / {inspo_wall:.0f} s)")
    oc = inspo["outcomes"]
    print(f"INSPO schedule: {args.steps} steps, evolutions at steps {evolutions} (after the initial population), "
          f"at most {co.max_rounds} rounds each, {co.candidates_per_call} candidates per call, "
          f"D_B sizes used {oc['db_sizes']}, tag check {'on: ' + ','.join(guard_tags) if guard_tags else 'off'}")
    print(f"INSPO candidates: {oc['optimizer_calls']} calls ({oc['calls_without_candidate']} without a candidate), "
          f"{oc['proposed']} proposed, {oc['admitted']} admitted; refused by stage "
          + ", ".join(f"{k} {v}" for k, v in oc["refused"].items()) + f" ({oc['truncated']} of the guard's cut at "
          f"the completion limit); leaks refused {len(oc['leaks'])}" + (f": {oc['leaks']}" if oc["leaks"] else ""))
    print("INSPO parser fallbacks: " + ", ".join(f"{k} {v}" for k, v in oc["parse_fallbacks"].items()))
    if gepa["proposer_rejections_by_kind"] is not None:
        print(f"GEPA proposer (INSPO's prompt and guard, no leak check): {gepa['optimizer_calls']} calls, "
              f"{gepa['proposer_errors']} without a candidate, rejections by kind {gepa['proposer_rejections_by_kind']}")
    y = gepa["proposal_yield"]
    print(f"GEPA's {y['proposals']} evaluated proposals under INSPO's checks (tags {','.join(guard_tags) or 'off'}): "
          f"guard refusals {y['guard_refusals']}, leaks {y['leaks']}, {y['would_verify']} would reach "
          f"verification; GEPA accepted {y['accepted']} ({y['accepted_the_guard_refuses']} the guard refuses), "
          f"rejected {y['rejected']}, undecided {y['undecided']}")
    if y["log_errors"]:
        print(f"WARNING: {len(y['log_errors'])} hook(s) of the proposal log failed, so the counts above may be off "
              "(a lost proposal is missing, a lost decision counts as undecided, a lost start loses the answers "
              f"the leak check reads): {y['log_errors']}")
    print("test questions whose gold answer the winner names: "
          + ", ".join(f"{k} {len(v)}" + (f" ({', '.join(v)})" if v else "") for k, v in named.items()))
    print(f"test {metric} on {n} questions (greedy); paired difference from the seed, 95% CI")
    for name, same in shared.items():
        print(f"  ({name} returned the {same} arm's text: its greedy episodes were played once, for both)")
    for name in ("seed", "inspo", "gepa"):
        line = f"  {name:6s} {result['test_mean'][name]:.3f}"
        if name != "seed":
            line += "   " + paired_difference(test[name], test["seed"]).text()
        print(line)
    print("  GEPA - INSPO: " + paired_difference(test["gepa"], test["inspo"]).text())
    if kept is None:
        print(f"  every test question's gold answer is named by a winner ({n}): no difference without them")
    elif left[0]:
        print(f"  without the {len(left[0])} questions whose gold answer a winner names: GEPA - INSPO "
              + paired_difference(kept["gepa"], kept["inspo"]).text())
    for name in ("inspo", "gepa"):
        print(f"\n{name} best instruction:\n{result[name]['best_instruction']}")
    if stop_file.exists():  # asked during the test, after the last save: nothing was left to stop
        stop_file.unlink(missing_ok=True)
        print(f"{stop_file} arrived after the seed's last save: the seed finished; "
              "the file is removed")
    write_result(args.json, result)
    return result


def request_stop(folders: Sequence[str]) -> dict:
    """``--stop OUT``: ask the seed running in ``OUT`` to stop at its next save (module docstring)."""
    if len(folders) != 1:
        raise SystemExit("--stop takes one folder: the --out of a running seed")
    out = Path(folders[0])
    if not (out / "inspo").is_dir():
        raise SystemExit(f"{out}: no run there (no inspo/ folder); --stop takes the --out of a running seed")
    (out / artifacts.STOP_FILE).write_text("stop at the next save\n", encoding="utf-8")
    print(f"{out / artifacts.STOP_FILE} written: the seed running there stops after its next save (INSPO: its "
          "current step or initial-population round; GEPA: before its next iteration) and exits with status 3; "
          "--resume continues it (asked during the test, the seed finishes)")
    return {"stop_file": str(out / artifacts.STOP_FILE)}


if __name__ == "__main__":
    import logging

    from inspo.records import RunStopped

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    try:
        main()
    except RunStopped as exc:  # asked for with --stop: everything up to the save is kept
        print(f"evolve_vs_gepa: {exc}", file=sys.stderr)
        sys.exit(3)
