"""The transformers engine: :class:`HFEngine`, a causal LM as a policy on CPU or GPU (the engine
``inspo train`` plays its rollouts with), and :func:`attention_kernels`."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from inspo.engines.base import Generation, GenerationInput, TokenizerText, trim_generation
from inspo.engines.prefill import PrefillCount
from inspo.engines.turn_cache import TurnCache, cache_argument, returned_cache
from inspo.models.packed import PackedLinears

log = logging.getLogger("inspo.engines")


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    found: set[int] = set()
    for source in (getattr(model, "generation_config", None), getattr(model, "config", None)):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        if isinstance(value, int):
            found.add(value)
        elif value:
            found.update(int(v) for v in value)
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    return found


class HFEngine(TokenizerText):
    """A transformers causal LM as a policy (CPU or GPU), keeping token ids end to end.

    ``model`` may be any live ``PreTrainedModel`` (TRL passes its unwrapped training model);
    the engine switches it to eval mode for generation and restores the previous mode.
    ``dtype`` ("bfloat16", "float32" …) casts the model IN PLACE when given: leave it ``None``
    for a model someone else owns. ``rng`` makes sampling reproducible: each call draws a seed
    from it and samples inside ``torch.random.fork_rng`` (torch's global RNG is left as it was).
    ``batch_size`` caps the rows per ``model.generate`` call (None: all rows at once).
    ``packed``: where the model's bf16 linear weights are kept packed for oneDNN on CPU
    (:mod:`inspo.models.packed`; same tokens, faster decoding); pass one to share it between
    engines on the same model (packing the 0.5B takes about a second), ``PackedLinears(enabled=
    False)`` to multiply as torch does. None: the engine keeps its own. ``share_prefill``: on
    CPU, rows that repeat an input (a group's G rollouts) are prefilled once
    (:mod:`inspo.engines.prefill`; the same tokens). ``keep_turns``: inside an
    :meth:`episode_cache` block, each call's keys and values are kept and the next call prefills
    only what its rows add (:mod:`inspo.engines.turn_cache`; the same logits to rounding).
    ``drop_finished``: on CPU, rows that have finished leave the decoding steps
    (:mod:`inspo.engines.decode_rows`; the same tokens).
    """

    keeps_token_ids = True
    row_seeds = True  # honours GenerationInput.seed (inspo.engines.row_seeds)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        dtype: str | None = None,
        rng: random.Random | None = None,
        batch_size: int | None = None,
        packed: PackedLinears | None = None,
        share_prefill: bool = True,
        keep_turns: bool = True,
        drop_finished: bool = True,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"HFEngine: batch_size must be >= 1 or None, got {batch_size}")
        if dtype is not None:
            import torch

            if not isinstance(getattr(torch, dtype, None), torch.dtype):
                raise ValueError(f"HFEngine: unknown dtype {dtype!r}; use e.g. 'bfloat16'")
            model.to(getattr(torch, dtype))
        self.model = model
        self.tokenizer = tokenizer
        self.rng = rng
        self.batch_size = batch_size
        self.packed = packed if packed is not None else PackedLinears()
        self.share_prefill = share_prefill
        self.prefilled = PrefillCount()  # rows prefilled as how many distinct ones, so far
        self.keep_turns = keep_turns
        self.drop_finished = drop_finished
        self.dropped = 0  # row-steps finished rows did not run, so far (drop_finished)
        self.turn_cache: TurnCache | None = None  # open inside an episode_cache() block
        self.eos_ids = _eos_ids(model, tokenizer)
        if not self.eos_ids:
            raise ValueError(
                "HFEngine: neither the model's generation_config nor the tokenizer names an EOS "
                "token; set tokenizer.eos_token (or model.generation_config.eos_token_id)"
            )
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else min(self.eos_ids)

    @classmethod
    def from_loaded(cls, loaded: Any, **kwargs: Any) -> HFEngine:
        """Build from ``inspo.models.load_model(...)``'s ``LoadedModel`` (model + tokenizer)."""
        return cls(loaded.model, loaded.tokenizer, **kwargs)

    @contextmanager
    def episode_cache(self) -> Iterator[TurnCache | None]:
        """A block whose ``generate`` calls continue each other's rows (one rollout's turns, with
        the policy's weights unchanged): each call reuses the keys and values of the rows the
        call before it played (:mod:`inspo.engines.turn_cache`). Yields the block's
        :class:`TurnCache` (None where ``keep_turns`` is off); a block inside one shares it."""
        if not self.keep_turns or self.turn_cache is not None:
            yield self.turn_cache
            return
        self.turn_cache = TurnCache()
        try:
            yield self.turn_cache
        finally:
            self.turn_cache = None

    # -- generation -----------------------------------------------------------------------
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
        if self.turn_cache is not None:
            self.turn_cache.start_call()
        size = self.batch_size or len(inputs)
        out: list[Generation] = []
        for start in range(0, len(inputs), size):
            chunk = inputs[start : start + size]
            seeds = [x.seed for x in chunk]
            rows = self._generate_ids(
                [x.prompt_ids + x.completion_ids for x in chunk],
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                stop=stop,
                seeds=seeds if all(seed is not None for seed in seeds) else None,
            )
            for row in rows:
                ids, finish = trim_generation(
                    row, stop=stop, eos_ids=self.eos_ids, pad_id=self.pad_id, decode=self.decode
                )
                out.append(Generation(token_ids=ids, text=self.decode(ids), finish=finish))
        return out

    def _generate_ids(
        self,
        sequences: list[list[int]],
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
        seeds: list[int] | None = None,
    ) -> list[list[int]]:
        """Left-padded batched ``model.generate``; returns each row's raw new ids. With ``seeds``
        (one per row) a sampled row draws from its own seed, not from the call's."""
        import torch

        from inspo.engines.decode_rows import FinishedRows, decoding_rows
        from inspo.engines.prefill import shared_prefill
        from inspo.models.head import contiguous_head_input

        if any(not s for s in sequences):
            raise ValueError("HFEngine.generate: an input has no tokens (empty prompt)")
        width = max(len(s) for s in sequences)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor(
            [[self.pad_id] * (width - len(s)) + s for s in sequences], device=device
        )
        attention = torch.tensor(
            [[0] * (width - len(s)) + [1] * len(s) for s in sequences], device=device
        )
        finished = (
            FinishedRows(len(sequences), width, self.eos_ids)
            if self.drop_finished and device.type == "cpu"
            else None
        )
        kwargs = self._decoding(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            stop=stop,
            seeds=seeds,
            width=width,
            finished=finished,
        )
        turns = self.turn_cache
        if turns is not None:
            kwargs["generation_config"].return_dict_in_generate = True
            cache = turns.prefix(sequences, self.model.config)
            if cache is not None:
                kwargs[cache_argument(self.model)] = cache
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.random.fork_rng(devices=[] if device.type == "cpu" else [device]):
                if self.rng is not None:
                    torch.manual_seed(self.rng.getrandbits(63))
                with (
                    torch.inference_mode(),
                    attention_kernels(device),
                    contiguous_head_input(self.model),
                    self.packed.active(self.model),
                    shared_prefill(self.model, self.prefilled)
                    if self._shares(device)
                    else nullcontext(),
                    decoding_rows(self.model, finished) if finished is not None else nullcontext(),
                ):
                    output = self.model.generate(
                        input_ids=input_ids, attention_mask=attention, **kwargs
                    )
        finally:
            self.model.train(was_training)
        if finished is not None:
            self.dropped += finished.skipped_steps
        if turns is not None:
            computed = finished.computed if finished is not None else None
            turns.keep(returned_cache(output), sequences, output.sequences[:, width:], computed)
            output = output.sequences
        return [row.tolist() for row in output[:, width:]]

    def _shares(self, device: Any) -> bool:
        return self.share_prefill and device.type == "cpu"

    def _decoding(
        self,
        *,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        stop: Sequence[str],
        seeds: list[int] | None,
        width: int,
        finished: Any = None,
    ) -> dict[str, Any]:
        """``model.generate``'s keyword arguments: the generation config, the sampling processor
        and the stop criteria (``width``: the input's width, where new tokens start; ``finished``:
        a :class:`~inspo.engines.decode_rows.FinishedRows` told what the criteria decide)."""
        from transformers import GenerationConfig

        sample = temperature > 0
        row_seeded = sample and seeds is not None
        # Every sampling knob is set explicitly: unset ones would be filled from the model's own
        # generation_config (Qwen ships top_k=20, repetition_penalty=1.05), which would make
        # the policy's samples differ from the distribution being trained.
        # Sampling decodes greedily over scores that a processor has turned into one sample per
        # row: row-seeded, by the Gumbel processor (same distribution as do_sample, see
        # row_seeds); otherwise by the same draw as do_sample's torch.multinomial from the same
        # generator, the same tokens at a fraction of its cost (inspo.engines.sampling).
        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=False,
            temperature=1.0,
            top_p=1.0,
            top_k=50,  # greedy ignores it; 50 = transformers' default (no warning)
            min_p=None,
            repetition_penalty=1.0,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids),
            use_cache=True,
        )
        kwargs: dict[str, Any] = {"generation_config": config}
        if sample:
            from transformers import LogitsProcessorList

            from inspo.engines.row_seeds import gumbel_sample_processor
            from inspo.engines.sampling import multinomial_sampler

            kwargs["logits_processor"] = LogitsProcessorList(
                [
                    gumbel_sample_processor(seeds, width, temperature, top_p)
                    if row_seeded
                    else multinomial_sampler(temperature, top_p)
                ]
            )
        if stop or finished is not None:
            kwargs["stopping_criteria"] = _stop_criteria(self.tokenizer, stop, width, finished)
        return kwargs


