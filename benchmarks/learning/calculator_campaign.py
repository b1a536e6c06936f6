"""What co-evolution buys where the instruction decides tool use: the ``calculator`` preset's arms,
paired by seed and per held-out problem (issue 33).

Arms (each ``inspo.training.run.run_training`` on the ``calculator`` preset, same seed, data and steps):

- ``static-weak``: static GRPO under the weak seed (``@weak``: it names the calculator, nothing more);
- ``static-worked``: static GRPO under the hand-written instruction with a worked example
  (``@worked``): an upper reference, not a competitor;
- ``inspo-weak``: INSPO from the weak seed;
- ``pre-policy-weak``: the instruction evolved with the frozen policy first, then static GRPO under
  it (separates co-evolution from prompt search);
- ``untrained``: the base policy, greedy, under the weak, the worked and the calculator seed (no training);
- ``static-calculator``, ``inspo-calculator``, ``pre-policy-calculator``: the same three arms from the
  environment's own seed (``@calculator``, the protocol in words: 0.355 greedy). From the weak seed the
  1.5B optimizer wrote no candidate that beat it (0 of 282, ``optimizer_yield.py``), so an INSPO arm
  from there tests the loop's machinery, not an instruction; from ``@calculator`` it did, rarely.
- ``cross-calculator``: INSPO's returned instruction (``inspo-calculator``, same seed) played by the base
  policy, static GRPO's and INSPO's own: whether a gain is the instruction's or the policy's (after both arms);
- ``gepa-then-grpo``: static GRPO under the instruction GEPA returned for the same seed with the
  frozen policy (``results/calculator/arm5/gepa-calc-sS.json``): prompt search first, then RL, as
  DSPy's BetterTogether and mmGRPO do (issue 65); a seed with no GEPA result is refused;
- ``cross-pre-policy-calculator``: the pre-policy arm's instruction (found with the frozen base policy)
  played by the same three policies: whether co-evolution's instruction beats the frozen search's on
  one policy (after ``pre-policy-calculator``, ``static-calculator`` and ``inspo-calculator``);
- ``inspo-evidence``: INSPO from ``@calculator`` with issue 63's evidence (:func:`evidence_settings`:
  paired, greedy, raced verification on 64 training problems the optimizer did not see, the
  protocol block, worked examples held out, split groups, the final choice over every admitted
  instruction), each evolution's verification capped at the rematch's 187 rollouts (issue 65);
- ``pre-policy-evidence``: static GRPO under the instruction the evidence search returned with the
  frozen policy for the same seed (``results/calculator/evidence/rematch-sS.json``); where that
  search returned the seed instruction, the arm is ``static-calculator``'s run and is refused;
- ``cross-inspo-evidence``: ``inspo-evidence``'s returned instruction played by the base policy (a
  hit: at least +0.1 over ``@calculator``);

The optimizer is a language model, never the rule-based reflector (its rules are written by us):
by default Qwen2.5-Coder-1.5B-Instruct run locally (``--set optimizer...`` changes it;
``requirements/models-1.5b.txt`` installs it). ``--quick`` runs the tiny random model with the
offline reflector: a smoke run of the machinery, no evidence about instructions.

Every run ends with the library's held-out test (greedy, the trained policy, ``data.max_test_questions``
test problems no choice saw): static arms under their seed, INSPO and pre-policy under the
instruction they return and under the weak seed (policy versus prompt). Each final agent is also
scored on 40 problems written by hand, phrased unlike the generator
(``benchmarks/learning/data/calculator-handwritten.jsonl``): the ``handwritten`` group, reported apart
from the ``generated`` one. Per arm the script keeps, step by step, the reward, tool calls and
tool errors per episode, the prompt length (the instruction's) and the population (Fig. 2/3), the
optimizer's yield from the events (proposed, refused by the tag guard, by the leak guard, admitted
after verification), and what the run spent.

One JSON per (arm, seed) under ``--out``/results; a finished arm is skipped and a killed run resumes
from its last checkpoint when invoked again, so a campaign runs in pieces. ``--combine`` pools the
seeds: per comparison and group, the per-seed paired differences, their mean with a 95% interval
across seeds, the pooled per-problem difference, the seed-to-seed SD, the smallest effect the
seeds could detect (80% power, two-sided 5%) and the seeds a +0.05 effect would need.

Usage::

    python benchmarks/learning/calculator_campaign.py --seed 0 --out runs/calc        # every arm of seed 0
    python benchmarks/learning/calculator_campaign.py --seed 1 --arms static-weak,inspo-weak --out runs/calc
    python benchmarks/learning/calculator_campaign.py --combine runs/calc/results --json runs/calc/combined.json
    python benchmarks/learning/calculator_campaign.py --combine benchmarks/results/calculator/campaign \
        --markdown benchmarks/results/calculator/campaign-tables.md     # the tables BENCHMARKS.md quotes
    python benchmarks/learning/calculator_campaign.py --quick --out /tmp/calc            # a smoke run
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import load_script

HERE = Path(__file__).resolve().parent
HANDWRITTEN = HERE / "data" / "calculator-handwritten.jsonl"
GEPA_RESULTS = HERE.parent / "results" / "calculator" / "arm5"
GEPA = "gepa"
"""The seed instruction of an arm that starts from GEPA's returned instruction for its seed."""
EVIDENCE_RESULTS = HERE.parent / "results" / "calculator" / "evidence"
EVIDENCE_SEARCH = "evidence-search"
"""The seed instruction of an arm that starts from the evidence search's returned instruction for its
seed (issue 63's instruction-only rematch, the frozen policy)."""
EVOLVE_ROLLOUTS = 187
"""``inspo-evidence``'s verification rollouts an evolution: the rematch's (seed 0's plan, 867 rollouts
of GEPA's budget over 3 evolutions). The first campaign's INSPO arms spent 136-384 over their 2."""

