"""benchmarks/learning/evidence_summary.py (issue 63's summary.json): records checked against a
naive computation on rematch results written here."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from test_benchmarks import load_script


def rematch(seed, rng, lift_inspo, lift_gepa=None, n=30):
    """A rematch result whose INSPO (and GEPA) solve each problem the seed instruction solves, plus
    some it does not, so that the lift is about ``lift``."""
    base = [float(rng.random() < 0.4) for _ in range(n)]
    arms = {"seed": base, "inspo": [max(b, float(rng.random() < lift_inspo)) for b in base]}
    if lift_gepa is not None:
        arms["gepa"] = [max(b, float(rng.random() < lift_gepa)) for b in base]
    means = {k: statistics.fmean(v) for k, v in arms.items()}
    diffs = {f"{a} - seed": {"mean": means[a] - means["seed"]} for a in arms if a != "seed"}
    return {"seed": seed, "test_question_ids": [f"t{i}" for i in range(n)], "test_rewards": arms,
            "test_mean": means, "differences": diffs, "budget_rollouts": 900, "inspo_rollouts": 880,
            "rollouts_by_kind": {"step": 192}, "over_budget": False, "settings": ["x=1"],
            "optimizer_calls": {"inspo": 12, "gepa": 120 if lift_gepa is not None else None},
            "optimizer_tokens": 5000, "wall_s": {"inspo": 10.0}, "fates": {"proposed": 9, "race": 6, "admitted": 2},
            "provenance": {"commit": "abc", "command": "c", "versions": {"inspo": "0"}, "dtype": "bfloat16",
                           "machine": {"cpu_flags": ["avx2"]}}}


def naive_seed_interval(values):
    m, sd, k = statistics.fmean(values), statistics.stdev(values), len(values)
    t = {1: 12.706, 2: 4.303, 3: 3.182}[k - 1]
    return m - t * sd / math.sqrt(k), m + t * sd / math.sqrt(k)


def test_the_records_match_a_naive_computation_and_count_hits_per_seed(tmp_path):
    script = load_script("evidence_summary")
    rng = random.Random(0)
    runs = [rematch(0, rng, 0.3, 0.5), rematch(1, rng, 0.05, 0.4), rematch(2, rng, 0.4, 0.3),
            rematch(3, rng, 0.2), rematch(4, rng, 0.0)]
    paths = []
    for r in runs:
        paths.append(tmp_path / f"rematch-s{r['seed']}.json")
        paths[-1].write_text(json.dumps(r))
    s = script.main([*map(str, reversed(paths)), "--out", str(tmp_path / "summary.json")])
    io = s["instruction_only"]
    assert io["seeds"] == [0, 1, 2, 3, 4] and io["seeds_with_gepa"] == [0, 1, 2]
    rec = io["inspo_minus_gepa"]
    per = [statistics.fmean(r["test_rewards"]["inspo"]) - statistics.fmean(r["test_rewards"]["gepa"]) for r in runs[:3]]
    assert rec["per_seed"] == pytest.approx(per) and rec["mean"] == pytest.approx(statistics.fmean(per))
    assert rec["ci95"] == pytest.approx(naive_seed_interval(per), abs=1e-3)
    pooled = [statistics.fmean(r["test_rewards"]["inspo"][i] - r["test_rewards"]["gepa"][i] for r in runs[:3])
              for i in range(30)]
    assert statistics.fmean(pooled) == pytest.approx(rec["mean"])
    assert rec["ci95_pooled"][0] < rec["mean"] < rec["ci95_pooled"][1]
    lifts = [r["differences"]["inspo - seed"]["mean"] for r in runs]
    hits = io["hit_rate"]["inspo"]
    assert hits["per_seed"] == [x >= 0.1 for x in lifts] and hits["mean"] == sum(x >= 0.1 for x in lifts) / 5
    assert hits["ci95"][0] <= hits["mean"] <= hits["ci95"][1] and hits["ci95_pooled"] is None
    assert len(io["hit_rate"]["gepa"]["per_seed"]) == 3 and io["inspo_minus_seed"]["seeds"] == 5
    assert s["fates"]["total"] == {"proposed": 45, "race": 30, "admitted": 10}
    assert s["provenance"]["runs"][0]["commit"] == "abc" and s["provenance"]["cpu_flags"] == ["avx2"]
    assert json.loads((tmp_path / "summary.json").read_text())["instruction_only"]["seeds"] == [0, 1, 2, 3, 4]


def test_wilson_and_the_detectable_effect_against_known_values():
    script = load_script("evidence_summary")
    lo, hi = script.wilson(3, 3)
    assert hi == 1.0 and lo == pytest.approx(0.4385, abs=1e-3)  # Wilson's interval for 3 of 3
    lo, hi = script.wilson(0, 5)
    assert lo == 0.0 and hi == pytest.approx(0.4345, abs=1e-3)
    # three seeds with sd 0.2: (t_0.975,2 + t_0.8,2) x 0.2 / sqrt(3) = (4.303 + 1.061) x 0.1155
    assert script.detectable([0.0, 0.2, 0.4]) == pytest.approx((4.3027 + 1.0607) * 0.2 / math.sqrt(3), abs=1e-3)


def test_an_ablation_is_its_lift_minus_the_main_runs_on_the_same_seed(tmp_path):
    script = load_script("evidence_summary")
    rng = random.Random(1)
    main = [rematch(0, rng, 0.3, 0.5), rematch(1, rng, 0.3, 0.5)]
    gate = [dict(rematch(0, rng, 0.0), settings=["coevolution.gate=true"]),
            dict(rematch(1, rng, 0.0), settings=["coevolution.gate=true"])]
    s = script.summarise(main, {"gate": gate}, {}, [])
    rec = s["ablations"]["gate"]["ablation_minus_main"]
    expect = [statistics.fmean(a["test_rewards"]["inspo"]) - statistics.fmean(a["test_rewards"]["seed"])
              - statistics.fmean(m["test_rewards"]["inspo"]) + statistics.fmean(m["test_rewards"]["seed"])
              for a, m in zip(gate, main, strict=True)]
    assert rec["per_seed"] == pytest.approx(expect)
    with pytest.raises(SystemExit, match="no main run of"):
        script.summarise(main, {"gate": [dict(gate[0], seed=7)]}, {}, [])


def test_an_ablation_at_an_older_commit_is_compared_with_the_main_run_at_that_commit(tmp_path):
    script = load_script("evidence_summary")
    rng = random.Random(3)
    old_provenance = {**rematch(0, rng, 0.0)["provenance"], "commit": "old"}
    main, old_main = rematch(0, rng, 0.1, 0.5), dict(rematch(0, rng, 0.6), provenance=old_provenance)
    gate = dict(rematch(0, rng, 0.3), provenance=old_provenance, settings=["coevolution.gate=true"])
    with pytest.raises(SystemExit, match="--baseline"):
        script.summarise([main], {"gate": [gate]}, {}, [])
    s = script.summarise([main], {"gate": [gate]}, {}, [], baselines=[old_main])
    a = s["ablations"]["gate"]
    def lift(r):
        return statistics.fmean(r["test_rewards"]["inspo"]) - statistics.fmean(r["test_rewards"]["seed"])

    assert a["ablation_minus_main"]["per_seed"] == pytest.approx([lift(gate) - lift(old_main)])
    assert lift(gate) - lift(old_main) != pytest.approx(lift(gate) - lift(main))  # the pairing can be wrong
    assert a["commits"] == ["old"] and a["main_test_mean"][0] == old_main["test_mean"]
    assert s["instruction_only"]["seeds"] == [0]  # a baseline is not a main run


def test_refusals_that_keep_a_wrong_summary_from_being_written(tmp_path):
    script = load_script("evidence_summary")
    rng = random.Random(2)
    a, b = rematch(0, rng, 0.3, 0.5), rematch(0, rng, 0.3, 0.5)
    with pytest.raises(SystemExit, match="two results of one seed"):
        script.summarise([a, b], {}, {}, [])
    c = dict(rematch(1, rng, 0.3, 0.5, n=20))
    with pytest.raises(SystemExit, match="different test problems"):
        script.summarise([a, c], {}, {}, [])
    with pytest.raises(SystemExit, match="NAME=FILE"):
        script.main(["x.json", "--ablation", "gate"])
    with pytest.raises(SystemExit, match="integer seed, got 's0'"):
        script.main(["x.json", "--paper-inspo", "s0=arm5.json"])


def test_hand_written_scores_are_read_from_inspo_evals_json(tmp_path):
    script = load_script("evidence_summary")
    rows = [{"instruction": name, "question_id": f"h{i}", "reward": float(r)}
            for name, rewards in (("seed", [1, 0, 0, 0]), ("inspo", [1, 1, 0, 0]), ("gepa", [1, 1, 1, 0]))
            for i, r in enumerate(rewards)]
    path = tmp_path / "hw.json"
    path.write_text(json.dumps({"questions": rows}))
    out = script.handwritten({0: path})["0"]
    assert out["mean"] == {"seed": 0.25, "inspo": 0.5, "gepa": 0.75} and out["problems"] == 4
    assert out["minus_seed"]["gepa"]["mean"] == pytest.approx(0.5)
    path.write_text(json.dumps({"questions": [dict(r, instruction="calculator") for r in rows]}))
    with pytest.raises(SystemExit, match="no instruction named 'seed'"):
        script.handwritten({0: path})


def test_the_evidence_is_paired_with_the_papers_inspo_on_the_same_problems(tmp_path):
    script = load_script("evidence_summary")
    rng = random.Random(4)
    main = [rematch(0, rng, 0.3, 0.5), rematch(1, rng, 0.1, 0.5)]
    papers = {}
    for r in main:
        other = rematch(r["seed"], rng, 0.2)
        papers[r["seed"]] = tmp_path / f"arm5-s{r['seed']}.json"
        papers[r["seed"]].write_text(json.dumps({"test_question_ids": other["test_question_ids"],
                                                 "test_rewards": {"inspo": other["test_rewards"]["inspo"]}}))
    s = script.summarise(main, {}, {}, [], paper=papers)
    rec = s["instruction_only"]["versus_paper_inspo"]["evidence_minus_paper_inspo"]
    expect = [statistics.fmean(r["test_rewards"]["inspo"])
              - statistics.fmean(json.loads(papers[r["seed"]].read_text())["test_rewards"]["inspo"]) for r in main]
    assert rec["per_seed"] == pytest.approx(expect) and rec["seeds"] == 2
    assert "versus_paper_inspo" not in script.summarise(main, {}, {}, [])["instruction_only"]
    papers[1].write_text(json.dumps({"test_question_ids": ["other"] * 30, "test_rewards": {"inspo": [0.0] * 30}}))
    with pytest.raises(SystemExit, match="other test problems"):
        script.summarise(main, {}, {}, [], paper=papers)
    with pytest.raises(SystemExit, match="no main run"):
        script.summarise(main, {}, {}, [], paper={7: papers[0]})


def campaign_result(arm, seed, rewards, n=30, **extra):
    """A calculator_campaign.py result: ``rewards`` the test rewards by name (``returned``, ``seed``...)."""
    return {"arm": arm, "seed": seed, "test_question_ids": [f"t{i}" for i in range(n)], "test_rewards": rewards,
            "provenance": {"commit": f"c{seed}", "command": "campaign", "machine": {"cpu": "cpu"}}, **extra}


def rl_campaign(tmp_path):
    """Three seeds of rematches and campaign results (GEPA then GRPO missing for seed 2, the evidence
    search returning an instruction of its own for seed 0 only), written under ``tmp_path``."""
    script = load_script("evidence_summary")
    rng = random.Random(5)
    draw = lambda p: [float(rng.random() < p) for _ in range(30)]  # noqa: E731
    main = [rematch(s, rng, lift, 0.5) for s, lift in ((0, 0.3), (1, 0.0), (2, 0.0))]
    for r in main:
        r["final_choice"] = {"seed_returned": r["seed"] != 0}
    runs = tmp_path / "campaign"
    runs.mkdir()
    written = {}
    for seed in (0, 1, 2):
        arms = {"inspo-evidence": {"returned": draw(0.6), "seed": draw(0.4)}, "static-calculator": {"returned": draw(0.4)},
                "inspo-calculator": {"returned": draw(0.45)}, "cross-inspo-evidence": {"untrained": draw(0.5)}}
        if seed != 2:  # seed 2 has no GEPA-then-GRPO run: left out, never filled in
            arms["gepa-then-grpo"] = {"returned": draw(0.8)}
        if seed == 0:  # the evidence search returned an instruction of its own for seed 0 only
            arms["pre-policy-evidence"] = {"returned": draw(0.5)}
        for arm, rewards in arms.items():
            written[arm, seed] = rewards
            hand = {"handwritten": {"rewards": {"returned": [1.0, 0.0]}}} if arm == "inspo-evidence" else {}
            (runs / f"{arm}-s{seed}.json").write_text(json.dumps(campaign_result(arm, seed, rewards, extra=hand)))
    (runs / "untrained-s0.json").write_text(json.dumps(campaign_result("untrained", 0, {"calculator": draw(0.3)})))
    paths = []
    for r in main:
        paths.append(tmp_path / f"rematch-s{r['seed']}.json")
        paths[-1].write_text(json.dumps(r))
    return script, main, paths, runs, written, draw


def test_the_rl_section_pairs_inspo_with_each_arm_by_seed_and_never_fills_a_missing_one(tmp_path, capsys):
    script, main, paths, runs, written, draw = rl_campaign(tmp_path)
    rl = script.main([*map(str, paths), "--rl", str(runs)])["rl"]

    def naive(a, b, seeds):
        return [statistics.fmean(written[a, s]["returned"]) - statistics.fmean(written[b, s]["returned"]) for s in seeds]

    assert rl["seeds"] == [0, 1, 2] and rl["pre_policy_is_static"] == [1, 2]
    assert rl["inspo_minus_static"]["per_seed"] == pytest.approx(naive("inspo-evidence", "static-calculator", [0, 1, 2]))
    assert rl["inspo_minus_static"]["ci95"] == pytest.approx(
        naive_seed_interval(naive("inspo-evidence", "static-calculator", [0, 1, 2])), abs=1e-3)
    gepa = rl["inspo_minus_gepa_then_grpo"]
    assert gepa["per_seed"] == pytest.approx(naive("inspo-evidence", "gepa-then-grpo", [0, 1]))
    assert gepa["seed_ids"] == [0, 1] and gepa["missing"] == [2]
    pre = rl["inspo_minus_pre_policy"]  # seeds 1, 2: static GRPO under @calculator stands for it
    assert pre["per_seed"] == pytest.approx([naive("inspo-evidence", "pre-policy-evidence", [0])[0],
                                             *naive("inspo-evidence", "static-calculator", [1, 2])])
    own = [statistics.fmean(written["inspo-evidence", s]["returned"]) - statistics.fmean(written["inspo-evidence", s]["seed"])
           for s in (0, 1, 2)]
    assert rl["policy_versus_prompt"]["per_seed"] == pytest.approx(own)
    base = statistics.fmean(json.loads((runs / "untrained-s0.json").read_text())["test_rewards"]["calculator"])
    lifts = [statistics.fmean(written["cross-inspo-evidence", s]["untrained"]) - base for s in (0, 1, 2)]
    assert rl["hit_rate"]["inspo"]["hit_size"] == pytest.approx(lifts)
    assert rl["hit_rate"]["inspo"]["per_seed"] == [x >= 0.1 for x in lifts]
    assert rl["hit_rate"]["evidence_search"]["per_seed"] == [r["differences"]["inspo - seed"]["mean"] >= 0.1 for r in main]
    assert "paper_inspo" not in rl["hit_rate"]  # no cross scoring of the paper's INSPO was given
    assert rl["handwritten_mean"] == {"inspo": {0: 0.5, 1: 0.5, 2: 0.5}}
    assert {(p["arm"], p["seed"]) for p in rl["provenance"]} >= {("gepa-then-grpo", 0), ("static-calculator", 2)}
    assert "inspo_minus_gepa_then_grpo: " in capsys.readouterr().out
    (runs / "static-calculator-s1.json").write_text(json.dumps(campaign_result("static-calculator", 1, {"returned": [0.0]}, n=1)))
    with pytest.raises(SystemExit, match="static-calculator seed 1 was scored on other test problems"):
        script.main([*map(str, paths), "--rl", str(runs)])
    other = tmp_path / "other"
    other.mkdir()
    (other / "inspo-evidence-s0.json").write_text((runs / "inspo-evidence-s0.json").read_text())
    with pytest.raises(SystemExit, match="inspo-evidence seed 0 twice"):
        script.main([*map(str, paths), "--rl", str(runs), "--rl", str(other)])
    # a stored arm that did not reproduce, run again: the rerun replaces it, and says so
    (runs / "static-calculator-s1.json").write_text(json.dumps(campaign_result("static-calculator", 1, {"returned": draw(0.4)})))
    again = tmp_path / "again"
    again.mkdir()
    rerun = draw(0.9)
    (again / "static-calculator-s0.json").write_text(json.dumps(campaign_result("static-calculator", 0, {"returned": rerun})))
    rl = script.main([*map(str, paths), "--rl", str(runs), "--rl-rerun", str(again)])["rl"]
    assert rl["replaced"] == [{"arm": "static-calculator", "seed": 0, "stored": str(runs / "static-calculator-s0.json"),
                               "rerun": str(again / "static-calculator-s0.json")}]
    assert rl["inspo_minus_static"]["per_seed"][0] == pytest.approx(
        statistics.fmean(written["inspo-evidence", 0]["returned"]) - statistics.fmean(rerun))
    (again / "gepa-then-grpo-s2.json").write_text(json.dumps(campaign_result("gepa-then-grpo", 2, {"returned": rerun})))
    with pytest.raises(SystemExit, match="no stored gepa-then-grpo seed 2 in the --rl folders"):
        script.main([*map(str, paths), "--rl", str(runs), "--rl-rerun", str(again)])
    with pytest.raises(SystemExit, match="give those with --rl"):
        script.main([*map(str, paths), "--rl-rerun", str(again)])


def test_rl_lift_is_each_arms_trained_policy_minus_the_base_policy_under_its_own_instruction(tmp_path):
    script, main, paths, runs, written, _ = rl_campaign(tmp_path)
    rl = script.main([*map(str, paths), "--rl", str(runs)])["rl"]
    # what RL added under each arm's own instruction: trained minus the base policy under it
    frozen = {s: r["test_rewards"] for s, r in enumerate(main)}

    def lift_of(arm, seed, base):
        return statistics.fmean(written[arm, seed]["returned"]) - statistics.fmean(base)

    lifts = rl["rl_lift"]
    assert lifts["static"]["per_seed"] == pytest.approx([lift_of("static-calculator", s, frozen[s]["seed"]) for s in (0, 1, 2)])
    assert lifts["gepa_then_grpo"]["seed_ids"] == [0, 1]
    assert lifts["gepa_then_grpo"]["per_seed"] == pytest.approx([lift_of("gepa-then-grpo", s, frozen[s]["gepa"]) for s in (0, 1)])
    assert lifts["pre_policy"]["per_seed"] == pytest.approx([lift_of("pre-policy-evidence", 0, frozen[0]["inspo"]),
                                                             *(lift_of("static-calculator", s, frozen[s]["seed"]) for s in (1, 2))])
    assert lifts["inspo"]["per_seed"] == pytest.approx(
        [lift_of("inspo-evidence", s, written["cross-inspo-evidence", s]["untrained"]) for s in (0, 1, 2)])
    assert lifts["inspo"]["untrained_mean"] == pytest.approx(
        [statistics.fmean(written["cross-inspo-evidence", s]["untrained"]) for s in (0, 1, 2)])
    assert "paper_inspo" not in lifts  # its instruction was never scored with the base policy here
