"""The calculator's benchmarks (issues 32 and 33): the frozen-policy pilot and the campaign of arms.

Quick modes play the tiny random model (it scores nothing; the tests check the machinery and the
records). The pooling of a campaign is pure and is checked on stored fixtures with known numbers.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pytest

from inspo.lab.power import detectable_effect, seeds_needed
from test_benchmarks import load_script


def test_the_hand_written_problems_are_forty_distinct_and_their_answers_are_their_expressions():
    from fractions import Fraction

    from inspo.data.sources import load_qa_source
    from inspo.envs.calculator.arith import evaluate_expression

    campaign = load_script("calculator_campaign")
    questions = load_qa_source(str(campaign.HANDWRITTEN))
    assert len(questions) == 40 and len({q.question for q in questions}) == 40 and len({q.id for q in questions}) == 40
    for q in questions:
        assert Fraction(q.answers[0]) == evaluate_expression(q.meta["expression"]), q.id
    generated = {q.question for split in ("train", "dev", "test")
                 for q in __import__("inspo.envs", fromlist=["make_env"]).make_env("calculator").questions(split)}
    assert not generated & {q.question for q in questions}


@pytest.mark.slow
def test_the_pilot_quick_run_scores_each_seed_greedy_and_sampled(tmp_path):
    pilot = load_script("calculator_pilot")
    result = pilot.main(["--quick", "--threads", "1", "--json", str(tmp_path / "pilot.json"),
                         "--episodes", str(tmp_path / "episodes.jsonl")])
    assert json.loads((tmp_path / "pilot.json").read_text())["seeds"] == result["seeds"]
    assert set(result["seeds"]) == {"notool", "weak", "calculator", "worked"}
    for cell in result["seeds"].values():
        assert cell["greedy"]["rollouts"] == 4 and cell["sampled"]["rollouts"] == 8  # 4 problems, G 2
        assert len(cell["sampled"]["problem_means"]) == 4
    assert set(result["differences"]["greedy"]) == {"notool - weak", "calculator - weak", "worked - weak"}
    assert result["provenance"]["commit"] and "float32" in result["precision"]
    assert set(result["lever"]) == {"greedy", "sampled"}
    rows = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * (4 + 8) and "completion_ids" not in rows[0]


def test_the_pilot_summary_counts_errors_apart_and_scores_what_remains():
    pilot = load_script("calculator_pilot")
    from inspo.records import Question, Rollout

    q = Question("p", "?", ("3",))
    ok = Rollout(q, "i", "<answer>3</answer>", reward=1.0, answer="3", metrics={"n_tool_errors": 1.0})
    wrong = Rollout(q, "i", "x", reward=0.0, answer=None, metrics={"n_invalid": 1.0})
    error = Rollout(q, "i", "", reward=0.0, finish_reason="error", error="EndpointDown: down")
    cell = pilot.summarise([ok, wrong, error, wrong], group=2)
    assert (cell["problems"], cell["rollouts"], cell["errors"]) == (2, 4, 1)
    assert cell["reward"] == pytest.approx(1 / 3) and cell["format_failures"] == pytest.approx(2 / 3)
    assert cell["pass_at_g"] == 0.5 and cell["mixed_groups"] == 0.5 and cell["problem_means"] == [0.5, 0.0]
    assert cell["tool_errors"] == pytest.approx(1 / 3)


def _result(arm: str, seed: int, rewards: dict, hand: dict) -> dict:
    curves = {"reward": [0.1, 0.2], "tool_calls": [0.5, 1.5], "tool_errors": [0.2, 0.1], "step_s": [3.0, 4.5]}
    return {"arm": arm, "seed": seed, "test_question_ids": ["a", "b", "c"], "test_groups": ["generated"] * 3,
            "test_rewards": rewards, "extra": {"handwritten": {"question_ids": ["h1", "h2"], "rewards": hand}},
            "curves": curves, "events": {"proposed": 8, "refused_guard": 5, "refused_leak": 1, "admitted": 1},
            "returned_is_seed": False, "wall_s": 1.0, "provenance": {"commit": "abc"}}


def test_combine_pairs_arms_by_seed_and_group_and_keeps_the_hand_written_group_apart(capsys):
    campaign = load_script("calculator_campaign")
    mh = campaign._campaign()
    setting = campaign.setting()
    results = [_result("untrained", 0, {"weak": [0, 0, 0], "worked": [1, 1, 0]}, {"weak": [0, 0], "worked": [1, 0]})]
    for seed, inspo, hand in ((0, [1, 1, 0], [1, 0]), (1, [1, 1, 1], [1, 1]), (2, [1, 0, 0], [0, 0])):
        results.append(_result("static-weak", seed, {"seed": [1, 0, 0]}, {"seed": [0, 0]}))
        results.append(_result("inspo-weak", seed, {"returned": inspo, "seed": [1, 0, 0]},
                               {"returned": hand, "seed": [0, 0]}))
    c = mh.combine(results, setting)
    assert c["test_questions"] == {"generated": 3, "handwritten": 2}
    gen = c["comparisons"]["inspo-weak - static-weak"]["hops"]["generated"]
    assert [x["mean"] for x in gen["per_seed"]] == pytest.approx([1 / 3, 2 / 3, 0.0])
    assert gen["seed_mean"] == pytest.approx(1 / 3) and gen["seed_sd"] == pytest.approx(1 / 3)
    assert gen["detectable_effect"] == pytest.approx(detectable_effect(1 / 3, 3))
    assert gen["seeds_for_effect"] == seeds_needed(1 / 3, 0.05)
    hand = c["comparisons"]["inspo-weak - static-weak"]["hops"]["handwritten"]
    assert [x["mean"] for x in hand["per_seed"]] == pytest.approx([0.5, 1.0, 0.0])
    # the untrained policy, scored once, stands for every seed; policy versus prompt
    assert c["comparisons"]["static-weak - untrained:weak"]["seeds"] == [0, 1, 2]
    assert c["comparisons"]["inspo-weak - inspo-weak:seed"]["hops"]["generated"]["seed_mean"] == pytest.approx(1 / 3)
    assert c["means"]["untrained:worked"]["handwritten"] == {"0": 0.5, "1": 0.5, "2": 0.5}
    assert c["curves"]["inspo-weak"]["tool_errors"] == pytest.approx([0.2, 0.1]) and c["events"]["inspo-weak"][0]["refused_leak"] == 1
    # a resumed run's wall time is its last piece's: said apart, beside the time its steps took
    assert c["steps_s"]["inspo-weak"] == [7.5, 7.5, 7.5] and c["resumed"]["inspo-weak"] == [False, False, False]
    # memory per step, per run, where the run recorded it (older results did not): never averaged
    traced = dict(results[-1], curves={**results[-1]["curves"], "rss_gib": [4.6, 4.7], "released_gib": [1.1, 1.4]})
    untraced = dict(results[-2], curves={**results[-2]["curves"], "rss_gib": [math.nan] * 2,
                                         "released_gib": [math.nan] * 2})
    memory = mh.combine([*results[:-2], untraced, traced], setting)
    assert memory["memory"]["inspo-weak"] == {"2": [[4.6, 4.7], [1.1, 1.4]]} and memory["memory"]["static-weak"] == {}
    mh.print_combined(memory, setting)
    assert "memory s2 (GiB after each step's release / released): 4.6/1.1, 4.7/1.4" in capsys.readouterr().out
    resumed = mh.combine([*results[:-1], dict(results[-1], resumed=True)], setting)
    assert resumed["resumed"]["inspo-weak"] == [False, False, True]
    # a pre-policy run's own "seed" test plays the instruction its offline stage handed over: not the seed
    pre = dict(_result("pre-policy-weak", 0, {"returned": [1, 0, 0], "seed": [1, 0, 0]}, {"returned": [1, 0],
                                                                                      "seed": [0, 0]}),
               mode="pre-policy", returned_is_seed=True)
    with_pre = mh.combine([*results, pre], setting)
    assert "pre-policy-weak" in with_pre["means"] and "pre-policy-weak:seed" not in with_pre["means"]
    assert with_pre["returned_is_seed"]["pre-policy-weak"] == []
    # after the library's fix its test plays the run's seed (id run-seed): that column is kept
    fixed = dict(pre, seed=1, returned_is_seed=False, seed_id="run-seed",
                 test_rewards={"returned": [1, 0, 0], "seed": [0, 0, 0]})
    both = mh.combine([*results, pre, fixed], setting)
    assert both["means"]["pre-policy-weak:seed"]["generated"] == {"1": 0.0}
    assert both["returned_is_seed"]["pre-policy-weak"] == [False]
    assert both["comparisons"]["pre-policy-weak - pre-policy-weak:seed"]["seeds"] == [1]
    with pytest.raises(SystemExit, match="same test questions"):
        mh.combine([*results, dict(_result("static-weak", 5, {"seed": [1, 0, 0]}, {"seed": [0]}),
                                   extra={"handwritten": {"question_ids": ["h1"], "rewards": {"seed": [0]}}})], setting)
    assert math.isnan(mh.combine(results[:3], setting)["comparisons"]["inspo-weak - static-weak"]["hops"][
        "generated"]["seed_low"])  # one seed: its paired difference, no interval across seeds


def test_combine_sets_the_worked_example_arm_beside_the_calculator_seeds_arms():
    """Arm 2 (static GRPO under @worked, the upper reference) is compared with the arms the campaign
    runs from @calculator and with the untrained policy under @worked, paired per seed."""
    campaign = load_script("calculator_campaign")
    mh = campaign._campaign()
    results = [_result("untrained", 0, {"worked": [1, 0, 0], "calculator": [0, 0, 0]}, {"worked": [1, 0], "calculator": [0, 0]}),
               _result("static-worked", 0, {"seed": [1, 1, 1]}, {"seed": [1, 1]}),
               _result("static-calculator", 0, {"seed": [1, 0, 0]}, {"seed": [0, 0]}),
               _result("inspo-calculator", 0, {"returned": [1, 1, 0], "seed": [1, 0, 0]}, {"returned": [1, 0], "seed": [0, 0]})]
    c = mh.combine(results, campaign.setting())["comparisons"]
    mean = {name: c[name]["hops"]["generated"]["per_seed"][0]["mean"] for name in (
        "static-worked - static-calculator", "inspo-calculator - static-worked", "static-worked - untrained:worked")}
    assert mean == pytest.approx({"static-worked - static-calculator": 2 / 3, "inspo-calculator - static-worked": -1 / 3,
                                  "static-worked - untrained:worked": 2 / 3})


def test_the_markdown_tables_show_each_score_comparison_and_run_with_its_seed(tmp_path, capsys):
    campaign = load_script("calculator_campaign")
    results = [_result("untrained", 0, {"weak": [0, 0, 0], "worked": [1, 1, 0]}, {"weak": [0, 0], "worked": [1, 0]})]
    for seed, inspo in ((0, [1, 1, 0]), (1, [1, 1, 1])):
        results.append(dict(_result("static-weak", seed, {"seed": [1, 0, 0]}, {"seed": [0, 0]}),
                            events={"proposed": 0}))
        results.append(dict(_result("inspo-weak", seed, {"returned": inspo, "seed": [1, 0, 0]},
                                    {"returned": [1, 0], "seed": [0, 0]}),
                            events={"proposed": 9 + seed, "refused_guard": 7, "refused_leak": 1, "refused_race": 1,
                                    "admitted": 1}))
    for r in results:
        path = tmp_path / "results" / f"{r['arm']}-s{r['seed']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(r))
    tables = tmp_path / "tables.md"
    campaign.main(["--combine", str(tmp_path / "results"), "--markdown", str(tables)])
    text = tables.read_text()
    assert f"tables: {tables}" in capsys.readouterr().out
    assert "| static-weak | s0 0.333, s1 0.333 | s0 0.000, s1 0.000 |" in text
    # inspo - static per seed +1/3 and +2/3: mean +0.5, its interval across the two seeds, SD 0.236
    row = next(line for line in text.splitlines() if line.startswith("| inspo-weak - static-weak | generated |"))
    assert "| +0.333, +0.667 | +0.500 [-1.618, +2.618] | +0.500 [" in row and "| 0.236 |" in row
    one_seed = campaign._campaign().combine(results[:3], campaign.setting())
    one = campaign._campaign()._sibling("campaign_pooling").markdown(one_seed, campaign.setting())
    assert "| inspo-weak - static-weak | generated | +0.333 | one seed |" in one
    # the optimizer's yield, a row per run that proposed something, with its seed
    # (columns: proposed, guard, leak, gate, race, parent, top n, budget, admitted; 0 where a run has no count)
    assert "| inspo-weak | 0 | 9 | 7 | 1 | 0 | 1 | 0 | 0 | 0 | 1 |" in text
    assert "| inspo-weak | 1 | 10 | 7 | 1 | 0 | 1 | 0 | 0 | 0 | 1 |" in text
    assert "| static-weak |" not in text.split("| arm | seed |")[1]  # a run that proposed nothing has no row
    # the step curves, averaged over the arm's seeds (Fig. 2 / 3)
    assert "inspo-weak, per step (mean over seeds 0, 1):" in text
    assert "| step | reward | tool_calls | tool_errors | step_s |" in text and "| 2 | 0.200 | 1.500 | 0.100 | 4.500 |" in text


def test_combine_names_a_cross_scoring_by_policy_and_instruction_arm_and_pairs_it_by_seed(capsys):
    campaign = load_script("calculator_campaign")
    mh = campaign._campaign()
    setting = campaign.setting()
    results = [_result("untrained", 0, {"calculator": [0, 0, 1]}, {"calculator": [0, 0]})]
    for seed in (0, 1):
        results.append(_result("static-calculator", seed, {"seed": [0, 1, 0]}, {"seed": [0, 0]}))
        results.append(_result("inspo-calculator", seed, {"returned": [1, 1, 0], "seed": [0, 0, 0]},
                               {"returned": [1, 0], "seed": [0, 0]}))
        cross = _result("cross-calculator", seed, {"untrained": [1, 0, 0], "static-calculator": [1, 1, seed],
                                                   "inspo-calculator": [1, 1, 0]},
                        {"untrained": [0, 0], "static-calculator": [1, 0], "inspo-calculator": [1, 0]})
        results.append(dict(cross, instruction_arm="inspo-calculator"))
    c = mh.combine(results, setting)
    assert c["means"]["untrained@inspo-calculator"]["generated"] == {"0": 1 / 3, "1": 1 / 3}
    comps = c["comparisons"]
    assert comps["untrained@inspo-calculator - untrained:calculator"]["hops"]["generated"]["seed_mean"] == 0
    assert comps["static-calculator@inspo-calculator - static-calculator"]["hops"]["generated"][
        "seed_mean"] == pytest.approx(0.5)  # seeds: +1/3 and +2/3
    policies = comps["inspo-calculator - static-calculator@inspo-calculator"]["hops"]["generated"]
    assert [x["mean"] for x in policies["per_seed"]] == pytest.approx([0.0, -1 / 3])
    again = comps["inspo-calculator@inspo-calculator - inspo-calculator"]["hops"]["handwritten"]
    # two seeds that agree exactly give no spread: no zero-width interval, no seed count sized from it
    assert again["seed_mean"] == 0 and again["seed_sd"] == 0 and again["seeds_for_effect"] is None
    assert math.isnan(again["seed_low"]) and math.isnan(again["detectable_effect"])
    assert not math.isnan(policies["seed_low"]) and policies["seeds_for_effect"] is not None
    mh.print_combined(c, setting)
    printed = capsys.readouterr().out
    assert "inspo-calculator@inspo-calculator - inspo-calculator handwritten: per seed +0.000, +0.000; over seeds " \
        "+0.000, the 2 seeds agree exactly" in printed and "detectable 0.000" not in printed
    assert "cross-calculator" not in c["curves"]  # a scoring, not a training run


def test_a_cross_scoring_needs_its_instruction_arm_first(tmp_path):
    campaign = load_script("calculator_campaign")
    with pytest.raises(SystemExit, match="run --arms inspo-calculator first"):
        campaign.main(["--quick", "--threads", "1", "--out", str(tmp_path), "--arms", "cross-calculator"])


def test_the_campaign_defaults_to_a_language_model_optimizer():
    campaign = load_script("calculator_campaign")
    mh = campaign._campaign()
    args = mh.parse_args([*(x for o in campaign.OPTIMIZER for x in ("--set", o)), "--seed", "2"], campaign.setting())
    o = mh.overrides(args, "inspo-weak", campaign.setting())
    assert "optimizer.kind=local" in o and "optimizer.local_model_path=qwen2.5-coder-1.5b" in o
    assert "mode=inspo" in o and "seed_instruction=@weak" in o and "rl.seed=2" in o
    quick = mh.parse_args(["--quick"], campaign.setting())
    assert "optimizer.kind=rule-based" in quick.set  # the smoke run only: no evidence about instructions


@pytest.mark.slow
def test_the_campaign_quick_run_plays_every_arm_scores_both_groups_and_skips_what_is_done(tmp_path, capsys):
    campaign = load_script("calculator_campaign")
    argv = ["--quick", "--threads", "1", "--out", str(tmp_path)]
    done = campaign.main(argv)
    told = capsys.readouterr()
    assert told.out.count("seed 0: running") == len(done)
    # each training step and the final test, as they happen, with the time (no tqdm bars in a log)
    assert re.search(r"^\d\d:\d\d:\d\d step 2/2 \| reward ", told.err, re.M), told.err[-2000:]
    # ... and each greedy scoring of a cross arm or an extra test set, as it starts and ends
    assert re.search(r"^\d\d:\d\d:\d\d scored .*static-calculator-s0/model: mean reward ", told.err, re.M)
    assert set(done) == {"untrained", *campaign.ARMS, *campaign.CROSSES}
    assert len({tuple(r["test_question_ids"]) for r in done.values()}) == 1
    for arm, r in done.items():
        assert r["extra"]["handwritten"]["question_ids"][:2] == ["hand-00", "hand-01"]
        assert len(r["extra"]["handwritten"]["question_ids"]) == 4  # --quick plays an extra set's first 4
        if arm in campaign.ARMS:
            assert r["curves"]["tool_calls"] == [1.0, 1.0]  # the prefill forces one calc call an episode
    cross = done["cross-calculator"]
    assert cross["instruction_text"] == done["inspo-calculator"]["returned_text"]
    # INSPO's own policy under its own instruction, scored again: the same greedy rewards as its run's test
    assert cross["test_rewards"]["inspo-calculator"] == done["inspo-calculator"]["test_rewards"]["returned"]
    assert set(cross["extra"]["handwritten"]["rewards"]) == {"untrained", "static-calculator", "inspo-calculator"}
    frozen = done["cross-pre-policy-calculator"]  # the frozen search's instruction, played by the same policies
    assert frozen["instruction_text"] == done["pre-policy-calculator"]["returned_text"]
    assert set(frozen["test_rewards"]) == {"untrained", "static-calculator", "inspo-calculator"}
    assert set(done["inspo-weak"]["extra"]["handwritten"]["rewards"]) == {"returned", "seed"}
    assert done["inspo-weak"]["events"]["proposed"] > 0 and done["pre-policy-weak"]["events"]["proposed"] > 0
    pre = done["pre-policy-weak"]  # its test played the config's seed; its spend counts the offline stage's
    handed = json.loads((Path(pre["run_dir"]) / "summary.json").read_text())["stages"]["pre-policy"]["best_instruction"]
    weak = done["static-weak"]["returned_text"]  # a static run returns its seed
    assert pre["seed_id"] == ("ins-0001" if handed == weak else "run-seed") and pre["rollouts"]["offline_rollouts"] > 0
    assert pre["rollouts"]["verification_rollouts"] >= pre["stage_ledgers"]["pre-policy"]["verification_rollouts"] > 0
    assert "offline_rollouts" not in done["inspo-weak"]["rollouts"] and done["inspo-weak"]["seed_id"] == "ins-0001"
    capsys.readouterr()
    again = campaign.main(argv)  # NaN (a curve the calculator has no value for) != NaN: compare as written
    assert json.dumps(again, sort_keys=True) == json.dumps(done, sort_keys=True)
    assert capsys.readouterr().out.count("done before") == len(campaign.ARMS) + len(campaign.CROSSES) + 1
    combined = campaign.main(["--combine", str(tmp_path / "results"), "--json", str(tmp_path / "c.json")])
    assert combined["test_questions"] == {"generated": 6, "handwritten": 4}
    assert json.loads((tmp_path / "c.json").read_text())["seeds"] == [0]


def test_greedy_drift_pairs_greedy_episodes_by_cell_and_question_and_counts_what_changed(tmp_path, capsys):
    drift = load_script("greedy_drift")

    def row(cell, qid, response, reward, answer=None, error=None):
        return {"cell": cell, "question": {"id": qid}, "response": response, "reward": reward,
                "answer": answer, "error": error}

    a = [row("greedy:weak", "q1", "x", 0.0, "1"), row("greedy:weak", "q2", "y", 1.0, "2"),
         row("greedy:worked", "q1", "z", 1.0, "3"), row("greedy:worked", "q3", "e", 0.0, error="boom"),
         row("sampled:weak", "q1", "s", 1.0, "1"), row("greedy:weak", "q9", "only in A", 0.0)]
    b = [row("greedy:weak", "q1", "x'", 1.0, "5"), row("greedy:weak", "q2", "y", 1.0, "2"),
         row("greedy:worked", "q1", "z'", 1.0, "3"), row("greedy:worked", "q3", "e", 1.0, "4"),
         row("sampled:weak", "q1", "t", 0.0, "0")]
    import gzip

    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in a))
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as fh:  # the committed episode files are gzipped
        fh.write("".join(json.dumps(r) + "\n" for r in b))
    result = drift.main([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl.gz"), "--json", str(tmp_path / "d.json")])
    weak, worked = result["cells"]["greedy:weak"], result["cells"]["greedy:worked"]
    assert (weak["episodes"], weak["response_changed"], weak["answer_changed"], weak["reward_changed"]) == (2, 1, 1, 1)
    assert weak["mean_diff"] == 0.5 and worked["errors"] == 1  # an error episode is counted apart, never scored
    assert (worked["response_changed"], worked["answer_changed"], worked["mean_diff"]) == (1, 0, 0.0)
    assert result["unpaired"] == 1 and "sampled:weak" not in result["cells"]  # sampled cells are not compared
    assert result["all"]["episodes"] == 4 and result["all"]["response_changed"] == 2
    assert json.loads((tmp_path / "d.json").read_text())["all"] == result["all"]
    assert "1 episodes were in one file only" in capsys.readouterr().out


def test_the_pilots_table_shows_each_seed_with_its_paired_difference_from_weak():
    pilot = load_script("calculator_pilot")
    cell = {"reward": 0.5, "tool_calls": 2.0, "tool_errors": 0.25, "format_failures": 0.1, "pass_at_g": 0.75,
            "mixed_groups": 0.5}
    result = {"group": 8, "seeds": {"weak": {"greedy": {**cell, "reward": 0.0}, "sampled": {**cell, "reward": 0.1}},
                                    "worked": {"greedy": cell, "sampled": cell}},
              "differences": {"greedy": {"worked - weak": {"mean": 0.5, "low": 0.4, "high": 0.6, "n": 200}},
                              "sampled": {"worked - weak": {"mean": 0.4, "low": 0.3, "high": 0.5, "n": 200}}}}
    lines = pilot.markdown(result).splitlines()
    assert "sampled reward (G 8)" in lines[0] and "pass@8" in lines[0] and len(lines) == 4
    assert lines[2] == "| weak | 0.000 | - | 0.100 | - | 2.00 | 0.25 | 10.0% | 75.0% | 50.0% |"
    assert lines[3] == ("| worked | 0.500 | +0.500 [+0.400, +0.600] | 0.500 | +0.400 [+0.300, +0.500] | 2.00 | 0.25 | "
                        "10.0% | 75.0% | 50.0% |")
    greedy_only = pilot.markdown({"group": 0, "seeds": {"weak": {"greedy": cell}}})
    assert greedy_only.splitlines()[2] == "| weak | 0.500 | - | - | - | 2.00 | 0.25 | 10.0% | - | - |"


def _pilot_part(seeds: dict[str, list[float]], **setting) -> dict:
    base = {"model": "m", "engine": "vllm", "precision": "bf16", "env": {"steps": 2}, "problems": 3, "group": 2,
            "temperature": 1.0, "agent": {"max_turns": 3}, "seed": 0}
    base.update(setting)
    cells = {name: {"text": name, "sampled": {"reward": sum(means) / len(means), "problem_means": means,
                                              "pass_at_g": 1.0, "mixed_groups": 0.0, "tool_calls": 0.0,
                                              "tool_errors": 0.0, "format_failures": 0.0}}
             for name, means in seeds.items()}
    return {**base, "seeds": cells, "provenance": {"commit": "abc"}, "timing": {"sampled": {"wall_s": 1.0}}, "errors": 0}


def test_the_pilot_joins_runs_of_single_seeds_and_pairs_them_as_one_run_would(tmp_path):
    pilot = load_script("calculator_pilot")
    weak, worked = [0.0, 0.5, 0.0], [1.0, 0.5, 1.0]
    paths = []
    for i, part in enumerate((_pilot_part({"weak": weak}), _pilot_part({"worked": worked}))):
        paths.append(tmp_path / f"part{i}.json")
        paths[-1].write_text(json.dumps(part))
    joined = pilot.main(["--combine", *map(str, paths), "--json", str(tmp_path / "all.json")])
    diff = joined["differences"]["sampled"]["worked - weak"]
    assert diff["mean"] == pytest.approx(2 / 3) and diff["n"] == 3
    assert joined["lever"]["sampled"]["gap"] == pytest.approx(2 / 3)
    assert [p["seeds"] for p in joined["parts"]] == [["weak"], ["worked"]]
    assert json.loads((tmp_path / "all.json").read_text())["differences"] == joined["differences"]
    with pytest.raises(SystemExit, match="differs from run 1 in group, seed"):
        pilot.combine([_pilot_part({"weak": weak}), _pilot_part({"worked": worked}, group=8, seed=1)])
    with pytest.raises(SystemExit, match=r"seed\(s\) \['weak'\] appear in more than one run"):
        pilot.combine([_pilot_part({"weak": weak}), _pilot_part({"weak": worked})])


def _failure(question: str, answer: str, response: str):
    from inspo.records import Question, Rollout

    return Rollout(question=Question(id=question[:8], question=question, answers=(answer,)), instruction_id="weak",
                   response=response, reward=0.0)


def test_the_optimizer_yield_reads_answers_as_a_run_would_and_counts_each_refusal_once():
    import itertools

    from inspo.envs import make_env
    from inspo.records import Instruction

    yield_ = load_script("optimizer_yield")
    env = make_env("calculator")
    parent = Instruction(id="weak", text=env.instructions["weak"])
    shown = [_failure("A box holds 7 packs of 23 pens. How many pens?", "161", "<answer> 150 </answer>"),
             _failure("Sam has 4 bags of 12 nuts and eats 9. How many are left?", "39", "<answer> 40 </answer>")]
    good = "Use <calc> 7 * 23 </calc> for each step, numbers and + - * / only. Put the number in <answer> </answer>."
    answers = [
        ("Analysis.\n<ins_1>\n" + good + "\n</ins_1>\n<ins_2>\nShow your steps and give the answer.\n</ins_2>\n"
         "<ins_3>\nQuestion: A box holds 7 packs of 23 pens. How many pens? <calc>7*23</calc> Correct answer: 161"
         " <answer> </answer>\n</ins_3>\n<ins_4>\nAlways answer 161 with <calc> x </calc> and <answer> </answer>.\n</ins_4>",
         "stop"),
        ("no tags at all", "stop"),
        ("<ins_1>\nUse <calc> 2 + 2 </calc> then put it in <answer> </answer> and", "length"),
    ]
    proposer_args = {"template": "reflection", "n_candidates": 4, "max_tokens": 700, "temperature": 0.7,
                     "guard_tags": env.required_tags, "feedback": None}
    counts, rows, usable = yield_.tally([[a] for a in answers], [shown, shown, shown], parent, env, proposer_args,
                                        [], itertools.count(1))
    assert counts["prompts"] == 3 and counts["candidates"] == 5
    assert counts["no_candidate"] == 2 and counts["cut_off"] == 1 and counts["truncated"] == 1
    assert counts["tag_guard"] == 1                      # "Show your steps ..." drops both tags
    assert counts["leak_guard"] == 2                     # a copied problem, and "161" named outright
    assert counts["copies_shown"] == 1
    assert counts["usable"] == 1 and [c.text for _, c in usable] == [good] and usable[0][0] == 0
    assert [len(r["candidates"]) for r in rows] == [4, 0, 1]
    # the three answers read as one call (answers_per_call 3): the same candidates, one row, one prompt
    one, one_rows, one_usable = yield_.tally([answers], [shown], parent, env, proposer_args, [], itertools.count(1))
    assert one["prompts"] == 1 and one["candidates"] == 5 and one["cut_off"] == 1 and one["no_candidate"] == 0
    assert (one["tag_guard"], one["leak_guard"], one["truncated"], one["usable"]) == (1, 2, 1, 1)
    assert one_rows[0]["finishes"] == ["stop", "stop", "length"]


def test_the_optimizer_yield_interval_is_students_t_and_copies_are_found_whatever_the_spacing():
    yield_ = load_script("optimizer_yield")
    values = [0, 1, 0, 2, 1, 0, 0, 1]
    iv = yield_.paired([v + 1 for v in values], [1] * len(values))
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    assert iv["mean"] == pytest.approx(mean) and iv["high"] - mean == pytest.approx(2.364624252 * sd / math.sqrt(8))  # t(0.975, 7)
    assert yield_.paired([3], [0])["low"] is None
    assert yield_.copies_shown("Q:  a  Box holds 7 packs\n", ["A box holds 7 packs"])
    assert yield_.copies_shown("... Correct Answer: 5", [])
    assert not yield_.copies_shown("Use <calc> a * b </calc>.", ["A box holds 7 packs"])


@pytest.mark.slow
def test_the_optimizer_yield_quick_run_counts_every_prompt_of_every_presentation(tmp_path):
    yield_ = load_script("optimizer_yield")
    result = yield_.main(["--quick", "--threads", "1", "--answers", "2", "--json", str(tmp_path / "yield.json")])
    assert set(result["presentations"]) == {"reflection", "feedback", "paraphrase"}
    for stats in result["presentations"].values():
        counts = stats["counts"]
        assert counts["prompts"] == 2 and len(stats["rows"]) == 2
        assert [len(row["answers"]) for row in stats["rows"]] == [2, 2]
        refused = sum(counts.get(k, 0) for k in ("tag_guard", "other_guard", "truncated", "leak_guard"))
        assert counts["candidates"] == refused + counts.get("usable", 0)
    assert result["score_errors"] == 0 and result["pool"]["errors"] == 0
    assert "Feedback:" in result["presentations"]["feedback"]["example_prompt"]
    assert "Feedback:" not in result["presentations"]["reflection"]["example_prompt"]
    assert "<example>" not in result["presentations"]["paraphrase"]["example_prompt"]
    assert json.loads((tmp_path / "yield.json").read_text())["provenance"]["commit"]
    table = yield_.markdown([result, result])
    assert table.count("| weak (") == 6 and "paraphrase - reflection: usable per prompt" in table


def test_the_optimizer_yield_judges_both_leak_scopes_the_gate_and_admission(monkeypatch):
    import itertools

    from inspo.envs import make_env
    from inspo.records import Instruction, Question, Rollout

    yield_ = load_script("optimizer_yield")
    env = make_env("calculator")
    parent = Instruction(id="calculator", text=env.instructions["calculator"])
    box = _failure("A box holds 7 packs of 23 pens. How many pens?", "161", "<answer> 150 </answer>")
    sam = _failure("Sam has 4 bags of 12 nuts and eats 9. How many are left?", "39", "<answer> 40 </answer>")
    dev = [Question(id="dev1", question="A farmer plants 6 rows of 14 trees. How many trees?", answers=("84",)),
           Question(id="dev2", question="Ann reads 5 pages a day for 9 days. How many pages?", answers=("45",))]
    strategies = ["Compute each step with the calculator.",
                  "For example, for 7 packs of 23 pens: 7 * 23 = 161.",  # a shown problem, worked
                  "Example: 6 rows of 14 trees make 84.",  # a dev problem: "84" is too short to leak
                  "Show your steps."]
    answer = "".join(f"<ins_{i}>\n{s}\n</ins_{i}>\n" for i, s in enumerate(strategies, 1))
    proposer_args = {"template": "reflection", "n_candidates": 4, "max_tokens": 700, "temperature": 0.7,
                     "guard_tags": env.required_tags, "feedback": env.feedback, "protocol": env.protocol}
    terms = [t for q in dev for t in env.leak_terms(q)]
    counts, rows, usable = yield_.tally([[(answer, "stop")]], [[box, sam]], parent, env, proposer_args,
                                        terms, itertools.count(1), held_out=dev)
    assert counts["candidates"] == 4 and counts["tag_guard"] == 0
    assert (counts["usable"], counts["leak_guard"], counts["usable_held_out"], counts["leak_held_out"]) == (3, 1, 3, 1)
    assert [c.id for _, c in usable] == ["c0001", "c0002", "c0003", "c0004"]  # usable under some scope
    assert all(c.text.endswith(env.protocol.block) for _, c in usable)
    leak = {c["id"]: c["leak"] for c in rows[0]["candidates"]}
    assert leak["c0002"]["held-out"] is None and "161" in leak["c0002"]["shown"]
    assert leak["c0003"]["shown"] is None and leak["c0003"]["held-out"] == "names held-out problem dev1"
    # the gate: the parent solves sam only; c0002 solves both, but under held-out its own example
    # (box) is left out of its comparison, where it ties
    solved = {("calculator", sam.question.id), ("c0001", box.question.id), ("c0001", sam.question.id),
              ("c0002", box.question.id), ("c0002", sam.question.id), ("c0004", sam.question.id)}
    played = []

    def play_pairs(engine, env_, config, pairs):
        played.extend((ins.id, q.id) for ins, q in pairs)
        return [Rollout(question=q, instruction_id=ins.id, response="", reward=float((ins.id, q.id) in solved))
                for ins, q in pairs]

    monkeypatch.setattr(yield_, "play_pairs", play_pairs)
    triples = [("feedback-protocol", k, c) for k, c in usable]
    gates = yield_.gate_all(None, env, None, parent, triples, [[box, sam]])
    assert played.count(("calculator", box.question.id)) == 1 and len(played) == 2 + 4 * 2
    assert {cid: (g["shown"]["passed"], g["held-out"]["passed"]) for cid, g in gates.items()} == {
        "c0001": (True, True), "c0002": (True, False), "c0003": (False, False), "c0004": (False, False)}
    assert gates["c0002"]["held-out"]["skipped"] == [box.question.id]
    rewards = {"calculator": [0.0, 1.0], "c0001": [1.0, 1.0], "c0002": [1.0, 1.0], "c0003": [1.0, 1.0],
               "c0004": [0.0, 1.0]}
    result = {"parent_name": "calculator", "parent": parent.text,
              "presentations": {"feedback-protocol": {"counts": dict(counts), "rows": rows}}}
    per_prompt = {"feedback-protocol": rows}
    yield_.judge(result, per_prompt, triples, gates, rewards, parent, dev, env.names_problem)
    scopes = result["presentations"]["feedback-protocol"]["scopes"]
    assert {f: scopes["shown"][f] for f in yield_.FATES} == {"usable": 3, "gated": 1, "admitted": 2,
                                                            "admitted_gated": 1}
    assert {f: scopes["held-out"][f] for f in yield_.FATES} == {"usable": 3, "gated": 1, "admitted": 2,
                                                               "admitted_gated": 1}
    assert scopes["shown"]["leak"] == 1 and scopes["held-out"]["calls"] == 1
    assert result["presentations"]["feedback-protocol"]["counts"]["admitted"] == 2  # shown scope, as before
    fate = {c["id"]: c.get("fate") for c in rows[0]["candidates"]}
    assert fate["c0003"]["held-out"]["skipped"] == ["dev1"] and not fate["c0003"]["held-out"]["usable"]
    assert fate["c0002"]["held-out"]["admitted"] and not fate["c0002"]["held-out"]["admitted_gated"]
    assert rows[0]["scopes"]["held-out"]["admitted"] == 2
    result["paired"] = yield_.pair_shown(per_prompt)
    result["paired_scopes"] = yield_.pair_up(per_prompt)
    result["parent_score"] = 0.5
    assert result["paired_scopes"]["feedback-protocol: held-out - shown: usable per call"]["mean"] == 0
    table = yield_.markdown([result])
    assert "| calculator | feedback-protocol | held-out (demonstrations allowed) | 1 | 4 (4.00) | 1 (1.00) |" in table


@pytest.mark.slow
def test_the_optimizer_yield_quick_run_composes_the_protocol_block_and_counts_both_scopes(tmp_path):
    yield_ = load_script("optimizer_yield")
    result = yield_.main(["--quick", "--threads", "1", "--presentations", "feedback,feedback-protocol",
                          "--json", str(tmp_path / "yield.json")])
    prompts = {name: stats["example_prompt"] for name, stats in result["presentations"].items()}
    assert "Write only the strategy" in prompts["feedback-protocol"] and "Feedback:" in prompts["feedback-protocol"]
    assert "Write only the strategy" not in prompts["feedback"]
    for stats in result["presentations"].values():
        for scope in yield_.SCOPES:
            row = stats["scopes"][scope]
            assert row["calls"] == 2 and row["usable"] <= row["candidates"]
            assert row["gated"] <= row["usable"] and row["admitted_gated"] <= min(row["gated"], row["admitted"])
    assert "feedback-protocol - feedback [held-out]: usable per call" in result["paired_scopes"]
    assert "held-out (demonstrations allowed)" in yield_.markdown([result])


def test_the_optimizer_answers_benchmark_times_one_answer_against_a_batch_side_by_side(tmp_path):
    bench = load_script("optimizer_answers")
    result = bench.main(["--quick", "--threads", "1", "--answers", "3", "--json", str(tmp_path / "a.json")])
    (pair,) = result["pairs"]
    assert pair["n1_tokens"] >= 1 and pair["n3_tokens"] >= pair["n1_tokens"] and result["prompt_tokens"] > 100
    assert pair["answers_per_s_ratio"] == pytest.approx(3 * pair["n1_s"] / pair["n3_s"])
    assert bench.SCRIPT + " --quick" in json.loads((tmp_path / "a.json").read_text())["provenance"]["command"]


@pytest.mark.slow
def test_the_optimizer_answers_benchmark_times_a_real_vllm_server_beside_transformers(tmp_path):
    pytest.importorskip("vllm")
    bench = load_script("optimizer_answers")
    result = bench.main(["--quick", "--vllm", "--vllm-kv-cache-gib", "0.05", "--threads", "1", "--answers", "2",
                         "--json", str(tmp_path / "a.json")])
    (pair,) = result["pairs"]
    # vLLM was asked the same calls: it answered with n completions, counted by the server
    assert pair["vllm_n1_tokens"] >= 1 and pair["vllm_n2_tokens"] > pair["vllm_n1_tokens"]
    for n in (1, 2):
        speed = (pair[f"vllm_n{n}_tokens"] / pair[f"vllm_n{n}_s"]) / (pair[f"n{n}_tokens"] / pair[f"n{n}_s"])
        assert pair[f"vllm_over_transformers_tokens_per_s_n{n}"] == pytest.approx(speed)
    assert pair["server_cpu_s_during_transformers"] >= 0.0  # Linux: read from /proc
    assert "--served-model-name" in result["vllm"]["command"] and result["vllm"]["dtype"] in ("bfloat16", "float32")
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["median_vllm_over_transformers_tokens_per_s_n2"] == pytest.approx(
        pair["vllm_over_transformers_tokens_per_s_n2"])


def test_gepa_then_grpo_starts_from_the_instruction_gepa_returned_for_its_seed(tmp_path):
    campaign = load_script("calculator_campaign")
    stored = json.loads((campaign.GEPA_RESULTS / "gepa-calc-s1.json").read_text())["gepa"]["best_instruction"]
    assert campaign.gepa_instruction("gepa", 1) == stored and campaign.gepa_instruction("@weak", 1) == "@weak"
    machinery = campaign._campaign()
    args = machinery.parse_args(["--seed", "1", "--out", str(tmp_path), "--arms", "gepa-then-grpo"],
                                campaign.setting())
    settings = machinery.overrides(args, "gepa-then-grpo", campaign.setting())
    assert "mode=static" in settings and f"seed_instruction={stored}" in settings
    assert ("inspo-calculator", "gepa-then-grpo") in campaign.COMPARISONS
    with pytest.raises(SystemExit, match="gepa-then-grpo seed 9: no GEPA result"):
        campaign.gepa_instruction("gepa", 9)


def test_the_evidence_arms_take_issue_63s_settings_and_its_frozen_search_per_seed(tmp_path):
    campaign = load_script("calculator_campaign")
    stored = json.loads((campaign.EVIDENCE_RESULTS / "rematch-s0.json").read_text())["final_choice"]
    assert not stored["seed_returned"]
    assert campaign.evidence_instruction("evidence-search", 0) == stored["returned_text"]
    assert campaign.evidence_instruction("gepa", 1) == campaign.gepa_instruction("gepa", 1)
    with pytest.raises(SystemExit, match="seed 1: the evidence search returned the seed instruction .* "
                                         "static-calculator's run for seed 1"):
        campaign.evidence_instruction("evidence-search", 1)
    with pytest.raises(SystemExit, match="pre-policy-evidence seed 9: no evidence search"):
        campaign.evidence_instruction("evidence-search", 9)
    machinery, setting = campaign._campaign(), campaign.setting()
    args = machinery.parse_args(["--seed", "0", "--out", str(tmp_path), "--set", "coevolution.validation_size=8"],
                                setting)
    pre = machinery.overrides(args, "pre-policy-evidence", setting)
    assert "mode=static" in pre and f"seed_instruction={stored['returned_text']}" in pre
    o = machinery.overrides(args, "inspo-evidence", setting)
    assert "mode=inspo" in o and "seed_instruction=@calculator" in o
    for s in ("coevolution.admission=paired", "coevolution.verify_greedy=true", "coevolution.split_groups=true",
              f"coevolution.evolve_rollouts={campaign.EVOLVE_ROLLOUTS}", "final_choice=admitted"):
        assert s in o, s
    # the arm's own settings, then every --set: a --set applies to every arm and wins
    assert o.index("coevolution.validation_size=64") < o.index("coevolution.validation_size=8")
    assert not any(s.startswith("coevolution.admission") for s in machinery.overrides(args, "inspo-calculator", setting))
    from inspo.config.train import resolve

    config = resolve("calculator", None, o)
    assert config.coevolution.admission == "paired" and config.coevolution.validation_size == 8
    assert ("inspo-evidence", "gepa-then-grpo") in campaign.COMPARISONS
    assert campaign.CROSSES["cross-inspo-evidence"] == ("inspo-evidence", ("untrained",))


def test_the_reproduction_check_pairs_the_new_runs_sample_with_the_stored_problems(tmp_path, capsys):
    check = load_script("campaign_reproduce")
    ids = [f"calc-test-{i}" for i in range(40)]
    stored_rewards = [float(i % 3 == 0) for i in range(40)]

    def result(qids, rewards, hand):
        return {"arm": "static-calculator", "seed": 0, "test_question_ids": qids, "returned_text": "x",
                "test_rewards": {"returned": rewards, "seed": rewards},
                "extra": {"handwritten": {"question_ids": ["h0", "h1"], "rewards": {"seed": hand}}},
                "provenance": {"commit": "abc", "command": "c", "machine": {"cpu": "cpu"}}}

    stored, new = tmp_path / "stored.json", tmp_path / "new.json"
    stored.write_text(json.dumps(result(ids, stored_rewards, [1.0, 0.0])))
    # the new run's first 30 problems, with two of them changed either way: the same level
    moved = [1.0 - r if i in (1, 3) else r for i, r in enumerate(stored_rewards[:30])]
    new.write_text(json.dumps(result(ids[:30], moved, [1.0, 0.0])))
    out = check.main([str(stored), str(new), "--json", str(tmp_path / "c.json")])
    test = out["groups"]["test"]
    assert test["problems"] == 30 and test["same_reward"] == 28 and out["reproduces"]
    assert test["stored_mean"] == pytest.approx(statistics.fmean(stored_rewards[:30]))
    assert test["difference"]["mean"] == pytest.approx(statistics.fmean(moved) - statistics.fmean(stored_rewards[:30]))
    assert out["groups"]["handwritten"]["same_reward"] == 2 and out["same_instruction"]
    assert "reproduces at tolerance 0.10" in capsys.readouterr().out
    assert json.loads((tmp_path / "c.json").read_text())["provenance"]["new"]["commit"] == "abc"
    new.write_text(json.dumps(result(ids[:30], [1.0] * 30, [1.0, 0.0])))  # every problem solved: another level
    assert not check.main([str(stored), str(new)])["reproduces"]
    new.write_text(json.dumps(result(["elsewhere"] * 30, moved, [1.0, 0.0])))
    with pytest.raises(SystemExit, match="not in the stored one"):
        check.main([str(stored), str(new)])


def test_the_reproduction_check_says_whether_a_rerun_lies_within_the_arms_spread(tmp_path, capsys):
    check = load_script("campaign_reproduce")
    ids = [f"calc-test-{i}" for i in range(40)]

    def result(seed, qids, solved, hand):
        return {"arm": "static-calculator", "seed": seed, "test_question_ids": qids, "returned_text": "x",
                "test_rewards": {"returned": [float(i < solved) for i in range(len(qids))]},
                "extra": {"handwritten": {"question_ids": ["h0", "h1"], "rewards": {"seed": hand}}},
                "provenance": {"commit": "abc", "command": "c", "machine": {"cpu": "cpu"}}}

    files = {}
    for seed, solved in ((0, 15), (1, 12), (2, 9)):  # 0.500, 0.400, 0.300 on the first 30
        files[seed] = tmp_path / f"s{seed}.json"
        files[seed].write_text(json.dumps(result(seed, ids, solved, [1.0, 0.0])))
    new = tmp_path / "new.json"
    new.write_text(json.dumps(result(0, ids[:30], 8, [1.0, 0.0])))  # 0.267: off seed 0 by 0.233, in the spread
    argv = [str(files[0]), str(new), "--arm-seed", str(files[1]), "--arm-seed", str(files[2])]
    out = check.main(argv)
    sp = out["groups"]["test"]["spread"]
    assert not out["reproduces"] and out["within_spread"]
    assert sp["seed_means"] == {"0": 0.5, "1": 0.4, "2": 0.3} and (sp["low"], sp["high"]) == (0.3, 0.5)
    assert out["groups"]["handwritten"]["spread"]["within"]
    assert "within [0.300, 0.500] +- 0.10" in capsys.readouterr().out
    new.write_text(json.dumps(result(0, ids[:30], 5, [1.0, 0.0])))  # 0.167: below 0.3 - 0.1
    assert not check.main(argv)["within_spread"]
    new.write_text(json.dumps(result(0, ids[:30], 12, [1.0, 0.0])))
    assert "within_spread" not in check.main(argv[:2])  # no other seeds: the same-seed rule alone
    with pytest.raises(SystemExit, match="not another seed"):
        check.main([str(files[0]), str(new), "--arm-seed", str(files[0])])
    files[2].write_text(json.dumps(result(2, ids[5:], 9, [1.0, 0.0])))
    with pytest.raises(SystemExit, match="did not play every problem"):
        check.main(argv)
