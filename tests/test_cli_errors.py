"""Bad inputs get a one-line message and exit status 2, never a traceback, and the message names
what is wrong, the file (and line) and how to go on (issue 21, items 4 and 5). In-process
``inspo.cli.main``; nothing here loads a model."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from inspo import artifacts
from inspo.cli import main
from inspo.config.schedule import core_config
from inspo.config.train import _SECTIONS, TrainConfig, dump, resolve
from inspo.core.coevolution import CoEvolution
from inspo.core.proposer import Proposer
from inspo.core.reflector import RuleBasedReflector

BASE = ["model.name_or_path=tiny-qwen2", "rl.steps=4"]


def refused(capsys, argv: list[str]) -> str:
    """Run ``inspo argv``; assert exit 2 and a one-line message without a traceback; return it."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.startswith("inspo: error: ")
    lines = [line for line in err.splitlines() if line and " INFO " not in line and " WARNING " not in line]
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------ item 4: messages, not tracebacks
def test_eval_with_a_policy_that_does_not_exist(capsys):
    message = refused(capsys, ["eval", "--policy", "/nope/model", "--dataset", "world@test", "--limit", "2"])
    assert "--policy /nope/model: unknown model '/nope/model'" in message and "not a registered name" in message


@pytest.mark.parametrize(("flags", "expected"), [
    (["--port", "-1"], "--port: port must be in 0..65535 (0: any free port), got -1"),
    (["--port", "65536"], "got 65536"),
    (["--max-queries", "0"], "--max-queries: max_queries must be a whole number >= 1, got 0"),
    (["--max-query-chars", "0"], "--max-query-chars: max_query_chars must be a whole number >= 1, got 0"),
    (["--max-body-mb", "0"], "--max-body-mb must be > 0"),
    (["--topk", "0"], "--topk: default_topk must be in 1..max_topk=50, got 0"),
])
def test_serve_retriever_refuses_bad_flags_before_loading_the_index(capsys, monkeypatch, flags, expected):
    monkeypatch.setattr("inspo.retrieval.factory.load_retriever", lambda *a, **k: pytest.fail("index loaded"))
    assert expected in refused(capsys, ["serve-retriever", "--corpus", "world", *flags])


def test_data_refuses_an_out_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("not a folder")
    message = refused(capsys, ["data", "world", "--out", str(target)])
    assert f"--out {target} is a file, not a folder" in message
    assert target.read_text() == "not a folder"


def _evolve_run(tmp_path, state_text: str | bytes):
    run = tmp_path / "evo"
    run.mkdir()
    path = run / artifacts.STATE_FILE
    path.write_bytes(state_text if isinstance(state_text, bytes) else state_text.encode())
    return run, path


@pytest.mark.parametrize(("state", "expected"), [
    ("{}", "is not an INSPO state: it lacks schema_version, config, last_step"),
    ("[1, 2]", "is not an INSPO state: it holds a JSON list"),
    ('{"schema_version": 2, "config": {}, "last_', "is not valid JSON (Unterminated string"),
    (b"\x80\x81garbage", "is not an INSPO state: not UTF-8 at byte offset 0"),
], ids=["empty-object", "list", "cut-off", "not-utf8"])
def test_evolve_resume_from_a_damaged_state_names_the_file(tmp_path, capsys, state, expected):
    run, path = _evolve_run(tmp_path, state)
    message = refused(capsys, ["evolve", "--resume", "--output-dir", str(run), "--no-progress", *_sets(BASE)])
    assert f"cannot resume: {path} " in message and expected in message
    assert "run without --resume in another --output-dir" in message


def test_a_damaged_state_section_is_named(tmp_path, capsys):
    state = _state(resolve("cpu-tiny", overrides=BASE))
    state["population"] = {"members": "?"}
    run, path = _evolve_run(tmp_path, json.dumps(state))
    message = refused(capsys, ["evolve", "--resume", "--output-dir", str(run), "--no-progress", *_sets(BASE)])
    assert f"{path} is not a readable INSPO state: its population section is damaged (KeyError" in message


def _sets(overrides):
    return [arg for o in overrides for arg in ("--set", o)]


def _state(config: TrainConfig, step: int = 2) -> dict:
    coevo = CoEvolution(core_config(config.coevolution, static=False), "Use <search> and <answer>.",
                        Proposer(RuleBasedReflector(seed=0)))
    coevo.last_step = step
    return coevo.state_dict()


