"""A small training run for the subprocess tests of inspo.training (kill/resume, torchrun).

Usage: python tests/train_run_script.py OUT_DIR [--resume] [--record-vllm] [--fail-step-end N] [--set section.key=value ...]

``--record-vllm`` (with ``rl.use_vllm=true``) appends one line per vLLM sync and per engine handed
out (``{"event": "sync"|"play", "version"}``) to ``OUT_DIR/vllm_calls.rank<r>.jsonl``.

The tiny random Qwen2 writes noise, so the reward is scripted: a deterministic function of the
sampled completion ids and the instruction id (it moves when the policy or the instruction
changes, like a real reward). Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

TINY = [
    "model.name_or_path=tiny-qwen2", "model.dtype=float32", "model.lora=false", "rl.bf16=false",
    "env.reward=em", "data.max_hops=0",
    "rl.steps=4", "rl.questions_per_step=2", "rl.group_size=2", "rl.micro_batch_size=4", "rl.max_turns=1",
    "rl.max_response_tokens=6", "rl.max_obs_tokens=32", "rl.learning_rate=0.01", "rl.save_steps=2",
    "rl.prefill=<search>", "data.warmup_questions=2", "data.eval=", "data.max_train_questions=64",
    "coevolution.population_size=3", "coevolution.prune_every=1", "coevolution.evolve_every=2",
    "coevolution.evolve_until=4", "coevolution.validation_size=2", "coevolution.candidates_per_call=2",
    "coevolution.max_rounds=1",
]


def scripted_reward(rollout) -> float:
    """0, 0.5 or 1 from the policy's sampled ids and the instruction (never from the prompt)."""
    sampled = [t for t, m in zip(rollout.completion_ids, rollout.env_mask, strict=True) if m]
    tail = rollout.instruction_id.split("-")[-1]  # ins-0003 -> 3; the run's seed after a pre-policy stage: 0
    return ((sum(sampled) + 7 * (int(tail) if tail.isdigit() else 0)) % 3) / 2.0


def record_vllm_calls(out: str) -> None:
    """Wrap both vLLM syncs so every sync and every engine handed out is written down."""
    from pathlib import Path

    from inspo import artifacts
    from inspo.engines import vllm_server
    from inspo.training import vllm_sync

    path = Path(out) / f"vllm_calls.rank{os.environ.get('RANK', '0')}.jsonl"
    for cls in (vllm_sync.WeightSync, vllm_sync.AdapterSync, vllm_server.AdapterPusher):
        def wrap(method, event):
            def recorded(self, model, version, *rest):
                path.parent.mkdir(parents=True, exist_ok=True)
                artifacts.append_jsonl(path, {"event": event, "version": version})
                return method(self, model, version, *rest)
            return recorded

        cls.sync = wrap(cls.sync, "sync")
        cls.engine_for = wrap(cls.engine_for, "play")


def fail_at_step_end(step: int) -> None:
    """Make the main process's end of ``step`` stop as a verification over ``rl.max_error_rate`` does."""
    from inspo.records import TooManyErrors
    from inspo.training import step as step_mod

    real = step_mod.finish_step

    def finish_step(coevo, t, *args, **kwargs):
        if t == step:
            raise TooManyErrors(f"3 of 4 rollouts failed (injected at step {t}), over rl.max_error_rate=0.1")
        return real(coevo, t, *args, **kwargs)

    step_mod.finish_step = finish_step


def main(argv: list[str]) -> int:
    import torch

    torch.set_num_threads(1)
    from inspo.config.train import resolve
    from inspo.training.run import run_training

    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--record-vllm", action="store_true")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--fail-step-end", type=int, default=0, help="the main process's end of this step fails")
    args = parser.parse_args(argv)
    if args.record_vllm:
        record_vllm_calls(args.out)
    if args.fail_step_end:
        fail_at_step_end(args.fail_step_end)
    config = resolve("cpu-tiny", overrides=[*TINY, f"output_dir={args.out}", *args.set])
    rank = int(os.environ.get("RANK", "0"))
    from inspo.records import TooManyErrors

    try:
        summary = run_training(config, resume=args.resume, progress=False, reward_fn=scripted_reward)
    except TooManyErrors as exc:
        print(f"rank {rank} stopped: {exc}", flush=True)
        return 3
    # every process leaves its view of the population (the test compares them)
    from pathlib import Path

    from inspo import artifacts

    artifacts.write_json(Path(args.out) / f"final_population.rank{rank}.json", summary.population)
    print(json.dumps({"rank": rank, "population": summary.population}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
