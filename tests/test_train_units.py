"""inspo.training without a training run: the config -> TRL mapping, the rollout batch TRL gets,
run-directory bookkeeping (resume truncation, checkpoint discovery), step helpers, and the
pre-flight errors that must come before any training time is spent."""

from __future__ import annotations

import importlib.util
import json
import time
import warnings
from types import SimpleNamespace

import pytest

from inspo import artifacts
from inspo.config.train import resolve
from inspo.core.accounting import CostLedger
from inspo.core.coevolution import StepReport
from inspo.core.config import ConfigError
from inspo.models.sources import ModelNotInstalledError
from inspo.processes import free_local_port
from inspo.records import Instruction, Question, Rollout, ToolCall
from inspo.training.grpo_trainer import rollout_batch
from inspo.training.metrics import step_line, step_metrics
from inspo.training.preflight import SetupError, agent_config
from inspo.training.run import grpo_settings, run_training
from inspo.training.step import choose_groups
from inspo.training.summary import start_end

# ----------------------------------------------------------------------- config -> GRPOConfig


def test_grpo_settings_map_one_inspo_step_to_one_generation_batch():
    cfg = resolve("paper")  # 512 questions x G 5, 2 mini-batches, micro 64
    s = grpo_settings(cfg, world_size=8, cuda=True)
    assert s["generation_batch_size"] == 2560 and s["num_generations"] == 5
    # 2560 rows / (8 processes x 2 updates) = 160 per process per update = 40 (<= micro 64) x 4
    assert s["per_device_train_batch_size"] == 40 and s["gradient_accumulation_steps"] == 4
    assert s["per_device_train_batch_size"] * 8 * s["gradient_accumulation_steps"] * 2 == 2560
    assert s["max_steps"] == 600 and s["save_steps"] == 100  # counted in optimizer updates
    assert s["beta"] == 0.001 and s["epsilon"] == 0.2 and s["loss_type"] == "grpo"
    assert s["warmup_steps"] == 0.1 and s["lr_scheduler_type"] == "cosine" and not s["use_cpu"]
    assert s["remove_unused_columns"] is False and s["model_init_kwargs"] == {"dtype": "float32"}  # paper: float32 master weights


def test_grpo_settings_cpu_single_process_and_indivisible_batches():
    cfg = resolve("cpu-tiny", overrides=["rl.questions_per_step=3", "rl.group_size=2", "rl.micro_batch_size=4"])
    s = grpo_settings(cfg, world_size=1, cuda=False)
    assert s["use_cpu"] and s["per_device_train_batch_size"] == 3 and s["gradient_accumulation_steps"] == 2
    assert s["report_to"] == "none"
    s2 = grpo_settings(cfg, world_size=2, cuda=False)  # 6 rows over 2 processes: 3 each, a split group
    assert s2["per_device_train_batch_size"] == 3 and s2["gradient_accumulation_steps"] == 1
    with pytest.raises(SetupError, match="cannot be split"):
        grpo_settings(cfg, world_size=4, cuda=False)
    no_saves = resolve("cpu-tiny", overrides=["rl.save_steps=0"])
    assert grpo_settings(no_saves, 1, cuda=False)["save_strategy"] == "no"


def test_max_completion_length_counts_the_final_turn():
    # paper: 4 search turns (500 tokens + a 500-token observation each), then a final 500-token turn
    assert grpo_settings(resolve("paper"), world_size=8, cuda=True)["max_completion_length"] == 4500
    tiny = resolve("cpu-tiny")  # 1 search turn: 32 + 100, then the final turn: 32
    assert grpo_settings(tiny, world_size=1, cuda=False)["max_completion_length"] == 164


