"""``run_training``: GRPO on TRL with co-evolving instructions, from a :class:`TrainConfig`.

Reads top to bottom like the run does:

1. pre-flight (:func:`inspo.train.setup.prepare`): data, retriever, optimizer LLM, model and
   prompt lengths are checked before any training time is spent;
2. the core (:class:`~inspo.core.coevolution.CoEvolution`) with the seed instruction; the
   trainer (:mod:`inspo.train.grpo`) with the model loaded by path (bf16, LoRA when asked);
3. a fresh run builds P_0 (warm-up rollouts of the seed, then a verified refill) on the main
   process; a resumed run loads the core state of its checkpoint; either way the population is
   broadcast so every process holds the same one;
4. ``trainer.train()``: each INSPO step is one TRL generation batch (see :mod:`.grpo`);
5. the run directory is completed (see :mod:`inspo.artifacts`) and a summary returned.

Modes: ``inspo`` (co-evolution), ``static`` (a population of one, the seed: the Search-R1
baseline), ``pre-policy`` (instruction evolution with the frozen base policy for
``offline_steps`` steps, then static GRPO with its best instruction) and ``post-policy``
(static GRPO, then instruction evolution with the frozen trained policy). The two offline
stages run :func:`inspo.train.evolve.run_evolve` into ``<run>/pre-policy`` or
``<run>/post-policy`` on the offline schedule (:func:`inspo.train.config.offline_config`: by
default as many evolution rounds as the online schedule, compressed into ``offline_steps``).

Multi-process (``torchrun --nproc_per_node N`` or ``accelerate launch``): every process calls
``run_training`` with the same config; only the main process writes the run files (each
process writes its own ``choices.rank<R>.jsonl``).
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.core.coevolution import CoEvolution
from inspo.core.events import EventLog
from inspo.core.state import read_state, save_state
from inspo.records import Question
from inspo.rng import derived_rng
from inspo.train.config import TrainConfig, dump, offline_config
from inspo.train.loop import RewardFn, build_coevolution, warmup_questions
from inspo.train.setup import SetupError, prepare
from inspo.train.summary import RunSummary, summarize

log = logging.getLogger("inspo.train")

__all__ = ["RunSummary", "SetupError", "grpo_settings", "run_training"]


# ------------------------------------------------------------------------- config -> TRL


def _largest_divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def grpo_settings(config: TrainConfig, world_size: int, *, cuda: bool, progress: bool = True) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments for ``config`` on ``world_size`` processes.

    One INSPO step = one TRL generation batch of ``questions_per_step x group_size`` rows, split
    into ``mini_batches`` optimizer updates; each update is ``per_device x world x grad_accum``
    rows with ``per_device`` the largest divisor of the per-process share that is at most
    ``micro_batch_size``. Steps, saves and logging are counted in optimizer updates.
    ``max_completion_length`` bounds one episode's completion: ``max_turns + 1`` policy turns and
    ``max_turns`` observations (corrective messages and the nudge are assumed to fit an
    observation's budget; the prefill is not counted). With a ``rollout_func`` TRL truncates
    nothing by it; it is ``dr_grpo``'s normaliser and the cap of TRL's own generators.
    """
    rl = config.rl
    rows = rl.trajectories_per_step
    if rows % (world_size * rl.mini_batches):
        raise SetupError(
            f"rl.questions_per_step x rl.group_size = {rows} trajectories cannot be split into "
            f"rl.mini_batches={rl.mini_batches} updates over {world_size} process(es); make it a multiple of "
            f"{world_size * rl.mini_batches}"
        )
    per_process = rows // (world_size * rl.mini_batches)
    micro = _largest_divisor_at_most(per_process, rl.micro_batch_size)
    settings: dict[str, Any] = {
        "output_dir": config.output_dir,
        "num_generations": rl.group_size,
        "generation_batch_size": rows,
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": per_process // micro,
        "num_iterations": 1,
        "max_steps": rl.steps * rl.mini_batches,
        "learning_rate": rl.learning_rate,
        "lr_scheduler_type": rl.lr_scheduler,
        "warmup_steps": rl.warmup_ratio,  # a float below 1 is a ratio of the total steps
        "beta": rl.beta,
        "epsilon": rl.clip_epsilon,
        "loss_type": rl.loss_type,
        "temperature": rl.temperature,
        "top_p": rl.top_p,
        # max_turns search turns, each followed by an observation, then the final turn
        "max_completion_length": (rl.max_turns + 1) * rl.max_response_tokens + rl.max_turns * rl.max_obs_tokens,
        "bf16": rl.bf16,
        "use_cpu": not cuda,
        "report_to": list(rl.report_to) or "none",
        "logging_steps": rl.logging_steps,
        "save_strategy": "steps" if rl.save_steps else "no",
        "save_steps": max(rl.save_steps, 1) * rl.mini_batches,
        "save_only_model": False,
        "seed": rl.seed,
        "use_vllm": False,  # rl.use_vllm: inspo's own vLLM engine plays the rollouts (inspo.train.vllm_sync)
        "gradient_checkpointing": config.model.gradient_checkpointing,
        "remove_unused_columns": False,
        "shuffle_dataset": True,
        "model_init_kwargs": {"dtype": config.model.dtype},
        "disable_tqdm": not progress,
        "ddp_timeout": 7200,  # verification on the main process can take a while
        # TRL calls a completion that does not end in EOS "truncated"; an episode that ends at
        # </answer> has no EOS, so masking "truncated" completions would drop the answered ones.
        # Kept off explicitly (TRL's default today); inspo logs its own rollout/finish/* shares.
        "mask_truncated_completions": False,
    }
    return settings


