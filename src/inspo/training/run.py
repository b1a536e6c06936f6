"""``run_training`` (``inspo train``): a mode is a list of named stages, run in order.

The modes (:func:`mode_stages`)::

    inspo:        grpo (co-evolving)
    static:       grpo (static: the seed alone, the Search-R1 baseline)
    pre-policy:   pre-policy (evolve with the frozen base policy, offline)
                  -> grpo (static, seeded with the evolved best instruction)
    post-policy:  grpo (static) -> post-policy (evolve with the frozen trained policy, offline)

:func:`run_stages` is the driver: first every stage's pre-flight checks (a bad path, an
unreachable server, a refused resume change: all before any stage works), then each stage in
order, handing the next one what it produced (a :class:`Handoff`: the instruction to start from,
the trained policy, the run's summary so far; on several processes, the main process's). At the
end the main process writes ``summary.json``, each offline stage's summary under ``stages``.

Where the work happens:

- ``grpo`` (:class:`GrpoStage`): :mod:`inspo.training.grpo_stage` (pre-flight, P_0,
  ``trainer.train()``, the run directory's final files); one INSPO step inside TRL:
  :mod:`inspo.training.grpo_trainer`, and the step's order, :mod:`inspo.training.step`;
- ``pre-policy`` / ``post-policy`` (:class:`OfflineStage`): :func:`inspo.training.evolve.run_evolve`
  with a frozen policy on the main process, into ``<run>/pre-policy`` or ``<run>/post-policy``, on
  the offline schedule (:func:`inspo.config.schedule.offline_config`: by default as many evolution
  rounds as the online schedule, compressed into ``offline_steps``).

Resume (``resume=True``): a stage before the last that finished is picked up from what it left
(an offline stage: its ``summary.json``, whose best instruction the GRPO checkpoints were trained
from; a GRPO stage: ``training_summary.json`` and ``model/``); the last stage, or one a kill left
unfinished, continues from its checkpoint (GRPO; after another stage, one without a checkpoint yet
starts fresh) or after the last step its ``inspo_state.json`` saved (offline, checked before any
stage works; without one, it runs again from its start).

Multi-process (``torchrun --nproc_per_node N`` or ``accelerate launch``): every process calls
``run_training`` with the same config; only the main process writes the run files.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from inspo import artifacts
from inspo.config.schedule import offline_config
from inspo.config.train import EnvConfig, TrainConfig
from inspo.engines.base import PolicyEngine
from inspo.models.precision import Precision
from inspo.records import SetupError
from inspo.rng import derived_rng
from inspo.training.grpo_config import grpo_settings
from inspo.training.grpo_stage import GrpoStart, Policy, cuda_available, preflight, run_grpo, world
from inspo.training.memory import freed_blocks_kept
from inspo.training.precision import announce, run_precision
from inspo.training.progress import say
from inspo.training.step import RewardFn
from inspo.training.summary import RunSummary

log = logging.getLogger("inspo.training")

__all__ = ["RunSummary", "SetupError", "grpo_settings", "run_training"]


@dataclass
class Run:
    """What the stages of one ``inspo train`` run share."""

    config: TrainConfig
    resume: bool | str = False
    progress: bool = True
    reward_fn: RewardFn | None = None
    rank: int = 0
    world_size: int = 1
    precision: Precision | None = None
    """How ``config``'s ``model.dtype`` and ``rl.bf16`` were resolved (:func:`run_precision`)."""
    env: Any = None
    """An environment object given in Python (None: the one ``config.env`` names, built by each
    stage)."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def run_dir(self) -> Path:
        return Path(self.config.output_dir)


@dataclass
class Handoff:
    """What a stage hands the next one."""

    instruction: str | None = None
    """The instruction the next stage starts from (None: the config's seed)."""
    policy: Policy | None = None
    """The trained policy (a GRPO stage's, for the offline stage after it)."""
    summary: RunSummary | None = None
    """The run's summary so far (a GRPO stage's; an offline stage after it changes what is
    returned)."""
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The offline stages' summaries by stage name (the run summary's ``stages``)."""


class Stage(Protocol):
    name: str

    def check(self, run: Run, *, first: bool, last: bool) -> None:
        """Pre-flight, before any stage works; ``first``: no stage comes before this one;
        ``last``: no stage follows it."""

    def run(self, run: Run, handoff: Handoff) -> Handoff:
        """Do the stage's work, given what the stages before it handed over."""


