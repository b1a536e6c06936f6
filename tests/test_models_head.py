"""inspo.models.head: the LM head sees a contiguous input inside contiguous_head_input, and only there."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")


def _lora_tiny():
    from peft import LoraConfig, get_peft_model

    from inspo.models import load_model

    plain = load_model("tiny-qwen2", dtype=torch.bfloat16).model.eval()
    lora = get_peft_model(copy.deepcopy(plain), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                           task_type="CAUSAL_LM")).eval()
    return plain, lora


def test_the_head_of_a_lora_model_sees_a_contiguous_input_inside_the_block_and_the_logits_do_not_change():
    pytest.importorskip("peft")
    from inspo.models.head import contiguous_head_input

    plain, lora = _lora_tiny()
    head = lora.get_output_embeddings()
    assert not head.weight.requires_grad  # PEFT froze it: the case torch copies per row
    seen = []
    probe = head.register_forward_hook(lambda m, args, out: seen.append(args[0].is_contiguous()))
    ids = torch.randint(0, plain.config.vocab_size, (3, 7), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        outside = lora(input_ids=ids, logits_to_keep=1).logits
        with contiguous_head_input(lora):
            inside = lora(input_ids=ids, logits_to_keep=1).logits
        after = lora(input_ids=ids, logits_to_keep=1).logits
        reference = plain(input_ids=ids, logits_to_keep=1).logits
    probe.remove()
    # transformers slices the last position out of (3, 7, hidden): not contiguous, unless the block makes it so
    assert seen == [False, True, False]
    assert not head._forward_pre_hooks  # the hook is gone after the block
    assert torch.equal(inside, outside) and torch.equal(after, outside) and torch.equal(inside, reference)


def test_contiguous_head_input_leaves_a_model_without_a_head_alone():
    from inspo.models.head import contiguous_head_input

    body = torch.nn.Linear(2, 2)  # no get_output_embeddings
    with contiguous_head_input(body):
        out = body(torch.ones(1, 2))
    assert out.shape == (1, 2)


def test_the_engine_and_the_cpu_log_prob_pass_play_the_head_on_a_contiguous_input():
    """HFEngine's generate and cpu_logps_and_entropies run their forwards inside the block."""
    pytest.importorskip("peft")
    from contextlib import nullcontext
    from types import SimpleNamespace

    from inspo.engines.base import GenerationInput
    from inspo.engines.hf import HFEngine
    from inspo.models import load_model
    from inspo.training.cpu_logps import cpu_logps_and_entropies

    _, lora = _lora_tiny()
    tokenizer = load_model("tiny-qwen2").tokenizer
    seen = []
    probe = lora.get_output_embeddings().register_forward_hook(lambda m, args, out: seen.append(args[0].is_contiguous()))
    engine = HFEngine(lora, tokenizer)
    engine.generate([GenerationInput(prompt_ids=[5, 6, 7, 8], completion_ids=[], text="")] * 2, max_new_tokens=3,
                    temperature=0.0, top_p=1.0, stop=[])
    trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext), temperature=1.0)
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cpu_logps_and_entropies(trainer, lora, ids, torch.ones_like(ids), 4, batch_size=2, compute_entropy=False)
    probe.remove()
    assert seen and all(seen), seen