def _world() -> tuple[int, int]:
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# ---------------------------------------------------------------------------------- the run


def run_training(config: TrainConfig, *, resume: bool | str = False, progress: bool = True,
                 reward_fn: RewardFn | None = None) -> RunSummary:
    """Train ``config``'s policy with GRPO while its instruction co-evolves (see module docstring).

    Args:
        config: the resolved config (``inspo.train.config.resolve``).
        resume: ``True`` continues from the last complete ``checkpoint-N`` in ``output_dir``;
            a path resumes from that checkpoint; ``False`` starts a new run (refused when
            ``output_dir`` already holds checkpoints).
        progress: show TRL's progress bar and one line per step (main process).
        reward_fn: replaces the response-only EM/F1 reward of every rollout (training and
            verification); see :data:`inspo.train.loop.RewardFn`.

    Raises:
        SetupError: a bad path, an unreachable retrieval server or optimizer endpoint, a prompt
            over ``rl.max_prompt_tokens``, a batch that does not divide: before training.
        ConfigError: an invalid config value.
    """
    if config.mode == "pre-policy":
        return _pre_policy(config, resume=resume, progress=progress, reward_fn=reward_fn)
    if config.mode == "post-policy":
        return _post_policy(config, resume=resume, progress=progress, reward_fn=reward_fn)
    summary, _ = _train(config, resume=resume, progress=progress, reward_fn=reward_fn,
                        static=config.mode == "static")
    return summary


def _pre_policy(config, *, resume, progress, reward_fn) -> RunSummary:
    """Offline evolution with the frozen base policy (the trainer's model before any update,
    on the main process, result broadcast), then static GRPO from its best instruction."""
    summary, _ = _train(config, resume=resume, progress=progress, reward_fn=reward_fn, static=True,
                        pre_policy=True)
    summary.write()
    return summary


