"""A micro-batch's training pass as one packed row: each distinct prompt once, no padding
(``rl.pack_prompts``, the CPU pass of :mod:`inspo.training.cpu_logps`).

TRL hands the loss a micro-batch as ``prompt + completion`` rows, the prompt left-padded and the
completion right-padded, and the model runs on every column of every row. A step's G rollouts of a
question share their prompt (the instruction and the question), so the prompt's forward and
backward are repeated G times, and each row is as wide as the micro-batch's longest. Here the
micro-batch's attended tokens become one row: each distinct prompt once, each followed by the
completions that continue it. The position ids restart after the prompt for every completion, and
attention (:func:`packed_attention`) lets a prompt see itself causally and a completion see its
prompt and itself causally, nothing else. That is the attention each row had on its own, so every
completion position computes what it computed in its padded row; the products run over fewer
positions (the prompt's gradient is the sum of what its G copies received). Not bit for bit: the
products' shapes differ, so rounding does (float32 to ~1e-6, the tests).

The attention is a function registered with transformers (:data:`ATTENTION`): it reads the layout
from the ``inspo_packing`` keyword the model passes down to its attention, and without it defers to
transformers' own SDPA, so the model computes what it did for every other caller (generation, the
scoring). :func:`packing_attention` switches a model to it for a block: the trainer holds it over
its whole ``training_step``, so gradient checkpointing's recompute in the backward runs it too.

torch and transformers are imported when a function here runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

ATTENTION = "inspo_packed_sdpa"
"""The name the packed attention is registered under with transformers."""
SOURCE = "sdpa"
"""The implementation a model must use for its attention to be packed (and what it defers to)."""


@dataclass(frozen=True)
class Segment:
    """Columns ``[start, end)`` of the packed row: a prompt (``prompt`` None) or a completion that
    continues the prompt at ``prompt = (start, end)``."""

    start: int
    end: int
    prompt: tuple[int, int] | None = None


@dataclass
class PackedRows:
    """A micro-batch of ``rows`` x ``width`` completion columns packed into one row.

    ``ids`` and ``positions``: the packed row's token and position ids (``1 x length``).
    ``sources``: for each completion token kept, the packed column whose hidden state predicts it;
    ``targets``: that token's id; ``slots``: its flat index ``row * width + column`` in the
    ``rows x width`` log-probs TRL expects (the rest are 0, where its completion mask is 0)."""

    ids: Any
    positions: Any
    segments: list[Segment]
    sources: Any
    targets: Any
    slots: Any
    rows: int
    width: int
    masks: dict[tuple[int, int], Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return int(self.ids.size(1))

    def completion_mask(self, segment: Segment) -> Any:
        """What a completion's queries attend to in ``[its prompt, itself]``: all of the prompt,
        and itself causally (shared by every layer; built once per shape)."""
        import torch

        prompt = segment.prompt[1] - segment.prompt[0]
        own = segment.end - segment.start
        key = (prompt, own)
        if key not in self.masks:
            causal = torch.ones(own, own, dtype=torch.bool).tril()
            self.masks[key] = torch.cat([torch.ones(own, prompt, dtype=torch.bool), causal], 1)
        return self.masks[key]


def pack_rows(input_ids: Any, attention_mask: Any, width: int) -> PackedRows | None:
    """``input_ids`` / ``attention_mask`` (``rows x (prompt + width)``, TRL's layout) packed, or
    None where a row's attended prompt is not one run at its end (left padding) or its attended
    completion not one run at its start (right padding): such a batch goes the padded way.

    Rows whose attended prompts are the same tokens share one prompt segment (in order of first
    appearance); each is followed by its completions, in row order."""
    import torch

    prompt_width = input_ids.size(1) - width
    prompt_mask = attention_mask[:, :prompt_width]
    completion_mask = attention_mask[:, prompt_width:]
    left_padded = bool((prompt_mask[:, 1:] >= prompt_mask[:, :-1]).all())
    right_padded = bool((completion_mask[:, 1:] <= completion_mask[:, :-1]).all())
    if not (left_padded and right_padded):
        return None
    prompt_lengths = (prompt_mask != 0).sum(1).tolist()
    completion_lengths = (completion_mask != 0).sum(1).tolist()
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, p in enumerate(prompt_lengths):
        tokens = tuple(input_ids[row, prompt_width - p : prompt_width].tolist())
        groups.setdefault(tokens, []).append(row)
    ids, positions, segments = [], [], []
    sources, targets, slots = [], [], []
    start = 0
    for tokens, rows in groups.items():
        p = len(tokens)
        prompt = (start, start + p)
        ids.append(torch.tensor(tokens, dtype=input_ids.dtype))
        positions.append(torch.arange(p))
        segments.append(Segment(*prompt))
        start += p
        for row in rows:
            c = completion_lengths[row]
            if c == 0:
                continue
            completion = input_ids[row, prompt_width : prompt_width + c]
            ids.append(completion)
            positions.append(torch.arange(p, p + c))
            segments.append(Segment(start, start + c, prompt))
            # token t is predicted by the prompt's last column (t = 0) or the completion's t - 1
            last = torch.tensor([prompt[1] - 1])
            sources.append(torch.cat([last, torch.arange(start, start + c - 1)]))
            targets.append(completion)
            slots.append(torch.arange(row * width, row * width + c))
            start += c
    empty = torch.zeros(0, dtype=torch.long)
    return PackedRows(
        ids=torch.cat(ids)[None, :].to(input_ids.device),
        positions=torch.cat(positions)[None, :].to(input_ids.device),
        segments=segments,
        sources=torch.cat(sources) if sources else empty,
        targets=torch.cat(targets) if targets else empty.to(input_ids.dtype),
        slots=torch.cat(slots) if slots else empty,
        rows=input_ids.size(0),
        width=width,
    )


def unpack(values: Any, packed: PackedRows) -> Any:
    """Per-token ``values`` (one per kept completion token, in ``packed``'s order) as TRL's
    ``rows x width`` tensor, 0 where nothing was kept (differentiable in ``values``)."""
    out = values.new_zeros(packed.rows * packed.width)
    return out.index_put((packed.slots.to(values.device),), values).view(packed.rows, packed.width)


def packed_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    inspo_packing: PackedRows | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' attention interface: with ``inspo_packing``, the attention of its segments
    (``query`` ``1 x heads x length x dim``, ``key`` / ``value`` with the model's key-value heads),
    returned as ``1 x length x heads x dim``; without it, transformers' SDPA, unchanged."""
    if inspo_packing is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    import torch
    import torch.nn.functional as F

    if kwargs.get("sliding_window") or dropout:
        raise ValueError("packed rows support full attention without attention dropout only")
    repeat = query.size(1) // key.size(1)
    if repeat > 1:  # grouped-query attention: each key-value head serves `repeat` query heads
        key, value = key.repeat_interleave(repeat, 1), value.repeat_interleave(repeat, 1)
    pieces = []
    for segment in inspo_packing.segments:
        q = query[:, :, segment.start : segment.end]
        own = slice(segment.start, segment.end)
        if segment.prompt is None:
            out = F.scaled_dot_product_attention(
                q, key[:, :, own], value[:, :, own], is_causal=True, scale=scaling
            )
        else:
            seen = slice(*segment.prompt)
            k = torch.cat([key[:, :, seen], key[:, :, own]], 2)
            v = torch.cat([value[:, :, seen], value[:, :, own]], 2)
            mask = inspo_packing.completion_mask(segment).to(query.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling)
        pieces.append(out)
    return torch.cat(pieces, 2).transpose(1, 2).contiguous(), None


def register() -> None:
    """Register :func:`packed_attention` (and SDPA's mask builder) under :data:`ATTENTION` with
    transformers; idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION, packed_attention)
    if ATTENTION not in AttentionMaskInterface._global_mapping:
        AttentionMaskInterface.register(ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS[SOURCE])


@contextmanager
def packing_attention(model: Any) -> Iterator[bool]:
    """While the block runs, ``model`` (its shared config) attends through :func:`packed_attention`
    where it used SDPA; yields whether it does (a model on another attention is left alone, and
    its passes go unpacked). Restored on exit, so nothing saved names the packed attention."""
    config = _config(model)
    if config is None or getattr(config, "_attn_implementation", None) not in (SOURCE, ATTENTION):
        yield False
        return
    register()
    before = config._attn_implementation
    config._attn_implementation = ATTENTION
    try:
        yield True
    finally:
        config._attn_implementation = before


def is_packing(model: Any) -> bool:
    """Whether ``model`` attends through :func:`packed_attention` now (inside
    :func:`packing_attention`)."""
    config = _config(model)
    return getattr(config, "_attn_implementation", None) == ATTENTION


def _config(model: Any) -> Any:
    seen = set()
    while model is not None and id(model) not in seen:  # accelerate / PEFT wrappers
        seen.add(id(model))
        config = getattr(model, "config", None)
        if config is not None and hasattr(config, "_attn_implementation"):
            return config
        model = getattr(model, "module", None) or getattr(model, "base_model", None)
    return None
