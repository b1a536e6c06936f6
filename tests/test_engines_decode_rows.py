"""inspo.engines.decode_rows: finished rows leave the decoding batch. The bookkeeping of which rows
finished and how many of their tokens have keys and values; the engine plays the same tokens with
and without dropping them (greedy, sampled from the same generator, row-seeded), alone and with the
turn cache over several turns."""

from __future__ import annotations

import random

import pytest

from inspo.engines.base import GenerationInput
from inspo.engines.decode_rows import MIN_FINISHED_SHARE, FinishedRows
from inspo.engines.turn_cache import cache_argument, returned_cache


def test_finished_rows_are_the_union_of_eos_and_the_criteria():
    import torch

    rows = FinishedRows(4, start=3, eos_ids={9})
    rows.update(torch.tensor([[1, 1, 1, 5], [1, 1, 1, 9], [1, 1, 1, 5], [1, 1, 1, 5]]),
                torch.tensor([False, False, True, False]))
    assert rows.done.tolist() == [False, True, True, False]
    rows.update(torch.tensor([[1, 1, 1, 5, 9], [1, 1, 1, 9, 0], [1, 1, 1, 5, 0], [1, 1, 1, 5, 4]]), None)
    assert rows.done.tolist() == [True, True, True, False]  # a finished row stays finished
    # the decoding step that feeds the 2nd new token (width 5): rows 0-2 are dropped there, so
    # each has keys and values for its first new token only
    assert rows.skip(5) == [3]
    assert rows.computed == [1, 1, 1, None] and rows.skipped_steps == 3
    assert rows.skip(6) == [3] and rows.computed == [1, 1, 1, None]  # recorded once


def test_too_few_finished_rows_run_the_whole_batch():
    import torch

    n = 8
    rows = FinishedRows(n, start=0, eos_ids={9})
    few = int(MIN_FINISHED_SHARE * n) - 1
    rows.update(torch.tensor([[9]] * few + [[1]] * (n - few)), None)
    assert rows.skip(2) == list(range(n)) and rows.computed == [None] * n and rows.skipped_steps == 0


def _inputs(tok, seeded):
    texts = ["Question: where is Zarn? Think step by step, then answer.",
             "Answer the given question please. Question: who rules the north of the old kingdom?",
             "Q: 12 * 7 = ? Use the calculator.", "Where does the river end, and why there?"] * 2
    return [GenerationInput(tok(t)["input_ids"], [], "", seed=1000 + i if seeded else None)
            for i, t in enumerate(texts)]


def _early_stops(tiny, inputs, temperature=0.0):
    """Tokens some rows play early (the random model, greedy, repeats one token a row; sampled,
    it rarely plays a token twice): made EOS, they end those rows at different steps."""
    from inspo.engines.hf import HFEngine

    engine = HFEngine(tiny.model, tiny.tokenizer, rng=random.Random(3), drop_finished=False)
    gens = engine.generate(inputs, max_new_tokens=16, temperature=temperature, top_p=0.95, stop=[])
    if temperature == 0:
        return {gens[0].token_ids[0]}
    return {gens[0].token_ids[3], gens[1].token_ids[5], gens[2].token_ids[7], gens[5].token_ids[2]}


@pytest.mark.parametrize("temperature,seeded", [(0.0, False), (0.8, False), (0.8, True)],
                         ids=["greedy", "sampled", "row-seeded"])
def test_dropping_finished_rows_plays_the_same_tokens(tiny, temperature, seeded):
    from inspo.engines.hf import HFEngine

    inputs = _inputs(tiny.tokenizer, seeded)
    eos = _early_stops(tiny, inputs, temperature)
    played, dropped = {}, {}
    for drop in (False, True):
        engine = HFEngine(tiny.model, tiny.tokenizer, rng=random.Random(3), drop_finished=drop)
        engine.eos_ids = eos
        gens = engine.generate(inputs, max_new_tokens=16, temperature=temperature, top_p=0.95, stop=[])
        played[drop] = [(g.token_ids, g.finish) for g in gens]
        dropped[drop] = engine.dropped
    assert dropped[False] == 0 and dropped[True] > 0
    assert played[True] == played[False]
    assert sum(finish == "eos" for _, finish in played[True]) >= 2


def test_dropping_with_the_turn_cache_over_turns(tiny):
    from inspo.engines.hf import HFEngine

    tok = tiny.tokenizer
    eos = _early_stops(tiny, _inputs(tok, False))
    played, counts = {}, {}
    for drop in (False, True):
        engine = HFEngine(tiny.model, tok, drop_finished=drop)
        engine.eos_ids = eos
        ctx = [x.prompt_ids for x in _inputs(tok, False)]
        turns_out = []
        with engine.episode_cache() as turns:
            for turn in range(3):
                gens = engine.generate([GenerationInput(c, [], "") for c in ctx], max_new_tokens=12,
                                       temperature=0.0, top_p=1.0, stop=[])
                turns_out.append([g.token_ids for g in gens])
                ctx = [c + g.token_ids + tok(f" Result {turn}: {turn * 7} apples.")["input_ids"]
                       for c, g in zip(ctx, gens, strict=True)]
            counts[drop] = (turns.reused, engine.dropped)
        played[drop] = turns_out
    assert counts[True][0] > 0 and counts[True][1] > 0
    assert played[True] == played[False]