def test_trl_never_masks_completions_that_end_without_eos(tmp_path):
    # an answered episode ends at </answer> (no EOS): TRL's mask_truncated_completions would
    # drop it from the loss, so inspo keeps it off explicitly, whatever TRL's default becomes
    for cfg in (resolve("paper"), resolve("cpu-tiny")):
        assert grpo_settings(cfg, world_size=1, cuda=False)["mask_truncated_completions"] is False
    trl = pytest.importorskip("trl")
    cfg = resolve("cpu-tiny", overrides=[f"output_dir={tmp_path}"])
    with warnings.catch_warnings():  # transformers 5 renamed gradient_checkpointing
        warnings.simplefilter("ignore", FutureWarning)
        args = trl.GRPOConfig(**grpo_settings(cfg, world_size=1, cuda=False, progress=False))
    assert args.mask_truncated_completions is False


def test_agent_config_carries_the_rl_sampling_and_prefill():
    cfg = resolve("cpu-tiny", overrides=["rl.prefill=<search>", "rl.temperature=0.5", "env.reward=f1"])
    agent = agent_config(cfg.rl)
    assert (agent.prefill, agent.temperature, cfg.env.options["reward"]) == ("<search>", 0.5, "f1")
    assert not hasattr(agent, "reward")  # the reward is the environment's
    assert agent.max_turns == cfg.rl.max_turns and agent.max_obs_tokens == cfg.rl.max_obs_tokens
    # the last-turn nudge is off by default (Search-R1 has none) and on in cpu-tiny (as measured)
    assert agent.last_turn_nudge is True and (cfg.rl.max_turns, cfg.rl.max_response_tokens) == (1, 32)
    assert agent_config(resolve("paper").rl).last_turn_nudge is False
    assert agent_config(resolve("cpu-tiny", overrides=["rl.last_turn_nudge=false"]).rl).last_turn_nudge is False


# ----------------------------------------------------------------------------- rollout batch


def _rollout(qid, iid, ids, mask, reward=1.0, searches=("q",)):
    return Rollout(
        question=Question(qid, "?", ("a",)), instruction_id=iid, response="r", reward=reward,
        tool_calls=[ToolCall("search", s) for s in searches], turns=2, finish_reason="answer",
        prompt_ids=[5, 6, 7], completion_ids=ids, env_mask=mask,
    )


def test_rollout_batch_rows_keys_and_never_empty_completions():
    out = rollout_batch([_rollout("q1", "i1", [1, 2, 3], [1, 0, 1]), _rollout("q1", "i1", [], [], 0.0, ())], 99)
    assert out["prompt_ids"] == [[5, 6, 7], [5, 6, 7]]
    assert out["completion_ids"] == [[1, 2, 3], [99]] and out["env_mask"] == [[1, 0, 1], [0]]
    assert out["logprobs"] is None
    assert out["reward"] == [1.0, 0.0] and out["instruction_id"] == ["i1", "i1"]
    assert out["question_id"] == ["q1", "q1"] and out["n_tool_calls"] == [1, 0]
    assert out["turns"] == [2, 2] and out["finish_reason"] == ["answer", "answer"]


def test_rollout_batch_refuses_text_only_rollouts_and_bad_masks():
    text_only = _rollout("q", "i", [], [])
    text_only.prompt_ids = []
    with pytest.raises(ValueError, match="keeps token ids"):
        rollout_batch([text_only], 0)
    with pytest.raises(ValueError, match="mask entries"):
        rollout_batch([_rollout("q", "i", [1, 2], [1])], 0)


def test_choose_groups_calls_choose_once_per_group_in_order():
    calls = []

    class Core:
        def choose_split(self, step, qid):
            calls.append((step, qid))
            return [Instruction(f"ins-{qid}", "text")]

    qs = [Question(q, "?", ("a",)) for q in ("a", "a", "b", "b", "c")]
    rows, groups = choose_groups(Core(), 3, qs)
    assert calls == [(3, "a"), (3, "b"), (3, "c")]
    assert [r.id for r in rows] == ["ins-a", "ins-a", "ins-b", "ins-b", "ins-c"]
    assert groups == [("a", "ins-a"), ("b", "ins-b"), ("c", "ins-c")]