def attention_kernels(device: Any) -> Any:
    """On CUDA, scaled-dot-product attention without the cuDNN kernel (generation, and the GRPO
    stage's training passes, whose shapes change every step too).

    With a padding mask, torch picks cuDNN's attention on Hopper GPUs, which builds a plan for
    every new (rows, length) shape: measured on an H100 (torch 2.11, tiny-qwen2, greedy, 64
    tokens), a call at a shape not seen before took 3-5 s against 0.2 s at a seen one, and
    rollouts meet new shapes on nearly every call. The memory-efficient kernel (and the math
    fallback) have no such cost; over a whole GRPO step, a further 1.14-1.18x (two pairs). On
    CPU nothing changes.
    """
    import contextlib

    if getattr(device, "type", "cpu") != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(
        [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    )


def _stop_criteria(tokenizer: Any, stop: Sequence[str], start: int, finished: Any = None) -> Any:
    """A per-row StoppingCriteria: done once the row's NEW text contains a stop string (and,
    given ``finished``, it is told each step's verdict; no stop strings: never done).

    Each step decodes only the last ``max(len(stop))`` new tokens of each row (a stop string of
    n ASCII characters spans at most n tokens), so it costs microseconds per row. transformers'
    own ``stop_strings`` does the same job but re-embeds the whole vocabulary on every
    ``generate`` call when the tokenizer's vocab order is not stable (~4 s for Qwen's 151k).
    """
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    window = max((len(s) for s in stop), default=0)

    class StopOnStrings(StoppingCriteria):
        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            done = [False] * input_ids.shape[0]
            if stop:
                tails = input_ids[:, max(start, input_ids.shape[1] - window) :].tolist()
                texts = tokenizer.batch_decode(tails, skip_special_tokens=True)
                done = [any(s in text for s in stop) for text in texts]
            verdict = torch.tensor(done, dtype=torch.bool, device=input_ids.device)
            if finished is not None:
                finished.update(input_ids, verdict)
            return verdict

    return StoppingCriteriaList([StopOnStrings()])
