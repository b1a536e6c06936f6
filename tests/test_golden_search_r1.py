"""The golden Search-R1 test: the search agent's behaviour, pinned to numbers written by the code
before the environment seam existed (``tests/golden/search_r1.json``).

It fails when any of these moves:

- **episodes**: scripted and sampled episodes of the real search agent on the tiny random Qwen2
  (transformers engine, BM25 over the built-in ``world`` corpus): every prompt id, completion id,
  ``env_mask`` entry, reward, search, turn count, finish reason and answer. The scripted episodes
  search, read truncated observations, get the corrective message and the last-turn nudge, and
  answer right and wrong (F1 against the world's golds); the sampled ones pin the seeded sampler;
- **training**: a two-step ``tiny-qwen2`` GRPO run of ``inspo train`` (TRL, co-evolving, the
  rule-based reflector, verification with the current policy): each step's reward, searches,
  turns and tokens, TRL's loss and gradient norm, every core event, the final population;
- **evolve**: a two-step ``inspo evolve`` with the frozen tiny model: the same.

Floats are compared to a relative 1e-6 (TRL's loss and gradient norm to 1e-4), ids exactly.
``INSPO_WRITE_GOLDEN=1 pytest tests/test_golden_search_r1.py`` rewrites the file: do that only for a
change of behaviour that is meant, and say why in the commit.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

pytest.importorskip("trl")

from agent_helpers import Scripted  # noqa: E402
from golden_compare import same, same_run  # noqa: E402
from inspo import artifacts  # noqa: E402
from inspo.records import Instruction, Question  # noqa: E402

pytestmark = pytest.mark.slow

GOLDEN = Path(__file__).parent / "golden" / "search_r1.json"
WRITE = os.environ.get("INSPO_WRITE_GOLDEN") == "1"

# What each scripted question writes on each turn (0-based); None lets the model sample.
SCRIPT = {
    ("q0", 0): "<think>I need the year.</think>\n<search>Venven Miselgol</search>",
    ("q0", 1): "<answer>1972</answer>",
    ("q1", 0): "Not sure yet",  # no tag at all: the corrective message
    ("q1", 1): "<search>Goljus Bank founded</search>",
    ("q1", 2): "<answer>It was 1999</answer>",  # wrong, and past max_turns: the final turn
    ("q2", 0): "<answer>Ostwen</answer>",  # partly right (F1)
    ("q3", 0): "<search>Lorral River</search>",
    ("q3", 1): "<search>Lorral River length</search>",
    ("q3", 2): "<search>Lorral length km</search>",  # the final turn: this search is not run
}


def _world_questions():
    from inspo.data.sources import load_qa_source

    test = {q.id: q for q in load_qa_source("world", split="test")}
    picks = ["world0-test-0", "world0-test-1", "world0-test-3", "world0-test-5"]
    return [Question(f"q{i}", f"q{i}: {test[qid].question}", test[qid].answers) for i, qid in enumerate(picks)]


def _episode_record(r) -> dict:
    return {"question": r.question.id, "prompt_ids": list(r.prompt_ids), "completion_ids": list(r.completion_ids),
            "env_mask": list(r.env_mask), "reward": r.reward, "searches": r.calls_of("search"), "turns": r.turns,
            "finish_reason": r.finish_reason, "answer": r.answer}


def _tiny():
    import torch

    from inspo.models import load_model

    torch.set_num_threads(1)
    return load_model("tiny-qwen2", dtype="float32")


def _episodes() -> dict:
    """The scripted and the sampled episodes (the module docstring)."""
    from inspo.engines.hf import HFEngine
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig, Episode, run_rollouts
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION, SearchR1Env
    from inspo.retrieval.factory import load_retriever

    tiny = _tiny()
    retriever = load_retriever("bm25", corpus="world")
    seed = Instruction("ins-0001", SEARCH_R1_INSTRUCTION)
    questions = _world_questions()
    original = tiny.model.generate
    try:
        tiny.model.generate = Scripted(tiny, lambda qid, turn: SCRIPT.get((qid, turn)))
        config = AgentConfig(max_turns=2, max_response_tokens=24, max_obs_tokens=48, temperature=0.0,
                             last_turn_nudge=True)
        scripted = run_rollouts(HFEngine(tiny.model, tiny.tokenizer), SearchR1Env(retriever, topk=3, reward="f1"),
                                config, [Episode(q, seed) for q in questions])
    finally:
        tiny.model.generate = original
    sampled_config = AgentConfig(max_turns=1, max_response_tokens=10, max_obs_tokens=40, temperature=1.0,
                                 prefill="<search>")
    evaluate = make_evaluate(HFEngine(tiny.model, tiny.tokenizer, rng=random.Random(0)),
                             SearchR1Env(retriever, topk=2, reward="em"), sampled_config,
                             group_size=2, batch_size=8, paired_seed=(0, "golden"))
    sampled = evaluate(seed, questions[:2])
    return {"scripted": [_episode_record(r) for r in scripted], "sampled": [_episode_record(r) for r in sampled]}


_METRICS = ("reward/mean", "reward/std", "rollout/search_calls", "rollout/turns", "rollout/prompt_tokens",
            "rollout/completion_tokens", "rollout/answered", "inspo/population_size", "inspo/best_weight",
            "inspo/admitted", "inspo/rejected", "inspo/pruned", "inspo/optimizer_calls",
            "inspo/verification_rollouts")
_TRL_METRICS = ("loss", "grad_norm")


def _run_record(out: Path) -> dict:
    """What a run directory says about the run, without timings."""
    metrics = []
    for line in artifacts.read_jsonl(out / "metrics.jsonl"):
        metrics.append({k: line[k] for k in (*_METRICS, *_TRL_METRICS) if k in line})
    events = [{k: v for k, v in e.items() if k not in ("time", "wall_seconds")}
              for e in artifacts.read_jsonl(out / "events.jsonl")]
    state = json.loads((out / "inspo_state.json").read_text())
    population = state["population"]
    return {"metrics": metrics, "events": events, "population": population,
            "best_instruction": (out / "best_instruction.txt").read_text()}


def _training(tmp: Path) -> dict:
    from inspo.config.train import resolve
    from inspo.training.run import run_training
    from train_run_script import TINY, scripted_reward

    out = tmp / "train"
    _tiny()  # one thread, as the stored numbers were made
    config = resolve("cpu-tiny", overrides=[*TINY, f"output_dir={out}", "rl.steps=2", "rl.save_steps=0",
                                            "coevolution.evolve_every=2", "coevolution.evolve_until=3"])
    run_training(config, progress=False, reward_fn=scripted_reward)
    return _run_record(out)


def _evolve(tmp: Path) -> dict:
    from inspo.config.train import resolve
    from inspo.engines.hf import HFEngine
    from inspo.training.evolve import run_evolve

    out = tmp / "evolve"
    tiny = _tiny()
    config = resolve("cpu-tiny", overrides=[
        f"output_dir={out}", "model.name_or_path=tiny-qwen2", "offline_steps=2", "rl.questions_per_step=2",
        "rl.group_size=2", "rl.max_turns=1", "rl.max_response_tokens=8", "rl.max_obs_tokens=32", "env.reward=em",
        "data.warmup_questions=2", "data.max_hops=0", "data.eval=", "coevolution.population_size=3",
        "coevolution.prune_every=1", "coevolution.evolve_every=2", "coevolution.evolve_until=3",
        "coevolution.validation_size=2", "coevolution.candidates_per_call=2", "coevolution.max_rounds=1",
    ])
    run_evolve(config, engine=HFEngine(tiny.model, tiny.tokenizer), progress=False)
    return _run_record(out)


@pytest.fixture(scope="module")
def golden() -> dict:
    if WRITE:
        return {}
    if not GOLDEN.is_file():
        pytest.fail(f"{GOLDEN} is missing; write it with INSPO_WRITE_GOLDEN=1 from a commit whose behaviour is right")
    return json.loads(GOLDEN.read_text())


def _store(part: str, value: dict) -> None:
    data = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    data[part] = value
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def _check(part: str, got: dict, golden: dict, rel: float = 1e-6) -> None:
    if WRITE:
        _store(part, got)
        return
    same(got, golden[part], part, rel)


def test_search_r1_episodes_are_unchanged(golden):
    got = _episodes()
    assert {r["finish_reason"] for r in got["scripted"]} >= {"answer", "turn_limit"}  # the script did its job
    _check("episodes", got, golden)


def test_search_r1_training_run_is_unchanged(golden, tmp_path):
    got = _training(tmp_path)
    if WRITE:
        _store("training", got)
        return
    same_run(got, golden["training"], "training", _TRL_METRICS)


def test_search_r1_evolve_run_is_unchanged(golden, tmp_path):
    _check("evolve", _evolve(tmp_path), golden)
