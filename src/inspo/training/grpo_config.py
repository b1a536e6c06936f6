"""The TRL trainer of a GRPO stage: the config mapped to ``GRPOConfig``, the trainer wired to
inspo's rollout function, reward function and callback (all in
:mod:`inspo.training.grpo_trainer`), and the trained model taken out of it. The name follows TRL's
own pair, ``trl/trainer/grpo_config.py`` and ``grpo_trainer.py``.

Heavy imports (trl, transformers, peft, datasets) happen inside functions.
"""

from __future__ import annotations

import warnings
from typing import Any

from inspo.config.train import TrainConfig
from inspo.records import Question
from inspo.training.preflight import SetupError


def _largest_divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def grpo_settings(
    config: TrainConfig, world_size: int, *, cuda: bool, progress: bool = True
) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments for ``config`` on ``world_size`` processes.

    One INSPO step = one TRL generation batch of ``questions_per_step x group_size`` rows, split
    into ``mini_batches`` optimizer updates; each update is ``per_device x world x grad_accum``
    rows with ``per_device`` the largest divisor of the per-process share that is at most
    ``micro_batch_size``. Steps, saves and logging are counted in optimizer updates.
    ``max_completion_length`` bounds one episode's completion: ``max_turns + 1`` policy turns and
    ``max_turns`` observations (corrective messages and the nudge are assumed to fit an
    observation's budget; the prefill is not counted). With a ``rollout_func`` TRL truncates
    nothing by it; it is ``dr_grpo``'s normaliser and the cap of TRL's own generators.
    ``run_training`` hands a config whose ``model.dtype`` and ``rl.bf16`` are resolved
    (:mod:`inspo.training.precision`); an ``auto`` left here is resolved by the same rule for
    ``cuda`` or the CPU.
    """
    from inspo.models.precision import concrete_dtype, fast_bf16, resolve_bf16_setting

    rl = config.rl
    device = "cuda" if cuda else "cpu"
    bf16 = (
        rl.bf16 if isinstance(rl.bf16, bool) else resolve_bf16_setting(rl.bf16, fast_bf16(device))
    )
    rows = rl.trajectories_per_step
    if rows % (world_size * rl.mini_batches):
        raise SetupError(
            f"rl.questions_per_step x rl.group_size = {rows} trajectories cannot be split into "
            f"rl.mini_batches={rl.mini_batches} updates over {world_size} process(es); make it a "
            f"multiple of {world_size * rl.mini_batches}"
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
        # max_turns tool turns, each followed by an observation, then the final turn
        "max_completion_length": (rl.max_turns + 1) * rl.max_response_tokens
        + rl.max_turns * rl.max_obs_tokens,
        "bf16": bf16,
        "use_cpu": not cuda,
        "report_to": list(rl.report_to) or "none",
        "logging_steps": rl.logging_steps,
        "save_strategy": "steps" if rl.save_steps else "no",
        "save_steps": max(rl.save_steps, 1) * rl.mini_batches,
        "save_only_model": False,
        "seed": rl.seed,
        # rl.use_vllm: inspo's own vLLM engine plays the rollouts (inspo.training.vllm_sync)
        "use_vllm": False,
        "gradient_checkpointing": config.model.gradient_checkpointing,
        "remove_unused_columns": False,
        "shuffle_dataset": True,
        "model_init_kwargs": {"dtype": concrete_dtype(config.model.dtype, device)},
        "disable_tqdm": not progress,
        # verification (and an offline stage) on the main process can take a while
        "ddp_timeout": 7200,
        # TRL calls a completion that does not end in EOS "truncated"; an episode that ends at
        # </answer> has no EOS, so masking "truncated" completions would drop the answered ones.
        # Kept off explicitly (TRL's default today); inspo logs its own rollout/finish/* shares.
        "mask_truncated_completions": False,
    }
    return settings


def grpo_args(settings: dict[str, Any]) -> Any:
    """TRL's ``GRPOConfig`` from :func:`grpo_settings`. Building it also sets up the processes
    (``torch.distributed`` with ``ddp_timeout``), so every process can wait for the main one."""
    from trl import GRPOConfig

    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning
        )
        return GRPOConfig(**settings)


def build_trainer(
    config: TrainConfig, args: Any, inputs: Any, ctx: Any, callback: Any, progress: bool
) -> Any:
    """``InspoGRPOTrainer`` on ``inputs``' questions and model (loaded by TRL from its path, with
    LoRA when ``config.model.lora``), with the rollout function, reward function and ``callback``
    of ``ctx`` (a :class:`~inspo.training.rollout_context.RolloutContext`); TRL's log printout
    replaced by a quiet progress bar."""
    from inspo.training.grpo_trainer import (
        make_reward_func,
        make_rollout_func,
        quiet_progress_callback,
        trainer_class,
    )

    peft_config = None
    if config.model.lora:
        from peft import LoraConfig

        m = config.model
        peft_config = LoraConfig(
            r=m.lora_r,
            lora_alpha=m.lora_alpha,
            lora_dropout=m.lora_dropout,
            target_modules=list(m.lora_target_modules),
            task_type="CAUSAL_LM",
        )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
        warnings.filterwarnings(
            "ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning
        )
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
    trainer.checkpointed_share = config.model.gradient_checkpointing_layers
    trainer.group_by_length = config.rl.group_by_length
    trainer.pack_prompts = config.rl.pack_prompts
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if progress:
        trainer.add_callback(quiet_progress_callback())
    return trainer


def questions_dataset(questions: list[Question]):
    """TRL's train dataset: one row per question (``prompt`` = the question, ``question_id``)."""
    from datasets import Dataset

    return Dataset.from_dict(
        {"prompt": [q.question for q in questions], "question_id": [q.id for q in questions]}
    )


def final_model(trainer: Any) -> Any:
    """The trained model, unwrapped, with LoRA adapters merged into the weights."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    model.eval()
    return model
