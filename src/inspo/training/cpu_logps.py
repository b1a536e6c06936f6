"""Per-token log-probs of completions on CPU, for the TRL trainer
(:mod:`inspo.training.grpo_trainer`).

TRL's own path scores every position of every row in float32 through a fused head meant for
Triton devices; :func:`cpu_logps_and_entropies` computes the same quantities for the completion
positions only, cutting each chunk's right padding first (:func:`attended_end`). Like
``grpo_trainer.py`` it uses TRL's internals (``trl.trainer.utils``); torch and trl are imported
inside the function.
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
    trainer, model, input_ids, attention_mask, logits_to_keep, *, batch_size, compute_entropy
):
    """Per-token log-probs (and entropies) of the completion tokens, for CPU text models.

    TRL 1.16's fused LM head scores EVERY position in float32 when no Triton device is present
    (prompt included, the head's weight upcast on each tile); on a 152k-token vocabulary that
    was two thirds of a CPU training step. Here the model computes logits for the completion
    positions only (``logits_to_keep``), in the autocast dtype, and TRL's row-looped
    ``selective_log_softmax`` takes the log-probs at ``temperature``. Same quantities as TRL's
    path (log-softmax of ``logits / temperature`` at the sampled ids); the logits are bf16 under
    bf16 autocast instead of float32.

    Each chunk of ``batch_size`` rows runs only as far as its longest row: TRL pads every
    completion of a step to the step's longest (a multi-turn episode that hit the turn limit), and
    the columns after a chunk's last attended token change nothing before them (causal attention),
    so they are cut before the forward and the chunk's log-probs (and entropies) are padded back
    with zeros there, where the completion mask is 0 (:func:`attended_end`).
    """
    import torch
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    from inspo.models.head import contiguous_head_input

    batch_size = batch_size or input_ids.size(0)
    entropy_grad = bool(getattr(trainer, "entropy_coef", 0.0) or 0.0)
    all_logps, all_entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        mask = attention_mask[start : start + batch_size]
        end = attended_end(mask, logits_to_keep)
        cut = input_ids.size(1) - end
        ids, mask = input_ids[start : start + batch_size, :end], mask[:, :end]
        keep = logits_to_keep - cut
        with trainer.accelerator.autocast(), contiguous_head_input(model):
            logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=keep + 1).logits
        logits = logits[:, :-1, :] / trainer.temperature
        all_logps.append(
            torch.nn.functional.pad(selective_log_softmax(logits, ids[:, -keep:]), (0, cut))
        )
        if compute_entropy:
            with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
                all_entropies.append(torch.nn.functional.pad(entropy_from_logits(logits), (0, cut)))
    logps = torch.cat(all_logps, dim=0)
    entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None
    return logps, entropies, None
