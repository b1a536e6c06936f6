"""Micro-batches of similar lengths within each optimizer update (``rl.group_by_length``).

TRL shuffles a step's trajectories and cuts them, in that order, into micro-batches; a micro-batch's
training pass (the loss's forward and its backward) runs as wide as its longest row, so one episode
that used every turn makes the seven short ones beside it pay its width in padding
(:func:`inspo.training.cpu_logps.attended_end` cuts only what no row attends). Here the rows of
each optimizer update (``gradient_accumulation_steps`` micro-batches in a row of TRL's buffer) are
ordered by length, shortest first (ties keep TRL's shuffled order), and cut again into micro-batches
of the same size: short rows share a micro-batch with short rows.

Why it is the same update: an update's gradient is the sum over its micro-batches, and under the
``grpo`` (each row's mean over its tokens, averaged over the micro-batch's rows), ``dr_grpo`` and
``dapo`` losses every row's term is weighted alike whatever micro-batch holds it, so regrouping
rows inside an update sums the same terms in another order. What moves: the rounding of those sums,
the LoRA dropout masks (drawn per micro-batch, so other masks from the same distribution) and the
per-micro-batch means TRL logs (clip ratios, entropy). ``bnpo`` divides by each micro-batch's own
token count, so there the grouping would change the weights: its batches are left as TRL made
them, as are updates of one micro-batch (nothing to regroup) and a batch holding a value this
module cannot split by rows.
"""

from __future__ import annotations

from typing import Any

LOSSES = ("grpo", "dr_grpo", "dapo")
"""Losses under which an update's gradient does not depend on how its rows form micro-batches."""


def row_ends(batch: dict[str, Any]) -> list[int]:
    """Each row's attended width: the prompt's padded width plus one past its last attended
    completion token (a row attending to no completion token ends at the prompt)."""
    prompt_width = batch["prompt_ids"].size(1)
    mask = batch["completion_mask"]
    positions = mask.new_ones(mask.shape).cumsum(1) * (mask != 0)
    return [prompt_width + int(p) for p in positions.max(dim=1).values]


def length_order(ends: list[int], window: int) -> list[int]:
    """Row indices ordered by ``ends`` within each consecutive ``window`` of rows (a stable sort,
    so equal ends keep their order); windows stay where they are."""
    order: list[int] = []
    for start in range(0, len(ends), window):
        rows = range(start, min(start + window, len(ends)))
        order.extend(sorted(rows, key=lambda i: ends[i]))
    return order


def prompt_order(batch: dict[str, Any], window: int) -> list[int]:
    """Row indices with each consecutive ``window`` of rows ordered by prompt: rows whose attended
    prompt tokens are the same stay together, prompts in order of first appearance, rows of one
    prompt in their order."""
    ids, mask = batch["prompt_ids"], batch["prompt_mask"].bool()
    order: list[int] = []
    for start in range(0, len(ids), window):
        first: dict[tuple[int, ...], int] = {}
        rows = range(start, min(start + window, len(ids)))
        keys = [first.setdefault(tuple(ids[i][mask[i]].tolist()), len(first)) for i in rows]
        order.extend(sorted(rows, key=lambda i: keys[i - start]))
    return order


def regroup_by_length(
    micro_batches: list[dict[str, Any]], per_update: int, *, by_prompt: bool = False
) -> list[dict[str, Any]]:
    """``micro_batches`` (TRL's buffer for one generation, in order) with the rows of each run of
    ``per_update`` micro-batches reordered by :func:`length_order` (``by_prompt``:
    :func:`prompt_order`) and cut again into micro-batches of the same sizes. Returned unchanged
    where there is nothing to regroup or a value cannot be split by rows (see the module
    docstring)."""
    if per_update < 2 or len(micro_batches) < 2:
        return micro_batches
    merged = _merge(micro_batches)
    if merged is None:
        return micro_batches
    from trl.trainer.utils import split_tensor_dict  # how TRL cut the buffer in the first place

    window = len(micro_batches[0]["prompt_ids"]) * per_update
    if by_prompt and "prompt_mask" in merged:
        order = prompt_order(merged, window)
    else:
        order = length_order(row_ends(merged), window)
    return split_tensor_dict(_take(merged, order), len(micro_batches))


def _merge(micro_batches: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The micro-batches' rows as one batch: tensors and lists joined along the rows, a value
    without rows (a 0-d tensor such as ``num_items_in_batch``, or None) kept as the first has it.
    None where a key is missing from one of them, sizes disagree or a value is of another kind."""
    import torch

    first = micro_batches[0]
    if "prompt_ids" not in first or "completion_mask" not in first:
        return None
    rows = len(first["prompt_ids"])
    merged: dict[str, Any] = {}
    for key, value in first.items():
        parts = [mb.get(key) for mb in micro_batches]
        if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
            merged[key] = value
        elif isinstance(value, torch.Tensor) and all(
            isinstance(p, torch.Tensor) and p.ndim >= 1 and len(p) == rows for p in parts
        ):
            if any(p.shape[1:] != value.shape[1:] for p in parts):
                return None
            merged[key] = torch.cat(parts)
        elif isinstance(value, list) and all(isinstance(p, list) and len(p) == rows for p in parts):
            merged[key] = [x for p in parts for x in p]
        else:
            return None
    if any(set(mb) != set(first) for mb in micro_batches):
        return None
    return merged


def _take(batch: dict[str, Any], order: list[int]) -> dict[str, Any]:
    import torch

    index = torch.tensor(order)
    out: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1:
            out[key] = value[index.to(value.device)]
        elif isinstance(value, list):
            out[key] = [value[i] for i in order]
        else:
            out[key] = value
    return out