def test_a_split_group_alternates_its_rows_between_champion_and_challenger():
    class Core:
        def choose_split(self, step, qid):
            return [Instruction("champ", "c"), Instruction("chall", "d")] if qid == "a" else [Instruction("one", "o")]

    qs = [Question(q, "?", ("a",)) for q in ("a", "a", "a", "a", "b", "b")]
    rows, groups = choose_groups(Core(), 1, qs)
    assert [r.id for r in rows] == ["champ", "chall", "champ", "chall", "one", "one"]
    assert groups == [("a", "champ"), ("a", "chall"), ("b", "one")]


def test_a_static_core_has_an_optimizer_that_refuses_calls_and_names_none(caplog):
    from inspo.core.config import CoEvolutionConfig
    from inspo.core.events import EventLog
    from inspo.training.build_core import NoOptimizer, build_coevolution

    with caplog.at_level("INFO"):
        coevo = build_coevolution(CoEvolutionConfig(), "seed text", None, EventLog(), static=True)
    assert isinstance(coevo.proposer.llm, NoOptimizer) and coevo.proposer.llm.usage.calls == 0
    assert "rule-based" not in caplog.text  # a static run's log names no optimizer it lacks
    with pytest.raises(RuntimeError, match="no optimizer"):
        coevo.proposer.llm.generate([{"role": "user", "content": "x"}])
    with pytest.raises(ValueError, match="needs an optimizer"):
        build_coevolution(CoEvolutionConfig(), "seed text", None, EventLog(), static=False)


def test_step_metrics_report_the_share_of_each_finish_reason():
    reasons = ["answer", "answer", "answer", "eos", "length", "turn_limit", "turn_limit", "error"]
    rollouts = [
        Rollout(question=Question(f"q{i}", "?", ("a",)), instruction_id="i", response="", finish_reason=reason)
        for i, reason in enumerate(reasons)
    ]
    coevo = SimpleNamespace(ledger=CostLedger(), population=["i"])  # what step_metrics reads
    m = step_metrics(2, rollouts, StepReport(step=2, weights={"i": 0.5}), coevo, CostLedger())
    finish = {k: v for k, v in m.items() if k.startswith("rollout/finish/")}
    assert finish == {
        "rollout/finish/answer": 3 / 8, "rollout/finish/eos": 1 / 8, "rollout/finish/length": 1 / 8,
        "rollout/finish/turn_limit": 2 / 8, "rollout/finish/error": 1 / 8,
    }
    assert m["rollout/answered"] == m["rollout/finish/answer"] and m["rollout/count"] == 8.0


def test_step_metrics_count_observations_cut_to_their_token_cap():
    rollouts = [Rollout(question=Question(f"q{i}", "?", ("a",)), instruction_id="i", response="",
                        metrics={"n_obs_truncated": float(cut)}) for i, cut in enumerate([2, 0, 1, 0])]
    coevo = SimpleNamespace(ledger=CostLedger(), population=["i"])
    m = step_metrics(2, rollouts, StepReport(step=2, weights={"i": 0.5}), coevo, CostLedger())
    assert m["rollout/obs_truncated"] == 0.75  # a flooding tool's cut is no longer silent


def test_start_end_means_and_step_line():
    history = [{"step": s, "reward/mean": float(s)} for s in range(1, 9)]
    assert start_end(history, "reward/mean") == (1.5, 7.5, 2)
    assert start_end([], "reward/mean") == (0.0, 0.0, 0)
    line = step_line({"step": 3, "reward/mean": 0.25, "rollout/tool_calls": 1.5, "inspo/population_size": 4,
                      "inspo/best_weight": 0.5, "inspo/pruned": 2, "inspo/admitted": 0, "inspo/rejected": 0}, 8)
    assert line.startswith("step 3/8 | reward 0.250 | tool calls 1.50") and "pruned 2" in line