def _post_policy(config, *, resume, progress, reward_fn) -> RunSummary:
    from inspo.agent.engines import HFEngine
    from inspo.train.evolve import run_evolve

    run_dir = Path(config.output_dir)
    trained = run_dir / artifacts.MODEL_DIR
    if resume and (trained / "config.json").is_file() and (run_dir / artifacts.TRAINING_SUMMARY_FILE).is_file():
        from inspo.models import load_model

        loaded = load_model(trained, dtype=config.model.dtype, device="cuda" if _cuda() else "cpu")
        model, tokenizer = loaded.model, loaded.tokenizer
        summary = RunSummary.read(run_dir / artifacts.TRAINING_SUMMARY_FILE)
    else:
        summary, (model, tokenizer) = _train(config, resume=resume, progress=progress, reward_fn=reward_fn,
                                             static=True, keep_model=True)
        artifacts.write_json(run_dir / artifacts.TRAINING_SUMMARY_FILE, summary.to_dict())
    rank, _ = _world()
    if rank != 0:
        return summary
    log.info("post-policy stage: instruction evolution with the frozen trained policy for %d steps", config.offline_steps)
    engine = HFEngine(model, tokenizer, rng=derived_rng(config.rl.seed, "post-policy"))
    evo = run_evolve(offline_config(config), steps=config.offline_steps, engine=engine,
                     out_dir=run_dir / "post-policy", progress=progress, reward_fn=reward_fn)
    summary.stages["post-policy"] = evo.to_dict()
    summary.best_instruction_id, summary.best_instruction = evo.best_instruction_id, evo.best_instruction
    summary.best_weight, summary.population = evo.best_weight, evo.population
    artifacts.write_best_instruction(run_dir, evo.best_instruction)
    summary.write()
    return summary


