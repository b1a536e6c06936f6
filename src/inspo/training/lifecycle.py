"""What every run does around its steps, written once for ``inspo evolve`` (and so ``inspo
train``'s offline stages) and ``inspo train``'s GRPO stages.

A run, top to bottom:

1. **pre-flight** (the driver's own: :func:`inspo.training.evolve.run_evolve`,
   :func:`inspo.training.grpo_stage.preflight`): the run directory checked, a resume planned
   (:mod:`inspo.training.resume`), the inputs built (:func:`inspo.training.preflight.prepare`);
2. :func:`open_run`: the run directory made, an earlier run's files cleared (a fresh run),
   ``config.yaml`` written, the event log opened;
3. :func:`build_run_core`: the co-evolution core
   (:func:`~inspo.training.build_core.build_coevolution`) with the optimizer answers it pays for
   kept in the run directory;
4. the population: :func:`resume_core` (a resume: the saved state, the log lines after it dropped,
   the plan's changes recorded) or :func:`initialize_core` (P_0 from warm-up rollouts of the seed);
5. the steps (the driver's own: TRL's ``trainer.train()``, or ``inspo evolve``'s loop), each an
   :class:`~inspo.training.step.InspoStep`;
6. :func:`final_choice`: the returned instruction (``final_choice``) and its held-out test, with
   the policy decoding greedily; :func:`returned_instruction` and ``best_instruction.txt``;
7. the summary (:func:`inspo.training.summary.summarize`) and, from the caller, ``report.html``
   (:func:`inspo.report.write_run_report`).

Only the main process of a multi-process run writes files (``main``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspo import artifacts
from inspo.config.train import TrainConfig, dump
from inspo.core.coevolution import CoEvolution
from inspo.core.events import EventLog
from inspo.records import EvaluateFn, Instruction
from inspo.training.build_core import build_coevolution, keep_paid_answers, warmup_questions
from inspo.training.progress import say

if TYPE_CHECKING:
    from inspo.training.final_choice import FinalChoice
    from inspo.training.preflight import RunInputs

log = logging.getLogger("inspo.training")


def open_run(
    run_dir: Path, config: TrainConfig, plan: Any, *, fresh: bool, main: bool = True
) -> EventLog:
    """Step 2: the run directory with ``config.yaml`` (the resume plan's text, else the config's)
    and an earlier run's files removed when ``fresh``; returns the run's event log (kept in memory
    only on the main process, which alone writes it)."""
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        if fresh:
            leftovers = [p.name for p in artifacts.jsonl_paths(run_dir) if p.is_file()]
            if leftovers:
                log.info(
                    "starting a new run in %s: removing %s of an earlier run",
                    run_dir,
                    ", ".join(leftovers),
                )
            artifacts.clear_run_files(run_dir)
        text = plan.config_text(config) if plan is not None else dump(config)
        (run_dir / artifacts.CONFIG_FILE).write_text(text, encoding="utf-8")
    return EventLog(run_dir / artifacts.EVENTS_FILE if main else None, keep=main)


def build_run_core(
    config: TrainConfig,
    inputs: RunInputs,
    events: EventLog,
    run_dir: Path,
    *,
    seed_text: str,
    static: bool = False,
    main: bool = True,
) -> CoEvolution:
    """Step 3: the core for the run's mode, seeded with ``seed_text``; the main process (the only
    one that calls the optimizer) keeps its paid answers in the run directory."""
    coevo = build_coevolution(
        config.coevolution,
        seed_text,
        inputs.optimizer,
        events,
        static=static,
        fits=inputs.fits,
        env=inputs.env,
        questions=inputs.questions,
        held_out=inputs.eval_questions + inputs.test_questions,
    )
    if main:
        keep_paid_answers(coevo, run_dir)
    return coevo


def resume_core(
    coevo: CoEvolution,
    saved_state: dict[str, Any],
    plan: Any,
    run_dir: Path,
    events: EventLog,
    *,
    progress: bool,
    step: int | None = None,
) -> int:
    """Step 4 of a resume: ``coevo`` loads the saved state (every section's changes go in one
    event, the plan's), the log lines written after ``step`` (default: the state's last step) are
    dropped (and a round of the initial population saved part-way loses its later events), the
    plan is recorded and told. Returns how many log lines were dropped."""
    coevo.load_state_dict(saved_state, emit=False)
    dropped = artifacts.truncate_after(run_dir, coevo.last_step if step is None else step)
    if coevo.init is not None:
        dropped += artifacts.truncate_events(run_dir, coevo.init.events)
    if plan.applied:
        events.emit(plan.event())
    plan.write(run_dir)
    say(plan.lines(), progress)
    return dropped


def initialize_core(
    coevo: CoEvolution,
    evaluate: EvaluateFn | None,
    inputs: RunInputs,
    config: TrainConfig,
    *,
    progress: bool,
    after_round: Callable[[], None] | None = None,
) -> None:
    """Step 4 of a fresh run, Algorithm 1 line 2: the seed rolled out on
    ``data.warmup_questions`` training questions (they fill the replay buffer), then P_0 grown to
    ``coevolution.population_size`` with candidates verified by ``evaluate`` (the current
    policy); ``after_round`` runs after each round (``inspo evolve`` saves there)."""
    warm = warmup_questions(inputs.questions, config.data.warmup_questions, coevo.config.seed)
    if warm:
        say(
            f"warm-up: rolling the seed out on {len(warm)} training question(s) (they fill the "
            "replay buffer)",
            progress,
        )
    coevo.initialize(evaluate, warm, after_round=after_round)


def final_choice(
    evaluate: EvaluateFn, coevo: CoEvolution, config: TrainConfig, inputs: RunInputs, progress: bool
) -> FinalChoice:
    """Step 6: the returned instruction (``config.final_choice``) and its held-out test against
    the seed, ``evaluate`` playing the policy greedily (:mod:`inspo.training.final_choice`)."""
    from inspo.training.final_choice import choose_for_run

    return choose_for_run(
        evaluate,
        coevo,
        config,
        inputs,
        rule=config.final_choice,
        tell=lambda line: say(line, progress),
    )


def returned_instruction(coevo: CoEvolution, final: FinalChoice | None) -> Instruction:
    """What the run returns: the final choice's instruction (from the archive; a stage's seed
    handed on by an earlier stage is no member of it), else the population's best."""
    if final is None:
        return coevo.best()
    return next(
        (i for i in coevo.population.archive.values() if i.id == final.returned_id),
        Instruction(id=final.returned_id, text=final.returned_text, origin="seed"),
    )