def test_metrics_log_records_resident_memory_step_by_step(tmp_path):
    from inspo.training.metrics import MetricsLog

    line = {"step": 1, "reward/mean": 0.5, "inspo/population_size": 1, "inspo/best_weight": 0.5}
    log = MetricsLog(tmp_path / "metrics.jsonl", 2, progress=False)
    log.write(line)
    held = b"\x01" * (256 * 2**20)  # 256 MiB, written, so resident
    log.write({**line, "step": 2})
    first, second = artifacts.read_jsonl(tmp_path / "metrics.jsonl")
    assert first["reward/mean"] == 0.5 and log.history[1] == second
    assert 0 < first["system/rss_gib"] <= first["system/peak_rss_gib"] + 1e-3
    assert second["system/rss_gib"] - first["system/rss_gib"] > 0.2  # the 256 MiB show
    assert second["system/peak_rss_gib"] >= second["system/rss_gib"] - 1e-3
    assert "system/released_gib" not in second  # the demo's log releases nothing
    assert f"memory {second['system/rss_gib']:.1f} GiB" in step_line(second, 2)
    del held

    released = MetricsLog(tmp_path / "released.jsonl", 1, progress=False, release_memory=True)
    released.write(line)
    assert released.history[0]["system/released_gib"] >= 0.0
    assert "released" in step_line(released.history[0], 1)


def test_release_memory_hands_freed_heap_pages_back():
    """glibc keeps the free chunks between live ones; ``malloc_trim`` returns their pages."""
    import ctypes

    from inspo.training.memory import _malloc_trim, release_memory, resident_memory_gb

    if _malloc_trim() is None or resident_memory_gb() is None:
        pytest.skip("needs Linux with glibc (malloc_trim, /proc)")
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size, count = 64 * 1024, 6000  # 64 KiB chunks (below the mmap threshold): ~375 MiB of heap
    chunks = [libc.malloc(size) for _ in range(count)]
    for p in chunks:
        ctypes.memset(p, 1, size)  # touched, so resident
    kept = set(chunks[::16])  # one live chunk in 16 pins the heap: glibc cannot shrink its top
    touched = resident_memory_gb()
    for p in chunks:
        if p not in kept:
            libc.free(p)
    before = resident_memory_gb()
    if touched - before > 0.05:  # e.g. MALLOC_MMAP_THRESHOLD_ set lower: free gave it back at once
        pytest.skip("this allocator returned the freed chunks by itself: nothing left to release")
    release_memory()
    after = resident_memory_gb()
    for p in kept:
        libc.free(p)
    freed_gib = size * (count - len(kept)) / 2**30
    assert before - after > 0.5 * freed_gib, (before, after, freed_gib)


_KEEP_FREED = """
import ctypes, json
from inspo.training.memory import freed_blocks_kept, release_memory, resident_memory_gb
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 64 * 2**20  # above glibc's largest mmap threshold: mmap'd and unmapped by default

def freed_gib():
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    before = resident_memory_gb()
    libc.free(p)
    return before - resident_memory_gb()

default = freed_gib()
with freed_blocks_kept() as took:
    kept = freed_gib()
    before = resident_memory_gb()
    release_memory()
    released = before - resident_memory_gb()
    kept_again = freed_gib()
    before = resident_memory_gb()
after = before - resident_memory_gb()  # the block's end releases what it kept
print(json.dumps({"default": default, "took": took, "kept": kept, "released": released,
                  "kept_again": kept_again, "after": after, "restored": freed_gib()}))
"""


