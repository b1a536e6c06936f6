"""One GRPO stage of ``inspo train``: GRPO on TRL with the instruction population of a mode.

Reads top to bottom like the stage does:

1. :func:`preflight` (before any stage of the run works): the checkpoint a resume starts from and
   its :class:`~inspo.training.resume.ResumePlan` (a refused change stops here, before anything
   loads), TRL's settings (:func:`inspo.training.grpo_config.grpo_settings`), the run's inputs
   (:func:`inspo.training.preflight.prepare`: the environment, data, optimizer LLM, model and prompt
   lengths) and TRL's ``GRPOConfig``, which also sets up the processes;
2. :func:`run_grpo`: the run directory; the core (:class:`~inspo.core.coevolution.CoEvolution`)
   from the instruction the stage is handed (else the seed), co-evolving or ``static`` (a
   population of one); the trainer (:mod:`inspo.training.grpo_config`, the model loaded by TRL
   from its path, bf16, LoRA when asked);
3. a fresh run builds P_0 (warm-up rollouts of the seed, then a verified refill) on the main
   process; a resumed run loads the core state of its checkpoint; either way the population is
   broadcast so every process holds the same one;
4. ``trainer.train()``: each INSPO step is one TRL generation batch (the step's order is in
   :mod:`inspo.training.step`, the TRL side in :mod:`inspo.training.grpo_trainer`);
5. the run directory's final files: ``inspo_state.json``, ``model/``, the final choice on dev
   (:mod:`inspo.training.final_choice`), ``best_instruction.txt``; the stage's summary and trained
   policy are returned (the caller, :mod:`inspo.training.run`, writes ``summary.json``).

Multi-process (``torchrun`` / ``accelerate launch``): every process runs the stage; only the main
process writes the run files (each process writes its own ``choices.rank<R>.jsonl``).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspo import artifacts
from inspo.config.trackers import missing_tracker_message
from inspo.config.train import TrainConfig
from inspo.core.coevolution import CoEvolution
from inspo.core.state import read_state, save_state
from inspo.training.dry_run import rollout_engine
from inspo.training.grpo_config import build_trainer, final_model, grpo_args, grpo_settings
from inspo.training.lifecycle import (
    build_run_core,
    final_choice,
    initialize_core,
    open_run,
    resume_core,
    returned_instruction,
)
from inspo.training.preflight import RunInputs, SetupError, prepare
from inspo.training.progress import announce_events, say
from inspo.training.step import RewardFn
from inspo.training.summary import RunSummary, summarize

if TYPE_CHECKING:
    from inspo.training.resume import ResumePlan

log = logging.getLogger("inspo.training")


@dataclass
class Policy:
    """A policy model and its tokenizer (the trained one a GRPO stage hands on)."""

    model: Any
    tokenizer: Any


@dataclass
class GrpoStart:
    """What :func:`preflight` checked and built: everything a GRPO stage needs before it works."""

    config: TrainConfig
    static: bool
    """A population of one that never changes (no optimizer LLM)."""
    rank: int
    world_size: int
    checkpoint: Path | None
    """The checkpoint a resume continues from (None: a fresh run)."""
    plan: ResumePlan | None
    """The checked plan of a resume (None: a fresh run)."""
    saved_state: dict[str, Any] | None
    """The checkpoint's core state."""
    inputs: RunInputs
    args: Any
    """TRL's ``GRPOConfig``."""
    started: float
    vllm: bool = False
    """Whether vLLM plays the rollouts (``rl.use_vllm``, ``auto`` resolved:
    :func:`~inspo.training.dry_run.rollout_engine`)."""

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def world() -> tuple[int, int]:
    """(rank, world size) of this process (``torchrun`` / ``accelerate launch`` set them)."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


# ------------------------------------------------------------------------------ 1. pre-flight


def preflight(
    config: TrainConfig, *, resume: bool | str, progress: bool, static: bool, env: Any = None
) -> GrpoStart:
    """Check and build what a GRPO stage needs; raises :class:`SetupError` for a tracker of
    ``rl.report_to`` that is not installed (first: before anything loads), a bad path, an
    unreachable server, a prompt over ``rl.max_prompt_tokens``, a batch that does not divide, a
    resume without a checkpoint (or a fresh run over one) and a refused resume change. ``env``: an
    environment object given in Python instead of the one ``config.env`` names."""
    started = time.time()
    rank, world_size = world()
    run_dir = Path(config.output_dir)
    missing = missing_tracker_message(config.rl.report_to)
    if missing:
        raise SetupError(missing)
    engine = rollout_engine(config)
    log.info("rollout engine: %s (%s)", "vLLM" if engine.vllm else "transformers", engine.why)
    if engine.vllm:
        _check_vllm_training(config, world_size)
    if config.model.engine != "hf":
        raise SetupError(
            f"model.engine={config.model.engine}: model.engine picks the frozen policy's engine of "
            "inspo evolve; inspo train plays its rollouts with vLLM through rl.use_vllm=true. Use "
            "model.engine=hf"
        )
    try:
        checkpoint = artifacts.find_checkpoint(run_dir, resume) if resume else None
    except FileNotFoundError as exc:
        raise SetupError(str(exc)) from exc
    if checkpoint is None and artifacts.any_checkpoint_dirs(run_dir):
        raise SetupError(
            f"{run_dir} already holds checkpoints of an earlier run; pass resume=True (--resume) "
            "to continue it, or choose another output_dir"
        )
    plan, saved_state = (None, None)
    if checkpoint is not None:  # a refused change stops here, before anything loads
        plan, saved_state = _plan_resume(config, run_dir, checkpoint, static=static)
    settings = grpo_settings(config, world_size, cuda=cuda_available(), progress=progress)
    inputs = prepare(config, need_optimizer=not static, need_eval=True, env=env)
    log.info("optimizer LLM: %s", inputs.optimizer_note)
    if not config.model.lora and config.model.dtype == "bfloat16":
        log.warning(
            "full fine-tuning of bfloat16 weights: an update smaller than bf16's precision (about "
            "1/256 of a weight) is lost; for small learning rates use model.dtype=float32 (float32 "
            "master weights, bf16 compute through rl.bf16) or model.lora=true"
        )
    return GrpoStart(
        config=config,
        static=static,
        rank=rank,
        world_size=world_size,
        checkpoint=checkpoint,
        plan=plan,
        saved_state=saved_state,
        inputs=inputs,
        args=grpo_args(settings),
        started=started,
        vllm=engine.vllm,
    )


def _check_vllm_training(config: TrainConfig, world_size: int) -> None:
    """``rl.use_vllm``: refuse what cannot run, before anything loads.

    Full weights (``model.lora=false``) and LoRA adapters are synced into an engine in each
    training process (:mod:`inspo.training.vllm_sync`), so any number of processes works.
    """
    from inspo.engines.vllm_engine import INSTALL_HINT, vllm_available

    problems = []
    if config.rl.vllm_mode == "server":
        if not config.model.lora:
            problems.append(
                "rl.vllm_mode=server gets the LoRA adapter each step, so it needs model.lora=true "
                "(full weights reach a vLLM server only over NCCL between GPUs, TRL's vllm-serve, "
                "which inspo does not build; use rl.vllm_mode=colocate for full fine-tuning)"
            )
        if not config.rl.vllm_server_url:
            problems.append(
                "rl.vllm_mode=server needs rl.vllm_server_url (the server's http://host:port)"
            )
        if problems:
            raise SetupError("rl.use_vllm=true: " + "; ".join(problems))
        _check_vllm_server(config.rl.vllm_server_url)
        return
    if not vllm_available():
        problems.append(f"no module named 'vllm'; {INSTALL_HINT}")
    if problems:
        raise SetupError(
            "rl.use_vllm=true: " + "; ".join(problems) + ". Or set rl.use_vllm=false "
            "(rollouts then generate with the training model through transformers)"
        )


def _check_vllm_server(url: str) -> None:
    """rl.vllm_mode=server: the server answers ``/v1/models`` (else a SetupError naming the URL)."""
    import httpx

    root = url.rstrip("/").removesuffix("/v1")
    try:
        response = httpx.get(f"{root}/v1/models", timeout=10)
    except httpx.HTTPError as exc:
        raise SetupError(
            f"rl.vllm_server_url={url}: cannot reach the vLLM server ({type(exc).__name__}: "
            f"{exc}); start it with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
        ) from exc
    if response.status_code != 200:
        raise SetupError(
            f"rl.vllm_server_url={url}: {root}/v1/models answered {response.status_code}"
        )


def _plan_resume(config: TrainConfig, run_dir: Path, checkpoint: Path, *, static: bool):
    """The checked :class:`~inspo.training.resume.ResumePlan` of a resume from ``checkpoint`` and
    the saved core state; raises ``ResumeRefused`` (a SetupError) for a change the checkpoint
    cannot honour."""
    from inspo.training.resume import check_checkpoint, plan_resume, read_old_config

    step_info = check_checkpoint(
        checkpoint
    )  # every file it holds is read once: a damaged one is named here
    if int(step_info.get("mini_batches", config.rl.mini_batches)) != config.rl.mini_batches:
        raise SetupError(
            f"{checkpoint} was written with rl.mini_batches={step_info['mini_batches']}; "
            f"resume with the same value (now {config.rl.mini_batches})"
        )
    state = read_state(checkpoint / artifacts.STATE_FILE)
    saved, where = read_old_config(run_dir, checkpoint)
    plan = plan_resume(
        config,
        saved_core=state["config"],
        saved=saved,
        checkpoint=str(checkpoint),
        step=int(step_info["inspo_step"]),
        compared_with=where,
        static=static,
    )
    plan.check()
    if plan.step > config.rl.steps:
        raise SetupError(
            f"{checkpoint} holds INSPO step {plan.step}, past rl.steps={config.rl.steps}: resume "
            f"with --set rl.steps={plan.step} (or more), or resume from an earlier checkpoint-N"
        )
    return plan, state


# ------------------------------------------------------------------------------ 2-5. the stage


def run_grpo(
    start: GrpoStart, *, instruction: str | None, progress: bool, reward_fn: RewardFn | None
) -> tuple[RunSummary, Policy]:
    """Train from ``start`` with ``instruction`` (None: the config's seed) as the seed of the
    population; returns the stage's summary (not written) and the trained policy."""
    config, inputs, main = start.config, start.inputs, start.is_main
    run_dir = Path(config.output_dir)

    # -- 2. run directory, core, trainer ------------------------------------------------
    choices = run_dir / artifacts.choices_file(start.rank)
    events = open_run(run_dir, config, start.plan, fresh=start.checkpoint is None, main=main)
    if start.checkpoint is None:
        choices.unlink(missing_ok=True)
    if main:
        announce_events(events, progress, max_rounds=config.coevolution.max_rounds)
    coevo = build_run_core(
        config,
        inputs,
        events,
        run_dir,
        seed_text=instruction or inputs.seed_instruction,
        static=start.static,
        main=main,
    )
    ctx, callback, trainer = _trainer(start, coevo, choices, progress, reward_fn)

    # -- 3. P_0 (fresh) or the checkpoint's state (resume), identical on every process ------
    if start.plan is not None:
        _resume(start, coevo, events, choices, progress)
    elif main:
        _initialize(coevo, ctx, trainer, inputs, config, progress)
    _sync_population(ctx, coevo)

    # -- 4. train; 5. the run directory's final files -----------------------------------------
    _train(start, trainer, ctx, progress)
    return _finish(start, coevo, ctx, trainer, callback, progress)


def _trainer(start: GrpoStart, coevo: CoEvolution, choices: Path, progress: bool, reward_fn):
    """The process's :class:`~inspo.training.rollout_context.RolloutContext`, the callback and
    TRL's trainer built on them."""
    from inspo.training.grpo_trainer import make_callback
    from inspo.training.rollout_context import RolloutContext

    config, inputs, rl, main = start.config, start.inputs, start.config.rl, start.is_main
    ctx = RolloutContext(
        coevo=coevo,
        env=inputs.env,
        agent=inputs.agent,
        questions={q.id: q for q in inputs.questions},
        tokenizer=inputs.tokenizer,
        mini_batches=rl.mini_batches,
        seed=rl.seed,
        rank=start.rank,
        world_size=start.world_size,
        reward_fn=reward_fn,
        choices_path=choices,
        eval_batch_size=rl.eval_batch_size(start.world_size),
        eval_questions=inputs.eval_questions if rl.eval_every else [],
        eval_every=rl.eval_every,
        progress=progress and main,
        max_error_rate=rl.max_error_rate,
        keep_turns=rl.keep_turns,
    )
    if start.vllm:
        from inspo.training.vllm_sync import start_sync

        ctx.vllm_sync = start_sync(
            config, inputs.model_dir, Path(config.output_dir), rl.seed, rank=start.rank
        )
    callback = make_callback(
        ctx,
        run_dir=Path(config.output_dir),
        total_steps=rl.steps,
        progress=progress and main,
        run_config=config.to_dict(),
    )
    trainer = build_trainer(config, start.args, inputs, ctx, callback, progress)
    callback.trainer = trainer
    return ctx, callback, trainer


def _resume(start: GrpoStart, coevo: CoEvolution, events, choices: Path, progress: bool) -> None:
    """The checkpoint's core state on the main process; every other process drops its own
    choices written after the checkpoint."""
    step = start.plan.step
    if not start.is_main:
        artifacts.truncate_jsonl(choices, lambda r: int(r.get("step", 0)) <= step)
        return
    run_dir = Path(start.config.output_dir)
    dropped = resume_core(
        coevo, start.saved_state, start.plan, run_dir, events, progress=progress, step=step
    )
    log.info(
        "resuming from %s (INSPO step %d); dropped %d log line(s) written after it",
        start.checkpoint,
        step,
        dropped,
    )


def _train(start: GrpoStart, trainer: Any, ctx: Any, progress: bool) -> None:
    """``trainer.train()`` (from the checkpoint on a resume); a checkpoint of the last step only
    loads. vLLM, when it played the rollouts, is shut down after."""
    from inspo.engines.hf import attention_kernels

    rl, checkpoint = start.config.rl, start.checkpoint
    if start.plan is not None and start.plan.step >= rl.steps:
        from inspo.training.grpo_trainer import load_finished

        load_finished(trainer, checkpoint)
        if start.is_main:
            say(
                f"{checkpoint.name} holds the run's last step (rl.steps={rl.steps}): nothing left "
                "to train; the final files are written from it",
                progress,
            )
    else:
        with attention_kernels(trainer.accelerator.device):  # no per-shape cuDNN plans on a GPU
            trainer.train(
                resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None
            )
    if ctx.vllm_sync is not None:  # the final choice plays the merged model through transformers
        ctx.vllm_sync.shutdown()
        ctx.vllm_sync = None


def _finish(
    start: GrpoStart, coevo: CoEvolution, ctx: Any, trainer: Any, callback: Any, progress: bool
) -> tuple[RunSummary, Policy]:
    """The run directory's final files (main process): the core state, ``model/``, the final
    choice on dev and test, ``best_instruction.txt``; the stage's summary and policy."""
    config, inputs, main, plan = start.config, start.inputs, start.is_main, start.plan
    run_dir = Path(config.output_dir)
    trainer.accelerator.wait_for_everyone()
    model = final_model(trainer)
    final = None
    if main:
        save_state(coevo, run_dir / artifacts.STATE_FILE)
        model.save_pretrained(str(run_dir / artifacts.MODEL_DIR))
        inputs.tokenizer.save_pretrained(str(run_dir / artifacts.MODEL_DIR))
        if inputs.eval_questions or inputs.test_questions:
            evaluate = ctx.greedy_evaluate(model, progress=progress)
            final = final_choice(evaluate, coevo, config, inputs, progress)
    returned = returned_instruction(coevo, final)
    if main:
        artifacts.write_best_instruction(run_dir, returned.text)
    trainer.accelerator.wait_for_everyone()
    history = (
        artifacts.read_jsonl(run_dir / artifacts.METRICS_FILE) if main else callback.metrics.history
    )
    summary = summarize(
        run_dir=config.output_dir,
        mode=config.mode,
        steps=config.rl.steps,
        history=history,
        coevo=coevo,
        returned=returned,
        optimizer=inputs.optimizer_note,
        started=start.started,
        resumed_from=str(start.checkpoint) if start.checkpoint else None,
        evaluation=final.to_dict() if final is not None else None,
        resume_changes=[str(c) for c in plan.applied] if plan else [],
        selection_rollouts=final.dev_rollouts if final is not None else 0,
        eval_history=[
            {"step": h["step"], "eval/reward": h["eval/reward"]}
            for h in history
            if "eval/reward" in h
        ],
    )
    return summary, Policy(model, inputs.tokenizer)


def _initialize(
    coevo: CoEvolution, ctx, trainer, inputs: RunInputs, config: TrainConfig, progress: bool
) -> None:
    """Algorithm 1 line 2 on the main process: warm-up rollouts of the seed, then P_0."""
    from inspo.training.grpo_trainer import generation_model

    co = coevo.config
    needs_policy = co.init_population or config.data.warmup_questions
    if not needs_policy or (co.population_size == 1 and not co.evolve):
        coevo.initialize(None, [])
        return
    t0 = time.time()
    with generation_model(trainer) as model:
        version = trainer.state.global_step
        evaluate = ctx.make_evaluate(model, 0, tag="init", version=version)
        initialize_core(coevo, evaluate, inputs, config, progress=progress)
    say(
        f"initial population: {len(coevo.population)} instruction(s) "
        f"({coevo.ledger.warmup_rollouts} warm-up + {coevo.ledger.verification_rollouts} "
        f"verification rollouts, {coevo.ledger.optimizer_calls} optimizer call(s), "
        f"{time.time() - t0:.0f} s)",
        progress,
    )


def _sync_population(ctx, coevo: CoEvolution) -> None:
    """Broadcast the main process's population (and last step) to every process."""
    if ctx.world_size == 1:
        return
    from accelerate.utils import broadcast_object_list

    from inspo.training.rollout_context import set_population

    payload = [(coevo.population.to_dict(), coevo.last_step) if ctx.is_main else None]
    broadcast_object_list(payload, from_process=0)
    if not ctx.is_main:
        set_population(coevo, *payload[0])
