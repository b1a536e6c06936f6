"""The golden calculator test: a seeded ``calculator`` run on the tiny random Qwen2, pinned to numbers
written by the code (``tests/golden/calculator.json``), so a refactor of the run's lifecycle or a
speed-up of its step that changes what is played or learned fails here.

- **training**: two GRPO steps of ``inspo train`` on the ``calculator`` preset (LoRA, gradient
  checkpointing as the preset sets it, float32, co-evolving with the rule-based reflector, an
  evolution at step 2 verified with the current policy, a final choice on dev): each step's reward,
  calculator calls, turns and tokens, TRL's loss and gradient norm, every core event, the final
  population and the returned instruction;
- **evolve**: two steps of ``inspo evolve`` with the frozen tiny model: the same.

The rewards are :func:`train_run_script.scripted_reward` (a function of the sampled ids and the
instruction), so the random model's groups have something to learn from. Floats are compared to a
relative 1e-6 (TRL's loss and gradient norm to 1e-4), ids exactly. ``INSPO_WRITE_GOLDEN=1 pytest
tests/test_golden_calculator.py`` rewrites the file: only for a change of behaviour that is meant,
said in the commit. It uses only names that stood before issue 66 moved the training package
(``resolve``, ``run_training``, ``run_evolve``), so the same file runs at an older commit.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("trl")

from golden_compare import same_run  # noqa: E402
from inspo import artifacts  # noqa: E402

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden" / "calculator.json"
WRITE = os.environ.get("INSPO_WRITE_GOLDEN") == "1"

SETTINGS = [
    "model.name_or_path=tiny-qwen2", "model.dtype=float32", "rl.bf16=false", "optimizer.kind=rule-based",
    "rl.questions_per_step=2", "rl.group_size=2", "rl.micro_batch_size=4", "rl.max_turns=2",
    "rl.max_response_tokens=8", "rl.max_obs_tokens=16", "rl.learning_rate=0.01", "rl.save_steps=0",
    "data.warmup_questions=2", "data.max_eval_questions=2", "data.max_test_questions=2",
    "coevolution.population_size=3", "coevolution.prune_every=1", "coevolution.evolve_every=2",
    "coevolution.evolve_until=3", "coevolution.validation_size=2", "coevolution.candidates_per_call=2",
    "coevolution.max_rounds=1",
]
METRICS = ("reward/mean", "reward/std", "rollout/calc_calls", "rollout/turns", "rollout/prompt_tokens",
           "rollout/completion_tokens", "rollout/answered", "inspo/population_size", "inspo/best_weight",
           "inspo/admitted", "inspo/rejected", "inspo/pruned", "inspo/optimizer_calls",
           "inspo/verification_rollouts")
TRL_METRICS = ("loss", "grad_norm")


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _record(out: Path) -> dict:
    """What a run directory says about the run, without timings."""
    metrics = [{k: line[k] for k in (*METRICS, *TRL_METRICS) if k in line}
               for line in artifacts.read_jsonl(out / "metrics.jsonl")]
    events = [{k: v for k, v in e.items() if k not in ("time", "wall_seconds")}
              for e in artifacts.read_jsonl(out / "events.jsonl")]
    state = json.loads((out / "inspo_state.json").read_text())
    return {"metrics": metrics, "events": events, "population": state["population"],
            "best_instruction": (out / "best_instruction.txt").read_text()}


def _training(tmp: Path) -> dict:
    from inspo.config.train import resolve
    from inspo.training.run import run_training
    from train_run_script import scripted_reward

    _one_thread()
    out = tmp / "train"
    config = resolve("calculator", overrides=[*SETTINGS, f"output_dir={out}", "rl.steps=2"])
    assert config.model.lora  # the preset's LoRA policy (and its checkpointing, where the preset sets it)
    run_training(config, progress=False, reward_fn=scripted_reward)
    return _record(out)


def _evolve(tmp: Path) -> dict:
    from inspo.config.train import resolve
    from inspo.training.evolve import run_evolve
    from train_run_script import scripted_reward

    _one_thread()
    out = tmp / "evolve"
    config = resolve("calculator", overrides=[*SETTINGS, f"output_dir={out}", "offline_steps=2"])
    run_evolve(config, progress=False, reward_fn=scripted_reward)
    return _record(out)


def _check(part: str, got: dict) -> None:
    if WRITE:
        data = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
        data[part] = got
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return
    if not GOLDEN.is_file():
        pytest.fail(f"{GOLDEN} is missing; write it with INSPO_WRITE_GOLDEN=1 from a commit whose behaviour is right")
    same_run(got, json.loads(GOLDEN.read_text())[part], part, TRL_METRICS)


def test_calculator_training_run_is_unchanged(tmp_path):
    got = _training(tmp_path)
    assert len(got["metrics"]) == 2 and any(e["kind"] == "evolution_started" for e in got["events"])
    assert any(m.get("grad_norm", 0) > 0 for m in got["metrics"])  # the scripted rewards taught it something
    _check("training", got)


def test_calculator_evolve_run_is_unchanged(tmp_path):
    got = _evolve(tmp_path)
    assert len(got["metrics"]) == 2
    _check("evolve", got)