def test_freed_blocks_kept_keeps_a_large_block_mapped_until_a_release():
    """In a child process (the setting is the process's): a freed 64 MiB block goes back to the OS
    at once by default; inside ``freed_blocks_kept`` it stays mapped until ``release_memory`` or
    the block's end; after the block, the default is back."""
    import json
    import subprocess
    import sys

    from inspo.training.memory import _malloc_trim, _mallopt, resident_memory_gb

    if _mallopt() is None or _malloc_trim() is None or resident_memory_gb() is None:
        pytest.skip("needs Linux with glibc (mallopt, malloc_trim, /proc)")
    out = subprocess.run([sys.executable, "-c", _KEEP_FREED], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    block = 64 / 1024
    assert got["took"] is True
    assert got["default"] > 0.8 * block, got
    assert got["kept"] < 0.2 * block, got
    assert got["released"] > 0.8 * block, got
    assert got["kept_again"] < 0.2 * block, got
    assert got["after"] > 0.8 * block, got  # kept again, then released as the block ended
    assert got["restored"] > 0.8 * block, got


# ------------------------------------------------------------------------ run-dir bookkeeping


def test_truncate_after_drops_lines_of_the_killed_run(tmp_path):
    for name in ("events.jsonl", "metrics.jsonl", "choices.rank1.jsonl"):
        for step in (0, 1, 2, 3):
            artifacts.append_jsonl(tmp_path / name, {"step": step})
    with (tmp_path / "events.jsonl").open("a") as fh:
        fh.write('{"step": 3, "kind": "tor')  # a torn last line
    dropped = artifacts.truncate_after(tmp_path, 1)
    assert dropped == 6
    for name in ("events.jsonl", "metrics.jsonl", "choices.rank1.jsonl"):
        assert [r["step"] for r in artifacts.read_jsonl(tmp_path / name)] == [0, 1]


def test_find_checkpoint_skips_incomplete_ones(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        artifacts.find_checkpoint(tmp_path, True)
    for n, complete in ((2, True), (4, True), (6, False)):
        d = tmp_path / f"checkpoint-{n}"
        d.mkdir()
        (d / "trainer_state.json").write_text("{}")
        if complete:
            (d / artifacts.STATE_FILE).write_text("{}")
    assert artifacts.find_checkpoint(tmp_path, True).name == "checkpoint-4"
    assert artifacts.find_checkpoint(tmp_path, str(tmp_path / "checkpoint-2")).name == "checkpoint-2"
    with pytest.raises(FileNotFoundError, match="inspo_state.json is missing"):
        artifacts.find_checkpoint(tmp_path, str(tmp_path / "checkpoint-6"))


# ------------------------------------------------------------------------- modes as stages


def test_each_mode_is_a_list_of_named_stages():
    from inspo.training.run import mode_stages

    names = {mode: [s.name for s in mode_stages(mode)] for mode in ("inspo", "static", "pre-policy", "post-policy")}
    assert names == {"inspo": ["grpo"], "static": ["grpo"], "pre-policy": ["pre-policy", "grpo"],
                     "post-policy": ["grpo", "post-policy"]}
    assert [getattr(s, "static", None) for s in mode_stages("inspo") + mode_stages("pre-policy")] == [False, None, True]


class Recording:
    """A stage that records what it was asked and hands on ``out``."""

    def __init__(self, name, log, **out):
        self.name, self.log, self.out = name, log, out

    def check(self, run, *, first, last):
        self.log.append(("check", self.name, first, last))

    def run(self, run, handoff):
        from dataclasses import replace

        self.log.append(("run", self.name, handoff.instruction))
        return replace(handoff, **self.out)


def test_the_driver_checks_every_stage_first_then_hands_each_stage_on(tmp_path):
    from inspo.training.run import Run, run_stages
    from inspo.training.summary import RunSummary

    summary = RunSummary(run_dir=str(tmp_path), mode="pre-policy", steps=1, reward_start=0.0, reward_end=0.0,
                         tool_calls_start=None, tool_calls_end=None, window=1, best_instruction_id="ins-0001",
                         best_instruction="Evolved.", best_weight=None, population=["ins-0001"], optimizer="none",
                         ledger={}, wall_seconds=0.0)
    log = []
    stages = [Recording("first", log, instruction="Evolved.", stages={"first": {"steps": 2}}),
              Recording("second", log, summary=summary)]
    run = Run(resolve("cpu-tiny", overrides=[f"output_dir={tmp_path}"]), progress=False)
    returned = run_stages(run, stages)
    assert log == [("check", "first", True, False), ("check", "second", False, True), ("run", "first", None),
                   ("run", "second", "Evolved.")]
    assert returned.stages == {"first": {"steps": 2}} and RunSummary.read(tmp_path / "summary.json") == returned
    with pytest.raises(RuntimeError, match="no summary"):
        run_stages(run, stages[:1])


def test_a_finished_grpo_stage_is_picked_up_on_resume_only_before_another_stage(tmp_path, monkeypatch):
    import inspo.training.run as run_module
    from inspo.training.run import GrpoStage, Run

    preflights = []
    monkeypatch.setattr(run_module, "preflight", lambda config, **kwargs: preflights.append(kwargs) or "start")
    config = resolve("cpu-tiny", overrides=[f"output_dir={tmp_path}", "mode=post-policy"])
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    artifacts.write_json(tmp_path / "training_summary.json", {
        "run_dir": str(tmp_path), "mode": "post-policy", "steps": 1, "reward_start": 0.0, "reward_end": 0.5,
        "tool_calls_start": 1.0, "tool_calls_end": 1.0, "window": 1, "best_instruction_id": "ins-0001",
        "best_instruction": "Search.", "best_weight": 0.5, "population": ["ins-0001"], "optimizer": "none",
        "ledger": {}, "wall_seconds": 1.0})
    picked = GrpoStage(static=True)
    picked.check(Run(config, resume=True), first=True, last=False)
    assert picked.finished.reward_end == 0.5 and picked.start is None and preflights == []
    for resume, last in ((False, False), (True, True)):  # a new run; the last stage continues its checkpoint
        stage = GrpoStage(static=True)
        stage.check(Run(config, resume=resume), first=True, last=last)
        assert stage.finished is None and stage.start == "start"
    assert preflights == [{"resume": False, "progress": True, "static": True, "env": None},
                          {"resume": True, "progress": True, "static": True, "env": None}]


def test_a_resumed_grpo_stage_after_another_stage_starts_fresh_until_it_has_a_checkpoint(tmp_path, monkeypatch):
    """pre-policy killed in its offline stage, or before GRPO's first checkpoint: the resume
    continues the offline stage, and the GRPO stage has nothing of its own to resume (issue 33)."""
    import inspo.training.run as run_module
    from inspo.training.run import GrpoStage, Run

    preflights = []
    monkeypatch.setattr(run_module, "preflight", lambda config, **kwargs: preflights.append(kwargs["resume"]))
    config = resolve("cpu-tiny", overrides=[f"output_dir={tmp_path}", "mode=pre-policy"])
    tmp_path.mkdir(exist_ok=True)
    for resume, first in ((True, False), ("last", False), (True, True)):
        GrpoStage(static=True).check(Run(config, resume=resume), first=first, last=True)
    # after a stage and without a checkpoint it starts fresh; as the first stage, a resume with
    # nothing to resume from stays refused by pre-flight (it is told resume=True)
    assert preflights == [False, False, True]
    (tmp_path / "checkpoint-2").mkdir()  # once it has one, even cut while saving, pre-flight decides
    for resume in (True, str(tmp_path / "checkpoint-2")):
        GrpoStage(static=True).check(Run(config, resume=resume), first=False, last=True)
    assert preflights[3:] == [True, str(tmp_path / "checkpoint-2")]


# --------------------------------------------------------------- pre-flight errors, no training


def _fast_fail(tmp_path, *overrides):
    cfg = resolve("cpu-tiny", overrides=["model.name_or_path=tiny-qwen2", f"output_dir={tmp_path / 'run'}", *overrides])
    t0 = time.time()
    with pytest.raises(SetupError) as info:
        run_training(cfg, progress=False)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # nothing was trained
    return str(info.value), time.time() - t0


def test_missing_data_file_fails_before_training(tmp_path):
    message, _ = _fast_fail(tmp_path, f"data.train={tmp_path / 'nope.jsonl'}")
    assert "data.train=" in message and "nope.jsonl" in message


def test_too_few_questions_fails_before_training(tmp_path):
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": "Who?", "golden_answers": ["x"]}) + "\n"
                            for i in range(2)))

    message, _ = _fast_fail(tmp_path, f"data.train={path}", "rl.questions_per_step=3")
    assert "fewer than rl.questions_per_step" in message


