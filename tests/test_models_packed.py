"""inspo.models.packed: bf16 linear layers multiply with packed weights inside the block, give the
same numbers as torch's linear, and are themselves again after it."""

from __future__ import annotations

import copy
import random

import pytest

torch = pytest.importorskip("torch")

from inspo.models.packed import PackedLinears, packing_supported  # noqa: E402

needs_packing = pytest.mark.skipif(
    not packing_supported(), reason="this CPU's oneDNN has no bf16 kernel to pack for"
)


def _linear(out_features=48, in_features=32, bias=True, dtype=torch.bfloat16):
    torch.manual_seed(0)
    return torch.nn.Linear(in_features, out_features, bias=bias).to(dtype)


@needs_packing
@pytest.mark.parametrize("rows", [1, 7, 32, 33, 200])
@pytest.mark.parametrize("bias", [True, False])
def test_a_packed_layer_gives_torch_linear_bitwise(rows, bias):
    layer = _linear(bias=bias)
    x = torch.randn(rows, 1, 32, generator=torch.Generator().manual_seed(rows)).to(torch.bfloat16)
    packed = PackedLinears()
    with torch.inference_mode():
        expected = torch.nn.functional.linear(x, layer.weight, layer.bias)
        with packed.active(layer) as switched:
            got = layer(x)
    assert switched == 1
    assert len(packed) == 1  # the packed path ran (the call had few enough rows)
    assert torch.equal(got, expected)
    assert "forward" not in vars(layer)  # the layer is itself again


@needs_packing
def test_a_changed_weight_is_packed_again_and_a_kept_one_is_reused():
    layer = _linear()
    x = torch.randn(4, 32).to(torch.bfloat16)
    packed = PackedLinears()
    with torch.inference_mode(), packed.active(layer):
        layer(x)
    first = packed.weight(layer)
    assert packed.weight(layer) is first  # same weight: reused, not packed again
    with torch.no_grad():
        layer.weight.add_(1.0)  # what an optimizer step does: bumps the version counter
    with torch.inference_mode():
        with packed.active(layer):
            got = layer(x)
        expected = torch.nn.functional.linear(x, layer.weight, layer.bias)
    assert packed.weight(layer) is not first
    assert torch.equal(got, expected)


@needs_packing
def test_calls_the_packed_product_cannot_serve_take_torch_linear():
    layer = _linear()
    packed = PackedLinears(max_rows=8)
    # under autograd: the gradient reaches the input
    x = torch.randn(3, 32).to(torch.bfloat16).requires_grad_(True)
    with packed.active(layer):
        layer(x).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    # more rows than max_rows, and a float32 input: nothing packed
    with torch.inference_mode(), packed.active(layer):
        layer(torch.randn(9, 32).to(torch.bfloat16))
        with pytest.raises(RuntimeError):  # torch's own dtype check, as without packing
            layer(torch.randn(2, 32))
    assert len(packed) == 0


def test_layers_packing_does_not_serve_are_left_alone():
    model = torch.nn.Sequential(_linear(dtype=torch.float32), _linear(48, 48))
    wrapped = model[1]
    own = wrapped.forward
    wrapped.forward = lambda x: own(x)  # an instance-level forward, as hook wrappers install
    with PackedLinears().active(model) as switched:
        assert switched == 0  # float32 is not packed; the wrapped layer keeps its wrapper
    assert "forward" not in vars(model[0]) and "forward" in vars(wrapped)
    with PackedLinears(enabled=False).active(_linear()) as switched:
        assert switched == 0


@needs_packing
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_lora_policy_writes_the_same_tokens_with_and_without_packing(temperature):
    """The engine-level check: same prompts, same seeds, same tokens (the packed product is
    bitwise torch's), and the base layers and head were the packed ones."""
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model

    from inspo.engines.base import GenerationInput
    from inspo.engines.hf import HFEngine
    from inspo.models import load_model

    loaded = load_model("tiny-qwen2", dtype=torch.bfloat16)
    torch.manual_seed(0)
    lora = get_peft_model(copy.deepcopy(loaded.model), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(1))
    gen = random.Random(3)
    inputs = [GenerationInput([gen.randrange(10, 500) for _ in range(n)], [], "", seed=None) for n in (5, 9, 14)]

    def play(packed):
        engine = HFEngine(lora, loaded.tokenizer, rng=random.Random(7), packed=packed)
        return [g.token_ids for g in engine.generate(inputs, max_new_tokens=12, temperature=temperature,
                                                     top_p=1.0, stop=[])]

    shared = PackedLinears()
    assert play(shared) == play(PackedLinears(enabled=False))
    assert play(shared) == play(PackedLinears(enabled=False))  # the second call reuses the packing
    base = {m for name, m in lora.named_modules() if name.endswith("base_layer")}
    assert base and all(m in shared._packed for m in base)
    assert lora.get_output_embeddings() in shared._packed