def _train(
    config: TrainConfig,
    *,
    resume: bool | str,
    progress: bool,
    reward_fn: RewardFn | None,
    static: bool,
    pre_policy: bool = False,
    keep_model: bool = False,
):
    """One GRPO run; returns (summary, (model, tokenizer) if ``keep_model`` else None)."""
    started = time.time()
    rank, world = _world()
    main = rank == 0
    run_dir = Path(config.output_dir)
    rl = config.rl
    if rl.use_vllm:
        _check_vllm_training(config, world)
    if config.model.engine != "hf":
        raise SetupError(
            f"model.engine={config.model.engine}: model.engine picks the frozen policy's engine of inspo evolve; "
            "inspo train plays its rollouts with vLLM through rl.use_vllm=true (with model.lora=true). "
            "Use model.engine=hf"
        )
    try:
        checkpoint = artifacts.find_checkpoint(run_dir, resume) if resume else None
    except FileNotFoundError as exc:
        raise SetupError(str(exc)) from exc
    if checkpoint is None and artifacts.any_checkpoint_dirs(run_dir):
        raise SetupError(
            f"{run_dir} already holds checkpoints of an earlier run; pass resume=True (--resume) to continue "
            "it, or choose another output_dir"
        )
    plan, saved_state = (None, None)
    if checkpoint is not None:  # a refused change stops here, before anything loads
        plan, saved_state = _plan_resume(config, run_dir, checkpoint, static=static)
    cuda = _cuda()
    settings = grpo_settings(config, world, cuda=cuda, progress=progress)
    inputs = prepare(config, need_optimizer=not static, need_eval=True)
    log.info("optimizer LLM: %s", inputs.optimizer_note)
    if not config.model.lora and config.model.dtype == "bfloat16":
        log.warning("full fine-tuning of bfloat16 weights: an update smaller than bf16's precision (about "
                    "1/256 of a weight) is lost; for small learning rates use model.dtype=float32 (float32 master "
                    "weights, bf16 compute through rl.bf16) or model.lora=true")

    # -- run directory ------------------------------------------------------------------
    choices = run_dir / artifacts.choices_file(rank)
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        if checkpoint is None:
            artifacts.clear_run_files(run_dir)
        (run_dir / artifacts.CONFIG_FILE).write_text(plan.config_text(config) if plan else dump(config),
                                                     encoding="utf-8")
    if checkpoint is None:
        choices.unlink(missing_ok=True)
    events = EventLog(run_dir / artifacts.EVENTS_FILE if main else None, keep=main)
    coevo = build_coevolution(config.coevolution, inputs.seed_instruction, inputs.optimizer, events, static=static,
                              fits=inputs.fits)

    # -- trainer --------------------------------------------------------------------------
    from inspo.train.grpo import RolloutContext, make_callback

    ctx = RolloutContext(
        coevo=coevo,
        retriever=inputs.retriever,
        agent=inputs.agent,
        questions={q.id: q for q in inputs.questions},
        tokenizer=inputs.tokenizer,
        mini_batches=rl.mini_batches,
        seed=rl.seed,
        rank=rank,
        world_size=world,
        reward_fn=reward_fn,
        choices_path=choices,
        eval_batch_size=rl.eval_batch_size(world),
        eval_questions=inputs.eval_questions if rl.eval_every else [],
        eval_every=rl.eval_every,
    )
    if rl.use_vllm:
        from inspo.train.vllm_sync import start_adapter_sync

        ctx.adapters = start_adapter_sync(config, inputs.model_dir, run_dir, rl.seed)
    callback = make_callback(ctx, run_dir=run_dir, total_steps=rl.steps, progress=progress and main,
                             run_config=config.to_dict())
    trainer = _build_trainer(config, settings, inputs, ctx, callback, progress)
    callback.trainer = trainer

    # -- pre-policy: the seed is the best instruction of an offline evolution ----------------
    stages: dict[str, Any] = {}
    if pre_policy:
        stages["pre-policy"] = _pre_policy_stage(config, trainer, ctx, resume=bool(resume), progress=progress,
                                                 reward_fn=reward_fn)
        coevo = build_coevolution(config.coevolution, stages["pre-policy"]["best_instruction"], inputs.optimizer,
                                  events, static=True)
        ctx.coevo = coevo

    # -- P_0 (fresh) or the checkpoint's state (resume), identical on every process --------
    if plan is not None:
        step = plan.step
        if main:
            coevo.load_state_dict(saved_state, emit=False)  # every section's changes go in one event below
            dropped = artifacts.truncate_after(run_dir, step)
            if plan.applied:
                events.emit(plan.event())
            plan.write(run_dir)
            _say(plan.lines(), progress)
            log.info("resuming from %s (INSPO step %d); dropped %d log line(s) written after it", checkpoint, step, dropped)
        else:
            artifacts.truncate_jsonl(choices, lambda r: int(r.get("step", 0)) <= step)
    elif main:
        _initialize(coevo, ctx, trainer, inputs, config, progress)
    _sync_population(ctx, coevo)

    # -- train ----------------------------------------------------------------------------
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)

    # -- the run directory's final artifacts ----------------------------------------------
    trainer.accelerator.wait_for_everyone()
    model = _final_model(trainer)
    evaluation = None
    final = None
    if main:
        save_state(coevo, run_dir / artifacts.STATE_FILE)
        model.save_pretrained(str(run_dir / artifacts.MODEL_DIR))
        inputs.tokenizer.save_pretrained(str(run_dir / artifacts.MODEL_DIR))
        if inputs.eval_questions or inputs.test_questions:
            final = _final_choice(ctx, model, inputs, coevo, config, progress)
            evaluation = final.to_dict()
        returned = final.returned_text if final else coevo.best().text
        artifacts.write_best_instruction(run_dir, returned)
    trainer.accelerator.wait_for_everyone()
    history = artifacts.read_jsonl(run_dir / artifacts.METRICS_FILE) if main else callback.metrics.history
    returned = coevo.best()
    if final is not None:
        returned = next(i for i in coevo.population.archive.values() if i.id == final.returned_id)
    summary = summarize(
        run_dir=config.output_dir, mode=config.mode, steps=rl.steps, history=history, coevo=coevo, returned=returned,
        optimizer=inputs.optimizer_note, started=started, resumed_from=str(checkpoint) if checkpoint else None,
        evaluation=evaluation, stages=stages, resume_changes=[str(c) for c in plan.applied] if plan else [],
        eval_history=[{"step": h["step"], "eval/reward": h["eval/reward"]} for h in history if "eval/reward" in h],
    )
    if main:
        summary.write()
        if progress:
            print(summary, flush=True)
    if ctx.adapters is not None:
        ctx.adapters.shutdown()
    return summary, ((model, inputs.tokenizer) if keep_model else None)


