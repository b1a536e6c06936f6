"""Finished rows leave the decoding batch: a turn's short answers stop paying for its long ones.

transformers decodes every row of a batch until the last one stops: a row that has written its
stop string or EOS goes on being fed (a pad token a step) through the whole model, and its output
is thrown away. In a calculator step's rollouts fewer than half the rows a decoding step runs are
still writing (3,112 of 6,784 row-steps over a step's four turns, counted on the 0.5B), and on a
CPU a decoding step at 32 rows costs its products, so the rest is waste.

While :func:`decoding_rows` is active, each decoding forward of ``generate`` runs the model on the
rows still writing only, when at least :data:`MIN_FINISHED_SHARE` of the batch has finished: their
slice of the keys and values, ids, mask and positions; the new keys and values go back into the
batch's cache (zeros for the finished rows, which attend to nothing later) and the logits into a
batch-wide tensor (zeros for the finished rows). ``generate`` then goes on as before: its
processors see every row, so the sampler draws the same random numbers from the same generator,
and it writes the pad token into the finished rows as it always did. A row's logits are what the
full batch gives where the model's products do not depend on how many rows share the call (true
of torch's CPU products at the 0.5B's shapes, :mod:`inspo.engines.prefill`); the tests check the
tokens on the machine they run on.

Which rows have finished is what transformers' own stopping criteria decide (EOS, the stop
strings); :class:`FinishedRows` is given both and keeps their union, as ``generate``'s
``unfinished_sequences`` does. A finished row's keys and values after its last token are not
computed, so :attr:`FinishedRows.computed` says how many of each row's new tokens have them (the
turn cache keeps only those). torch is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

MIN_FINISHED_SHARE = 0.25
"""A decoding step drops its finished rows only when at least this share of the batch has
finished: gathering the rest's keys and values costs a copy of their cache every step."""


class FinishedRows:
    """The rows of one ``generate`` call that have finished, as its stopping criteria decide.

    ``update(input_ids, done)`` after every new token: ``done`` is the stopping criteria's verdict
    for that step (or None: EOS only). ``computed[i]``: how many of row ``i``'s new tokens have
    their keys and values in the cache (all but the last one, unless the row was dropped)."""

    def __init__(self, rows: int, start: int, eos_ids: set[int]) -> None:
        import torch

        self.start = start  # the input's width: new tokens begin there
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long)
        self.done = torch.zeros(rows, dtype=torch.bool)
        self.computed = [None] * rows  # None: every token but the last was fed
        self.skipped_steps = 0  # row-steps not run, so far

    def update(self, input_ids: Any, done: Any = None) -> None:
        last = input_ids[:, -1].cpu()
        finished = self.done | (last[:, None] == self.eos[None, :]).any(dim=1)
        if done is not None:
            finished |= done.cpu()
        self.done = finished

    def skip(self, width: int) -> list[int]:
        """The rows to run at a decoding step whose input is ``width`` tokens long (every row
        where too few have finished); records where the dropped rows' keys and values end."""
        finished = self.done.tolist()
        if sum(finished) < MIN_FINISHED_SHARE * len(finished):
            return list(range(len(finished)))
        for i, gone in enumerate(finished):
            if gone and self.computed[i] is None:
                self.computed[i] = width - 1 - self.start  # the token fed now is not computed
        self.skipped_steps += sum(finished)
        return [i for i, gone in enumerate(finished) if not gone]


@contextmanager
def decoding_rows(model: Any, rows: FinishedRows) -> Iterator[FinishedRows]:
    """While the block runs, ``model.generate``'s decoding steps run on the rows ``rows`` says
    are still writing (see the module doc). ``model`` may wrap the generating model (a PEFT
    model): every transformers ``GenerationMixin`` among its modules is switched."""
    from transformers import GenerationMixin

    modules = [m for m in model.modules() if isinstance(m, GenerationMixin)]
    for module in modules:
        module.forward = _ActiveRowsForward(module.forward, rows)
    try:
        yield rows
    finally:
        for module in modules:
            del module.forward


class _ActiveRowsForward:
    def __init__(self, forward: Any, rows: FinishedRows) -> None:
        import inspect

        self.forward = forward
        self.rows = rows
        # generate reads the forward's parameters to decide what to pass (position ids from the
        # attention mask, logits_to_keep): this wrapper must show the model's own
        self.__signature__ = inspect.signature(forward)

    def __call__(self, input_ids: Any = None, **kwargs: Any) -> Any:
        import torch
        from transformers import DynamicCache

        name = "cache" if "cache" in kwargs else "past_key_values"  # transformers >= 5.20: cache
        cache, mask = kwargs.get(name), kwargs.get("attention_mask")
        decoding = (
            input_ids is not None
            and input_ids.shape[1] == 1
            and isinstance(cache, DynamicCache)
            and cache.get_seq_length() > 0
            and mask is not None
            and mask.dim() == 2
            and all(type(layer).__name__ == "DynamicLayer" for layer in cache.layers)
        )
        keep = self.rows.skip(mask.shape[1]) if decoding else None
        if keep is None or len(keep) == input_ids.shape[0] or not keep:
            return self.forward(input_ids=input_ids, **kwargs)
        pick = torch.tensor(keep, device=input_ids.device)
        part = DynamicCache(
            ddp_cache_data=[(layer.keys[pick], layer.values[pick]) for layer in cache.layers]
        )
        sliced = {
            key: value.index_select(0, pick)
            if key in ("attention_mask", "position_ids") and value is not None
            else value
            for key, value in kwargs.items()
        }
        sliced[name] = part
        out = self.forward(input_ids=input_ids.index_select(0, pick), **sliced)
        for whole, layer in zip(cache.layers, part.layers, strict=True):
            whole.update(
                _spread(layer.keys[:, :, -1:], pick, input_ids.shape[0]),
                _spread(layer.values[:, :, -1:], pick, input_ids.shape[0]),
            )
        out["logits"] = _spread(out.logits, pick, input_ids.shape[0])
        out["cache" if "cache" in out else "past_key_values"] = cache
        return out


def _spread(part: Any, pick: Any, rows: int) -> Any:
    """``part``'s rows at ``pick`` of a zero tensor of ``rows`` rows."""
    whole = part.new_zeros((rows, *part.shape[1:]))
    whole[pick] = part
    return whole