ARMS: dict[str, tuple[str, str]] = {
    "static-weak": ("static", "@weak"),
    "static-worked": ("static", "@worked"),
    "inspo-weak": ("inspo", "@weak"),
    "pre-policy-weak": ("pre-policy", "@weak"),
    # From the environment's own seed: the 1.5B optimizer beat it in 1 call of 20 (with the feedback
    # line), and never beat the weak seed in 60 (benchmarks/learning/optimizer_yield.py).
    "static-calculator": ("static", "@calculator"),
    "inspo-calculator": ("inspo", "@calculator"),
    "pre-policy-calculator": ("pre-policy", "@calculator"),
    # Prompt search first, then RL: static GRPO under GEPA's instruction for the same seed (issue 65).
    "gepa-then-grpo": ("static", GEPA),
    # Issue 65: INSPO with issue 63's evidence, and static GRPO under that evidence's frozen search.
    "inspo-evidence": ("inspo", "@calculator"),
    "pre-policy-evidence": ("static", EVIDENCE_SEARCH),
}
UNTRAINED = {"weak": "@weak", "worked": "@worked", "calculator": "@calculator"}
#: INSPO's returned instruction played by the base policy, static GRPO's and INSPO's own (same seed):
#: is a gain the instruction's, found by the loop, or the policy's, trained beside it?
#: The same for the pre-policy arm's instruction (found with the frozen base policy): is the
#: instruction co-evolution found better than the one a frozen-policy search finds, on one policy?
CROSSES = {"cross-calculator": ("inspo-calculator", ("untrained", "static-calculator", "inspo-calculator")),
           "cross-pre-policy-calculator": ("pre-policy-calculator", ("untrained", "static-calculator",
                                                                     "inspo-calculator")),
           "cross-inspo-evidence": ("inspo-evidence", ("untrained",))}