@pytest.mark.integration
def test_unreachable_retrieval_server_fails_before_training(tmp_path):
    url = f"http://127.0.0.1:{free_local_port()}"
    message, _ = _fast_fail(tmp_path, "env.retriever=http", f"env.retriever_url={url}")
    assert "cannot reach retrieval server" in message and url in message


@pytest.mark.integration
def test_unreachable_optimizer_endpoint_fails_before_training(tmp_path):
    url = f"http://127.0.0.1:{free_local_port()}/v1"
    message, _ = _fast_fail(tmp_path, f"optimizer.base_url={url}", "optimizer.model=m", "optimizer.max_retries=0",
                            "optimizer.timeout_s=5")
    assert "optimizer LLM" in message
    if importlib.util.find_spec("openai") is None:  # seen on the GPU machine, which lacks the llm extra
        assert "pip install 'inspo[llm]'" in message
    else:
        assert "cannot reach" in message


def test_prompt_longer_than_the_limit_fails_before_training(tmp_path):
    message, _ = _fast_fail(tmp_path, "rl.max_prompt_tokens=20")
    assert "rl.max_prompt_tokens=20" in message and "longer than" in message


def test_missing_model_and_vllm_fail_before_training(tmp_path):
    message, _ = _fast_fail(tmp_path, f"model.name_or_path={tmp_path / 'no-model'}")
    assert "model.name_or_path=" in message
    if importlib.util.find_spec("vllm") is None:  # full fine-tuning is synced too: only the module is missing
        message, _ = _fast_fail(tmp_path, "rl.use_vllm=true", "model.lora=false")
        assert "rl.use_vllm=true" in message and "no module named 'vllm'" in message and "model.lora" not in message
    message, _ = _fast_fail(tmp_path, "rl.use_vllm=true", "model.lora=false", "rl.vllm_mode=server")
    assert "rl.vllm_mode=server" in message and "NCCL" in message and "rl.vllm_server_url" in message
    message, _ = _fast_fail(tmp_path, "model.engine=vllm")  # the frozen policy's engine, not training's
    assert "model.engine=vllm" in message and "inspo evolve" in message


