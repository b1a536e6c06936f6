"""Per-token log-probs of completions on CPU, for the TRL trainer
(:mod:`inspo.training.grpo_trainer`).

TRL's own path scores every position of every row in float32 through a fused head meant for
Triton devices; :func:`cpu_logps_and_entropies` computes the same quantities for the completion
positions only, cutting each chunk's right padding first (:func:`attended_end`), and, where the
model's head is a plain linear layer, through the head a few positions at a time
(:func:`inspo.models.head_logps.head_logps`) instead of materialising every position's logits. Like
``grpo_trainer.py`` it uses TRL's internals (``trl.trainer.utils``, for a head that is not plain);
torch and trl are imported inside the functions.
"""

from __future__ import annotations


def attended_end(attention_mask, logits_to_keep: int) -> int:
    """One past the last column any row attends to, but never inside the first completion token
    (at least one completion position is kept): where a right-padded chunk can be cut. A chunk that
    attends to nothing is not cut."""
    attended = attention_mask.any(dim=0).nonzero()
    last = int(attended[-1]) + 1 if attended.numel() else attention_mask.size(1)
    return max(last, attention_mask.size(1) - logits_to_keep + 1)


def cpu_logps_and_entropies(
    trainer,
    model,
    input_ids,
    attention_mask,
    logits_to_keep,
    *,
    batch_size,
    compute_entropy,
    chunked_head=True,
):
    """Per-token log-probs (and entropies) of the completion tokens, for CPU text models.

    TRL 1.16's fused LM head scores EVERY position in float32 when no Triton device is present
    (prompt included, the head's weight upcast on each tile); on a 152k-token vocabulary that
    was two thirds of a CPU training step. Here the model runs to the head's input for the
    completion positions only (``logits_to_keep``) and :func:`~inspo.models.head_logps.head_logps`
    takes the log-probs of ``logits / temperature`` at the sampled ids and the entropies, the head's
    product in the autocast dtype and the log-softmax in float32, a chunk of positions at a time
    (``chunked_head``; a micro-batch of the 0.5B, 8 x 552 tokens, bf16: 11.7 -> 10.2 GiB, 38 -> 24 s
    for the forward, ``benchmarks/speed/train_memory.py``). A head that is not a plain linear layer
    (:func:`~inspo.models.head_logps.plain_head`), or ``chunked_head=False``, goes the old way: the
    model's logits, TRL's row-looped ``selective_log_softmax`` (bf16 under bf16 autocast) and
    ``entropy_from_logits``.

    Each chunk of ``batch_size`` rows runs only as far as its longest row: TRL pads every
    completion of a step to the step's longest (a multi-turn episode that hit the turn limit), and
    the columns after a chunk's last attended token change nothing before them (causal attention),
    so they are cut before the forward and the chunk's log-probs (and entropies) are padded back
    with zeros there, where the completion mask is 0 (:func:`attended_end`).
    """
    import torch

    from inspo.models.head_logps import plain_head
    from inspo.training.packed_rows import is_packing, pack_rows

    batch_size = batch_size or input_ids.size(0)
    head = plain_head(model) if chunked_head else None
    score = _through_head if head is not None else _from_logits
    packing = head is not None and is_packing(model)
    all_logps, all_entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        mask = attention_mask[start : start + batch_size]
        rows = input_ids[start : start + batch_size]
        packed = pack_rows(rows, mask, logits_to_keep) if packing else None
        if packed is not None and packed.targets.numel():
            logps, entropies = _packed(trainer, model, head, packed, compute_entropy)
            all_logps.append(logps)
            all_entropies.append(entropies)
            continue
        end = attended_end(mask, logits_to_keep)
        cut = input_ids.size(1) - end
        ids, mask = input_ids[start : start + batch_size, :end], mask[:, :end]
        logps, entropies = score(
            trainer, model, head, ids, mask, logits_to_keep - cut, compute_entropy
        )
        all_logps.append(torch.nn.functional.pad(logps, (0, cut)))
        if compute_entropy:
            all_entropies.append(torch.nn.functional.pad(entropies, (0, cut)))
    logps = torch.cat(all_logps, dim=0)
    entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
    return logps, entropies, None


def _through_head(trainer, model, head, ids, mask, keep, compute_entropy):
    """The chunk's log-probs through the head a few positions at a time
    (:func:`inspo.models.head_logps.head_logps`): the model returns the head's input."""
    import torch

    from inspo.models.head import contiguous_head_input
    from inspo.models.head_logps import head_logps, head_passes_hidden

    with trainer.accelerator.autocast(), contiguous_head_input(model), head_passes_hidden(head):
        hidden = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep + 1).logits
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
    logps, entropies = head_logps(
        hidden[:, :-1, :],
        head.weight,
        ids[:, -keep:],
        temperature=trainer.temperature,
        dtype=dtype or head.weight.dtype,
        entropy=compute_entropy,
    )
    if compute_entropy and not _entropy_grad(trainer):
        entropies = entropies.detach()
    return logps, entropies


def _packed(trainer, model, head, packed, compute_entropy):
    """The chunk's log-probs from one packed row (:mod:`inspo.training.packed_rows`): the model
    returns the head's input at every packed column, and the head runs on the columns that
    predict a kept completion token only."""
    import torch

    from inspo.models.head import contiguous_head_input
    from inspo.models.head_logps import head_logps, head_passes_hidden
    from inspo.training.packed_rows import unpack

    with trainer.accelerator.autocast(), contiguous_head_input(model), head_passes_hidden(head):
        hidden = model(input_ids=packed.ids, position_ids=packed.positions, inspo_packing=packed)
        hidden = hidden.logits
        dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
    logps, entropies = head_logps(
        hidden[0, packed.sources.to(hidden.device)],
        head.weight,
        packed.targets.to(hidden.device),
        temperature=trainer.temperature,
        dtype=dtype or head.weight.dtype,
        entropy=compute_entropy,
    )
    if compute_entropy and not _entropy_grad(trainer):
        entropies = entropies.detach()
    return unpack(logps, packed), unpack(entropies, packed) if compute_entropy else None


def _from_logits(trainer, model, head, ids, mask, keep, compute_entropy):
    """The chunk's log-probs from the model's own logits (a head :func:`plain_head` refuses)."""
    import torch
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    from inspo.models.head import contiguous_head_input

    with trainer.accelerator.autocast(), contiguous_head_input(model):
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep + 1).logits
    logits = logits[:, :-1, :] / trainer.temperature
    logps, entropies = selective_log_softmax(logits, ids[:, -keep:]), None
    if compute_entropy:
        with torch.set_grad_enabled(_entropy_grad(trainer) and torch.is_grad_enabled()):
            entropies = entropy_from_logits(logits)
    return logps, entropies


def _entropy_grad(trainer) -> bool:
    return bool(getattr(trainer, "entropy_coef", 0.0) or 0.0)