# ---------------------------------------------------------------------------------- the driver


def mode_stages(mode: str) -> list[Stage]:
    """The stages of a training mode, in the order they run."""
    stages = {
        "inspo": [GrpoStage(static=False)],
        "static": [GrpoStage(static=True)],
        "pre-policy": [
            OfflineStage("pre-policy", base_policy, "base policy"),
            GrpoStage(static=True),
        ],
        "post-policy": [
            GrpoStage(static=True),
            OfflineStage("post-policy", trained_policy, "trained policy"),
        ],
    }
    return stages[mode]


def run_training(
    config: TrainConfig,
    *,
    resume: bool | str = False,
    progress: bool = True,
    reward_fn: RewardFn | None = None,
    env: Any = None,
) -> RunSummary:
    """Train ``config``'s policy with GRPO in ``config.mode`` (see the module docstring).

    Args:
        config: the resolved config (``inspo.config.train.resolve``).
        resume: ``True`` continues from the last complete ``checkpoint-N`` in ``output_dir``;
            a path resumes from that checkpoint; ``False`` starts a new run (refused when
            ``output_dir`` already holds checkpoints).
        progress: show TRL's progress bar, bars over long evaluations, one line per phase and
            per step, and the summary (main process); off, the phase and step lines go to the
            ``inspo.training`` log at INFO (:mod:`inspo.training.progress`).
        reward_fn: replaces the environment's response-only reward of every rollout (training
            and verification); see :data:`inspo.training.step.RewardFn`.
        env: an environment object (:class:`~inspo.envs.base.Environment`) instead of the one
            ``config.env`` names; the run records its name with ``env.python: true`` (a resume, or
            loading the exported agent, then needs the object again).

    Raises:
        SetupError: a bad path, an unreachable retrieval server or optimizer endpoint, a prompt
            over ``rl.max_prompt_tokens``, a batch that does not divide: before training.
        ConfigError: an invalid config value.
    """
    rank, world_size = world()
    if env is not None:
        config = replace(config, env=EnvConfig.of(env))
    config, precision = run_precision(config, saved=_resumed_config(config, resume))
    if rank == 0:
        announce(precision)
    run = Run(
        config,
        resume=resume,
        progress=progress,
        reward_fn=reward_fn,
        rank=rank,
        world_size=world_size,
        precision=precision,
        env=env,
    )
    with freed_blocks_kept():  # freed tensors' pages reused until each step's release
        return run_stages(run, mode_stages(config.mode))


def _resumed_config(config: TrainConfig, resume: bool | str) -> dict[str, Any] | None:
    """The config the checkpoint a resume continues from was written with (None: a fresh run, or
    no checkpoint: pre-flight says so)."""
    if not resume:
        return None
    from inspo.training.resume import read_old_config

    run_dir = Path(config.output_dir)
    try:
        return read_old_config(run_dir, artifacts.find_checkpoint(run_dir, resume))[0]
    except (OSError, ValueError):  # no checkpoint, or a damaged one: pre-flight names it
        return None


def run_stages(run: Run, stages: Sequence[Stage]) -> RunSummary:
    """Check every stage, run them in order, write and return the run's summary."""
    for i, stage in enumerate(stages):
        stage.check(run, first=i == 0, last=i == len(stages) - 1)
    handoff = Handoff()
    for i, stage in enumerate(stages):
        handoff = stage.run(run, handoff)
        if i < len(stages) - 1:
            handoff = _shared(run, handoff)
    if handoff.summary is None:
        raise RuntimeError(
            f"the stages {[s.name for s in stages]} made no summary: a mode needs a GRPO stage"
        )
    summary = replace(handoff.summary, stages={**handoff.summary.stages, **handoff.stages})
    if run.is_main:
        summary.write()
        if run.progress:
            print(summary, flush=True)
        export_run_agent(run.run_dir, progress=run.progress)
    return summary


