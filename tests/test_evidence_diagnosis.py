"""benchmarks/learning/evidence_diagnosis.py: issue 63's counts recomputed from run files (no
model): each core count on small fixture runs written here, and the whole script on the
committed files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from inspo.core.events import (
    Admitted,
    EvolutionStarted,
    ParentVerified,
    Proposed,
    Pruned,
    Rejected,
    Sampled,
    Verified,
    WarmedUp,
    Weights,
)
from test_benchmarks import load_script

ROOT = Path(__file__).resolve().parents[1]
TAG = "drops protocol tag(s) <answer>…</answer>"
LEAK = "leaks an answer: '{}'"


def diag():
    return load_script("evidence_diagnosis")


def lines(*events) -> list[dict]:
    """Events as ``events.jsonl`` holds them (written and read back)."""
    return [json.loads(json.dumps(e.to_dict())) for e in events]


def admitted(ins: str, parent: str, step: int = 0, score: float = 0.125) -> Admitted:
    return Admitted(step=step, instruction={"id": ins, "text": ins, "parent_ids": [parent]},
                    score=score)


def question(qid: str, text: str, answer: str):
    return SimpleNamespace(id=qid, question=text, answers=(answer,))


def test_prunes_count_only_pairs_scored_on_the_test_and_flag_the_worse_kept():
    events = lines(Pruned(step=2, removed=("ins-0002", "ins-0009"),
                          kept=("ins-0001", "ins-0003", "ins-0004"),
                          evidence={"ins-0001": 16, "ins-0003": 0, "ins-0004": 8}))
    test = {"ins-0001": 0.30, "ins-0002": 0.40, "ins-0003": 0.003, "ins-0004": 0.40}
    got = diag().prune_decisions(events, test)
    assert [(d["removed"], d["kept"]) for d in got] == [
        ("ins-0002", "ins-0001"), ("ins-0002", "ins-0003"), ("ins-0002", "ins-0004")]
    assert [d["kept_worse"] for d in got] == [True, True, False]  # a tie is not worse
    assert got[1]["kept_evidence"] == 0


def test_unreturned_evidence_counts_question_groups_and_skips_the_returned_one():
    run = {"events": lines(
        admitted("ins-0002", "ins-0001"), admitted("ins-0003", "ins-0001"),
        admitted("ins-0004", "ins-0002", step=4),
        *[Sampled(step=s, question_id=f"q{s}", instruction_id=i)
          for s, i in [(1, "ins-0002"), (2, "ins-0002"), (2, "ins-0003"), (3, "ins-0002")]])}
    assert diag().unreturned_evidence(run, "ins-0002") == {"ins-0003": 1, "ins-0004": 0}
    assert diag().unreturned_evidence(run, "ins-0001") == {"ins-0002": 3, "ins-0003": 1,
                                                          "ins-0004": 0}


def test_best_admission_is_the_highest_over_its_parent_with_its_groups_and_exit():
    events = lines(
        admitted("ins-0002", "ins-0001"), admitted("ins-0003", "ins-0002", step=4),
        Sampled(step=5, question_id="q1", instruction_id="ins-0003"),
        Sampled(step=6, question_id="q2", instruction_id="ins-0003"),
        Weights(step=8, weights={"ins-0002": 0.3, "ins-0003": 0.1}),
        EvolutionStarted(step=8, parents=("ins-0002",)))
    test = {"ins-0001": 0.30, "ins-0002": 0.60, "ins-0003": 0.75}  # +0.30 and +0.15
    got = diag().best_admission(events, test)
    assert got["id"] == "ins-0002" and got["minus_parent"] == pytest.approx(0.30)
    assert got["groups"] == 0 and got["left"] == "stayed"
    test["ins-0003"] = 0.95  # now ins-0003 is +0.35 over its parent
    got = diag().best_admission(events, test)
    assert (got["id"], got["groups"], got["left"]) == ("ins-0003", 2,
                                                       "not kept as a parent at step 8")


def test_refusals_count_candidates_tags_leaks_and_worked_examples_on_shown_problems():
    shown = question("q1", "Ava has 7 tins of 12. How many?", "84")
    other = question("q2", "Ben has 3 jars of 5. How many?", "15")
    run = {"name": "r", "config": {"optimizer": {"local_model_path": "qwen2.5-coder-1.5b"}},
           "events": lines(
               Proposed(step=0, parent_id="ins-0001", failures=("q1",),
                        candidate_ids=tuple(f"ins-{i:04d}" for i in range(2, 8))),
               Rejected(step=0, candidate_id="ins-0002", reason=TAG, stage="guard"),
               Rejected(step=0, candidate_id="ins-0003", reason="duplicate of its parent",
                        stage="guard"),
               Rejected(step=0, candidate_id="ins-0004", stage="leak",
                        reason=f"leaks an answer: '{shown.question}'",
                        text=f"Question: {shown.question}\nResponse: <calc>7 * 12</calc>"),
               Rejected(step=0, candidate_id="ins-0005", stage="leak", reason=LEAK.format("84"),
                        text="Question: Cy has 80 and 4 more?\n<calc>80 + 4</calc>"),
               Rejected(step=0, candidate_id="ins-0006", stage="leak", reason=LEAK.format("15"),
                        text="Question: Ben's jars?\n<calc>3 * 5</calc>"),  # D_B's answer
               Rejected(step=0, candidate_id="ins-0007", stage="leak", reason=LEAK.format("84"),
                        text="Write <calc> 84 </calc>, no question"))}
    got = diag().refusals(run, {"q1": shown, "q2": other})
    assert (got["candidates"], got["dropped_tag"], got["leak"]) == (6, 1, 4)
    assert (got["leak_worked"], got["leak_worked_shown"]) == (3, 2)
    assert got["leak_worked_not_shown"] == ["ins-0006"]


def test_verification_sizes_count_parent_successes_of_their_problems():
    run = {"config": {"rl": {"temperature": 1.0}}, "events": lines(
        ParentVerified(step=0, score=0.0625, n_questions=16, n_rollouts=16),
        ParentVerified(step=4, score=0.25, n_questions=16, n_rollouts=16),
        ParentVerified(step=8, score=0.0625, n_questions=16, n_rollouts=16),
        Verified(step=0, candidate_id="ins-0002", score=0.5, n_questions=16, n_rollouts=16))}
    got = diag().verification_sizes([run])
    assert got["parent_successes"] == {1: 2, 4: 1}
    assert got["candidate_sizes"] == got["parent_sizes"] == [(16, 16)]


def test_step0_db_is_the_warm_up_only_when_nothing_else_was_played_and_sizes_agree():
    questions = {f"q{i}": question(f"q{i}", f"problem {i}", str(i)) for i in range(4)}
    config = {"data": {"warmup_questions": 4}, "coevolution": {"seed": 0, "validation_size": 4}}
    events = [WarmedUp(step=0, instruction_id="ins-0001", n_rollouts=4),
              Proposed(step=0, failures=("q1", "q3", "q1")),
              Verified(step=0, candidate_id="ins-0002", n_questions=4, n_rollouts=4)]
    got = diag().step0_db({"config": config, "events": lines(*events)}, questions)
    assert got["db_is_warm_up"] and (got["shown_step0"], got["shown_in_warm_up"]) == (2, 2)
    config["coevolution"]["validation_size"] = 3  # D_B would draw 3 of the 4
    assert not diag().step0_db({"config": config, "events": lines(*events)}, questions)[
        "db_is_warm_up"]


def eval_folder(folder: Path, rewards: dict[str, list[float]]) -> Path:
    rows = [{"instruction": name, "question_id": f"t{i}", "reward": r}
            for name, values in rewards.items() for i, r in enumerate(values)]
    folder.mkdir(parents=True)
    (folder / "eval.json").write_text(json.dumps({"questions": rows}))
    return folder


def test_admission_groups_split_by_the_bar_and_average_test_minus_parent(tmp_path):
    events = [WarmedUp(step=0, instruction_id="ins-0001", n_rollouts=4),
              Proposed(step=0, parent_id="ins-0001", candidate_ids=("ins-0002", "ins-0003")),
              ParentVerified(step=0, parent_id="ins-0001", score=0.25, n_questions=4),
              Verified(step=0, candidate_id="ins-0002", score=0.5, n_questions=4),
              Verified(step=0, candidate_id="ins-0003", score=0.25, n_questions=4),
              admitted("ins-0002", "ins-0001"), admitted("ins-0003", "ins-0001"),
              Proposed(step=4, parent_id="ins-0002", candidate_ids=("ins-0004",)),
              ParentVerified(step=4, parent_id="ins-0002", score=0.0, n_questions=4),
              Verified(step=4, candidate_id="ins-0004", score=0.25, n_questions=4),
              admitted("ins-0004", "ins-0002", step=4)]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines(*events)))
    test = eval_folder(tmp_path / "test", {"calculator": [1, 0, 0, 0], "ins-0002": [1, 1, 0, 0],
                                           "ins-0003": [0, 0, 0, 0], "ins-0004": [0, 1, 0, 0]})
    got = diag().admission_groups([(path, test)])
    assert (got["above"]["n"], got["above"]["better"], got["above"]["worse"]) == (2, 1, 1)
    assert got["above"]["mean"] == pytest.approx((0.25 - 0.25) / 2)
    assert (got["level"]["n"], got["level"]["worse"]) == (1, 1)
    assert got["level"]["mean"] == pytest.approx(-0.25)


def test_hit_rates_pair_the_base_policy_by_problem_and_count_lifts_of_a_tenth():
    untrained = {"test_question_ids": ["a", "b", "c", "d"],
                 "test_rewards": {"calculator": [0, 0, 1, 0]}}
    cross = {0: {"test_question_ids": ["d", "c", "b", "a"],
                 "test_rewards": {"untrained": [1, 1, 0, 0]}},
             1: {"test_question_ids": ["a", "b", "c", "d"],
                 "test_rewards": {"untrained": [0, 0, 1, 0]}}}
    arm5 = {s: {"vs_seed": {"gepa": {"mean": m}, "inspo": {"mean": 0.0}}}
            for s, m in ((0, 0.1), (1, 0.099))}
    rl = {s: {"test_rewards": {"returned": [1, 0]}} for s in (0, 1)}
    static = {s: {"test_rewards": {"returned": [0, 0]}} for s in (0, 1)}
    got = diag().hit_rates(arm5, cross, untrained, rl, static)
    assert got["gepa"]["hits"] == 1 and got["inspo_evolve"]["hits"] == 0
    assert got["inspo_rl"]["lifts"] == {0: pytest.approx(0.25), 1: 0.0}  # paired by id
    assert got["inspo_rl"]["hits"] == 1 and got["inspo_rl_minus_static"]["hits"] == 2


def test_gepa_cost_counts_proposals_their_rollouts_and_the_ratio_to_inspo_calls():
    trace = [{"subsample_ids": [1, 2, 3], "subsample_scores": [0, 0, 1],
              "new_subsample_scores": [1, 0, 1]},
             {"subsample_ids": [4, 5, 6], "subsample_scores": [], "new_subsample_scores": []},
             {"subsample_ids": [7, 8, 9], "subsample_scores": [0, 0, 0],
              "new_subsample_scores": [0, 0, 0]}]
    result = {"gepa": {"rollouts": 20}, "inspo": {"optimizer_calls": 1, "rollouts": 40}}
    got = diag().gepa_cost(trace, result)
    assert (got["proposals"], got["problems"], got["rollouts_each"]) == (2, [3], [6])
    assert got["ratio"] == pytest.approx((2 / 20) / (1 / 40))


def test_the_committed_files_give_the_issues_counts_but_two(tmp_path):
    before = subprocess.run(["git", "status", "--porcelain", "benchmarks/results"], cwd=ROOT,
                            capture_output=True, text=True).stdout
    out = diag().main(["--out", str(tmp_path / "d.json")])
    rows = {r["claim"]: r for rows in out["claims"].values() for r in rows}
    differs = {c for c, r in rows.items() if r["status"] != "same"}
    assert differs == {"parents' successes on D_B, of 16",
                       "... built on a problem the optimizer call was shown"}
    assert rows["the 1.5B optimizer's candidates"]["files"] == "1,145"
    assert rows["prunes that kept the worse instruction on the test"]["files"] == "11 of 31"
    assert json.loads((tmp_path / "d.json").read_text())["provenance"]["commit"]
    after = subprocess.run(["git", "status", "--porcelain", "benchmarks/results"], cwd=ROOT,
                           capture_output=True, text=True).stdout
    assert after == before  # nothing written under benchmarks/results
