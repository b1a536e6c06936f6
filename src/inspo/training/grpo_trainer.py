"""The TRL glue: a GRPOTrainer subclass, the multi-turn ``rollout_func``, the reward function
that hands back precomputed rewards, and the callback that ends each INSPO step. Every use of TRL's
(and the Trainer's) private API is in this module.

TRL owns the training loop, so the INSPO step (:mod:`inspo.training.step`, where its order is
told) runs as its two halves around TRL's update, ``t = global_step // mini_batches + 1``:

- **before the update**, :func:`make_rollout_func`'s ``rollout_func`` on every process, on the rows
  TRL's sampler dealt it (each question G times in a row;
  :meth:`InspoGRPOTrainer._generate_and_score_completions` keeps the rows so the rollout function
  can read their ``question_id``): :meth:`InspoStep.play <inspo.training.step.InspoStep.play>`
  with the training model itself (unwrapped for generation). ``coevo.choose(t, qid)`` is a pure
  function of (seed, t, qid, population version), so a group split over two processes gets the
  same instruction on both. It returns token ids end to end, ``env_mask`` (0 on environment
  tokens: tool results, messages; they are not trained on) and the extra keys ``reward``,
  ``instruction_id``, ``question_id``, ``n_tool_calls``, ``turns``, ``finish_reason``; an outage
  stops training (:class:`~inspo.records.TooManyErrors`; the checkpoints already saved are kept,
  ``inspo train --resume`` continues from the last one). ``inspo_reward`` returns the precomputed
  reward (scored on the response only) and keeps the rollouts for the step's end;
- **the update**: TRL computes group advantages and makes ``mini_batches`` optimizer updates;
- **after the update** (``global_step % mini_batches == 0``), :class:`InspoHooks`' ``on_step_end``
  gathers every process's rollouts; the main process calls :meth:`InspoStep.finish
  <inspo.training.step.InspoStep.finish>` (verification with the CURRENT policy on evolve steps),
  then broadcasts the population so every process holds the identical one. Metrics go to TRL's
  logs and to ``metrics.jsonl`` (:class:`~inspo.training.metrics.MetricsLog`); at a save,
  ``inspo_state.json`` and ``inspo_step.json`` go into ``checkpoint-N/``.

Heavy imports (torch, transformers, trl, accelerate) happen inside functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.core.schedule import is_evolve_step
from inspo.core.state import save_state
from inspo.records import Rollout, TooManyErrors
from inspo.rng import derived_rng
from inspo.training.checkpointing import limit_checkpointing
from inspo.training.cpu_logps import cpu_logps_and_entropies
from inspo.training.length_groups import LOSSES as LENGTH_GROUPED_LOSSES
from inspo.training.length_groups import regroup_by_length
from inspo.training.memory import release_memory
from inspo.training.metrics import MetricsLog
from inspo.training.packed_rows import packing_attention
from inspo.training.rollout_context import RolloutContext, set_population
from inspo.training.step import light

# ---------------------------------------------------------------------------------- rollouts


def rollout_batch(rollouts: list[Rollout], fallback_token: int) -> dict[str, Any]:
    """TRL's rollout output for ``rollouts`` (one row each, in order).

    A completion is never empty (TRL indexes its last token): an empty one becomes
    ``[fallback_token]`` with mask 0. ``logprobs`` is None unless every rollout carries one
    per completion token.
    """
    prompt_ids, completion_ids, env_mask = [], [], []
    for r in rollouts:
        if not r.prompt_ids:
            raise ValueError(
                f"rollout of question {r.question.id!r} has no prompt token ids: training needs an "
                "engine that keeps token ids (HFEngine), not a text-only one"
            )
        ids, mask = list(r.completion_ids), list(r.env_mask)
        if len(ids) != len(mask):
            raise ValueError(
                f"rollout of question {r.question.id!r}: {len(ids)} completion ids but {len(mask)} "
                "mask entries"
            )
        if not ids:
            ids, mask = [fallback_token], [0]
        prompt_ids.append(list(r.prompt_ids))
        completion_ids.append(ids)
        env_mask.append(mask)
    logprobs = None
    if rollouts and all(
        r.logprobs is not None and len(r.logprobs) == len(c)
        for r, c in zip(rollouts, completion_ids, strict=True)
    ):
        logprobs = [list(r.logprobs) for r in rollouts]
    return {
        "prompt_ids": prompt_ids,
        "completion_ids": completion_ids,
        "env_mask": env_mask,
        "logprobs": logprobs,
        "reward": [float(r.reward) for r in rollouts],
        "instruction_id": [r.instruction_id for r in rollouts],
        "question_id": [r.question.id for r in rollouts],
        "n_tool_calls": [len(r.tool_calls) for r in rollouts],
        "turns": [r.turns for r in rollouts],
        "finish_reason": [r.finish_reason for r in rollouts],
    }


@contextmanager
def generation_model(trainer: Any) -> Iterator[Any]:
    """The training model, unwrapped (DDP/DeepSpeed/FSDP) and without gradient checkpointing."""
    import warnings

    from trl.models import unwrap_model_for_generation

    with warnings.catch_warnings():
        # transformers 5 renamed (is_)gradient_checkpointing; TRL 1.16 still reads the old name
        warnings.filterwarnings(
            "ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning
        )
        with unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model:
            yield model


def make_rollout_func(ctx: RolloutContext) -> Callable[[list, Any], dict[str, Any]]:
    def rollout_func(prompts: list, trainer: Any) -> dict[str, Any]:
        rows = getattr(trainer, "_inspo_inputs", None)
        if rows is None or len(rows) != len(prompts):
            raise RuntimeError(
                "rollout_func: the trainer did not pass its input rows (use InspoGRPOTrainer)"
            )
        step = ctx.inspo_step(trainer.state.global_step)
        questions = [ctx.questions[row["question_id"]] for row in rows]
        with generation_model(trainer) as model:
            engine = ctx.policy(
                model,
                trainer.state.global_step,
                rng=derived_rng(ctx.seed, "rollout", step, ctx.rank),
            )
            played = ctx.step.play(step, questions, engine)
        ctx.sampled = {qid for qid, _ in played.groups}
        ctx.trace(step, played.groups)
        ctx.in_flight = played.rollouts
        fallback = (
            ctx.tokenizer.eos_token_id
            if ctx.tokenizer.eos_token_id is not None
            else ctx.tokenizer.pad_token_id
        )
        return rollout_batch(ctx.in_flight, int(fallback))

    return rollout_func


def make_reward_func(ctx: RolloutContext) -> Callable[..., list[float]]:
    def inspo_reward(
        prompts, completions, reward, question_id, instruction_id, **kwargs
    ) -> list[float]:
        """The precomputed response-only reward; records the rollouts for attribution."""
        rollouts, ctx.in_flight = ctx.in_flight, []
        if len(rollouts) != len(reward) or any(
            r.question.id != q or r.instruction_id != i
            for r, q, i in zip(rollouts, question_id, instruction_id, strict=False)
        ):
            raise RuntimeError("inspo_reward: the rows do not match the rollouts of this batch")
        ctx.pending.extend(light(r) for r in rollouts)
        return [float(x) for x in reward]

    return inspo_reward


# ---------------------------------------------------------------------------------- callback


@dataclass(frozen=True)
class StepFailed:
    """What the main process broadcasts when the end of a step failed there (a run over
    ``rl.max_error_rate`` in verification or evaluation, a crash): every other process stops
    with the same message instead of waiting for a population that never comes."""

    step: int
    kind: str
    message: str

    def error(self) -> Exception:
        if self.kind == TooManyErrors.__name__:
            return TooManyErrors(self.message)
        return RuntimeError(
            f"the main process stopped at the end of INSPO step {self.step} ({self.kind}): "
            f"{self.message}"
        )


class InspoHooks:
    """The callback's logic; :func:`make_callback` makes it a ``TrainerCallback``.

    ``trainer`` must be set after the trainer is built (TRL does not pass it to callbacks).
    """

    def __init__(
        self,
        ctx: RolloutContext,
        *,
        run_dir: Path,
        total_steps: int,
        progress: bool,
        run_config: dict[str, Any] | None = None,
    ):
        self.ctx = ctx
        self.metrics = MetricsLog(
            Path(run_dir) / artifacts.METRICS_FILE,
            total_steps,
            progress=progress,
            release_memory=True,
        )
        self.run_config = run_config
        """The run's resolved config, recorded in each checkpoint (a resume compares with it)."""
        self.trainer: Any = None
        self.line: dict[str, Any] | None = None

    # -- the step's second half on the main process (InspoStep.finish), population to everyone --
    def on_step_end(self, args, state, control, **kwargs):
        ctx = self.ctx
        if state.global_step % ctx.mini_batches:
            return
        from accelerate.utils import broadcast_object_list, gather_object

        step = state.global_step // ctx.mini_batches
        local, ctx.pending = ctx.pending, []
        rollouts = list(gather_object(local)) if ctx.world_size > 1 else local
        payload: list[Any] = [None]
        evaluates = bool(ctx.eval_every and ctx.eval_questions and step % ctx.eval_every == 0)
        needs_model = is_evolve_step(step, ctx.coevo.config) or evaluates
        failure: Exception | None = None
        with generation_model(self.trainer) if needs_model else nullcontext() as model:
            if ctx.is_main:
                try:
                    payload[0] = self._update(step, rollouts, model)
                except (
                    Exception
                ) as exc:  # every rank must hear it, or the others wait in the broadcast
                    if ctx.world_size == 1:
                        raise
                    failure, payload[0] = exc, StepFailed(step, type(exc).__name__, str(exc))
        if ctx.world_size > 1:
            broadcast_object_list(payload, from_process=0)
        if isinstance(payload[0], StepFailed):
            raise failure if failure is not None else payload[0].error()
        population, metrics = payload[0]
        if not ctx.is_main:
            set_population(ctx.coevo, population, step)
            release_memory()  # the main process does it as it writes the step's metrics line
        train_metrics = self.trainer._metrics["train"]
        for key, value in metrics.items():
            if key != "step":
                train_metrics[key].append(value)

    def _update(self, step: int, rollouts: list[Rollout], model: Any):
        coevo = self.ctx.coevo
        version = self.trainer.state.global_step
        evaluate = (
            self.ctx.make_evaluate(model, step, version=version) if model is not None else None
        )
        metrics = self.ctx.step.finish(step, rollouts, evaluate, sampled=self.ctx.sampled).metrics
        if model is not None:
            metrics.update(self.ctx.periodic_eval(model, step, version=version))
        metrics["global_step"] = self.trainer.state.global_step
        self.line = dict(metrics)
        return coevo.population.to_dict(), metrics

    # -- logs, saves ------------------------------------------------------------------------
    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.ctx.is_main and self.line is not None and logs:
            for key, value in logs.items():
                if key not in self.line and isinstance(value, (int, float)):
                    self.line[key] = value
            self.flush()

    def on_save(self, args, state, control, **kwargs):
        if not self.ctx.is_main:
            return
        self.flush()
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        step = state.global_step // self.ctx.mini_batches
        info: dict[str, Any] = {
            "inspo_step": step,
            "global_step": state.global_step,
            "mini_batches": self.ctx.mini_batches,
        }
        if self.run_config is not None:
            info["config"] = self.run_config
        artifacts.write_json(checkpoint / artifacts.STEP_FILE, info)
        save_state(
            self.ctx.coevo, checkpoint / artifacts.STATE_FILE
        )  # last: marks the checkpoint complete

    def on_train_end(self, args, state, control, **kwargs):
        if self.ctx.is_main:
            self.flush()

    def flush(self) -> None:
        if self.line is not None:
            line, self.line = self.line, None
            self.metrics.write(line)