def _check_vllm_training(config: TrainConfig, world: int) -> None:
    """``rl.use_vllm``: refuse what the adapter sync cannot do, before anything loads."""
    from inspo.agent.vllm_engine import INSTALL_HINT, vllm_available

    problems = []
    if not config.model.lora:
        problems.append("it syncs the LoRA adapter into vLLM each step, so it needs model.lora=true (full "
                        "fine-tuning would push every weight into vLLM; vLLM's CPU build cannot take them)")
    if config.rl.vllm_mode != "colocate":
        problems.append(f"rl.vllm_mode={config.rl.vllm_mode}: only colocate (vLLM in the training process) is "
                        "built; a separate vLLM server would need its adapter pushed over the network")
    if world > 1:
        problems.append(f"{world} processes: each would start its own vLLM engine; one process only for now")
    if not vllm_available():
        problems.append(f"no module named 'vllm'; {INSTALL_HINT}")
    if problems:
        raise SetupError("rl.use_vllm=true: " + "; ".join(problems) + ". Or set rl.use_vllm=false "
                         "(rollouts then generate with the training model through transformers)")


def _plan_resume(config: TrainConfig, run_dir: Path, checkpoint: Path, *, static: bool):
    """The checked :class:`~inspo.train.resume.ResumePlan` of a resume from ``checkpoint`` and the
    saved core state; raises ``ResumeRefused`` (a SetupError) for a change the checkpoint cannot honour."""
    from inspo.train.resume import plan_resume, read_old_config

    step_info = artifacts.read_step(checkpoint)
    if int(step_info.get("mini_batches", config.rl.mini_batches)) != config.rl.mini_batches:
        raise SetupError(f"{checkpoint} was written with rl.mini_batches={step_info['mini_batches']}; "
                         f"resume with the same value (now {config.rl.mini_batches})")
    state = read_state(checkpoint / artifacts.STATE_FILE)
    saved, where = read_old_config(run_dir, checkpoint)
    plan = plan_resume(config, saved_core=state["config"], saved=saved, checkpoint=str(checkpoint),
                       step=int(step_info["inspo_step"]), compared_with=where, static=static)
    plan.check()
    return plan, state


def _say(lines: list[str], progress: bool) -> None:
    """Lines for the user: printed with progress on, logged otherwise (as the step lines are)."""
    for line in lines:
        if progress:
            print(line, flush=True)
        else:
            log.info(line)


def _build_trainer(config, settings, inputs, ctx, callback, progress):
    from trl import GRPOConfig

    from inspo.train.grpo import make_reward_func, make_rollout_func, trainer_class

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning)
        args = GRPOConfig(**settings)
    peft_config = None
    if config.model.lora:
        from peft import LoraConfig

        m = config.model
        peft_config = LoraConfig(r=m.lora_r, lora_alpha=m.lora_alpha, lora_dropout=m.lora_dropout,
                                 target_modules=list(m.lora_target_modules), task_type="CAUSAL_LM")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
        warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning)
        trainer = trainer_class()(
            model=str(inputs.model_dir),
            reward_funcs=[make_reward_func(ctx)],
            args=args,
            train_dataset=questions_dataset(inputs.questions),
            processing_class=inputs.tokenizer,
            rollout_func=make_rollout_func(ctx),
            callbacks=[callback],
            peft_config=peft_config,
        )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from inspo.train.grpo import quiet_progress_callback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if progress:
        trainer.add_callback(quiet_progress_callback())
    return trainer


