"""Training rollouts through vLLM (``rl.use_vllm=true``): the policy synced into vLLM per step.

inspo keeps its own multi-turn loop (TRL's vLLM generation is single-turn) and, before vLLM
generates with weights it has not seen (a new optimizer step), syncs what changed. Two ways,
picked by ``model.lora``:

- **full weights** (``model.lora=false``, the paper's full fine-tuning; :class:`WeightSync`):
  vLLM runs in the training process (colocate, one engine per process, as TRL's colocate mode)
  and every weight is handed to it as a tensor through vLLM's in-place reload
  (:meth:`VLLMEngine.load_weights`). TRL's colocate sync calls the model's ``load_weights``
  instead, which fails on vLLM's CPU build (``'Parameter' object has no attribute
  'weight_loader'``: its CPU layers repack their weights after loading, dropping the loader);
  the reload puts the layers back in their loading format first. A tied output embedding is
  handed over under its own name (:func:`~inspo.engines.vllm_engine.checkpoint_weights`), else the
  reload keeps the old head;
- **the LoRA adapter** (``model.lora=true``; :class:`AdapterSync`): vLLM holds the base
  weights and is started once per run with ``enable_lora``; the adapter is saved with peft's
  ``save_pretrained`` (a few MB) into a new folder under the run directory and handed to vLLM
  under a new adapter id (:meth:`VLLMEngine.use_adapter`); older folders are removed;
- **a running vLLM server** (``rl.vllm_mode=server``, LoRA only;
  :class:`~inspo.engines.vllm_server.AdapterPusher`): the adapter is loaded into the server at
  ``rl.vllm_server_url`` through its ``/v1/load_lora_adapter`` under a new name each step, and
  the rollouts are played over HTTP with token ids
  (:class:`~inspo.engines.vllm_server.VLLMServerEngine`). Full weights reach a server only over NCCL
  (TRL's ``vllm-serve``), which needs GPUs and is not built.

Either way the synced engine is the training policy: greedy ids from vLLM equal transformers'
on the trained model (``tests/test_train_vllm.py``), up to the two engines' numerics.

Rollouts come back as token ids (never re-tokenised) with the same ``env_mask`` and rewards as
:class:`~inspo.engines.hf.HFEngine`'s. Their log-probabilities are not handed to TRL: the
rollouts are on-policy (the weights are synced before every generation), so TRL's importance
correction for a stale vLLM policy does not apply.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.engines.vllm_engine import VLLMEngine, context_budget

#: The LoRA ranks vLLM accepts for ``max_lora_rank``.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

ADAPTER_DIR = "vllm-adapters"
"""The folder of the run directory that holds the synced adapters (the latest ``keep`` only)."""


def max_lora_rank(rank: int) -> int:
    """The smallest rank vLLM accepts for ``max_lora_rank`` that holds a LoRA of rank ``rank``."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(
        f"model.lora_r={rank} is larger than vLLM's largest LoRA rank {VLLM_LORA_RANKS[-1]}"
    )


class _SyncedEngine:
    """What both syncs share: an ``engine`` kept on the policy as of ``version``, synced by the
    subclass's ``sync(model, version)`` when a newer version is asked for."""

    engine: VLLMEngine
    version: int | None

    def engine_for(self, model: Any, version: int, rng: random.Random | None = None) -> VLLMEngine:
        """The engine, generating with ``model`` as of ``version`` (synced first if newer)."""
        if version != self.version:
            self.sync(model, version)
        self.engine.rng = rng
        return self.engine


@dataclass
class WeightSync(_SyncedEngine):
    """A vLLM engine in this process kept on the training model's current weights (full
    fine-tuning).

    ``version`` is what the weights were last synced at (the trainer's global step).
    """

    engine: VLLMEngine
    version: int | None = None
    syncs: int = 0

    def sync(self, model: Any, version: int) -> None:
        """Hand every weight of ``model`` (a transformers model, unwrapped) to the engine."""
        from inspo.engines.vllm_engine import checkpoint_weights

        if hasattr(model, "peft_config"):
            raise TypeError(
                "rl.use_vllm with model.lora=false syncs full weights; the trained model is a peft "
                "model (its adapter is synced by AdapterSync)"
            )
        self.engine.load_weights(checkpoint_weights(model))
        self.syncs += 1
        self.version = version

    def shutdown(self) -> None:
        self.engine.shutdown()


