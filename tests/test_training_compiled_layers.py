"""inspo.training.compiled_layers (``model.compile_layers``): the decoder layers' training passes
through torch.compile give the eager pass's loss and gradients to rounding, with the same dropout
masks, and leave every pass without gradients (generation) to the eager layers."""

from __future__ import annotations

import pytest

from inspo.config.train import resolve

torch = pytest.importorskip("torch")

from test_training_checkpointing import _lora_policy, _pass  # noqa: E402

pytestmark = [pytest.mark.slow,  # inductor compiles C++ kernels: tens of seconds on 2 cores
              pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*deprecated:FutureWarning")]


def _compile(model):
    from inspo.training.compiled_layers import compile_decoder_layers

    assert compile_decoder_layers(model) == model.config.num_hidden_layers


def _relative(a, b):
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize("share", [None, 0.5])  # no checkpointing; the first layer checkpointed
def test_the_compiled_pass_gives_the_eager_loss_and_gradients_with_the_same_dropout_masks(share):
    from torch._dynamo.utils import counters

    model = _lora_policy()  # dropout 0.3 on q and v
    graphs = counters["stats"]["unique_graphs"]
    eager, compiled = _pass(model, share), _pass(model, share, prepare=_compile)
    assert counters["stats"]["unique_graphs"] > graphs  # it did compile (no silent eager fallback)
    assert compiled[1].keys() == eager[1].keys()
    assert _relative(compiled[0], eager[0]) < 1e-5
    assert max(_relative(compiled[1][n], eager[1][n]) for n in eager[1]) < 1e-4
    assert torch.equal(compiled[3], eager[3])  # the same random draws, so the same stream after
    # other masks move the gradients far more than the bound above: the masks are the same ones
    other = _pass(model, share, seed=12)
    assert max(_relative(other[1][n], eager[1][n]) for n in eager[1]) > 1e-2


def test_passes_without_gradients_run_the_eager_layers_bit_for_bit():
    from torch._dynamo.utils import counters

    model = _lora_policy()
    ids = torch.randint(3, 400, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = model(input_ids=ids).logits
        greedy = model.generate(input_ids=ids, max_new_tokens=4, do_sample=False)
    _compile(model)
    _compile(model)  # a second call leaves the routed layers alone
    graphs = counters["stats"]["unique_graphs"]
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, before)
        assert torch.equal(model.generate(input_ids=ids, max_new_tokens=4, do_sample=False), greedy)
    model.eval()
    assert torch.equal(model(input_ids=ids).logits.detach(), before)  # eval mode: eager too
    assert counters["stats"]["unique_graphs"] == graphs


def test_a_deep_copy_routes_its_own_layers():
    import copy

    from inspo.training.checkpointing import checkpointing_layers

    model = _lora_policy()
    _compile(model)
    twin = copy.deepcopy(model)
    for layer, copied in zip(checkpointing_layers(model), checkpointing_layers(twin), strict=True):
        assert copied.forward.__self__ is copied and layer.forward.__self__ is layer


def test_no_cpp_compiler_or_no_decoder_layers_is_refused_with_the_fix(monkeypatch):
    from torch._inductor import cpp_builder

    from inspo.training.compiled_layers import compile_decoder_layers

    with pytest.raises(ValueError, match="set model.compile_layers=false"):
        compile_decoder_layers(torch.nn.Linear(2, 2))

    def missing():
        raise RuntimeError("no working C++ compiler found")

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", missing)
    with pytest.raises(RuntimeError, match="install one .* or set model.compile_layers=false"):
        compile_decoder_layers(_lora_policy())


def test_the_config_key_is_off_by_default_and_takes_only_booleans():
    assert resolve("calculator").model.compile_layers is False
    assert resolve("calculator", overrides=["model.compile_layers=true"]).model.compile_layers is True
    with pytest.raises(Exception, match="model.compile_layers"):
        resolve("calculator", overrides=["model.compile_layers=yes"])
