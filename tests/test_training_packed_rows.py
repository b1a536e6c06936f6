"""A micro-batch's training pass as one packed row (``rl.pack_prompts``,
:mod:`inspo.training.packed_rows`): the layout against a naive rebuild of every row, the packed
pass's log-probs, entropies and LoRA gradients against the padded pass's (with and without gradient
checkpointing), the packed attention deferring to SDPA without a layout, and the switch restored."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from golden_compare import same_pass  # noqa: E402
from inspo.training import packed_rows  # noqa: E402
from inspo.training.packed_rows import pack_rows, packing_attention  # noqa: E402

PROMPT, WIDTH = 7, 6


def _batch(completions=(6, 3, 5, 0, 4), prompts=2, seed=0):
    """TRL's layout: row i continues prompt ``i % prompts`` (left-padded to PROMPT) with
    ``completions[i]`` attended tokens (right-padded to WIDTH); the padding holds random ids too."""
    g = torch.Generator().manual_seed(seed)
    texts = [torch.randint(10, 5000, (PROMPT - 2 + k,), generator=g) for k in range(prompts)]
    ids = torch.randint(10, 5000, (len(completions), PROMPT + WIDTH), generator=g)
    mask = torch.zeros_like(ids)
    for i, c in enumerate(completions):
        text = texts[i % prompts]
        ids[i, PROMPT - len(text) : PROMPT] = text
        mask[i, PROMPT - len(text) : PROMPT + c] = 1
    return ids, mask


def test_the_layout_holds_each_prompt_once_and_predicts_every_kept_token_from_its_own_row():
    ids, mask = _batch()
    packed = pack_rows(ids, mask, WIDTH)
    distinct = {tuple(ids[i][: PROMPT][mask[i][:PROMPT].bool()].tolist()) for i in range(len(ids))}
    kept = int(mask[:, PROMPT:].sum())
    assert packed.length == sum(map(len, distinct)) + kept
    assert len(packed.targets) == len(packed.sources) == len(packed.slots) == kept
    flat_ids = packed.ids[0]
    for source, target, slot in zip(packed.sources.tolist(), packed.targets.tolist(), packed.slots.tolist(),
                                     strict=True):
        row, t = divmod(slot, WIDTH)
        attended = ids[row][mask[row].bool()]  # the row as it was: its prompt, then its completion
        p = int(mask[row, :PROMPT].sum())
        assert target == int(ids[row, PROMPT + t]) == int(attended[p + t])
        assert int(flat_ids[source]) == int(attended[p + t - 1])  # the token before it in that row
        assert int(packed.positions[0, source]) == p + t - 1  # at that row's position
        segment = next(s for s in packed.segments if s.start <= source < s.end)
        if t == 0:
            assert segment.prompt is None and source == segment.end - 1  # the prompt's last token
        else:  # the completion's own segment, continuing the prompt holding this row's prompt
            start, end = segment.prompt
            assert flat_ids[start:end].tolist() == attended[:p].tolist()


def test_a_row_padded_inside_is_left_to_the_padded_pass():
    ids, mask = _batch()
    mask[1, PROMPT + 1] = 0  # a hole inside row 1's completion
    assert pack_rows(ids, mask, WIDTH) is None
    ids, mask = _batch()
    mask[0, PROMPT - 2] = 0  # a hole inside row 0's prompt
    assert pack_rows(ids, mask, WIDTH) is None


def _policy(checkpointing: bool):
    from peft import LoraConfig, get_peft_model

    from inspo.models import ModelNotInstalledError, load_model

    torch.manual_seed(0)
    try:
        base = load_model("tiny-qwen2", dtype="float32").model
    except ModelNotInstalledError as exc:
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, task_type="CAUSAL_LM",
                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    for n, p in model.named_parameters():
        if "lora_B" in n:
            torch.nn.init.normal_(p, std=0.02, generator=torch.Generator().manual_seed(1))
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model.train()


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_packed_pass_gives_the_padded_pass_values_and_lora_gradients(checkpointing, monkeypatch):
    pytest.importorskip("peft")
    from inspo.training.cpu_logps import cpu_logps_and_entropies

    packs = []
    real = packed_rows.pack_rows

    def spy(*args):
        packs.append(real(*args))
        return packs[-1]

    monkeypatch.setattr(packed_rows, "pack_rows", spy)
    trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext), temperature=0.7)
    ids, mask = _batch()
    kept = mask[:, PROMPT:]
    got = {}
    for packed in (False, True):
        model = _policy(checkpointing)
        with packing_attention(model) if packed else nullcontext():  # the backward inside it, too
            logps, entropies, _ = cpu_logps_and_entropies(trainer, model, ids, mask, WIDTH, batch_size=3,
                                                          compute_entropy=True)
            (logps * kept * torch.arange(1, WIDTH + 1)).sum().backward()
        grads = [p.grad for _, p in sorted(model.named_parameters()) if p.grad is not None]
        got[packed] = ((logps * kept).detach(), (entropies * kept).detach(), grads)
    assert len(packs) == 2 and all(p is not None and len(p.segments) >= 3 for p in packs)  # two chunks
    same_pass(got[True], got[False])


def test_without_a_layout_the_packed_attention_is_transformers_sdpa_bit_for_bit():
    model = _policy(False).eval()
    ids, mask = _batch()
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=mask).logits
        with packing_attention(model) as packing:
            assert packing and model.config._attn_implementation == packed_rows.ATTENTION
            inside = model(input_ids=ids, attention_mask=mask).logits
    assert model.config._attn_implementation == "sdpa"  # restored
    assert torch.equal(inside, before)


def test_a_model_on_another_attention_is_left_alone():
    model = _policy(False)
    model.config._attn_implementation = "eager"
    with packing_attention(model) as packing:
        assert not packing and not packed_rows.is_packing(model)
    assert model.config._attn_implementation == "eager"
    assert not packed_rows.is_packing(SimpleNamespace())  # no config at all
