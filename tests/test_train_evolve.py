"""run_evolve (instruction-only INSPO with a frozen policy) with a scripted text-only policy
engine: no model, so it is fast. The scripted policy answers correctly only under an evolved
instruction, which the loop must discover, verify, admit and rank first; a resumed evolution
equals an uninterrupted one."""

from __future__ import annotations

import json

import pytest

from agent_helpers import ScriptedPolicy
from inspo.agent.protocol import SEARCH_R1_INSTRUCTION
from inspo.data.sources import load_qa_source
from inspo.train import artifacts
from inspo.train.config import resolve
from inspo.train.evolve import run_evolve, step_questions


def _config(out, steps=4):
    return resolve("cpu-tiny", overrides=[
        f"output_dir={out}", "model.name_or_path=tiny-qwen2", "offline_steps=" + str(steps),
        "rl.questions_per_step=2", "rl.group_size=2", "rl.prefill=", "rl.reward=em",
        "data.warmup_questions=2", "coevolution.population_size=3", "coevolution.prune_every=1",
        "coevolution.evolve_every=2", "coevolution.evolve_until=4", "coevolution.validation_size=2",
        "coevolution.candidates_per_call=2", "coevolution.max_rounds=1",
    ])


def test_evolution_finds_the_instruction_the_policy_needs(tmp_path):
    summary = run_evolve(_config(tmp_path / "evo"), engine=ScriptedPolicy(), progress=False)
    out = tmp_path / "evo"
    assert summary.best_instruction != SEARCH_R1_INSTRUCTION and summary.best_weight == 1.0
    assert summary.reward_end == 1.0 and summary.ledger["verification_rollouts"] > 0
    events = artifacts.read_jsonl(out / "events.jsonl")
    seed_rewards = [e["mean_reward"] for e in events if e["kind"] == "attributed" and e["instruction_id"] == "ins-0001"]
    evolved = [e["mean_reward"] for e in events if e["kind"] == "attributed" and e["instruction_id"] != "ins-0001"]
    assert set(seed_rewards) <= {0.0} and evolved and set(evolved) == {1.0}
    state = json.loads((out / "inspo_state.json").read_text())
    warmup = [i["rollout"] for i in state["buffer"]["items"] if i["step"] == 0]
    assert warmup and all(r["instruction_id"] == "ins-0001" and r["reward"] == 0.0 for r in warmup)
    for name in ("config.yaml", "metrics.jsonl", "inspo_state.json", "best_instruction.txt", "summary.json"):
        assert (out / name).is_file()
    assert not (out / "model").exists()
    assert [m["step"] for m in artifacts.read_jsonl(out / "metrics.jsonl")] == [1, 2, 3, 4]
    assert "policy (frozen):" in str(summary)


def test_resumed_evolution_equals_an_uninterrupted_one(tmp_path):
    run_evolve(_config(tmp_path / "straight"), engine=ScriptedPolicy(), progress=False)
    run_evolve(_config(tmp_path / "split", steps=2), engine=ScriptedPolicy(), progress=False)
    with (tmp_path / "split" / "events.jsonl").open("a") as fh:  # a line from a run killed after step 2
        fh.write(json.dumps({"kind": "sampled", "step": 3, "question_id": "x", "instruction_id": "y"}) + "\n")
    run_evolve(_config(tmp_path / "split", steps=4), engine=ScriptedPolicy(), resume=True, progress=False)
    a = json.loads((tmp_path / "straight" / "inspo_state.json").read_text())
    b = json.loads((tmp_path / "split" / "inspo_state.json").read_text())
    assert a["population"] == b["population"] and a["ledger"] == b["ledger"] and a["buffer"] == b["buffer"]
    assert artifacts.read_jsonl(tmp_path / "split" / "events.jsonl") == artifacts.read_jsonl(
        tmp_path / "straight" / "events.jsonl")


def test_step_questions_cover_each_pass_once():
    qs = load_qa_source("world", split="train")[:10]
    first_pass = [q.id for t in range(1, 6) for q in step_questions(qs, t, 2, seed=0)]
    assert sorted(first_pass) == sorted(q.id for q in qs)
    second_pass = [q.id for t in range(6, 11) for q in step_questions(qs, t, 2, seed=0)]
    assert sorted(second_pass) == sorted(first_pass) and second_pass != first_pass  # reshuffled
    with pytest.raises(Exception, match="fewer than"):
        step_questions(qs[:1], 1, 2, seed=0)
