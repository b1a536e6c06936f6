"""inspo.training.checkpointing: gradient checkpointing on the first decoder layers only, with the
same loss, gradients and random streams as checkpointing all of them or none."""

from __future__ import annotations

import contextlib
import copy
import math
from types import SimpleNamespace

import pytest

from inspo.config.train import resolve
from inspo.training.checkpointing import checkpointed_count

torch = pytest.importorskip("torch")

# transformers 5 renamed is_gradient_checkpointing; peft still reads the old name
pytestmark = pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*deprecated:FutureWarning")


@pytest.mark.parametrize("layers", [1, 2, 7, 24, 28])
@pytest.mark.parametrize("share", [0.01, 0.25, 1 / 3, 0.5, 0.6, 0.999, 1.0])
def test_the_count_is_the_share_rounded_up_and_at_least_one(layers, share):
    naive = next(k for k in range(layers + 1) if k >= share * layers - 1e-9)
    assert checkpointed_count(layers, share) == max(1, naive) == max(1, math.ceil(share * layers - 1e-9))


@pytest.mark.parametrize("share", [0, -0.5, 1.5])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        checkpointed_count(24, share)


@pytest.mark.parametrize("value", [0, 1.2, True, "half"])
def test_the_config_refuses_a_share_outside_zero_to_one(value):
    with pytest.raises(Exception, match="model.gradient_checkpointing_layers must be in"):
        resolve("cpu-tiny", overrides=[f"model.gradient_checkpointing_layers={value}"])


def _lora_policy():
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model

    from inspo.models import load_model

    loaded = load_model("tiny-qwen2", dtype=torch.float32)
    torch.manual_seed(0)
    model = get_peft_model(copy.deepcopy(loaded.model), LoraConfig(
        r=4, lora_alpha=8, lora_dropout=0.3, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05, generator=torch.Generator().manual_seed(1))
    return model.train()


def _pass(model, share, seed=11):
    """One training pass through the trainer's own log-prob method (as the loss runs it): the loss,
    the LoRA gradients, the layers left checkpointed, and the global random state after it."""
    from inspo.training.grpo_trainer import trainer_class

    model = copy.deepcopy(model)
    if share is not None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    stub = SimpleNamespace(checkpointed_share=1.0 if share is None else share, temperature=1.0,
                           accelerator=SimpleNamespace(autocast=contextlib.nullcontext))
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, 400, (3, 14), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # a left-padded row
    torch.manual_seed(seed)  # the dropout masks
    logps, *_ = trainer_class()._get_per_token_logps_and_entropies(stub, model, ids, mask, 6, batch_size=2)
    loss = (logps * torch.linspace(-1, 1, 6)).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    from inspo.training.checkpointing import checkpointing_layers

    kept = [bool(layer.gradient_checkpointing) for layer in checkpointing_layers(model)]
    return loss.detach(), grads, kept, torch.rand(3)


def test_checkpointing_part_of_the_layers_changes_no_bit_of_the_loss_gradients_or_random_stream():
    model = _lora_policy()
    layers = model.config.num_hidden_layers
    none, every, half = _pass(model, None), _pass(model, 1.0), _pass(model, 0.5)
    assert every[2] == [True] * layers and none[2] == [False] * layers
    assert half[2] == [i < checkpointed_count(layers, 0.5) for i in range(layers)]
    assert any(half[2]) and not all(half[2])
    for other in (every, half):
        assert torch.equal(other[0], none[0])
        assert other[1].keys() == none[1].keys() and len(none[1]) == 4 * layers  # A and B of q, v
        assert all(torch.equal(other[1][n], none[1][n]) for n in none[1])
        assert torch.equal(other[3], none[3])
    # dropout is on: other masks give another loss, so the equalities above could fail
    assert not torch.equal(_pass(model, None, seed=12)[0], none[0])


def test_a_model_without_checkpointing_is_left_alone():
    from inspo.training.checkpointing import checkpointing_layers, limit_checkpointing

    model = _lora_policy()
    assert limit_checkpointing(model, 0.5) == 0
    assert not any(layer.gradient_checkpointing for layer in checkpointing_layers(model))


def test_a_transformers_without_per_layer_checkpointing_gets_a_clear_error(monkeypatch):
    import sys

    from inspo.training.checkpointing import limit_checkpointing

    monkeypatch.setitem(sys.modules, "transformers.modeling_layers", None)  # import fails
    with pytest.raises(RuntimeError, match="set model.gradient_checkpointing_layers=1.0"):
        limit_checkpointing(torch.nn.Linear(2, 2), 0.5)