def _checkpoint(run, step=2):
    """A checkpoint as inspo train leaves it, with small stand-ins for TRL's files."""
    import torch
    from safetensors.torch import save_file

    config = resolve("cpu-tiny", overrides=[*BASE, f"output_dir={run}"])
    ckpt = run / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    artifacts.write_json(ckpt / artifacts.STEP_FILE, {"inspo_step": step, "global_step": step, "mini_batches": 1,
                                                      "config": config.to_dict()})
    artifacts.write_json(ckpt / artifacts.STATE_FILE, _state(config, step))
    torch.save({"state": {0: {"exp_avg": torch.zeros(64)}}, "param_groups": [{"lr": 1e-5}]}, ckpt / "optimizer.pt")
    torch.save({"last_epoch": step}, ckpt / "scheduler.pt")
    save_file({"base_model.layers.0.q_proj.lora_A.weight": torch.zeros(4, 64)}, ckpt / "adapter_model.safetensors")
    (ckpt / "adapter_config.json").write_text(json.dumps({"r": 4, "peft_type": "LORA"}))
    (run / "config.yaml").write_text(dump(config))
    return ckpt


def _cut(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda c: _cut(c / "optimizer.pt"), "optimizer.pt is damaged (not a complete torch.save archive"),
    (lambda c: _flip(c / "optimizer.pt"), "optimizer.pt is damaged (its entry"),
    (lambda c: (c / "scheduler.pt").write_bytes(b"junk"), "scheduler.pt is damaged"),
    (lambda c: _cut(c / "adapter_model.safetensors"), "adapter_model.safetensors is damaged (SafetensorError"),
    (lambda c: _cut(c / "trainer_state.json"), "trainer_state.json is not valid JSON"),
    (lambda c: _cut(c / "inspo_step.json", 0.3), "inspo_step.json is not valid JSON"),
    (lambda c: (c / "inspo_step.json").write_text("{}"), "inspo_step.json has no whole-number 'inspo_step'"),
    (lambda c: (c / "inspo_state.json").write_text("{}"), "inspo_state.json is not an INSPO state: it lacks"),
    (lambda c: (c / "adapter_config.json").write_bytes(b'{"r": "\xff"}'), "adapter_config.json is not valid JSON"),
], ids=["optimizer-cut", "optimizer-flipped", "scheduler-junk", "adapter-cut", "trainer-state-cut", "step-cut",
        "step-empty", "state-empty", "adapter-config-not-utf8"])
def test_train_resume_from_a_damaged_checkpoint_names_the_file(tmp_path, capsys, monkeypatch, damage, expected):
    import inspo.training.grpo_stage as grpo_stage

    run = tmp_path / "run"
    _checkpoint(run, step=1)
    damage(_checkpoint(run, step=2))
    monkeypatch.setattr(grpo_stage, "prepare", lambda *a, **k: pytest.fail("prepared before refusing"))
    message = refused(capsys, ["train", "--output-dir", str(run), "--resume", "--no-progress", *_sets(BASE)])
    assert f"cannot resume from {run / 'checkpoint-2'}: " in message and expected in message
    assert f"Resume from the checkpoint before it with --resume {run / 'checkpoint-1'}" in message


def test_an_intact_checkpoint_passes_the_check(tmp_path):
    from inspo.training.resume import check_checkpoint

    assert check_checkpoint(_checkpoint(tmp_path / "run"))["inspo_step"] == 2


def test_a_damaged_only_checkpoint_says_to_start_a_new_run(tmp_path, capsys, monkeypatch):
    import inspo.training.grpo_stage as grpo_stage

    run = tmp_path / "run"
    _cut(_checkpoint(run) / "optimizer.pt")
    monkeypatch.setattr(grpo_stage, "prepare", lambda *a, **k: pytest.fail("prepared before refusing"))
    message = refused(capsys, ["train", "--output-dir", str(run), "--resume", "--no-progress", *_sets(BASE)])
    assert f"There is no earlier checkpoint in {run}: start a new run in another --output-dir" in message


