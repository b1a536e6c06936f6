"""The core's offline demo: Algorithm 1 on the synthetic environment, no model needed.

It shows the instruction side of INSPO end to end — sampling, attribution, pruning, reflection
on failures, verification, admission — in seconds. Every step ends as a training step does
(:func:`inspo.training.step.finish_step`, the same metrics), and the run directory is like a
training run's: ``config.json`` (the demo's settings), ``events.jsonl``, ``metrics.jsonl``,
``inspo_state.json``, ``best_instruction.txt`` and ``summary.json``, whose ``seed_quality`` and
``best_quality`` are the true qualities the synthetic environment knows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import EventLog
from inspo.core.optimizer_llm import LLMClient
from inspo.core.proposer import Proposer
from inspo.core.state import save_state
from inspo.synthetic import (
    GUARD_TAGS,
    PROTOCOL,
    SEED_INSTRUCTION,
    SyntheticEnv,
    make_questions,
    run_synthetic,
)
from inspo.training.metrics import MetricsLog
from inspo.training.step import finish_step
from inspo.training.summary import RunSummary, summarize


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
) -> RunSummary:
    """Run the demo (module docstring) into ``out_dir``: ``steps`` steps of ``batch_size``
    questions x ``group_size`` rollouts, drawn from ``n_questions`` synthetic questions, with
    ``llm`` as the optimizer. Returns the run's summary (also written as ``summary.json``); raises
    ValueError for ``steps`` < 1 or for verification without validation questions."""
    if steps < 1:
        raise ValueError(f"run_demo: steps must be >= 1, got {steps}")
    started = time.time()
    config = config or CoEvolutionConfig(evolve_until=steps, validation_size=50)
    if config.verify and config.validation_size < 1:
        raise ValueError(
            "run_demo: validation_size must be >= 1 when candidates are verified (verify=True): "
            "with 0 questions every candidate would be admitted unverified; for the no-verify "
            "ablation set verify=False"
        )
    out = Path(out_dir)
    _start_run_dir(
        out,
        {
            "mode": "demo",
            "steps": steps,
            "batch_size": batch_size,
            "group_size": group_size,
            "optimizer": llm.name,
            "coevolution": config.to_dict(),
        },
    )
    events = EventLog(out / artifacts.EVENTS_FILE)
    proposer = Proposer.from_config(llm, config, required_tags=GUARD_TAGS, protocol=PROTOCOL)
    coevo = CoEvolution(config, SEED_INSTRUCTION, proposer, events=events)
    env = SyntheticEnv(seed=config.rng_seed)
    metrics = MetricsLog(out / artifacts.METRICS_FILE, steps, progress=progress)

    from tqdm.auto import tqdm

    bar = tqdm(total=steps, desc="inspo demo", unit="step", disable=not progress)

    def end_of_step(t, rollouts, evaluate):
        end = finish_step(coevo, t, rollouts, evaluate, episodes=False)
        end.metrics["inspo/best_true_quality"] = env.quality(coevo.best().text)
        metrics.write(end.metrics)
        bar.update(1)
        return end.report

    questions = make_questions(n_questions)
    run_synthetic(
        coevo,
        env,
        questions,
        steps=steps,
        batch_size=batch_size,
        group_size=group_size,
        update=end_of_step,
    )
    bar.close()
    return _finish_run_dir(
        out, coevo, env, metrics, steps=steps, optimizer=llm.name, started=started
    )


def _start_run_dir(out: Path, settings: dict[str, Any]) -> None:
    """Create ``out``, remove the JSONL files a previous run left there (a run appends to them),
    and write the demo's ``settings`` as its ``config.json``."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in artifacts.JSONL_FILES:
        (out / stale).unlink(missing_ok=True)
    (out / artifacts.DEMO_CONFIG_FILE).write_text(json.dumps(settings, indent=2))


def _finish_run_dir(
    out: Path,
    coevo: CoEvolution,
    env: SyntheticEnv,
    metrics: MetricsLog,
    *,
    steps: int,
    optimizer: str,
    started: float,
) -> RunSummary:
    """Write the end of the run to ``out``: the core state, the best instruction and
    ``summary.json``, with the true qualities of the seed and of the best instruction."""
    save_state(coevo, out / artifacts.STATE_FILE)
    best = coevo.best()
    artifacts.write_best_instruction(out, best.text)
    summary = summarize(
        run_dir=out,
        mode="demo",
        steps=steps,
        history=metrics.history,
        coevo=coevo,
        returned=best,
        optimizer=optimizer,
        started=started,
        episodes=False,
        extra={
            "seed_quality": env.quality(SEED_INSTRUCTION),
            "best_quality": env.quality(best.text),
        },
    )
    summary.write()
    return summary
