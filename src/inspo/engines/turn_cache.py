"""A turn's keys and values kept for the next: a multi-turn episode prefills only what a turn adds.

An agent's episode is several ``generate`` calls: after each turn the environment appends the
tool's answer and the rollout asks the policy to go on from the whole context. transformers
prefills that whole context again at every call, so the fourth turn of a calculator episode
re-reads three turns it has already read (a step's rollouts on the 0.5B: 20-30 rows of 235-462
tokens prefilled per later turn, most of generation's time on the CPU). While a
:class:`TurnCache` is open, :class:`~inspo.engines.hf.HFEngine` keeps the keys and values of the
rows each call played, and the next call starts each row from the longest prefix of it that a
kept row holds: only the rest is prefilled.

Batches are left-padded to one width ``W``. A call whose rows can reuse ``r_i`` of their ``n_i``
tokens prefills the last ``S = max(n_i - r_i)`` positions of every row and takes the first
``W - S`` from the kept cache (a row with a shorter new part recomputes a few tokens it had).
Positions come from the attention mask, so a key cached at one padding offset is the same key at
another. The kept keys were computed one token at a time while decoding, the full prefill's in
one pass: the logits agree to rounding, not bit for bit (in float32, ~1e-6), so a sampled token
can differ where the draw falls that close to a boundary; ``tests/test_engines_turn_cache.py``
checks the logits against the full prefill and that greedy tokens agree.

A cache is valid only for the weights that computed it: it lives inside one
:meth:`~inspo.engines.hf.HFEngine.episode_cache` block (one :func:`inspo.envs.loop.run_rollouts`
call, where the policy does not change) and keeps only the last call's rows. torch is imported
inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_CACHED_POSITIONS = 32
"""A call that could take fewer positions than this from the kept cache prefills everything, as
before: it would save little, and it keeps short calls bitwise as they were."""


@dataclass
class _Source:
    """One finished call's cache: per layer ``(keys, values)`` as ``[rows, heads, length, dim]``,
    and where each row's real tokens start in it."""

    layers: list[tuple[Any, Any]]
    tokens: list[list[int]]  # each row's tokens whose keys and values the cache holds
    starts: list[int]  # the position of each row's first real token


@dataclass
class TurnCache:
    """The keys and values of the rows the last ``generate`` call played (see the module doc)."""

    kept: list[_Source] = field(default_factory=list)
    fresh: list[_Source] = field(default_factory=list)
    reused: int = 0  # positions taken from the cache, so far
    prefilled: int = 0  # positions prefilled (padding included), so far

    def start_call(self) -> None:
        """A new ``generate`` call: what the previous one kept is what this one may reuse."""
        self.kept, self.fresh = self.fresh, []

    def prefix(self, sequences: Sequence[Sequence[int]], config: Any) -> Any:
        """A ``DynamicCache`` holding the first ``W - S`` positions of the left-padded batch of
        ``sequences`` (see the module doc), or None where too little would be reused."""
        from transformers import DynamicCache

        width = max(len(s) for s in sequences)
        match = best_prefixes(sequences, [row for src in self.kept for row in src.tokens])
        suffix = max(len(s) - reuse for s, (_, reuse) in zip(sequences, match, strict=True))
        cached = width - suffix
        if cached < MIN_CACHED_POSITIONS:
            self.prefilled += width * len(sequences)
            return None
        owners = [(k, i) for k, src in enumerate(self.kept) for i in range(len(src.tokens))]
        copies = []  # (row in the batch, source, row in it, first position there, positions)
        for b, (s, (row, _)) in enumerate(zip(sequences, match, strict=True)):
            if len(s) > suffix:
                source, i = owners[row]
                copies.append((b, source, i, self.kept[source].starts[i], len(s) - suffix))
        layers: list[tuple[Any, Any]] = []
        for layer, (like, _) in enumerate(self.kept[0].layers):
            shape = (len(sequences), like.shape[1], cached, like.shape[3])
            keys, values = like.new_zeros(shape), like.new_zeros(shape)
            for b, source, i, begin, take in copies:
                src_k, src_v = self.kept[source].layers[layer]
                keys[b, :, cached - take :] = src_k[i, :, begin : begin + take]
                values[b, :, cached - take :] = src_v[i, :, begin : begin + take]
            layers.append((keys, values))
        self.reused += sum(max(len(s) - suffix, 0) for s in sequences)
        self.prefilled += suffix * len(sequences)
        return DynamicCache(ddp_cache_data=layers, config=config)

    def keep(
        self,
        cache: Any,
        sequences: Sequence[Sequence[int]],
        new_ids: Any,
        computed: Sequence[int | None] | None = None,
    ) -> None:
        """After a call: keep ``cache`` (its rows left-padded ``sequences`` followed by
        ``new_ids``, ``[rows, steps]``) for the next call; ``computed[i]``, where not None, is how
        many of row ``i``'s new tokens have keys and values (a row dropped from the decoding
        steps, :mod:`inspo.engines.decode_rows`). A cache of any other length than the call's
        ``width + steps - 1`` positions is not kept (the next call prefills in full)."""
        width, steps = max(len(s) for s in sequences), int(new_ids.shape[1])
        layers = [(layer.keys, layer.values) for layer in getattr(cache, "layers", [])]
        if not layers or steps < 1 or layers[0][0].shape[2] != width + steps - 1:
            return
        rows = new_ids[:, : steps - 1].tolist()
        for i, n in enumerate(computed or []):
            if n is not None:
                rows[i] = rows[i][:n]
        self.fresh.append(
            _Source(
                layers=layers,
                tokens=[list(s) + row for s, row in zip(sequences, rows, strict=True)],
                starts=[width - len(s) for s in sequences],
            )
        )


def best_prefixes(
    sequences: Sequence[Sequence[int]], kept: Sequence[Sequence[int]]
) -> list[tuple[int, int]]:
    """For each sequence, ``(row, length)``: the kept row sharing its longest prefix and how many
    of its tokens may be reused, at most all but its last (the call needs one position's logits).
    ``(0, 0)`` where nothing is kept or nothing matches."""
    import torch

    if not kept or not sequences:
        return [(0, 0)] * len(sequences)
    # one column more than the longest row, and fills that differ: every pair differs somewhere
    width = max(max(len(s) for s in sequences), max(len(k) for k in kept)) + 1
    queries = torch.full((len(sequences), width), -1, dtype=torch.long)
    rows = torch.full((len(kept), width), -2, dtype=torch.long)
    for i, s in enumerate(sequences):
        queries[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
    for j, k in enumerate(kept):
        rows[j, : len(k)] = torch.tensor(list(k), dtype=torch.long)
    lengths = []
    for block in queries.split(16):  # [16, kept, width] booleans at a time
        differ = block[:, None, :] != rows[None, :, :]
        lengths.append(differ.to(torch.uint8).argmax(dim=2))  # the first position that differs
    length, best = torch.cat(lengths).max(dim=1)
    caps = torch.tensor([max(len(s) - 1, 0) for s in sequences])
    return [(int(b), int(n)) for b, n in zip(best, torch.minimum(length, caps), strict=True)]


def cache_argument(model: Any) -> str:
    """The name ``generate`` takes a cache by: ``cache`` from transformers 5.20 (which still
    accepts ``past_key_values`` with a warning), ``past_key_values`` before."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return (
        "cache"
        if "cache" in inspect.signature(type(base).forward).parameters
        else "past_key_values"
    )


def returned_cache(output: Any) -> Any:
    """The cache a dict-returning ``generate`` gave back, under either name."""
    found = getattr(output, "cache", None)
    return found if found is not None else getattr(output, "past_key_values", None)