def test_a_jsonl_line_that_is_not_utf8_is_named_with_its_line(tmp_path, capsys):
    bad = tmp_path / "qa.jsonl"
    bad.write_bytes(b'{"id": "a", "question": "q?", "golden_answers": ["x"]}\n\n'
                    b'{"id": "b", "question": "caf\xe9?", "golden_answers": ["y"]}\n')
    message = refused(capsys, ["eval", "--dataset", str(bad), "--policy", "tiny-qwen2"])
    assert ("qa.jsonl line 3: not UTF-8 at byte offset 28 of the line (invalid continuation byte); save the file "
            "as UTF-8") in message


def test_a_config_file_that_is_not_utf8_is_named(tmp_path, capsys):
    bad = tmp_path / "run.yaml"
    bad.write_bytes(b"rl:\n  steps: 3 # \xe9\n")
    assert f"{bad}: not UTF-8 at byte offset 17 (invalid continuation byte)" in refused(capsys, ["train", "--dry-run", "--config", str(bad)])


# ------------------------------------------------------------------ item 5: refused, not accepted
def test_duplicate_corpus_ids_are_refused_naming_the_id_and_the_rows(tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"id": "d1", "contents": '"A"\nalpha'}, {"id": "d2", "contents": '"B"\nbeta'},
            {"id": "d1", "contents": '"C"\ngamma'}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    message = refused(capsys, ["serve-retriever", "--corpus", str(corpus), "--port", "0"])
    assert "corpus.jsonl line 3: passage id 'd1' is already the id of corpus.jsonl line 1" in message
    assert "corpus ids must be unique" in message


def _bool_keys() -> list[str]:
    keys = [f.name for f in fields(TrainConfig) if f.type in (bool, "bool")]
    for section, cls in _SECTIONS[TrainConfig].items():
        keys += [f"{section}.{f.name}" for f in fields(cls) if f.type in (bool, "bool")]
    return keys


def test_every_boolean_setting_refuses_a_value_that_is_not_true_or_false(capsys):
    keys = _bool_keys()
    assert {"model.lora", "coevolution.verify", "require_paper_parts"} <= set(keys)
    for key in keys:
        message = refused(capsys, ["train", "--dry-run", "--set", f"{key}=maybe"])
        assert message == f"inspo: error: {key} must be true or false; got 'maybe'"
    # rl.bf16 is a boolean that also takes auto: the message names the three
    assert refused(capsys, ["train", "--dry-run", "--set", "rl.bf16=maybe"]).startswith(
        "inspo: error: rl.bf16 must be true, false or auto; got 'maybe'")
    assert "model.lora must be true or false; got 1" in refused(capsys, ["train", "--dry-run", "--set", "model.lora=1"])
    assert main(["train", "--dry-run", "--set", "model.lora=yes"]) == 0  # YAML's yes is true


def test_the_python_api_refuses_a_non_boolean_too():
    from inspo.config.train import ModelConfig, RLConfig
    from inspo.core.config import ConfigError

    with pytest.raises(ConfigError, match="model.lora must be true or false; got 'maybe'"):
        ModelConfig(lora="maybe")
    with pytest.raises(ConfigError, match="rl.use_vllm must be true or false; got 0"):
        RLConfig(use_vllm=0)


@pytest.mark.parametrize(("argv", "expected"), [
    (["eval", "--limit", "-1", "--dataset", "world@test"], "--limit must be >= 0 (at most this many questions"),
    (["demo", "--steps", "0", "--no-progress"], "--steps must be >= 1"),
    (["demo", "--validation-size", "0", "--no-progress"], "--validation-size must be >= 1"),
    (["serve-retriever", "--corpus", "world", "--max-queries", "0"], "max_queries must be a whole number >= 1"),
], ids=["eval-limit", "demo-steps", "demo-validation-size", "serve-max-queries"])
def test_values_that_were_accepted_silently_are_refused(tmp_path, capsys, argv, expected):
    if argv[0] == "demo":
        argv = [*argv, "--out", str(tmp_path / "demo")]
    assert expected in refused(capsys, argv)
    assert not (tmp_path / "demo").exists()


def test_parse_dataset_and_run_demo_refuse_too(tmp_path):
    from inspo.core.reflector import RuleBasedReflector
    from inspo.demo import run_demo
    from inspo.eval import parse_dataset

    with pytest.raises(ValueError, match="limit must be >= 0"):
        parse_dataset("world@test", limit=-1)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        run_demo(tmp_path, RuleBasedReflector(seed=0), steps=0)
