"""inspo's model card for the default base model (Qwen2.5-Coder-0.5B-Instruct), written without
loading or training it: what the hub reads from the front matter, the licence, the snippet."""

from __future__ import annotations

from pathlib import Path

import yaml

from inspo.config.train import resolve
from inspo.trained.card import base_model_info, licence_text, model_card, snippet_of
from inspo.trained.export import RunFacts
from inspo.trained.settings import AgentSettings

SUMMARY = {"steps": 40, "reward_start": 0.1, "reward_end": 0.3, "optimizer": "rule-based", "ledger": {},
           "evaluation": {"rule": "weight", "metric": "em", "returned_id": "ins-0004", "seed_id": "ins-0001",
                          "test_split": "test", "test_questions": 100, "test_returned": 0.31, "test_seed": 0.25,
                          "test_vs_seed": {"n": 100, "mean": 0.06, "se": 0.02, "low": 0.02, "high": 0.10}}}


def _card(**kw):
    config = resolve("cpu-tiny")
    base = base_model_info(config.model.name_or_path)
    facts = {"config": config, "summary": SUMMARY, "instruction": "Search first. <search> q </search>",
             "returned_id": "ins-0004", "population": [{"id": "ins-0004", "origin": "reflection", "weight": 0.3}]}
    card = dict(name="my-agent", settings=AgentSettings.from_config(config), base=base, location="my-agent",
                example="Who?", has_licence_file=True)
    run = RunFacts(run_dir=Path("my-agent"), **{k: kw.pop(k, v) for k, v in facts.items()})
    return model_card(run, **{**card, **kw}), base


def test_the_default_base_model_is_named_with_its_licence():
    card, base = _card()
    meta = yaml.safe_load(card.split("---\n", 2)[1])
    assert meta["license"] == "apache-2.0" and meta["base_model"] == ["Qwen/Qwen2.5-Coder-0.5B-Instruct"]
    assert meta["base_model_relation"] == "finetune" and meta["pipeline_tag"] == "text-generation"
    assert "Alibaba Cloud" in card and "(its text is in `LICENSE`)" in card
    assert "Apache License" in licence_text(base) and "Version 2.0" in licence_text(base)


def test_the_card_reports_the_held_out_result_with_its_interval_and_the_choice():
    card, _ = _card()
    assert "| returned (ins-0004) | 0.310 |" in card and "| seed (ins-0001) | 0.250 |" in card
    assert "**+0.060**, 95% CI [+0.020, +0.100] over 100 questions" in card
    assert "I* = argmax of the importance weights" in card
    assert snippet_of(card).splitlines()[2] == 'agent = inspo.load_agent("my-agent")'
    no_test, _ = _card(summary={**SUMMARY, "evaluation": None})
    assert "No held-out test was run" in no_test


def test_an_unknown_base_model_is_not_given_a_licence_it_may_not_have(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    assert base_model_info(str(folder)).license == "other"
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# a model\n")
    assert base_model_info(str(folder)).license == "mit"


def test_pointing_the_card_at_a_hub_id_rewrites_its_load_line_whatever_the_folder_is_now_called():
    from inspo.trained.card import point_card_at

    card, _ = _card()  # exported as my-agent, then renamed by its user: the line still gets found
    hub = point_card_at(card, "me/agent")
    assert snippet_of(hub).splitlines()[2] == 'agent = inspo.load_agent("me/agent")'
    assert hub.replace('"me/agent"', '"my-agent"') == card and hub.count("inspo.load_agent(") == card.count("inspo.load_agent(")


def test_the_card_says_which_module_must_be_importable_for_a_users_environment():
    from inspo.trained.card import _env_import

    assert _env_import("agents.shop:load_environment") == (
        "; to play it, the module `agents.shop` must be importable (run from the folder that holds `agents/shop.py`, "
        "or put that folder on `PYTHONPATH`)")
    assert _env_import("calculator") == "" and _env_import("/abs/shop.py:load_environment") == ""
