"""The core's offline demo: Algorithm 1 on the synthetic environment, no model needed.

It shows the instruction side of INSPO end to end — sampling, attribution, pruning, reflection
on failures, verification, admission — in seconds, and leaves a run directory like a training
run's: the resolved config, ``events.jsonl``, ``metrics.jsonl``, ``inspo_state.json``,
``best_instruction.txt`` and ``summary.json``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from inspo import artifacts
from inspo.agent.protocol import SEARCH_R1_INSTRUCTION
from inspo.core.coevolution import CoEvolution, StepReport
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import EventLog
from inspo.core.proposer import Proposer
from inspo.core.state import save_state
from inspo.llm.base import LLMClient
from inspo.synthetic import SyntheticEnv, make_questions, run_synthetic

log = logging.getLogger("inspo.demo")

@dataclass
class DemoSummary:
    run_dir: str
    steps: int
    seed_quality: float
    best_quality: float
    best_instruction: str
    mean_reward_first: float
    mean_reward_last: float
    optimizer: str
    ledger: dict

    def lines(self) -> list[str]:
        return [
            f"run directory:        {self.run_dir}",
            f"optimizer:            {self.optimizer}",
            f"steps:                {self.steps}",
            f"reward (first/last):  {self.mean_reward_first:.3f} -> {self.mean_reward_last:.3f}",
            f"true quality:         seed {self.seed_quality:.2f} -> best {self.best_quality:.2f}",
            f"optimizer calls:      {self.ledger['optimizer_calls']} "
            f"({self.ledger['optimizer_prompt_tokens']} prompt + "
            f"{self.ledger['optimizer_completion_tokens']} completion tokens)",
            f"verification share:   {100 * self.ledger['extra_inference_share']:.1f}% of training rollouts",
            "best instruction:",
            self.best_instruction,
        ]


def run_demo(
    out_dir: str | Path,
    llm: LLMClient,
    *,
    config: CoEvolutionConfig | None = None,
    steps: int = 60,
    batch_size: int = 16,
    group_size: int = 5,
    n_questions: int = 200,
    progress: bool = True,
) -> DemoSummary:
    config = config or CoEvolutionConfig(evolve_until=steps, validation_size=50)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in artifacts.JSONL_FILES:
        (out / stale).unlink(missing_ok=True)
    (out / artifacts.DEMO_CONFIG_FILE).write_text(
        json.dumps(
            {"mode": "demo", "steps": steps, "batch_size": batch_size, "group_size": group_size,
             "optimizer": llm.name, "coevolution": config.to_dict()},
            indent=2,
        )
    )
    events = EventLog(out / artifacts.EVENTS_FILE)
    proposer = Proposer.from_config(llm, config)
    coevo = CoEvolution(config, SEARCH_R1_INSTRUCTION, proposer, events=events)
    env = SyntheticEnv(seed=config.rng_seed)
    rewards: list[float] = []

    from tqdm.auto import tqdm

    bar = tqdm(total=steps, desc="inspo demo", unit="step", disable=not progress)

    def on_step(t: int, report: StepReport) -> None:
        step_events = [e for e in events.of_kind("attributed") if e.step == t]
        n = sum(e.n_rollouts for e in step_events)
        mean = sum(e.mean_reward * e.n_rollouts for e in step_events) / n if n else 0.0
        rewards.append(mean)
        best = coevo.best()
        metrics = {
            "step": t,
            "reward/mean": mean,
            "inspo/population_size": len(coevo.population),
            "inspo/best_weight": coevo.population.weight_of(best.id),
            "inspo/best_true_quality": env.quality(best.text),
            "inspo/optimizer_calls": coevo.ledger.optimizer_calls,
            **{f"inspo/weight/{k}": v for k, v in report.weights.items()},
        }
        artifacts.append_jsonl(out / artifacts.METRICS_FILE, metrics)
        bar.set_postfix(reward=f"{mean:.2f}", pop=len(coevo.population))
        bar.update(1)

    questions = make_questions(n_questions)
    run_synthetic(coevo, env, questions, steps=steps, batch_size=batch_size, group_size=group_size, on_step=on_step)
    bar.close()
    save_state(coevo, out / artifacts.STATE_FILE)
    best = coevo.best()
    artifacts.write_best_instruction(out, best.text)
    k = max(1, min(5, len(rewards) // 4))
    summary = DemoSummary(
        run_dir=str(out),
        steps=steps,
        seed_quality=env.quality(SEARCH_R1_INSTRUCTION),
        best_quality=env.quality(best.text),
        best_instruction=best.text,
        mean_reward_first=sum(rewards[:k]) / k,
        mean_reward_last=sum(rewards[-k:]) / k,
        optimizer=llm.name,
        ledger=coevo.ledger.to_dict(),
    )
    artifacts.write_json(out / artifacts.SUMMARY_FILE, summary.__dict__)
    return summary