@dataclass
class AdapterSync(_SyncedEngine):
    """A vLLM engine kept on the training policy's current LoRA adapter.

    ``directory`` receives one ``adapter-<n>`` folder per sync (``keep`` of them are kept);
    ``version`` is what the weights were last synced at (the trainer's global step).
    """

    engine: VLLMEngine
    directory: Path
    keep: int = 2
    version: int | None = None
    syncs: int = 0

    def sync(self, model: Any, version: int) -> Path:
        """Save ``model``'s LoRA adapter and make the engine generate with it."""
        if not hasattr(model, "peft_config"):
            raise TypeError(
                "rl.use_vllm syncs LoRA adapters into vLLM: the trained model has none (set "
                "model.lora=true)"
            )
        self.syncs += 1
        path = Path(self.directory) / f"adapter-{self.syncs}"
        model.save_pretrained(str(path))
        self.engine.use_adapter(path, self.syncs)
        self.version = version
        for old in range(1, self.syncs - self.keep + 1):
            shutil.rmtree(Path(self.directory) / f"adapter-{old}", ignore_errors=True)
        return path

    def shutdown(self) -> None:
        self.engine.shutdown()


def start_sync(config: Any, model_dir: str | Path, run_dir: Path, seed: int, rank: int = 0) -> Any:
    """The engine sync of ``config`` (a TrainConfig): a vLLM server's adapter pusher with
    ``rl.vllm_mode=server``; else an engine in this process, synced with the LoRA adapter
    (``model.lora``) or with all weights."""
    if config.rl.vllm_mode == "server":
        return start_server_sync(config, model_dir, run_dir, rank)
    if config.model.lora:
        return start_adapter_sync(config, model_dir, run_dir, seed)
    return start_weight_sync(config, model_dir, seed)


def start_server_sync(config: Any, model_dir: str | Path, run_dir: Path, rank: int) -> Any:
    """An :class:`~inspo.engines.vllm_server.AdapterPusher` to the server at ``rl.vllm_server_url``;
    each training process pushes its own adapter (names carry the rank)."""
    from transformers import AutoTokenizer

    from inspo.engines.vllm_engine import eos_ids_of
    from inspo.engines.vllm_server import AdapterPusher, VLLMServerEngine

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    engine = VLLMServerEngine(
        config.rl.vllm_server_url,
        str(model_dir),
        tokenizer,
        eos_ids=eos_ids_of(model_dir, tokenizer),
    )
    directory = Path(run_dir) / ADAPTER_DIR / f"rank{rank}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return AdapterPusher(engine, directory, prefix=f"inspo-r{rank}-adapter")


def vllm_options(config: Any) -> Any:
    """The run's ``model.vllm_*`` as :class:`~inspo.engines.vllm_engine.VLLMOptions`, sized to its
    agent."""
    from inspo.engines.vllm_engine import VLLMOptions

    model = config.model
    return VLLMOptions(
        kv_cache_gib=model.vllm_kv_cache_gib,
        max_model_len=model.vllm_max_model_len,
        enforce_eager=model.vllm_enforce_eager,
    ).sized(agent_budget(config.rl))


def agent_budget(rl: Any) -> int:
    """The longest episode of the agent ``rl`` (an ``RLConfig``) sets, in tokens
    (:func:`~inspo.engines.vllm_engine.context_budget`)."""
    return context_budget(
        rl.max_prompt_tokens, rl.max_turns, rl.max_response_tokens, rl.max_obs_tokens
    )


def start_weight_sync(config: Any, model_dir: str | Path, seed: int) -> WeightSync:
    """Start vLLM in this process on ``model_dir`` (its weights are replaced at the first sync)."""
    engine = VLLMEngine.from_pretrained(
        model_dir,
        dtype=config.model.dtype,
        options=vllm_options(config),
        seed=seed,
        in_process=True,
    )
    return WeightSync(engine)


def start_adapter_sync(config: Any, model_dir: str | Path, run_dir: Path, seed: int) -> AdapterSync:
    """Start vLLM on the base model ``model_dir`` with LoRA enabled for ``config`` (a
    TrainConfig)."""
    model = config.model
    engine = VLLMEngine.from_pretrained(
        model_dir,
        dtype=model.dtype,
        options=vllm_options(config),
        seed=seed,
        enable_lora=True,
        max_loras=1,
        max_lora_rank=max_lora_rank(model.lora_r),
    )
    directory = Path(run_dir) / ADAPTER_DIR
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return AdapterSync(engine, directory)