def test_existing_checkpoints_need_resume_and_resume_needs_a_checkpoint(tmp_path):
    (tmp_path / "run" / "checkpoint-2").mkdir(parents=True)  # incomplete: no inspo_state.json
    message, _ = _fast_fail(tmp_path)
    assert "already holds checkpoints" in message and "resume" in message
    cfg = resolve("cpu-tiny", overrides=["model.name_or_path=tiny-qwen2", f"output_dir={tmp_path / 'run'}"])
    with pytest.raises(SetupError, match="nothing to resume"):
        run_training(cfg, resume=True, progress=False)


def test_bad_values_are_config_errors():
    with pytest.raises(ConfigError, match="env.format_weight"):
        resolve("cpu-tiny", overrides=["env.format_weight=-1"])


# ------------------------------------------------------------ CPU log-probs equal TRL's kernel


def test_cpu_logprobs_match_trls_fused_lm_head():
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from contextlib import nullcontext
    from types import SimpleNamespace

    from trl.trainer.utils import add_fused_lm_head

    from inspo.models import load_model
    from inspo.training.cpu_logps import cpu_logps_and_entropies

    try:
        loaded = load_model("tiny-qwen2", dtype="float32")
    except ModelNotInstalledError as exc:  # not installed; a corrupt or unknown model fails
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    model = loaded.model
    add_fused_lm_head(model, temperature=0.7, outputs=("log_probs", "entropy"))
    torch.manual_seed(0)
    ids = torch.randint(10, 5000, (3, 12))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # a left-padded prompt
    keep = 5
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-keep] = -100
    with torch.no_grad():
        fused = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext), temperature=0.7)
        logps, entropies, aux = cpu_logps_and_entropies(trainer, model, ids, mask, keep, batch_size=2,
                                                        compute_entropy=True)
    assert aux is None and logps.shape == (3, keep) and entropies.shape == (3, keep)
    assert torch.allclose(logps, fused.log_probs[:, -keep:], atol=1e-5)
    assert torch.allclose(entropies, fused.entropy[:, -keep:], atol=1e-4)