def export_run_agent(run_dir: Path, *, progress: bool) -> Path | None:
    """The trained agent as one folder, ``RUN/agent`` (:func:`inspo.trained.export_agent`, the
    weights hard-linked to ``model/``). A failure is logged with the command that retries it and
    does not fail the finished run (its ``model/`` and ``best_instruction.txt`` are written)."""
    from inspo.trained.export import export_agent

    out = run_dir / artifacts.AGENT_DIR
    try:
        export_agent(run_dir, out, overwrite=True, link=True)
    except Exception as exc:  # noqa: BLE001 - the run finished; the export alone can be retried
        log.error(
            "could not export the trained agent into %s: %s: %s (retry: inspo export %s --out DIR)",
            out,
            type(exc).__name__,
            exc,
            run_dir,
        )
        return None
    say(
        f"agent: {out} (one folder: weights, instruction, settings, model card; try it: inspo ask "
        f'{out} "your question")',
        progress,
    )
    return out


def _shared(run: Run, handoff: Handoff) -> Handoff:
    """``handoff`` with the main process's instruction and stage summaries on every process."""
    if run.world_size == 1:
        return handoff
    from accelerate.utils import broadcast_object_list

    payload = [(handoff.instruction, handoff.stages) if run.is_main else None]
    broadcast_object_list(payload, from_process=0)
    instruction, stages = payload[0]
    return replace(handoff, instruction=instruction, stages=stages)


# ---------------------------------------------------------------------------------- the stages


class GrpoStage:
    """GRPO on TRL (:mod:`inspo.training.grpo_stage`), seeded with the instruction it is handed
    (else the config's seed): co-evolving, or ``static`` (a population of one that never changes).
    Hands on its summary and the trained policy; when a stage follows, it leaves
    ``training_summary.json`` so that a resume picks the finished stage up."""

    name = "grpo"

    def __init__(self, *, static: bool):
        self.static = static
        self.last = True
        self.start: GrpoStart | None = None
        self.finished: RunSummary | None = None

    def check(self, run: Run, *, first: bool, last: bool) -> None:
        self.last = last
        kept = run.run_dir / artifacts.TRAINING_SUMMARY_FILE
        if (
            run.resume
            and not last
            and kept.is_file()
            and (run.run_dir / artifacts.MODEL_DIR / "config.json").is_file()
        ):
            self.finished = RunSummary.read(kept)
            return
        resume = run.resume
        if (
            resume
            and not artifacts.names_checkpoint(resume)
            and not first
            and not artifacts.any_checkpoint_dirs(run.run_dir)
        ):
            # killed in an earlier stage or before this one's first checkpoint: it starts here
            resume = False
        self.start = preflight(
            run.config, resume=resume, progress=run.progress, static=self.static, env=run.env
        )

    def run(self, run: Run, handoff: Handoff) -> Handoff:
        if self.finished is not None:
            log.info("GRPO stage already done: reusing %s", run.run_dir / artifacts.MODEL_DIR)
            return replace(
                handoff, summary=self.finished, policy=_trained_model(run) if run.is_main else None
            )
        summary, policy = run_grpo(
            self.start,
            instruction=handoff.instruction,
            progress=run.progress,
            reward_fn=run.reward_fn,
        )
        if run.precision is not None:
            summary = replace(summary, precision=run.precision.describe())
        if run.is_main and not self.last:
            artifacts.write_json(run.run_dir / artifacts.TRAINING_SUMMARY_FILE, summary.to_dict())
        return replace(handoff, summary=summary, policy=policy)


#: ``policy(run, handoff, rng)``: the frozen policy of an offline stage, sampling from ``rng``.
PolicySource = Callable[[Run, Handoff, random.Random], PolicyEngine]


