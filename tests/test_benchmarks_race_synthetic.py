"""benchmarks/learning/race_synthetic.py (issue 63, measurement d): the paired race, the gate and
beat-parent judged against the synthetic environment's true qualities. One quick run (3 seeds,
every arm, harm 0 and 0.5, a second or two) is shared by the tests."""

from __future__ import annotations

import json
import statistics

import pytest

from inspo.core.race import RaceRule, admit_probability
from test_benchmarks import assert_provenance, load_script

PAIRED_ARMS = ("paired-64", "paired-64-gate", "paired-64-no-race")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    bench = load_script("race_synthetic")
    out = tmp_path_factory.mktemp("race") / "race.json"
    result = bench.main(["--quick", "--quiet", "--candidates", "--json", str(out)])
    return bench, result, out


def candidates(result: dict, harm: str, arm: str) -> list[dict]:
    return [c for run in result["runs"][harm][arm] for c in run["candidates"]]


def test_every_verified_candidate_has_a_fate_and_its_rollouts_add_up_to_the_ledger(quick):
    _, result, _ = quick
    for harm, by_arm in result["runs"].items():
        for arm, runs in by_arm.items():
            assert len(runs) == 3
            for run in runs:
                assert run["candidates"], (harm, arm)
                for c in run["candidates"]:
                    assert c["fate"] in ("admitted", "gate", "race", "parent", "top_n"), c
                    assert c["q_cand"] is not None and c["parent"] in ("seed", "admitted")
                # nothing verified goes uncounted: candidates' gate and D_B plus their parents'
                spent = sum(c["gate_rollouts"] + c["db_rollouts"] for c in run["candidates"])
                assert spent + run["parent_rollouts"] == run["verification_rollouts"], (harm, arm)


def test_each_arm_verifies_as_its_settings_say(quick):
    _, result, _ = quick
    for harm in result["runs"]:
        old = candidates(result, harm, "beat-parent-16")
        assert all(c["wins"] is None and c["gate_rollouts"] == 0 and c["db_size"] <= 16
                   for c in old)
        assert {c["fate"] for c in old} <= {"admitted", "parent", "top_n"}
        for arm in PAIRED_ARMS:
            mine = candidates(result, harm, arm)
            raced = [c for c in mine if c["wins"] is not None]
            assert all(c["db_size"] == 64 and c["played"] <= 64 for c in raced)
            # the race admits only a candidate that played all of D_B and ended ahead
            assert all(not c["stopped"] and c["wins"] > c["losses"]
                       for c in raced if c["fate"] == "admitted")
            assert all(c["fate"] == "race" for c in raced if c["stopped"])
            gated = [c for c in mine if c["gate_passed"] is not None]
            assert bool(gated) == (arm == "paired-64-gate")
            assert all(c["wins"] is None for c in gated if not c["gate_passed"])
        # without futility only curtailment stops a candidate: it can no longer end ahead
        for c in candidates(result, harm, "paired-64-no-race"):
            if c["stopped"]:
                assert c["losses"] - c["wins"] >= 64 - c["played"]


def test_the_race_spends_less_on_truly_worse_candidates(quick):
    _, result, _ = quick
    bands = {arm: result["summary"]["0.5"][arm]["bands"] for arm in PAIRED_ARMS}
    for arm in ("paired-64", "paired-64-gate"):
        assert bands[arm]["worse"]["n"] > 0
        assert bands[arm]["worse"]["db_rollouts"] < bands[arm]["better"]["db_rollouts"], arm
    raced, full = bands["paired-64"]["worse"], bands["paired-64-no-race"]["worse"]
    assert raced["db_rollouts"] < full["db_rollouts"]
    # a harmless reflector writes no truly worse candidate
    assert all(s["bands"]["worse"]["n"] == 0 for s in result["summary"]["0.0"].values())


def test_the_json_has_per_arm_rates_and_paired_returns(quick):
    bench, result, out = quick
    stored = json.loads(out.read_text())
    assert_provenance(out, "race_synthetic", "--quick")
    assert stored["summary"] == json.loads(json.dumps(result["summary"]))
    for harm in ("0.0", "0.5"):
        summary = stored["summary"][harm]
        assert list(summary) == list(bench.ARMS)
        for arm, s in summary.items():
            for name in bench.BANDS:
                b = s["bands"][name]
                assert b["n"] == 0 or 0 <= b["admitted"] <= b["passed"] <= 1, (arm, name)
            assert s["rollouts_per_candidate"] > 0
            assert bool(s["race_check"]) == (arm in PAIRED_ARMS)
        runs = stored["runs"][harm]
        d = summary["paired-64"]["returned_vs_reference"]
        pairs = zip(runs["paired-64"], runs["beat-parent-16"], strict=True)
        assert d["n"] == 3
        expected = statistics.fmean(a["returned"] - b["returned"] for a, b in pairs)
        assert d["mean"] == pytest.approx(expected)
        assert "returned_vs_reference" not in summary["beat-parent-16"]


def test_the_prediction_is_the_race_rules_exact_probability():
    bench = load_script("race_synthetic")
    assert bench.predicted(1.0, 0.0, 64, 4, 8) == 1.0 and bench.predicted(0.0, 1.0, 64, 4, 8) == 0.0
    expected = admit_probability(0.35 * 0.85, 0.15 * 0.65, 64, RaceRule(4, 8)).admit
    assert bench.predicted(0.35, 0.15, 64, 4, 8) == pytest.approx(expected)
    bands = [bench.band(d) for d in (0.05, 0.0, 0.049, -0.05, -0.15)]
    assert bands == ["better", "level", "level", "worse", "worse"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--arms", "paired-64,nope"])


def test_fresh_draws_play_a_question_anew_at_each_verification_call():
    bench = load_script("race_synthetic")
    from inspo.records import Instruction
    from inspo.synthetic import SEED_INSTRUCTION, make_questions

    seed, questions = Instruction("i0", SEED_INSTRUCTION), make_questions(64)

    def twice(fresh: bool) -> tuple[list[float], list[float]]:
        env = bench.make_env(0, fresh)
        return tuple([r.reward for r in env.evaluate(seed, questions)] for _ in range(2))

    first, second = twice(False)
    assert first == second  # the environment's own: the same draw each time
    first, second = twice(True)
    assert first != second and 0 < sum(first) < 64
