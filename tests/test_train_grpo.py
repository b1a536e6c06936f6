"""Real GRPO runs through TRL on the tiny random Qwen2 (CPU): parameters move, every question
group gets one sampled instruction, rewards are attributed, a prune and a verified evolution
round happen, the run directory is complete; static, pre-policy and post-policy modes.

The tiny model writes noise, so the reward is scripted (``train_run_script.scripted_reward``: a
deterministic function of the sampled ids and the instruction id); everything else is real:
TRL's trainer, the multi-turn rollout with BM25 over the built-in world, the rule-based
reflector, verification with the current policy.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict

import pytest

pytest.importorskip("trl")

from inspo import artifacts  # noqa: E402
from inspo.config.train import resolve  # noqa: E402
from inspo.training.run import run_training  # noqa: E402
from train_run_script import TINY, scripted_reward  # noqa: E402

pytestmark = pytest.mark.slow


# Algorithm 1's plain rules (every verified candidate fills a free slot, weights alone prune), so
# the schedule these tests check is exact; the evidence rules' own tests are in tests/test_core_*.py
ALGORITHM_1 = ("coevolution.admission=top-n", "coevolution.admit_per_round=2", "coevolution.min_evidence=0",
               "coevolution.prior_rollouts=0")


def _config(out, *extra):
    return resolve("cpu-tiny", overrides=[*TINY, f"output_dir={out}", *extra])


def _run(out, *extra):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run_training(_config(out, *extra), progress=False, reward_fn=scripted_reward)
    finally:
        torch.set_num_threads(threads)


def _tensors(path):
    from safetensors.torch import load_file

    return load_file(str(path))


@pytest.fixture(scope="module")
def inspo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("inspo") / "run"
    summary = _run(out, "rl.steps=3", "rl.save_steps=2", "data.eval=world", "data.max_eval_questions=2",
                   "data.max_test_questions=2", "rl.eval_every=2", *ALGORITHM_1)
    return out, summary


def test_run_directory_is_complete(inspo_run):
    out, summary = inspo_run
    for name in ("config.yaml", "events.jsonl", "metrics.jsonl", "inspo_state.json", "best_instruction.txt",
                 "summary.json", "model/config.json", "model/model.safetensors", "model/tokenizer.json",
                 "checkpoint-2/inspo_state.json", "checkpoint-2/inspo_step.json", "checkpoint-3/inspo_state.json"):
        assert (out / name).is_file(), name
    saved = json.loads((out / "summary.json").read_text())
    assert saved["best_instruction_id"] == summary.best_instruction_id
    assert (out / "best_instruction.txt").read_text().strip() == summary.best_instruction.strip()
    assert json.loads((out / "checkpoint-2" / "inspo_step.json").read_text())["inspo_step"] == 2
    assert "mode: inspo" in (out / "config.yaml").read_text()
    text = str(summary)
    assert "reward:" in text and "returned instruction" in text and "verification:" in text
    metrics = {m["step"]: m for m in artifacts.read_jsonl(out / "metrics.jsonl")}
    assert "eval/reward" in metrics[2] and "eval/reward" not in metrics[1]  # rl.eval_every=2 (issue 12.9)
    assert 0.0 <= metrics[2]["eval/reward"] <= 1.0
    if sys.platform.startswith("linux"):  # /proc: the resident set, recorded after each step's release
        assert all(m["system/released_gib"] >= 0.0 and m["system/rss_gib"] > 0.0 for m in metrics.values())
    assert summary.eval_history == [{"step": 2, "eval/reward": metrics[2]["eval/reward"]}]
    assert "periodic eval:" in str(summary)
    ev = summary.evaluation
    assert ev is not None and ev["dev_questions"] == 2 and ev["test_questions"] == 2
    assert ev["returned_id"] == summary.best_instruction_id and set(ev["dev_scores"]) >= {ev["seed_id"]}


def test_parameters_changed(inspo_run):
    from inspo.models import model_path

    out, _ = inspo_run
    before = _tensors(model_path("tiny-qwen2") / "model.safetensors")
    after = _tensors(out / "model" / "model.safetensors")
    changed = [k for k in before if not (before[k] == after[k]).all()]
    assert len(changed) >= len(before) // 2, f"only {changed} changed"


def test_one_instruction_per_group_and_rewards_attributed(inspo_run):
    out, _ = inspo_run
    events = artifacts.read_jsonl(out / "events.jsonl")
    sampled = [e for e in events if e["kind"] == "sampled"]
    per_step = Counter(e["step"] for e in sampled)
    assert per_step == {1: 2, 2: 2, 3: 2}  # 2 questions (groups) per step, one draw each
    choices = artifacts.read_jsonl(out / "choices.rank0.jsonl")
    assert {(c["step"], c["question_id"], c["instruction_id"]) for c in choices} == {
        (e["step"], e["question_id"], e["instruction_id"]) for e in sampled
    }
    metrics = {m["step"]: m for m in artifacts.read_jsonl(out / "metrics.jsonl")}
    assert sorted(metrics) == [1, 2, 3]
    by_step = defaultdict(list)
    for e in events:
        if e["kind"] == "attributed":
            by_step[e["step"]].append(e)
    for step, attributed in by_step.items():
        assert sum(a["n_rollouts"] for a in attributed) == 4  # 2 questions x G 2
        mean = sum(a["mean_reward"] * a["n_rollouts"] for a in attributed) / 4
        assert mean == pytest.approx(metrics[step]["reward/mean"])
        drawn = {e["instruction_id"] for e in sampled if e["step"] == step}
        assert {a["instruction_id"] for a in attributed} <= drawn
    assert any(m["reward/mean"] > 0 for m in metrics.values())
    for m in metrics.values():  # TRL's own training metrics land in the same line
        assert "grad_norm" in m and "inspo/population_size" in m and "rollout/search_calls" in m
        # inspo's finish reasons, one share each (TRL's clipped_ratio miscounts answered rows)
        finish = [m[f"rollout/finish/{r}"] for r in ("answer", "eos", "length", "turn_limit", "error")]
        assert sum(finish) == pytest.approx(1.0) and "completions/clipped_ratio" in m


def test_prune_and_evolution_happened(inspo_run):
    out, summary = inspo_run
    events = artifacts.read_jsonl(out / "events.jsonl")
    kinds = Counter((e["step"], e["kind"]) for e in events)
    assert kinds[(0, "admitted")] == 2  # P_0: seed + 2 verified candidates
    assert kinds[(1, "pruned")] == 1
    assert kinds[(2, "evolution_started")] == 1 and kinds[(2, "verified")] >= 1 and kinds[(2, "admitted")] >= 1
    assert summary.ledger["verification_rollouts"] > 0 and summary.ledger["optimizer_calls"] == 2
    # the ledger is what the run's events add up to (an event that lost a count fails here)
    from inspo.core.accounting import CostLedger
    from inspo.core.events import event_from_dict

    assert CostLedger.from_events(event_from_dict(e) for e in events).to_dict() == summary.ledger
    assert summary.ledger["training_rollouts"] == 3 * 4 and summary.ledger["warmup_rollouts"] == 2
    metrics = {m["step"]: m for m in artifacts.read_jsonl(out / "metrics.jsonl")}
    assert metrics[1]["inspo/pruned"] == 1 and metrics[2]["inspo/admitted"] >= 1


def test_static_mode_keeps_one_instruction_and_lora_is_merged(tmp_path):
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
    from inspo.models import model_path

    summary = _run(tmp_path / "static", "mode=static", "rl.steps=2", "rl.save_steps=0", "model.lora=true",
                   "model.lora_target_modules=[q_proj,v_proj]", "rl.learning_rate=0.05")
    before = _tensors(model_path("tiny-qwen2") / "model.safetensors")
    after = _tensors(tmp_path / "static" / "model" / "model.safetensors")
    assert set(after) == set(before)  # merged into the base weights: no adapter tensors left
    changed = {k for k in before if not (before[k] == after[k]).all()}
    assert changed and all(".q_proj." in k or ".v_proj." in k for k in changed)
    assert summary.population == ["ins-0001"] and summary.best_instruction == SEARCH_R1_INSTRUCTION
    events = artifacts.read_jsonl(tmp_path / "static" / "events.jsonl")
    assert {e["instruction_id"] for e in events if e["kind"] == "sampled"} == {"ins-0001"}
    assert not [e for e in events if e["kind"] in ("proposed", "admitted", "pruned")]
    assert summary.ledger["optimizer_calls"] == 0 and summary.ledger["training_rollouts"] == 8
    assert not list((tmp_path / "static").glob("checkpoint-*"))
    agent = tmp_path / "static" / "agent"  # the exported agent: full weights, nothing for peft to load
    assert (agent / "model.safetensors").is_file() and not (agent / "adapter_config.json").exists()


def test_pre_policy_evolves_before_training(tmp_path):
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION

    out = tmp_path / "pre"
    summary = _run(out, "mode=pre-policy", "offline_steps=2", "rl.steps=1", "rl.save_steps=0", "data.eval=world",
                   "data.max_eval_questions=2", "data.max_test_questions=2", "final_choice=dev", *ALGORITHM_1)
    stage = out / "pre-policy"
    stage_events = artifacts.read_jsonl(stage / "events.jsonl")
    # TINY's one round before T_e (K_e 2), compressed into 2 offline steps: evolved at offline step 1
    assert any(e["kind"] == "admitted" and e["step"] == 1 for e in stage_events)
    assert [m["step"] for m in artifacts.read_jsonl(stage / "metrics.jsonl")] == [1, 2]
    evolved_best = (stage / "best_instruction.txt").read_text().strip()
    assert summary.stages["pre-policy"]["best_instruction"].strip() == evolved_best
    # the GRPO stage is static and starts from the evolved instruction
    assert summary.population == ["ins-0001"] and summary.best_instruction.strip() == evolved_best
    train_events = artifacts.read_jsonl(out / "events.jsonl")
    assert {e["instruction_id"] for e in train_events if e["kind"] == "sampled"} == {"ins-0001"}
    # the final choice weighs the evolved instruction against the run's seed (the config's), which
    # the trained policy plays on dev and on test, not against the handed-over one a second time
    choice = summary.evaluation
    assert choice["seed_id"] == "run-seed" and set(choice["dev_scores"]) == {"run-seed", "ins-0001"}
    assert choice["returned_id"] in ("run-seed", "ins-0001") and len(choice["test_rewards"]["seed"]) == 2
    returned = (out / "best_instruction.txt").read_text().strip()
    assert returned == (evolved_best if choice["returned_id"] == "ins-0001" else SEARCH_R1_INSTRUCTION.strip())


def test_post_policy_evolves_with_the_trained_policy(tmp_path):
    out = tmp_path / "post"
    summary = _run(out, "mode=post-policy", "offline_steps=2", "rl.steps=1", "rl.save_steps=0")
    stage = out / "post-policy"
    assert (out / "model" / "model.safetensors").is_file()
    assert [m["step"] for m in artifacts.read_jsonl(stage / "metrics.jsonl")] == [1, 2]
    assert "post-policy" in summary.stages
    assert (out / "training_summary.json").is_file()  # what a resume picks the finished GRPO stage up from
    assert json.loads((out / "summary.json").read_text())["stages"]["post-policy"] == summary.stages["post-policy"]
    assert (out / "best_instruction.txt").read_text().strip() == (stage / "best_instruction.txt").read_text().strip()
    assert summary.best_instruction_id == summary.stages["post-policy"]["best_instruction_id"]
    # the exported agent returns the stage's instruction, with the stage's final population
    population = json.loads((out / "agent" / "population.json").read_text())
    assert population["returned_id"] == summary.best_instruction_id
    assert [m["id"] for m in population["members"] if m["member"]] == summary.population
    assert (out / "agent" / "instruction.txt").read_text().strip() == (stage / "best_instruction.txt").read_text().strip()


@pytest.mark.gpu
def test_one_step_on_cuda(tmp_path):
    """The same loop on a GPU (TRL's fused LM-head path, use_cpu off). Skipped without CUDA."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    summary = run_training(_config(tmp_path / "gpu", "rl.steps=2", "rl.save_steps=0", "rl.bf16=true"),
                           progress=False, reward_fn=scripted_reward)
    assert summary.ledger["training_rollouts"] == 8
    assert [m["step"] for m in artifacts.read_jsonl(tmp_path / "gpu" / "metrics.jsonl")] == [1, 2]


def test_mini_batches_make_several_updates_per_inspo_step(tmp_path):
    out = tmp_path / "mini"
    summary = _run(out, "rl.steps=2", "rl.mini_batches=2", "rl.save_steps=1")
    metrics = artifacts.read_jsonl(out / "metrics.jsonl")
    assert [(m["step"], m["global_step"]) for m in metrics] == [(1, 2), (2, 4)]  # 2 optimizer updates per step
    sampled = Counter(e["step"] for e in artifacts.read_jsonl(out / "events.jsonl") if e["kind"] == "sampled")
    assert sampled == {1: 2, 2: 2}  # one generation batch (2 questions) per INSPO step
    assert summary.ledger["training_rollouts"] == 8
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert json.loads((out / "checkpoint-2" / "inspo_step.json").read_text())["inspo_step"] == 1
