"""The paper's parts (§4, App. B) and the check that a run claiming the paper's setup has them.

The ``paper`` and ``paper-7b`` presets name the paper's parts, never the embedded ones:

- policy: ``Qwen/Qwen2.5-3B`` (``paper-7b``: ``Qwen/Qwen2.5-7B``), base models, from a local
  folder or the local Hugging Face hub cache (inspo downloads nothing at run time);
- training data: Search-R1's NQ+HotpotQA training mix (``data.train``: a file or folder, e.g.
  the ``PeterJinGo/nq_hotpotqa_train`` dataset's ``train.parquet``);
- retrieval: E5 (``intfloat/e5-base-v2``) over Search-R1's 2018 Wikipedia (wiki-18): either a
  corpus file / saved index for the in-process dense retriever, or a Search-R1-compatible
  retrieval server (``env.retriever=http``), in the ``search-r1`` environment;
- optimizer: an LLM behind an OpenAI-compatible endpoint (Gemini 2.5 Pro in the paper), when
  the mode evolves instructions (not ``static``).

With ``require_paper_parts`` on (the paper presets), :func:`inspo.training.preflight.prepare` checks
the parts first (:func:`paper_parts`, :func:`missing_message`), so a run refuses before any data,
index or model is loaded, with one message that lists every missing part and the ``--set`` key or
environment variable that supplies it. A part counts as supplied when it is set and usable without a
download; an explicit choice (another model, BM25, a built-in dataset) is the user's and is
accepted. ``inspo train --dry-run`` prints :func:`paper_lines` without refusing.

Nothing here loads a model, reads a dataset or contacts a server.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from inspo.config.train import TrainConfig
from inspo.data.sources import is_named_source

GEMINI_OPENAI_URL = "https://generativelanguage.googleapis.com/v1beta/openai/"


@dataclass(frozen=True)
class Part:
    """One of the paper's parts: what the paper used, what the config gives, what is missing."""

    name: str
    paper: str
    value: str
    missing: str = ""
    """Empty when supplied; otherwise why not and how to supply it."""


def paper_parts(
    config: TrainConfig,
    *,
    need_model: bool = True,
    need_optimizer: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Part]:
    """The parts a run of ``config`` needs. ``need_optimizer`` defaults to every mode but static
    (pre-/post-policy evolve offline); ``need_model`` is False when the policy is an endpoint."""
    env = os.environ if env is None else env
    if need_optimizer is None:
        need_optimizer = config.mode != "static"
    parts = []
    if need_model:
        parts.append(_policy(config.model.name_or_path))
    parts.append(_train_data(config.data.train))
    parts.append(_retrieval(config))
    if need_optimizer:
        parts.append(_optimizer(config, env))
    return parts


def missing_message(parts: list[Part]) -> str:
    """One message for every missing part ('' when none is)."""
    missing = [p for p in parts if p.missing]
    if not missing:
        return ""
    lines = [
        f"the paper's setup (require_paper_parts) is missing {len(missing)} part(s); nothing was "
        "loaded:"
    ]
    lines += [f"  - {p.name} ({p.paper}): {p.missing}" for p in missing]
    lines.append(
        "(to run App. B's settings on other parts, set them explicitly, or --set "
        "require_paper_parts=false)"
    )
    return "\n".join(lines)


def paper_lines(config: TrainConfig, env: Mapping[str, str] | None = None) -> list[str]:
    """The parts and their state, for ``--dry-run`` (empty when ``require_paper_parts`` is off)."""
    if not config.require_paper_parts:
        return []
    out = ["paper parts (a run refuses to start while one is missing):"]
    for p in paper_parts(config, env=env):
        out.append(
            f"  {p.name + ':':<15}{p.value or '(unset)'}  [paper: {p.paper}]  "
            f"{'MISSING' if p.missing else 'ok'}"
        )
        if p.missing:
            out.append(f"  {'':<15}{p.missing}")
    return out


# ------------------------------------------------------------------------------------ the parts


def _policy(name: str) -> Part:
    from inspo.models import model_problem

    problem = model_problem(name)
    how = f"{problem}; or --set model.name_or_path=/path/to/model" if problem else ""
    return Part("policy", "Qwen2.5-3B / 7B base", name, how)


def _train_data(source: str) -> Part:
    paper = "Search-R1's NQ+HotpotQA train mix"
    how = (
        "--set data.train=PATH, Search-R1's training file or folder (`huggingface-cli download "
        "--repo-type dataset PeterJinGo/nq_hotpotqa_train --local-dir DIR`, then "
        "data.train=DIR/train.parquet)"
    )
    if not source:
        return Part("training data", paper, source, f"data.train is not set: {how}")
    if is_named_source(source):
        return Part("training data", paper, source)  # named explicitly: the user's choice
    if not Path(source).expanduser().exists():
        return Part("training data", paper, source, f"{source} does not exist: {how}")
    return Part("training data", paper, source)


