"""The paper presets name the paper's parts (§4, App. B) and refuse, before any work, while one
is missing; a dry run shows them without refusing. Nothing is downloaded: the Hugging Face hub
cache is an empty (or hand-made) folder, and any step that would load data, build an index or
resolve a model fails the test."""

from __future__ import annotations

import json

import pytest

from inspo.cli import main
from inspo.config.paper import paper_parts
from inspo.config.train import preset, resolve

OPTIMIZER_ENV = ("INSPO_OPTIMIZER_BASE_URL", "OPENAI_BASE_URL", "INSPO_OPTIMIZER_API_KEY", "OPENAI_API_KEY",
                 "INSPO_OPTIMIZER_MODEL")


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face hub cache, and no optimizer endpoint in the environment."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    for name in OPTIMIZER_ENV:
        monkeypatch.delenv(name, raising=False)
    return cache


def _cache_model(cache, repo_id):
    """What `huggingface-cli download repo_id` leaves in the hub cache (config.json only)."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abc")
    snapshot = repo / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    return snapshot


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a run builds its environment (the retriever), reads questions or resolves/fetches a model."""
    import inspo.models
    import inspo.models.registry
    import inspo.training.preflight

    def refuse(*args, **kwargs):
        raise AssertionError("work started before the paper's parts were checked")

    for module, name in ((inspo.training.preflight, "load_questions"), (inspo.training.preflight, "build_env"),
                         (inspo.training.preflight, "resolve_model_dir"), (inspo.models.registry, "model_path"),
                         (inspo.models, "model_path")):
        monkeypatch.setattr(module, name, refuse)


def test_paper_presets_name_the_papers_parts():
    c = preset("paper")
    assert c.require_paper_parts
    assert (c.model.name_or_path, c.env.name, c.env.options["retriever"], c.env.options["retriever_model"]) == (
        "Qwen/Qwen2.5-3B", "search-r1", "dense", "intfloat/e5-base-v2")
    assert (c.data.train, c.env.options["corpus"], c.data.eval) == ("", "", "")  # the user's paths, never "world"
    assert (c.optimizer.kind, c.optimizer.model) == ("openai", "gemini-2.5-pro")  # never the rule-based reflector
    big = preset("paper-7b")
    assert (big.model.name_or_path, big.rl.learning_rate, big.rl.max_turns) == ("Qwen/Qwen2.5-7B", 3e-7, 6)
    # everything else is the 3B setup (App. B gives the 7B model only another lr and turn cap)
    same = resolve("paper", overrides=["model.name_or_path=Qwen/Qwen2.5-7B", "rl.learning_rate=3.0e-7",
                                       "rl.max_turns=6"])
    assert big == same


@pytest.mark.parametrize("command", ["train", "evolve"])
def test_paper_preset_refuses_before_any_work_and_lists_every_missing_part(command, tmp_path, hub_cache, no_work,
                                                                          capsys):
    assert main([command, "--preset", "paper", "--output-dir", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "missing 4 part(s)" in err
    for hint in ("huggingface-cli download Qwen/Qwen2.5-3B", "--set model.name_or_path=",  # policy
                 "--set data.train=", "nq_hotpotqa_train",                                  # NQ+HotpotQA
                 "huggingface-cli download intfloat/e5-base-v2", "--set env.corpus=",      # E5 over wiki-18
                 "wiki-18", "env.retriever_url=",
                 "INSPO_OPTIMIZER_BASE_URL=", "generativelanguage.googleapis.com",           # optimizer endpoint
                 "--set optimizer.base_url="):
        assert hint in err, hint
    assert not (tmp_path / "run").exists()


def test_static_paper_run_needs_no_optimizer_and_an_http_retriever_needs_no_corpus(tmp_path, hub_cache):
    config = resolve("paper", overrides=["mode=static", "env.retriever=http",
                                         "env.retriever_url=http://127.0.0.1:8000"])
    parts = {p.name: p for p in paper_parts(config, env={})}
    assert "optimizer" not in parts and not parts["retrieval"].missing
    assert parts["policy"].missing and parts["training data"].missing


def test_supplied_parts_pass_and_the_hub_model_resolves_from_the_cache(tmp_path, hub_cache):
    from inspo.models import model_path

    snapshot = _cache_model(hub_cache, "Qwen/Qwen2.5-3B")
    _cache_model(hub_cache, "intfloat/e5-base-v2")
    train, corpus = tmp_path / "train.parquet", tmp_path / "wiki-18.jsonl"
    train.write_bytes(b"")
    corpus.write_text(json.dumps({"id": "0", "contents": '"T"\ntext'}) + "\n")
    config = resolve("paper", overrides=[f"data.train={train}", f"env.corpus={corpus}"])
    env = {"INSPO_OPTIMIZER_BASE_URL": "http://127.0.0.1:9/v1"}
    assert [p.missing for p in paper_parts(config, env=env)] == ["", "", "", ""]
    assert model_path("Qwen/Qwen2.5-3B") == snapshot


def test_search_r1_prebuilt_index_counts_as_the_retrieval_part(tmp_path, hub_cache):
    _cache_model(hub_cache, "intfloat/e5-base-v2")
    corpus, index = tmp_path / "wiki-18.jsonl", tmp_path / "e5_Flat.index"
    corpus.write_text(json.dumps({"id": "0", "contents": '"T"\ntext'}) + "\n")
    config = resolve("paper", overrides=[f"env.corpus={corpus}", f"env.index_path={index}"])
    part = {p.name: p for p in paper_parts(config, env={})}["retrieval"]
    assert f"env.index_path={index} does not exist" in part.missing  # nothing is read, only looked for
    index.write_bytes(b"")
    part = {p.name: p for p in paper_parts(config, env={})}["retrieval"]
    assert not part.missing and f"prebuilt index {index}" in part.value


@pytest.mark.parametrize("name, shown", [("paper", "name_or_path: Qwen/Qwen2.5-3B"),
                                         ("paper-7b", "name_or_path: Qwen/Qwen2.5-7B")])
def test_dry_run_shows_the_papers_parts_and_budget_without_refusing(name, shown, hub_cache, no_work, capsys):
    assert main(["train", "--preset", name, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert shown in out and "retriever_model: intfloat/e5-base-v2" in out and "model: gemini-2.5-pro" in out
    assert "step  135: prune evolve -> 7" in out and "optimizer calls:        20 to 50" in out  # 2 rounds a refill
    assert "paper parts" in out and "MISSING" in out
