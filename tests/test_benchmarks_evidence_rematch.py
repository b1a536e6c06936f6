"""benchmarks/learning/evidence_rematch.py (issue 63 (b)): the new evidence against a stored GEPA
arm, on the quick setting (tiny random policy, rule-based optimizer): the machinery only."""

from __future__ import annotations

import json

import pytest

from test_benchmarks import load_script


def stored_arm(tmp_path, rollouts):
    from inspo.envs import make_env

    ids = [q.id for q in make_env("calculator").questions("test")[:3]]
    path = tmp_path / "gepa-calc-s0.json"
    path.write_text(json.dumps({
        "settings": {"max_rounds": 1, "candidates_per_call": 2, "warmup_questions": 2},
        "gepa": {"rollouts": rollouts, "optimizer_calls": 7, "wall_s": 1.0,
                 "best_instruction": "Answer with <calc> 2 + 2 </calc> then <answer> 4 </answer>."},
        "test_question_ids": ids,
    }))
    return path


def test_the_quick_rematch_fits_gepas_budget_and_scores_three_arms_on_its_test(tmp_path, capsys):
    script = load_script("evidence_rematch")
    out = tmp_path / "run"
    result = script.main(["--quick", "--threads", "1", "--gepa", str(stored_arm(tmp_path, 200)), "--out", str(out),
                          "--json", str(tmp_path / "r.json")])
    plan = result["plan"]
    assert plan["budget"] == 200 and plan["per evolution"] == (200 - 16 - 2 - 12) // 2
    assert result["inspo_rollouts"] == sum(result["rollouts_by_kind"].values())
    assert result["over_budget"] == (result["inspo_rollouts"] > 200)
    assert set(result["test_rewards"]) == {"seed", "inspo", "gepa"}
    assert all(len(v) == 3 for v in result["test_rewards"].values())
    assert "coevolution.admission=paired" in result["settings"] and result["evidence"]
    assert result["fates"]["proposed"] >= result["fates"]["admitted"]
    assert "hit (INSPO >= +0.1 over the seed)" in capsys.readouterr().out
    assert json.loads((tmp_path / "r.json").read_text())["budget_rollouts"] == 200
    # --stop asks the seed in OUT to stop at its next save; a resume of a finished seed has none
    # left (only its final choice and the test are played), so it finishes and removes the file
    with pytest.raises(SystemExit, match="no run there"):
        script.main(["--stop", str(tmp_path / "nothing")])
    script.main(["--stop", str(out)])
    assert (out / "STOP").is_file()
    script.main(["--quick", "--threads", "1", "--gepa", str(stored_arm(tmp_path, 200)), "--out", str(out),
                 "--resume"])
    assert not (out / "STOP").exists()


def test_a_budget_too_small_for_one_d_b_is_refused_before_anything_runs(tmp_path):
    script = load_script("evidence_rematch")
    with pytest.raises(SystemExit, match="less than one D_B"):
        script.main(["--quick", "--gepa", str(stored_arm(tmp_path, 30)), "--out", str(tmp_path / "run")])


def test_a_seed_with_no_gepa_result_plays_the_seed_and_inspo_on_its_budget(tmp_path):
    script = load_script("evidence_rematch")
    stored = stored_arm(tmp_path, 999)  # its rollouts are GEPA's seed 0's, not this seed's budget
    with pytest.raises(SystemExit):  # a budget belongs to --inspo-alone only
        script.main(["--quick", "--gepa", str(stored), "--budget", "200", "--out", str(tmp_path / "x")])
    result = script.main(["--quick", "--threads", "1", "--seed", "3", "--inspo-alone", "--budget", "200",
                          "--gepa", str(stored), "--out", str(tmp_path / "run")])
    assert result["plan"]["budget"] == 200 and result["gepa_result"] is None
    assert set(result["test_rewards"]) == {"seed", "inspo"} and list(result["differences"]) == ["inspo - seed"]
    assert result["optimizer_calls"]["gepa"] is None and "rl.seed=3" in result["settings"]


def test_inspo_alone_defaults_to_the_mean_of_the_stored_gepa_budgets(tmp_path):
    script = load_script("evidence_rematch")
    for seed, rollouts in ((1, 900), (2, 1000), (0, 1101)):  # stored_arm writes gepa-calc-s0.json
        stored_arm(tmp_path, rollouts).rename(tmp_path / f"gepa-calc-s{seed}.json")
    args = script.parse_args(["--inspo-alone", "--seed", "4", "--gepa", str(tmp_path / "gepa-calc-s0.json")])
    assert script.budget_of(args, {}) == 1000