def load_finished(trainer: Any, checkpoint: Path) -> None:
    """A resume from the run's last step: the checkpoint's weights and trainer state, no training.

    ``Trainer.train`` checks ``max_steps`` only after a step, so resumed at the last one it trains
    a step past ``rl.steps`` (a killed run's final choice or test would then score an extra step).
    """
    from transformers import TrainerState

    trainer._load_from_checkpoint(
        str(checkpoint)
    )  # what train(resume_from_checkpoint=...) loads first
    trainer.state = TrainerState.load_from_json(str(checkpoint / "trainer_state.json"))


def quiet_progress_callback():
    """TRL's progress bar over optimizer steps without its printout of every log dict."""
    from transformers.trainer_callback import ProgressCallback

    class QuietProgressCallback(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            return None

    return QuietProgressCallback


def make_callback(ctx: RolloutContext, **kwargs: Any) -> InspoHooks:
    """An :class:`InspoHooks` that is also a ``transformers.TrainerCallback``."""
    from transformers import TrainerCallback

    cls = type("InspoCallback", (InspoHooks, TrainerCallback), {})
    return cls(ctx, **kwargs)


# ---------------------------------------------------------------------------------- trainer


@contextmanager
def quiet_checkpointing_rename() -> Iterator[None]:
    """transformers 5 renamed ``is_gradient_checkpointing``; TRL 1.16 still reads the old name."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning
        )
        yield


def epoch_sampler_class():
    """TRL's ``RepeatSampler`` whose permutation depends only on (seed, epoch)."""
    from trl.trainer.utils import RepeatSampler

    class EpochRepeatSampler(RepeatSampler):
        """The permutation depends only on (seed, epoch), read from the trainer state when
        iteration starts (accelerate does not forward ``set_epoch`` on a mid-epoch resume)."""

        def __init__(self, *args, epoch_fn: Callable[[], int], **kwargs):
            super().__init__(*args, **kwargs)
            self.epoch_fn = epoch_fn

        def __iter__(self):
            if self.shuffle:
                self.generator.manual_seed((self.seed or 0) * 1000003 + self.epoch_fn())
            return super().__iter__()

    return EpochRepeatSampler


def epoch_sampler(cls: Any, base: Any, trainer: Any) -> Any:
    """TRL's train sampler ``base`` rebuilt as ``cls`` (:func:`epoch_sampler_class`), seeded by
    ``trainer``'s epoch."""
    return cls(
        data_source=base.data_source,
        mini_repeat_count=base.mini_repeat_count,
        batch_size=base.batch_size,
        repeat_count=base.repeat_count,
        shuffle=base.shuffle,
        seed=base.seed,
        epoch_fn=lambda: int((trainer.state.epoch or 0) + 1e-6),
    )


def length_grouped(trainer: Any, inputs: Any, fresh: bool) -> Any:
    """``inputs`` (the micro-batch TRL's ``_prepare_inputs`` returned), after ``trainer``'s buffer,
    when ``fresh`` from a new generation and ``trainer.group_by_length`` (``rl.group_by_length``),
    had each optimizer update's rows regrouped by length
    (:func:`~inspo.training.length_groups.regroup_by_length`; not under ``bnpo``), or by prompt
    where the pass packs prompts (:func:`packs_prompts`), whatever ``group_by_length`` says."""
    by_prompt = packs_prompts(trainer)
    grouped = trainer.group_by_length or by_prompt
    if not (fresh and grouped and trainer.loss_type in LENGTH_GROUPED_LOSSES):
        return inputs
    trainer._buffered_inputs = regroup_by_length(
        trainer._buffered_inputs, trainer.args.gradient_accumulation_steps, by_prompt=by_prompt
    )
    return trainer._buffered_inputs[trainer._step % trainer.args.steps_per_generation]


def packs_prompts(trainer: Any) -> bool:
    """Whether ``trainer``'s training passes pack each micro-batch into one row
    (``rl.pack_prompts``, :mod:`inspo.training.packed_rows`): on the CPU only, where the log-prob
    pass is inspo's own (:mod:`inspo.training.cpu_logps`)."""
    return bool(trainer.pack_prompts) and trainer.args.device.type == "cpu"


def trainer_class():
    """``InspoGRPOTrainer``: TRL's GRPOTrainer with (1) an epoch-seeded sampler, so a resumed run
    replays the same question order, (2) the input rows kept for the rollout function, (3) each
    update's rows in micro-batches of similar lengths (:func:`length_grouped`), (4) the CPU
    log-prob pass (:mod:`inspo.training.cpu_logps`) and (5) there, each micro-batch packed into one
    row (:func:`packs_prompts`)."""
    from trl import GRPOTrainer

    EpochRepeatSampler = epoch_sampler_class()

    class InspoGRPOTrainer(GRPOTrainer):
        checkpointed_share = 1.0
        """With gradient checkpointing, the share of decoder layers checkpointed in the loss's
        forward (``model.gradient_checkpointing_layers``; :mod:`inspo.training.checkpointing`)."""

        def create_model_card(self, *args, **kwargs):
            """No TRL card in the run directory (it is no model folder, and TRL's card names no base
            model, instruction or result): inspo writes its own into RUN/agent (inspo.trained)."""

        group_by_length = False  # rl.group_by_length: see length_grouped
        pack_prompts = False  # rl.pack_prompts: see packs_prompts

        def training_step(self, model, *args, **kwargs):
            # packed over the backward too: gradient checkpointing's recompute attends packed rows
            with packing_attention(model) if packs_prompts(self) else nullcontext():
                return super().training_step(model, *args, **kwargs)

        def _get_train_sampler(self, dataset=None):
            return epoch_sampler(EpochRepeatSampler, super()._get_train_sampler(dataset), self)

        def _prepare_inputs(self, generation_batch):
            buffered = self._buffered_inputs  # TRL replaces its buffer when it generates
            inputs = super()._prepare_inputs(generation_batch)
            return length_grouped(self, inputs, fresh=self._buffered_inputs is not buffered)

        def _generate_and_score_completions(self, inputs):
            self._inspo_inputs = inputs
            with quiet_checkpointing_rename():
                return super()._generate_and_score_completions(inputs)

        def _get_per_token_logps_and_entropies(
            self,
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=None,
            compute_entropy=False,
            compute_aux_loss=False,
            **multimodal,
        ):
            if self.checkpointed_share < 1 and model.training:
                # TRL turns checkpointing back on for every layer after each generation
                limit_checkpointing(model, self.checkpointed_share)
            plain = not compute_aux_loss and all(v is None for v in multimodal.values())
            if input_ids.device.type == "cpu" and plain:
                return cpu_logps_and_entropies(
                    self,
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size=batch_size,
                    compute_entropy=compute_entropy,
                )
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **multimodal,
            )

    return InspoGRPOTrainer
