"""The trained agent as one artifact (issue 20, items 1 and 2), on a real tiny GRPO run (TRL, the
tiny random Qwen2, BM25 over the built-in world, the scripted reward of ``train_run_script``):

- the end of training leaves ``RUN/agent`` (weights hard-linked to ``model/``) and no TRL card;
- ``inspo export`` writes a folder that transformers loads alone, whose instruction and
  settings play the same episode as the run; its model card's snippet runs; its errors are
  one line; ``--push-to-hub`` uploads every file to a local stand-in of the hub's API;
- ``inspo ask`` prints the turns of a run, of an exported folder and of a plain model.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

from inspo.cli import main  # noqa: E402
from train_run_script import TINY, scripted_reward  # noqa: E402

pytestmark = pytest.mark.slow

SRC = Path(__file__).resolve().parents[1] / "src"
QUESTION = "In which year was Venven Miselgol born?"
#: The tiny random policy writes noise and never closes a tag, so the ask tests force one search
#: through the prefill (text put at the start of the first turn; the rollout parses it as the
#: policy's own turn text), to see the retrieved titles printed.
FORCED_SEARCH = "<search> Venven Miselgol</search>"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import torch

    from inspo.config.train import resolve
    from inspo.training.run import run_training

    out = tmp_path_factory.mktemp("trained") / "run"
    config = resolve("cpu-tiny", overrides=[*TINY, f"output_dir={out}", "rl.steps=2", "rl.save_steps=2",
                                            "data.eval=world", "data.max_eval_questions=2",
                                            "data.max_test_questions=3"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_training(config, progress=False, reward_fn=scripted_reward)
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.fixture(scope="module")
def exported(run, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "my-agent"
    assert main(["export", str(run), "--out", str(out)]) == 0
    return out


def _front_matter(card: str) -> dict:
    import yaml

    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def test_training_ends_with_the_agent_folder_and_inspos_card_not_trls(run):
    agent = run / "agent"
    for name in ("config.json", "model.safetensors", "tokenizer.json", "instruction.txt", "population.json",
                 "agent.json", "README.md", "LICENSE"):
        assert (agent / name).is_file(), name
    assert not (run / "README.md").exists()  # TRL's "fine-tuned version of [None]" card, written at checkpoints
    assert (run / "checkpoint-2").is_dir()  # ... where TRL would have written it
    # the weights are the run's model/, linked (no second copy inside the run)
    assert (agent / "model.safetensors").stat().st_ino == (run / "model" / "model.safetensors").stat().st_ino
    summary = json.loads((run / "summary.json").read_text())
    assert (agent / "instruction.txt").read_text().strip() == (run / "best_instruction.txt").read_text().strip()
    population = json.loads((agent / "population.json").read_text())
    assert population["returned_id"] == summary["best_instruction_id"]
    members = [m["id"] for m in population["members"] if m["member"]]
    assert members == summary["population"] and all(m["text"] for m in population["members"])
    assert [m["id"] for m in population["members"] if m["returned"]] == [summary["best_instruction_id"]]
    settings = json.loads((agent / "agent.json").read_text())
    assert settings["agent"]["max_turns"] == 1 and settings["agent"]["max_response_tokens"] == 6
    assert settings["agent"]["prefill"] == "<search>" and settings["agent"]["temperature"] == 0.0
    assert settings["schema_version"] == 2 and settings["env"]["name"] == "search-r1"
    assert (settings["env"]["retriever"], settings["env"]["corpus"], settings["env"]["topk"],
            settings["env"]["reward"]) == ("bm25", "world", 3, "em")
    assert "topk" not in settings["agent"] and "reward" not in settings["agent"]  # the environment's now

    card = (agent / "README.md").read_text()
    meta = _front_matter(card)
    assert meta["license"] == "apache-2.0" and "inspo" in meta["tags"] and meta["library_name"] == "transformers"
    assert "base_model" not in meta  # tiny-qwen2 has random weights: no hub model to name
    ev = summary["evaluation"]
    assert f"On {ev['test_questions']} `test` questions" in card
    assert f"Paired difference, returned minus seed: **{ev['test_vs_seed']['mean']:+.3f}**" in card
    assert (run / "best_instruction.txt").read_text().strip() in card
    assert "arXiv:2512.01945" in card and "Zhou, Han and Wan, Xingchen" in card
    assert "2 GRPO steps (TRL) of 2 questions x 2 rollouts" in card
    assert "Apache License" in (agent / "LICENSE").read_text()


def test_the_exported_folder_loads_with_transformers_alone_and_plays_the_runs_agent(run, exported):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from inspo.engines.hf import HFEngine
    from inspo.envs.loop import AgentConfig, Episode, run_rollouts
    from inspo.envs.search_r1 import SearchR1Env
    from inspo.records import Instruction, Question
    from inspo.retrieval.factory import load_retriever

    # a copy, not links: the folder does not change when the run's model/ is written again
    assert (exported / "model.safetensors").stat().st_ino != (run / "model" / "model.safetensors").stat().st_ino
    model = AutoModelForCausalLM.from_pretrained(str(exported), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(exported))
    trained = AutoModelForCausalLM.from_pretrained(str(run / "model"), dtype=torch.float32)
    for (name, a), (_, b) in zip(model.state_dict().items(), trained.state_dict().items(), strict=True):
        assert torch.equal(a, b), name

    # one question played by hand with the exported instruction and settings ...
    settings = json.loads((exported / "agent.json").read_text())
    instruction = (exported / "instruction.txt").read_text().strip()
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    config = AgentConfig(**settings["agent"])
    episode = Episode(Question("q", QUESTION, ()), Instruction("exported", instruction))
    env = SearchR1Env(load_retriever("bm25", corpus="world"), topk=settings["env"]["topk"],
                      reward=settings["env"]["reward"])
    by_hand = run_rollouts(HFEngine(model, tokenizer), env, config, [episode])[0]
    assert instruction in tokenizer.decode(by_hand.prompt_ids) and by_hand.turns == 2

    # ... is the episode inspo.load_agent plays from the folder (greedy, same weights and settings)
    import inspo

    agent = inspo.load_agent(str(exported), dtype="float32")
    assert agent.instruction.text == instruction and agent.config == config
    answer = agent.ask(QUESTION)
    assert answer.rollout.completion_ids == by_hand.completion_ids and answer.rollout.prompt_ids == by_hand.prompt_ids


def test_the_cards_snippet_runs(exported):
    from inspo.trained.card import snippet_of

    snippet = snippet_of((exported / "README.md").read_text())
    # the card names the folder relative to itself, never the absolute path of the machine that exported it
    assert f'inspo.load_agent("{exported.name}")' in snippet and "agent.ask(" in snippet
    assert str(exported.parent.resolve()) not in (exported / "README.md").read_text()
    done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, cwd=exported.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("question: ") and lines[1] == "turn 1"
    assert lines[-2].startswith("final answer: ")  # then print(answer.answer)


def test_export_refuses_what_it_cannot_export_in_one_line(run, tmp_path, capsys):
    def error(*args) -> str:
        assert main(["export", *map(str, args)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("inspo: error: ")
        return err

    assert "is not an 'inspo train' run directory (no config.yaml" in error(tmp_path, "--out", tmp_path / "o1")
    assert "does not exist" in error(tmp_path / "nowhere", "--out", tmp_path / "o2")
    evolve_like = tmp_path / "evolve-run"
    evolve_like.mkdir()
    (evolve_like / "config.yaml").write_text((run / "config.yaml").read_text())
    assert "has no trained model" in error(evolve_like, "--out", tmp_path / "o3")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    assert "exists and is not empty" in error(run, "--out", full)
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"]  # nothing written
    assert "is not an 'inspo eval' result" in error(run, "--out", tmp_path / "o4", "--grid", run / "summary.json")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o3").exists() and not (tmp_path / "o4").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no half-written folder left


def test_the_card_shows_the_2x2_when_given(run, tmp_path):
    from inspo.eval import EvalCell, EvalReport
    from inspo.trained import export_agent

    cells = [EvalCell(policy, ins, "world@test", 3, em, 2.0, 0.0, 0, metrics={"em": em, "f1": em + 0.05},
                      tool_calls={"search": 1.0})
             for policy, ins, em in (("base", "seed", 0.1), ("base", "best", 0.2), ("trained", "seed", 0.3),
                                     ("trained", "best", 0.4))]
    grid, _ = EvalReport(cells=cells).write(tmp_path / "eval")
    card = (export_agent(run, tmp_path / "agent", grid=grid) / "README.md").read_text()
    assert "### The paper's 2x2" in card and "| policy | instruction | dataset | n | reward | em | f1 | search calls |" in card
    assert "| trained | best | world@test | 3 | 0.400 | 0.400 | 0.450 | 1.00 |" in card


def test_push_to_hub_uploads_every_file_with_huggingface_hub(run, tmp_path, monkeypatch, capsys):
    from fake_hub import FakeHub

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no token saved by a login on this machine
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        out = tmp_path / "pushed"
        # no token: the hub refuses, the folder stays complete, the error says how to log in
        assert main(["export", str(run), "--out", str(out), "--push-to-hub", "me/tiny-agent"]) == 2
        err = capsys.readouterr().err
        assert "the upload failed" in err and "HF_TOKEN" in err and len(err.strip().splitlines()) == 1
        assert hub.files == {} and f'inspo.load_agent("{out.name}")' in (out / "README.md").read_text()

        monkeypatch.setenv("HF_TOKEN", hub.token)
        out2 = tmp_path / "pushed2"
        assert main(["export", str(run), "--out", str(out2), "--push-to-hub", "me/tiny-agent"]) == 0
        assert "pushed to the hub: " + hub.url + "/me/tiny-agent/commit/" in capsys.readouterr().out
        uploaded = hub.files["me/tiny-agent"]
        local = {p.name: p.read_bytes() for p in out2.iterdir()}
        assert uploaded == local and "model.safetensors" in uploaded and "instruction.txt" in uploaded
        assert hub.repos["me/tiny-agent"]["organization"] == "me"
        # the card on the hub loads the agent from the hub: its snippet downloads the folder and plays it
        from inspo.trained.card import snippet_of

        snippet = snippet_of(uploaded["README.md"].decode())
        assert 'inspo.load_agent("me/tiny-agent")' in snippet
        done = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(SRC)})
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.startswith("question: ") and "\nfinal answer: " in done.stdout
        assert {"model.safetensors", "instruction.txt", "agent.json"} <= set(hub.downloads)


def test_ask_prints_each_turn_of_the_run(run, capsys):
    from inspo.retrieval.factory import load_retriever

    assert main(["ask", str(run), QUESTION, "--prefill", FORCED_SEARCH]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"policy:      {run / 'model'} (trained by the run {run})"
    assert lines[1].startswith("instruction: ins-") and lines[1].endswith(str(run / "best_instruction.txt"))
    assert any(line.startswith("environment: search-r1 (") and "corpus='world'" in line and "retriever='bm25'" in line
               and "topk=3" in line for line in lines)
    assert any(line == "decoding:    greedy" for line in lines)
    # the run trained in float32 (TINY): it plays in that, and the header says so
    assert any(line.startswith("precision:   weights float32, compute float32 (agent's dtype=float32; ")
               for line in lines)
    start = lines.index(f"question: {QUESTION}")
    titles = [p.title for p in load_retriever("bm25", corpus="world").search(["Venven Miselgol"], 3)[0]]
    assert titles
    turn = lines[start + 1:]
    assert turn[0] == "turn 1"
    i = turn.index("  search: Venven Miselgol")
    assert turn[i + 1:i + 1 + len(titles)] == [f"    {k}. {t}" for k, t in enumerate(titles, 1)]
    assert "turn 2" in turn  # the run's max_turns=1: one search turn, then the answer turn
    assert turn[-1].startswith("final answer: ")


def test_ask_reads_questions_from_stdin_and_plays_any_model(exported, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"{QUESTION}\n\nWho founded Alpha Town?\n"))
    assert main(["ask", str(exported), "--prefill", FORCED_SEARCH]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"agent:       {exported} (exported by inspo)"
    assert out.count("question: ") == 2 and "question: Who founded Alpha Town?" in out
    assert out.count("  search: Venven Miselgol") == 2 and out.count("\nfinal answer: ") == 2

    assert main(["ask", "tiny-qwen2", QUESTION, "--max-turns", "1", "--max-response-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert "instruction: the seed (search-r1's own)" in out and "corpus='world'" in out
    from inspo.models.precision import concrete_dtype, default_device

    auto = concrete_dtype("auto", default_device())  # a plain model has no recorded dtype: auto, resolved here
    assert f"precision:   weights {auto}, compute {auto} (agent's dtype=auto; " in out
    assert "Answer the given question." in out and "\nfinal answer: " in out
    assert main(["ask", "tiny-qwen2", QUESTION, "--instruction", "@weak", "--max-turns", "1",
                 "--max-response-tokens", "4", "--temperature", "-1"]) == 2
    assert "--temperature must be >= 0" in capsys.readouterr().err
    assert main(["ask", str(exported), QUESTION, "--corpus", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"inspo: error: environment 'search-r1' (corpus='{tmp_path / 'none.jsonl'}', "
                          "retriever='bm25') is not usable: ")
    assert len(err.splitlines()) == 1 and "--corpus" in err


def test_a_users_environment_module_travels_in_the_folder_and_plays_from_another_directory(
        run, tmp_path, monkeypatch, caplog):
    """Issue 67 item 6: the exported agent carries a user's one-file environment module, so asking it
    where the module does not import plays the copy (with a warning) instead of "No module named"."""
    import shutil

    import yaml

    import inspo

    home = tmp_path / "project"
    home.mkdir()
    (home / "inspo_travel_env_mod.py").write_text(
        "from inspo.envs import make_env\n\n\ndef load_environment(**settings):\n"
        "    return make_env('calculator', {'test_size': 2, **settings})\n")
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    config = yaml.safe_load((copy / "config.yaml").read_text())
    config["env"] = {"name": "inspo_travel_env_mod:load_environment"}
    (copy / "config.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.syspath_prepend(str(home))
    assert main(["export", str(copy), "--out", str(tmp_path / "agent")]) == 0
    settings = json.loads((tmp_path / "agent" / "agent.json").read_text())
    assert settings["env"]["source"] == "environment/inspo_travel_env_mod.py:load_environment"
    assert (tmp_path / "agent" / "environment" / "inspo_travel_env_mod.py").is_file()
    assert "travels in this folder" in (tmp_path / "agent" / "README.md").read_text()
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    sys.path.remove(str(home))
    sys.modules.pop("inspo_travel_env_mod", None)
    monkeypatch.chdir(tmp_path)
    with caplog.at_level("WARNING", logger="inspo.trained"):
        agent = inspo.load_agent(tmp_path / "agent", max_turns=1, max_response_tokens=4, prefill="<calc> 2 + 3 </calc>")
    assert agent.env.name == "calculator" and "playing the copy exported with the agent" in caplog.text
    assert agent.ask("What is 2 plus 3?").calls == [("calc", "2 + 3")]