class OfflineStage:
    """Instruction evolution with a frozen ``policy`` (:func:`inspo.training.evolve.run_evolve`) on
    the main process, into ``<run>/<name>``, for ``offline_steps`` steps of the offline schedule.

    Hands on its best instruction (the next stage's seed) and its summary (``stages[name]``); after
    a GRPO stage, its best instruction becomes the one the run returns (``best_instruction.txt``).
    """

    def __init__(self, name: str, policy: PolicySource, about: str):
        self.name = name
        self.policy = policy
        self.about = about
        """What the policy is, for the user ("base policy")."""
        self.finished: RunSummary | None = None
        self.continues = False
        """Whether the stage continues after the last step a killed run saved (a resume)."""

    def check(self, run: Run, *, first: bool, last: bool) -> None:
        stage_dir = run.run_dir / self.name
        done = stage_dir / artifacts.SUMMARY_FILE
        if run.resume and not last and done.is_file():
            self.finished = RunSummary.read(done)
            return
        # its steps are saved one by one: a resume does not play them again
        self.continues = bool(run.resume) and (stage_dir / artifacts.STATE_FILE).is_file()
        if (
            self.continues and run.is_main
        ):  # a refused change stops here, before any stage loads a model
            from inspo.training.resume import plan_evolve_resume

            plan_evolve_resume(offline_config(run.config), stage_dir, run.config.offline_steps)

    def run(self, run: Run, handoff: Handoff) -> Handoff:
        if not run.is_main:
            return handoff  # the main process's result reaches the next stage through the driver
        if self.finished is not None:
            evo = self.finished
            log.info(
                "%s stage already done: reusing %s from %s",
                self.name,
                evo.best_instruction_id,
                run.run_dir / self.name,
            )
        else:
            evo = self._evolve(run, handoff)
        summary = handoff.summary
        if summary is not None:  # after training: the evolved instruction is what the run returns
            summary = replace(
                summary,
                best_instruction_id=evo.best_instruction_id,
                best_instruction=evo.best_instruction,
                best_weight=evo.best_weight,
                population=evo.population,
            )
            artifacts.write_best_instruction(run.run_dir, evo.best_instruction)
        return replace(
            handoff,
            instruction=evo.best_instruction,
            summary=summary,
            stages={**handoff.stages, self.name: evo.to_dict()},
        )

    def _evolve(self, run: Run, handoff: Handoff) -> RunSummary:
        from inspo.training.evolve import run_evolve

        config = run.config
        engine = self.policy(run, handoff, derived_rng(config.rl.seed, self.name))
        say(
            f"{self.name} stage: instruction evolution with the frozen {self.about} for "
            f"{config.offline_steps} steps"
            + (" (continuing after the last step it saved)" if self.continues else ""),
            run.progress,
        )
        # overwrite: the run's own checks decided that this stage starts over (no saved state to
        # continue)
        return run_evolve(
            offline_config(config),
            steps=config.offline_steps,
            engine=engine,
            out_dir=run.run_dir / self.name,
            resume=self.continues,
            overwrite=not self.continues,
            progress=run.progress,
            reward_fn=run.reward_fn,
            env=run.env,
        )


def base_policy(run: Run, handoff: Handoff, rng: random.Random) -> PolicyEngine:
    """The frozen base policy: ``config.model`` as training loads it, before any update."""
    from inspo.engines.hf import HFEngine
    from inspo.models import load_model
    from inspo.training.preflight import resolve_model_dir

    model = run.config.model
    loaded = load_model(
        resolve_model_dir(model.name_or_path),
        dtype=model.dtype,
        device="cuda" if cuda_available() else "cpu",
    )
    return HFEngine(loaded.model, loaded.tokenizer, rng=rng)


def trained_policy(run: Run, handoff: Handoff, rng: random.Random) -> PolicyEngine:
    """The frozen trained policy: the one the GRPO stage before handed over."""
    from inspo.engines.hf import HFEngine

    if handoff.policy is None:
        raise RuntimeError("the trained policy's stage must follow a GRPO stage")
    return HFEngine(handoff.policy.model, handoff.policy.tokenizer, rng=rng)


def _trained_model(run: Run) -> Policy:
    """The model a finished GRPO stage saved in ``<run>/model``."""
    from inspo.models import load_model

    loaded = load_model(
        run.run_dir / artifacts.MODEL_DIR,
        dtype=run.config.model.dtype,
        device="cuda" if cuda_available() else "cpu",
    )
    return Policy(loaded.model, loaded.tokenizer)
