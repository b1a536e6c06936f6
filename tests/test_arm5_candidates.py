"""benchmarks/learning/arm5/candidates_on_test.py: the admitted instructions of a run,
and their paired differences from the seed, from stored files (no model)."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks/learning/arm5/candidates_on_test.py"


def load():
    spec = importlib.util.spec_from_file_location("inspo_arm5_candidates", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def eval_json(folder: Path, rewards: dict[str, list[float]], ids=("q0", "q1", "q2", "q3")) -> Path:
    rows = [{"instruction": name, "question_id": q, "reward": r}
            for name, values in rewards.items() for q, r in zip(ids, values, strict=True)]
    folder.mkdir(parents=True)
    (folder / "eval.json").write_text(json.dumps({
        "questions": rows, "errors": 0, "stopped": "", "settings": {"precision": "float32 on cpu"},
        "provenance": {"commit": "0123456789abcdef"}}))
    return folder


def test_write_keeps_only_the_admitted_instructions_in_order(tmp_path):
    run = tmp_path / "inspo"
    run.mkdir()
    events = [{"kind": "rejected", "instruction": {"id": "ins-0002", "text": "no"}},
              {"kind": "admitted", "instruction": {"id": "ins-0009", "text": "nine <calc>"}},
              {"kind": "admitted", "instruction": {"id": "ins-0004", "text": "four <answer>"}}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    cand = load()
    assert cand.write(run, tmp_path / "out") == ["ins-0009", "ins-0004"]
    assert (tmp_path / "out" / "ins-0004.txt").read_text() == "four <answer>"
    assert not (tmp_path / "out" / "ins-0002.txt").exists()
    (run / "events.jsonl").write_text(json.dumps(events[0]) + "\n")
    with pytest.raises(SystemExit, match="admits no instruction"):
        cand.write(run, tmp_path / "none")


def test_table_pairs_each_instruction_with_the_seed_and_refuses_other_problems(tmp_path, capsys):
    cand = load()
    folder = eval_json(tmp_path / "test", {"calculator": [1, 0, 0, 1], "ins-0078": [1, 1, 0, 0],
                                           "ins-0077": [0, 0, 0, 0]})
    cand.table(folder)
    out = capsys.readouterr().out
    assert "calculator: 0.500" in out
    assert "ins-0078: 0.500; minus the seed +0.000" in out
    assert "ins-0077: 0.000; minus the seed -0.500" in out and "over 4 questions" in out
    other = tmp_path / "other"
    eval_json(other, {"calculator": [1, 0]}, ids=("q0", "q1"))
    rows = json.loads((other / "eval.json").read_text())
    rows["questions"].append({"instruction": "ins-1", "question_id": "q9", "reward": 1.0})
    (other / "eval.json").write_text(json.dumps(rows))
    with pytest.raises(SystemExit, match="other problems than the seed"):
        cand.table(other)


def test_the_seed_is_compared_problem_by_problem_with_a_runs_recorded_test(tmp_path, capsys):
    cand = load()
    folder = eval_json(tmp_path / "test", {"calculator": [1, 0, 0, 1]})
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"test_question_ids": ["q3", "q2", "q1", "q0"],
                               "test_rewards": {"seed": [1, 1, 0, 0]}}))
    cand.seed_agreement(folder, run)
    out = capsys.readouterr().out
    assert "the seed here 0.500, in run.json 0.500: 2 of 4 problems differ (1 right only here, 1 only there)" in out
    run.write_text(json.dumps({"test_question_ids": ["q0", "q1", "q2", "q7"], "test_rewards": {"seed": [1, 1, 0, 0]}}))
    with pytest.raises(SystemExit, match="scored other problems"):
        cand.seed_agreement(folder, run)


def test_each_admitted_instruction_life_says_how_it_left_the_population(tmp_path):
    def admitted(step, ins, score):
        return {"kind": "admitted", "step": step, "instruction": {"id": ins, "text": ins}, "score": score}

    def weights(step, scores, evidence):
        return {"kind": "weights", "step": step, "weights": scores, "scores": scores, "evidence": evidence}

    events = [admitted(0, "a", 0.25), admitted(0, "b", 0.5), admitted(0, "c", 0.0),
              weights(1, {"a": 0.1, "b": 0.4, "c": 0.3}, {"a": 8, "b": 8, "c": 8}),
              weights(2, {"a": 0.1, "b": 0.35, "c": 0.2}, {"a": 8, "b": 16, "c": 16}),
              {"kind": "pruned", "step": 2, "removed": ["a"], "kept": ["b", "c"]},
              # a run credits its members at every step, an evolution step too, before line 17
              weights(4, {"b": 0.35, "c": 0.2}, {"b": 16, "c": 16}),
              {"kind": "evolution_started", "step": 4, "parents": ["b"], "target_size": 3},
              admitted(4, "d", 0.125)]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    life = load().lives(path)
    assert life["a"] == "admitted at step 0 (verification 0.250); last credited 0.100 on 8 rollouts (step 2); pruned at step 2"
    assert life["b"].endswith("last credited 0.350 on 16 rollouts (step 4); in the final population")
    assert life["c"].endswith("not a parent at step 4 (kept: b)")
    assert life["d"] == "admitted at step 4 (verification 0.125); never credited; in the final population"


def exact_odds(a, b, k):
    """The naive reference: every k-subset of the problems, counted."""
    from itertools import combinations

    subsets = list(combinations(range(len(a)), k))
    diffs = [sum(a[i] - b[i] for i in s) for s in subsets]
    return tuple(sum(test(d) for d in diffs) / len(subsets)
                 for test in (lambda d: d > 1e-9, lambda d: abs(d) <= 1e-9, lambda d: d < -1e-9))


def test_rank_odds_match_counting_every_subset_of_problems():
    np = pytest.importorskip("numpy")
    cand = load()
    a = [1, 0, 1, 1, 0, 0, 1]
    b = [0, 0, 1, 0, 1, 0, 0]
    rng = np.random.default_rng(0)
    for k in (1, 3, 7):
        got = cand.rank_odds(a, b, k, 40000, rng)
        assert got == pytest.approx(exact_odds(a, b, k), abs=0.01)
        assert sum(got) == pytest.approx(1.0)
    assert cand.rank_odds(a, b, 7, 10, rng) == (1.0, 0.0, 0.0)  # every problem: the whole difference, +2
    with pytest.raises(SystemExit, match="k must be 1 to 7"):
        cand.rank_odds(a, b, 8, 10, rng)


def test_resample_pairs_each_admitted_instruction_with_its_parent(tmp_path, capsys):
    pytest.importorskip("numpy")
    run = tmp_path / "inspo"
    run.mkdir()
    events = [{"kind": "warmed_up", "instruction_id": "ins-0001"},
              {"kind": "admitted", "instruction": {"id": "ins-0005", "parent_ids": ["ins-0001"]}},
              {"kind": "admitted", "instruction": {"id": "ins-0009", "parent_ids": ["ins-0005"]}}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    cand = load()
    pairs = cand.parent_pairs(run / "events.jsonl")
    assert pairs == [("ins-0005", "calculator"), ("ins-0009", "ins-0005")]
    folder = eval_json(tmp_path / "test", {"calculator": [0, 0, 1, 0], "ins-0005": [1, 1, 1, 0]})
    out = cand.resample(folder, pairs, [4], 100, seed=0)
    assert list(out) == ["ins-0005 - calculator"] and out["ins-0005 - calculator"]["difference"] == 0.5
    assert out["ins-0005 - calculator"]["odds"][4] == (1.0, 0.0, 0.0)
    assert "ins-0009 vs ins-0005: ins-0009 not scored" in capsys.readouterr().out
    assert cand.resample(folder, pairs[:1], [5], 100, seed=0) == {}  # k above the 4 problems: said, not raised
    assert "scored together on 4 problems, fewer than k=5, left out" in capsys.readouterr().out
    # a run without a warm-up event: its first instruction is the seed; an admission without parents is left out
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[1:] + [
        {"kind": "admitted", "instruction": {"id": "ins-0011"}}]))
    assert cand.parent_pairs(run / "events.jsonl") == pairs
    for bad in ("8,x", "0", ""):
        with pytest.raises(SystemExit, match="--sizes: problems per comparison"):
            cand.main(["resample", str(folder), "--pairs", "ins-0005:calculator", "--sizes", bad])


def test_verification_sets_each_candidate_against_its_rounds_parent(tmp_path, capsys):
    run = tmp_path / "inspo"
    run.mkdir()
    events = [{"kind": "proposed", "step": 0},
              {"kind": "parent_verified", "step": 0, "score": 0.0},
              {"kind": "verified", "step": 0, "candidate_id": "ins-0003", "score": 0.0, "n_questions": 16},
              {"kind": "verified", "step": 0, "candidate_id": "ins-0004", "score": 0.125, "n_questions": 16},
              {"kind": "admitted", "instruction": {"id": "ins-0003"}},
              {"kind": "proposed", "step": 4},  # a round without a parent's score: plain top-n
              {"kind": "verified", "step": 4, "candidate_id": "ins-0007", "score": 0.5, "n_questions": 16},
              {"kind": "proposed", "step": 4},
              {"kind": "parent_verified", "step": 4, "score": 0.25},
              {"kind": "verified", "step": 4, "candidate_id": "ins-0009", "score": 0.1875, "n_questions": 16}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    out = load().verification(run / "events.jsonl")
    assert out["counts"] == {"verified": 4, "without a bar": 1, "above": 1, "level": 1, "below": 1, "level at zero": 1}
    assert [r["bar"] for r in out["rows"]] == [0.0, 0.0, None, 0.25]
    assert "admitted ins-0003 at step 0: 0.000 on 16 problems, its parent's 0.000" in capsys.readouterr().out


def test_choose_returns_each_pools_best_on_the_dev_problems_and_scores_it_on_the_rest(tmp_path, capsys):
    pytest.importorskip("numpy")
    run = tmp_path / "inspo"
    run.mkdir()
    events = [{"kind": "admitted", "step": 0, "instruction": {"id": "ins-0002"}},
              {"kind": "admitted", "step": 0, "instruction": {"id": "ins-0003"}},
              {"kind": "admitted", "step": 0, "instruction": {"id": "ins-0004"}},
              {"kind": "pruned", "step": 2, "removed": ["ins-0002", "ins-0004"], "kept": ["ins-0003"]}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    cand = load()
    pools = cand.pools(run / "events.jsonl")
    assert pools == {"final": ["calculator", "ins-0003"], "admitted": ["calculator", "ins-0002", "ins-0003", "ins-0004"]}
    # the survivor ties the seed everywhere (the seed is returned); a pruned one is right everywhere,
    # and the one after it ties it (the first of a tie is returned)
    folder = eval_json(tmp_path / "test", {"calculator": [0, 0, 0, 0], "ins-0002": [1, 1, 1, 1],
                                           "ins-0003": [0, 0, 0, 0], "ins-0004": [1, 1, 1, 1]})
    out = cand.choose(folder, pools, [1, 3], 200, seed=0)
    for k in (1, 3):
        assert out[k]["final"] == {"held_out": 0.0, "seed": 1.0, "best": "calculator", "best_score": 0.0}
        assert out[k]["admitted"] == {"held_out": 1.0, "seed": 0.0, "best": "ins-0002", "best_score": 1.0}
        assert out[k]["admitted - final"] == {"mean": 1.0, "above": 1.0, "below": 0.0}
    # right on one problem of four: returned only when that problem is the one dev problem
    eval_json(tmp_path / "one", {"calculator": [0, 0, 0, 0], "ins-0002": [1, 0, 0, 0], "ins-0003": [0, 0, 0, 0],
                                 "ins-0004": [0, 0, 0, 0]})
    one = cand.choose(tmp_path / "one", pools, [1], 20000, seed=1)[1]["admitted"]
    assert one["seed"] == pytest.approx(0.75, abs=0.02) and one["held_out"] == 0.0  # its one right answer was dev
    assert "k=1: final (2) returns 0.000 held out, the seed in 100%" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="k must be 1 to 3"):
        cand.choose(folder, pools, [4], 10, seed=0)
    eval_json(tmp_path / "short", {"calculator": [0, 0, 0, 0], "ins-0003": [0, 0, 0, 0]})
    with pytest.raises(SystemExit, match="ins-0002, ins-0004 not scored there"):
        cand.choose(tmp_path / "short", pools, [1], 10, seed=0)


def test_admissions_sets_each_admitted_ones_test_difference_from_its_parent_by_how_it_passed(tmp_path, capsys):
    run = tmp_path / "inspo"
    run.mkdir()
    events = [{"kind": "warmed_up", "instruction_id": "ins-0001"},
              {"kind": "proposed", "step": 0},
              {"kind": "parent_verified", "step": 0, "score": 0.125},
              {"kind": "verified", "step": 0, "candidate_id": "ins-0002", "score": 0.25, "n_questions": 16},
              {"kind": "verified", "step": 0, "candidate_id": "ins-0003", "score": 0.125, "n_questions": 16},
              {"kind": "verified", "step": 0, "candidate_id": "ins-0009", "score": 0.0, "n_questions": 16},
              {"kind": "admitted", "instruction": {"id": "ins-0002", "parent_ids": ["ins-0001"]}},
              {"kind": "admitted", "instruction": {"id": "ins-0003", "parent_ids": ["ins-0001"]}},
              {"kind": "proposed", "step": 4},  # no bar: plain top-n, left out
              {"kind": "verified", "step": 4, "candidate_id": "ins-0005", "score": 0.5, "n_questions": 16},
              {"kind": "admitted", "instruction": {"id": "ins-0005", "parent_ids": ["ins-0002"]}}]
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    folder = eval_json(tmp_path / "test", {"calculator": [1, 0, 0, 0], "ins-0002": [0, 0, 0, 0],
                                           "ins-0003": [1, 1, 1, 0], "ins-0005": [1, 1, 1, 1]})
    cand = load()
    groups = cand.admissions_on_test([(run / "events.jsonl", folder), (run / "events.jsonl", folder)])
    assert groups == {"above": [-0.25, -0.25], "level": [0.5, 0.5]}  # each run counted, ins-0005 left out
    out = capsys.readouterr().out
    assert "ins-0002: above its parent calculator on D_B (0.250 against 0.125); on the test -0.250" in out
    assert "admitted level the bar: 2; test minus parent, mean +0.500; better than the parent 2, worse 0" in out
    eval_json(tmp_path / "short", {"calculator": [1, 0, 0, 0], "ins-0002": [0, 0, 0, 0]})
    with pytest.raises(SystemExit, match="ins-0003 not scored there"):
        cand.admissions_on_test([(run / "events.jsonl", tmp_path / "short")])