def questions_dataset(questions: list[Question]):
    """TRL's train dataset: one row per question (``prompt`` = the question, ``question_id``)."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [q.question for q in questions], "question_id": [q.id for q in questions]})


def _initialize(coevo: CoEvolution, ctx, trainer, inputs, config: TrainConfig, progress: bool) -> None:
    """Algorithm 1 line 2 on the main process: warm-up rollouts of the seed, then P_0."""
    from inspo.train.grpo import generation_model

    co = coevo.config
    needs_policy = co.init_population or config.data.warmup_questions
    if not needs_policy or (co.population_size == 1 and not co.evolve):
        coevo.initialize(None, [])
        return
    warm = warmup_questions(inputs.questions, config.data.warmup_questions, co.seed)
    t0 = time.time()
    with generation_model(trainer) as model:
        coevo.initialize(ctx.make_evaluate(model, 0, tag="init", version=trainer.state.global_step), warm)
    line = (f"initial population: {len(coevo.population)} instruction(s) "
            f"({coevo.ledger.warmup_rollouts} warm-up + {coevo.ledger.verification_rollouts} verification rollouts, "
            f"{coevo.ledger.optimizer_calls} optimizer call(s), {time.time() - t0:.0f} s)")
    if progress:
        print(line, flush=True)
    else:
        log.info(line)


def _pre_policy_stage(config: TrainConfig, trainer, ctx, *, resume: bool, progress: bool,
                      reward_fn: RewardFn | None) -> dict[str, Any]:
    """Run (or, on resume, reuse) ``<run>/pre-policy`` on the main process with the trainer's
    model before any update — the frozen base policy — and give every process its summary."""
    from inspo.agent.engines import HFEngine
    from inspo.train.evolve import run_evolve
    from inspo.train.grpo import generation_model

    stage_dir = Path(config.output_dir) / "pre-policy"
    payload: list[Any] = [None]
    if ctx.is_main:
        done = stage_dir / artifacts.SUMMARY_FILE
        if resume and done.is_file():
            evo = RunSummary.read(done)
            log.info("pre-policy stage already done: reusing %s from %s", evo.best_instruction_id, stage_dir)
        else:
            line = f"pre-policy stage: instruction evolution with the frozen base policy for {config.offline_steps} steps"
            if progress:
                print(line, flush=True)
            else:
                log.info(line)
            with generation_model(trainer) as model:
                engine = HFEngine(model, ctx.tokenizer, rng=derived_rng(config.rl.seed, "pre-policy"))
                evo = run_evolve(offline_config(config), steps=config.offline_steps, engine=engine,
                                 out_dir=stage_dir, progress=progress, reward_fn=reward_fn)
        payload[0] = evo.to_dict()
    if ctx.world_size > 1:
        from accelerate.utils import broadcast_object_list

        broadcast_object_list(payload, from_process=0)
    return payload[0]


def _sync_population(ctx, coevo: CoEvolution) -> None:
    """Broadcast the main process's population (and last step) to every process."""
    if ctx.world_size == 1:
        return
    from accelerate.utils import broadcast_object_list

    from inspo.train.grpo import set_population

    payload = [(coevo.population.to_dict(), coevo.last_step) if ctx.is_main else None]
    broadcast_object_list(payload, from_process=0)
    if not ctx.is_main:
        set_population(coevo, *payload[0])


def _final_model(trainer):
    """The trained model, unwrapped, with LoRA adapters merged into the weights."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.eval()
    return model


def _final_choice(ctx, model, inputs, coevo: CoEvolution, config: TrainConfig, progress: bool):
    """The returned instruction (``config.final_choice``) and its held-out test against the seed,
    with the trained policy decoding greedily (see :mod:`inspo.train.final`)."""
    from inspo.train.final import choose_for_run

    return choose_for_run(ctx.greedy_evaluate(model, progress=progress), coevo, config, inputs,
                          rule=config.final_choice)