COMPARISONS = (
    ("inspo-weak", "static-weak"),            # the claim: co-evolution beats static GRPO from the same seed
    ("inspo-weak", "pre-policy-weak"),        # co-evolution against prompt search, then RL
    ("inspo-weak", "static-worked"),          # against the hand-written upper reference
    ("inspo-weak:seed", "static-weak"),       # the policies alone, both under the weak seed
    ("inspo-weak", "inspo-weak:seed"),        # the evolved instruction on INSPO's own policy
    ("pre-policy-weak", "pre-policy-weak:seed"),  # ... on the policy trained under the frozen search's one
    ("static-worked", "static-weak"),         # does the seed instruction matter to static GRPO?
    ("static-weak", "untrained:weak"),        # does static GRPO learn here at all?
    ("inspo-weak", "untrained:weak"),
    ("inspo-calculator", "static-calculator"),  # the same claims from the seed the optimizer can improve
    ("inspo-calculator", "pre-policy-calculator"),
    ("pre-policy-calculator", "static-calculator"),  # prompt search with the frozen policy, then RL, against RL alone
    ("inspo-calculator:seed", "static-calculator"),
    ("inspo-calculator", "inspo-calculator:seed"),  # policy versus prompt: INSPO's policy under its seed
    ("pre-policy-calculator", "pre-policy-calculator:seed"),  # ... and the pre-policy arm's (seeds after b4abd88)
    ("static-calculator", "untrained:calculator"),
    ("static-worked", "static-calculator"),  # arm 2, the hand-written upper reference, against static GRPO ...
    ("inspo-calculator", "static-worked"),     # ... and against INSPO, both from the seed the campaign runs
    ("static-worked", "untrained:worked"),     # does static GRPO add to the worked example?
    ("untrained@inspo-calculator", "untrained:calculator"),  # INSPO's instruction alone, on the base policy
    ("static-calculator@inspo-calculator", "static-calculator"),  # ... on static GRPO's policy
    ("inspo-calculator", "static-calculator@inspo-calculator"),  # the two policies under INSPO's instruction
    ("inspo-calculator@inspo-calculator", "inspo-calculator"),  # the same agent scored twice: the test's own noise
    ("untrained@pre-policy-calculator", "untrained:calculator"),  # the frozen search's instruction alone
    ("untrained@inspo-calculator", "untrained@pre-policy-calculator"),  # the two searches' instructions, base policy
    ("static-calculator@inspo-calculator", "static-calculator@pre-policy-calculator"),  # ... on static's policy
    ("inspo-calculator", "inspo-calculator@pre-policy-calculator"),  # ... on INSPO's policy
    ("pre-policy-calculator", "static-calculator@pre-policy-calculator"),  # RL under it, or under the seed, then it
    ("inspo-calculator", "gepa-then-grpo"),    # co-evolution against prompt search (GEPA) first, then RL
    ("gepa-then-grpo", "static-calculator"),   # does GEPA's instruction help RL at all?
    ("inspo-evidence", "static-calculator"),   # issue 65: co-evolution with evidence that decides ...
    ("inspo-evidence", "gepa-then-grpo"),      # ... against GEPA, then RL
    ("inspo-evidence", "pre-policy-evidence"),  # ... against the same evidence with the frozen policy, then RL
    ("inspo-evidence", "inspo-calculator"),    # ... against INSPO as the paper specifies it: what the evidence changed
    ("inspo-evidence", "inspo-evidence:seed"),  # policy versus prompt
    ("untrained@inspo-evidence", "untrained:calculator"),  # its instruction alone, on the base policy (a hit)
)
#: The optimizer of the real campaign: the 1.5B, locally (DESIGN.md: the 0.5B writes no usable
#: instruction; the 1.5B found the lever in about 1 candidate of 22). Four answers a call: on 2
#: cores they cost about one (3.55-4.41x the answers a second), and 5 of 20 prompts instead of 1
#: gave a candidate above the calculator seed (optimizer_yield.py --answers 4; BENCHMARKS.md §4).
OPTIMIZER = ("optimizer.kind=local", "optimizer.local_model_path=qwen2.5-coder-1.5b",
             "coevolution.optimizer_temperature=0.7", "coevolution.optimizer_max_tokens=700",
             "coevolution.answers_per_call=4")