def test_cpu_logps_cut_each_chunk_after_its_last_attended_token_and_agree_with_the_full_forward():
    # TRL pads a step's completions to its longest; a chunk runs only as far as its own longest row
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from contextlib import nullcontext
    from types import SimpleNamespace

    from inspo.models import load_model
    from inspo.training.cpu_logps import attended_end, cpu_logps_and_entropies

    try:
        model = load_model("tiny-qwen2", dtype="float32").model
    except ModelNotInstalledError as exc:
        pytest.skip(f"tiny-qwen2 cannot be built here: {exc}")
    torch.manual_seed(0)
    ids = torch.randint(10, 5000, (4, 20))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0                 # a left-padded prompt
    mask[0, 12:] = 0                # rows 0-1 (one chunk) end at column 14 at the latest
    mask[1, 14:] = 0
    mask[2, 19:] = 0                # rows 2-3 run to the end
    keep = 10                       # completion: the last 10 columns
    assert attended_end(mask[:2], keep) == 14 and attended_end(mask[2:], keep) == 20
    prompt_only = torch.zeros_like(mask[:2])
    prompt_only[:, :8] = 1
    assert attended_end(prompt_only, keep) == 20 - keep + 1          # one completion column at least
    assert attended_end(torch.zeros_like(mask[:2]), keep) == 20      # nothing attended: nothing cut
    trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext), temperature=0.7)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -keep - 1:-1, :] / 0.7
        full = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, -keep:].unsqueeze(-1)).squeeze(-1)
        logps, entropies, _ = cpu_logps_and_entropies(trainer, model, ids, mask, keep, batch_size=2,
                                                      compute_entropy=True)
    attended = mask[:, -keep:].bool()
    assert logps.shape == entropies.shape == (4, keep)
    assert torch.allclose(logps[attended], full[attended], atol=1e-5)
    assert torch.all(logps[:2, 4:] == 0) and torch.all(entropies[:2, 4:] == 0)   # cut columns: zeros
    assert torch.all(entropies[attended] > 0)


def test_prepare_gives_the_proposer_a_prompt_length_check():
    # issue 12.7: only the seed's prompt was checked against rl.max_prompt_tokens
    from inspo.training.preflight import prepare

    cfg = resolve("cpu-tiny", overrides=["model.name_or_path=tiny-qwen2", "rl.max_prompt_tokens=300"])
    try:
        inputs = prepare(cfg, need_optimizer=False)
    except ModelNotInstalledError as exc:
        pytest.skip(str(exc))
    assert inputs.fits is not None
    assert inputs.fits(inputs.seed_instruction) is None
    reason = inputs.fits(inputs.seed_instruction + " Be careful." * 200)
    assert reason.startswith("prompt too long:") and "rl.max_prompt_tokens=300" in reason


def test_prepare_refuses_a_local_optimizer_model_that_is_not_installed_before_a_pre_policy_run_loads_anything(tmp_path):
    # a pre-policy run built its local optimizer in its offline stage, after loading the policy, and
    # only then said that the 1.5B's packages were missing; the GRPO stage's pre-flight now says it
    from inspo.training.preflight import prepare

    missing = tmp_path / "no-such-model"
    overrides = ["model.name_or_path=tiny-qwen2", "optimizer.kind=local", f"optimizer.local_model_path={missing}"]
    with pytest.raises(SetupError, match=r"optimizer.local_model_path=.*no-such-model.*does not exist|"
                                         r"optimizer.local_model_path=.*no-such-model.*not a registered model"):
        prepare(resolve("cpu-tiny", overrides=[*overrides, "mode=pre-policy"]), need_optimizer=False, need_model=False)
    # static GRPO never builds an optimizer: nothing to check
    assert prepare(resolve("cpu-tiny", overrides=[*overrides, "mode=static"]), need_optimizer=False,
                   need_model=False).optimizer is None