def _forced_generations(tiny):
    """Both arms of one forced greedy call over 8 left-padded rows, rows 0-2 ending at their 2nd
    token: ``({drop: output}, rows, width)``, each output carrying its ``finished``."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

    from inspo.engines.decode_rows import decoding_rows

    inputs = _inputs(tiny.tokenizer, False)
    eos = sorted(_early_stops(tiny, inputs, 0.8))
    rows = [x.prompt_ids for x in inputs]
    width = max(len(r) for r in rows)
    ids = torch.tensor([[0] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    torch.manual_seed(5)
    forced = torch.randint(50, 4000, (len(rows), 24))
    forced[:3, 1] = eos[0]  # rows 0-2 end at their 2nd token: the rest decode on without them

    class Force:  # a logits processor that makes greedy play ``forced``
        def __call__(self, input_ids, scores):
            step = input_ids.shape[1] - width
            out = torch.full_like(scores, -1e9)
            out[torch.arange(len(scores)), forced[:, step]] = 0.0
            return out

    config = GenerationConfig(max_new_tokens=24, do_sample=False, pad_token_id=0, eos_token_id=eos,
                              return_dict_in_generate=True, output_logits=True)
    outs = {}
    for drop in (False, True):
        finished = FinishedRows(len(rows), width, set(eos))

        class Told:  # tells ``finished`` each step's verdict, as HFEngine's criteria do
            def __init__(self, finished):
                self.finished = finished

            def __call__(self, input_ids, scores, **kwargs):
                self.finished.update(input_ids, None)
                return torch.zeros(len(input_ids), dtype=torch.bool)

        with torch.inference_mode(), decoding_rows(tiny.model, finished) if drop else torch.inference_mode():
            outs[drop] = tiny.model.generate(input_ids=ids, attention_mask=mask, generation_config=config,
                                             logits_processor=LogitsProcessorList([Force()]),
                                             stopping_criteria=StoppingCriteriaList([Told(finished)]))
        outs[drop].finished = finished
    return outs, rows, width


def test_the_rows_still_writing_get_the_whole_batchs_logits_and_keys(tiny):
    """At every decoding step, the logits of the rows still writing, and at the end every computed
    key and value, are what the whole batch gives (to rounding: fewer rows may take other kernels)."""
    import torch

    outs, _, width = _forced_generations(tiny)
    assert torch.equal(outs[True].sequences, outs[False].sequences)
    assert outs[True].finished.skipped_steps > 0 and outs[True].finished.computed[:3] == [1, 1, 1]
    for step, (a, b) in enumerate(zip(outs[True].logits, outs[False].logits, strict=True)):
        live = slice(3, None) if step >= 2 else slice(None)
        torch.testing.assert_close(a[live], b[live], rtol=1e-5, atol=1e-5)
    for got, want in zip(returned_cache(outs[True]).layers, returned_cache(outs[False]).layers, strict=True):
        torch.testing.assert_close(got.keys[3:], want.keys[3:], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got.keys[:3, :, : width + 1], want.keys[:3, :, : width + 1])
        torch.testing.assert_close(got.values[3:], want.values[3:], rtol=1e-5, atol=1e-5)


def test_the_turn_cache_keeps_only_a_dropped_rows_computed_tokens(tiny):
    """The next turn after a call that dropped rows: every row, the dropped ones included (they
    go on from their last token, whose keys were never computed), gets the full prefill's logits."""
    import torch
    from transformers import GenerationConfig

    from inspo.engines.turn_cache import TurnCache

    outs, rows, width = _forced_generations(tiny)
    out = outs[True]
    new = out.sequences[:, width:]
    turns = TurnCache()
    turns.keep(returned_cache(out), rows, new, out.finished.computed)
    turns.start_call()
    # the dropped rows' tokens end at their EOS, and they get a longer answer than the rest: the
    # batch then takes from the cache the position of their EOS, whose keys were never computed,
    # unless the cache knows it does not hold them
    nxt = [row + new[i, :2].tolist() + [21, 22, 23, 24, 25, 26] if i < 3 else row + new[i].tolist() + [21]
           for i, row in enumerate(rows)]
    cache = turns.prefix(nxt, tiny.model.config)
    assert cache is not None
    w = max(len(r) for r in nxt)
    ids = torch.tensor([[0] * (w - len(r)) + r for r in nxt])
    mask = torch.tensor([[0] * (w - len(r)) + [1] * len(r) for r in nxt])
    config = GenerationConfig(max_new_tokens=1, do_sample=False, pad_token_id=0, eos_token_id=None,
                              return_dict_in_generate=True, output_logits=True)
    with torch.inference_mode():
        cached = tiny.model.generate(input_ids=ids, attention_mask=mask, generation_config=config,
                                       **{cache_argument(tiny.model): cache})
        full = tiny.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    torch.testing.assert_close(cached.logits[0], full.logits[0], rtol=1e-4, atol=1e-5)