QUICK = (
    "model.name_or_path=tiny-qwen2", "model.lora=false", "rl.max_response_tokens=8", "rl.max_turns=2",
    "rl.questions_per_step=2", "rl.group_size=2", "rl.micro_batch_size=4", "rl.save_steps=1",
    "rl.prefill=<calc> 6 * 23 </calc>", "coevolution.evolve_every=1", "coevolution.prune_every=1",
    "coevolution.evolve_until=2", "coevolution.validation_size=2", "coevolution.population_size=2",
    "coevolution.min_evidence=1", "coevolution.prior_rollouts=1", "data.max_eval_questions=2",
    "data.max_test_questions=6", "data.warmup_questions=2", "offline_steps=2", "optimizer.kind=rule-based",
)


def gepa_instruction(name: str, seed: int, results: Path = GEPA_RESULTS) -> str:
    """:data:`GEPA`: the instruction GEPA returned for ``seed`` (``evolve_vs_gepa.py``'s result);
    any other name as it is."""
    if name != GEPA:
        return name
    path = results / f"gepa-calc-s{seed}.json"
    if not path.is_file():
        raise SystemExit(f"gepa-then-grpo seed {seed}: no GEPA result {path}; run evolve_vs_gepa.py for "
                         "that seed first (4-6 hours on 2 cores), or choose a seed that has one")
    import json

    text = json.loads(path.read_text())["gepa"]["best_instruction"]
    if not text.strip():
        raise SystemExit(f"{path}: GEPA returned an empty instruction")
    return text


def evidence_instruction(name: str, seed: int, results: Path = EVIDENCE_RESULTS) -> str:
    """:data:`EVIDENCE_SEARCH`: the instruction the evidence search returned for ``seed`` with the
    frozen policy (``evidence_rematch.py``'s result), :func:`gepa_instruction` for GEPA's, any other
    name as it is. A search that returned the seed instruction is refused: static GRPO under it is
    ``static-calculator``'s run, which ``evidence_summary.py`` then uses for that seed."""
    if name != EVIDENCE_SEARCH:
        return gepa_instruction(name, seed)
    path = results / f"rematch-s{seed}.json"
    if not path.is_file():
        raise SystemExit(f"pre-policy-evidence seed {seed}: no evidence search {path}; run "
                         "evidence_rematch.py for that seed first, or choose a seed that has one")
    import json

    chosen = json.loads(path.read_text())["final_choice"]
    if chosen["seed_returned"]:
        raise SystemExit(f"pre-policy-evidence seed {seed}: the evidence search returned the seed instruction "
                         f"({path}), so this arm is static-calculator's run for seed {seed}; run that arm instead")
    return chosen["returned_text"]


def evidence_settings() -> tuple[str, ...]:
    """``inspo-evidence``'s own settings: the rematch's evidence (``evidence_rematch.py``'s
    ``EVIDENCE``, the gate off as there) and its verification budget an evolution."""
    rematch = load_script(HERE / "evidence_rematch.py", "inspo_benchmark_evidence_rematch")
    return (*rematch.EVIDENCE, f"coevolution.evolve_rollouts={EVOLVE_ROLLOUTS}")


def _campaign():
    """benchmarks/learning/multihop_coevolution.py, the campaign machinery this script sets up."""
    return load_script(HERE / "multihop_coevolution.py", "inspo_benchmark_multihop_coevolution")


def setting(quick: bool = False):
    """The calculator campaign's :class:`Setting` (its arms, groups and extra test set)."""
    campaign = _campaign()
    return campaign.Setting(
        script="benchmarks/learning/calculator_campaign.py", preset="calculator", arms=ARMS, untrained=UNTRAINED,
        comparisons=COMPARISONS, groups=("generated",), group=lambda q: "generated", quick=QUICK,
        extra_tests={"handwritten": str(HANDWRITTEN)}, crosses=CROSSES, per_seed=evidence_instruction,
        arm_settings={"inspo-evidence": evidence_settings()})


def main(argv: Sequence[str] | None = None) -> dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--quick" not in argv and "--combine" not in argv:  # a language-model optimizer, unless --set says another
        argv = [*(x for o in OPTIMIZER for x in ("--set", o)), *argv]
    return _campaign().main(argv, setting())


if __name__ == "__main__":
    main()