def _retrieval(config: TrainConfig) -> Part:
    paper = "E5 (intfloat/e5-base-v2) over wiki-18"
    if config.env.name != "search-r1":  # another agent altogether: the user's explicit choice
        return Part("retrieval", paper, f"none (env.name={config.env.name})")
    data = SimpleNamespace(**config.env.options)
    if data.retriever == "http":
        return Part("retrieval", paper, f"http server at {data.retriever_url}")
    value = f"{data.retriever}" + (
        f" ({data.retriever_model})" if data.retriever == "dense" and data.retriever_model else ""
    )
    problems = []
    if data.retriever == "dense" and data.retriever_model:
        from inspo.models import model_problem

        problem = model_problem(data.retriever_model)
        if problem:
            problems.append(f"dense model: {problem}; or --set env.retriever_model=PATH")
    has_index = bool(data.index_dir) and _is_index_dir(data.retriever, data.index_dir)
    if has_index:
        value += f", index {data.index_dir}"
    elif data.index_path:
        value += f", prebuilt index {data.index_path}, corpus {data.corpus}"
        for key, path in (("index_path", data.index_path), ("corpus", data.corpus)):
            if not Path(path).expanduser().is_file():
                problems.append(
                    f"env.{key}={path} does not exist; --set env.{key}=PATH (Search-R1's "
                    "e5_Flat.index and wiki-18.jsonl, from its scripts/download.py)"
                )
    elif not data.corpus:
        problems.append(
            "no corpus: --set env.corpus=PATH/wiki-18.jsonl --set "
            "env.index_path=PATH/e5_Flat.index (Search-R1's corpus and prebuilt E5 index, nothing "
            "re-encoded), or env.corpus alone (indexing 21M passages with E5 needs GPUs; add --set "
            "env.index_dir=DIR to keep the index), or serve Search-R1's prebuilt E5 index (its "
            "retrieval_launch.sh) and --set env.retriever=http --set "
            "env.retriever_url=http://HOST:PORT"
        )
    else:
        value += f", corpus {data.corpus}"
        if not is_named_source(data.corpus) and not Path(data.corpus).expanduser().exists():
            problems.append(
                f"env.corpus={data.corpus} does not exist; --set env.corpus=PATH/wiki-18.jsonl"
            )
    return Part("retrieval", paper, value, "; ".join(problems))


def _is_index_dir(kind: str, directory: str) -> bool:
    if kind == "dense":
        from inspo.retrieval.dense import DenseRetriever as cls
    else:
        from inspo.retrieval.bm25 import BM25Retriever as cls
    return cls.is_index_dir(directory)


def _optimizer(config: TrainConfig, env: Mapping[str, str]) -> Part:
    from inspo.llm.factory import choose_kind

    spec = config.optimizer
    paper = "Gemini 2.5 Pro, OpenAI-compatible endpoint"
    kind, _ = choose_kind(spec, env)
    if kind == "local":
        return Part("optimizer", paper, f"local {spec.local_model_path}")
    if kind == "rule-based":
        if spec.kind == "rule-based":
            return Part("optimizer", paper, "rule-based (set explicitly)")
        return Part(
            "optimizer",
            paper,
            "rule-based (nothing configured)",
            "no optimizer LLM is configured: --set optimizer.kind=openai and an endpoint (below)",
        )
    base_url = spec.base_url or env.get("INSPO_OPTIMIZER_BASE_URL") or env.get("OPENAI_BASE_URL")
    model = spec.model or env.get("INSPO_OPTIMIZER_MODEL")
    problems = []
    if not base_url and not (env.get("INSPO_OPTIMIZER_API_KEY") or env.get("OPENAI_API_KEY")):
        problems.append(
            f"no endpoint: export INSPO_OPTIMIZER_BASE_URL={GEMINI_OPENAI_URL} and "
            "INSPO_OPTIMIZER_API_KEY=<key> (Gemini, as in the paper), or --set "
            "optimizer.base_url=URL for another OpenAI-compatible server"
        )
    if not model:
        problems.append("no model name: --set optimizer.model=NAME or export INSPO_OPTIMIZER_MODEL")
    if spec.api_key_env and not env.get(spec.api_key_env):
        problems.append(
            f"optimizer.api_key_env={spec.api_key_env} but that variable is not set: export it"
        )
    value = f"{model or '(no model)'} at {base_url or 'OpenAI (no base URL set)'}"
    return Part("optimizer", paper, value, "; ".join(problems))
