import pytest

from inspo.config.train import dump, parse_override, preset, read_config_file, resolve
from inspo.core.config import ConfigError
from inspo.training.dry_run import plan_run


def test_paper_preset_is_app_b():
    c = preset("paper")
    assert (c.rl.group_size, c.rl.learning_rate, c.rl.questions_per_step, c.rl.mini_batches) == (5, 5e-7, 512, 2)
    assert (c.rl.max_response_tokens, c.rl.max_turns, c.rl.temperature, c.rl.top_p) == (500, 4, 1.0, 1.0)
    assert (c.rl.beta, c.rl.clip_epsilon, c.rl.lr_scheduler, c.rl.warmup_ratio, c.rl.steps) == (0.001, 0.2, "cosine", 0.1, 300)
    co = c.coevolution
    assert (co.population_size, co.n_parent, co.tau_s, co.prune_every, co.evolve_every, co.evolve_until) == (7, 1, 0.2, 5, 15, 150)
    assert (co.weight_window, co.n_failures, co.validation_size, c.rl.max_prompt_tokens) == (5, 4, 200, 4096)


def test_paper_plan_matches_app_c_verification_budget():
    plan = plan_run(preset("paper"))
    # init + evolutions at 15, 30, ..., 135 (t < T_e = 150): 10 refills of 6 slots. A round verifies
    # 6 candidates on |D_B| = 200 and admits the top 3 (verification selects), so a refill takes 2
    # rounds at best: twice App. C's 6 x 200 x 10, which counts one round per refill.
    assert plan.optimizer_calls_min == 20 and plan.optimizer_calls_max == 50
    assert plan.verification_rollouts_min == 2 * 6 * 200 * 10
    assert plan.training_rollouts == 300 * 512 * 5
    assert [p.step for p in plan.schedule if p.evolve] == list(range(15, 150, 15))
    # admitting every verified candidate (top-6 of 6) is App. C's arithmetic exactly
    app_c = plan_run(resolve("paper", overrides=["coevolution.admit_per_round=6"]))
    assert (app_c.optimizer_calls_min, app_c.verification_rollouts_min) == (10, 6 * 200 * 10)
    parent = plan_run(resolve("paper", overrides=["coevolution.admission=beat-parent", "coevolution.admit_per_round=6"]))
    assert parent.verification_rollouts_min == 7 * 200 * 10  # the parent is scored too
    assert plan_run(resolve("paper", overrides=["coevolution.verify=false"])).verification_rollouts_max == 0


def test_file_then_overrides(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rl:\n  steps: 3\ncoevolution:\n  tau_s: 0.5\n")
    c = resolve("cpu-tiny", f, ["rl.steps=5", "mode=static", "model.lora=true"])
    assert (c.rl.steps, c.coevolution.tau_s, c.mode, c.model.lora) == (5, 0.5, "static", True)
    t = tmp_path / "c.toml"
    t.write_text('[data]\ntrain = "world:3"\n')
    assert resolve("paper", t).data.train == "world:3"
    again = tmp_path / "again.yaml"
    again.write_text(dump(c))
    assert resolve("paper", again) == c


@pytest.mark.parametrize(
    "override, message",
    [
        ("rl.stepz=3", "unknown key.*rl.stepz.*accepts"),
        ("data.corpus=world", r"unknown key\(s\) data\.corpus; .*: write env\.corpus$"),  # no silent move into env
        ("rl.topk=5", r"unknown key\(s\) rl\.topk; .*: write env\.topk$"),
        ("rl.group_size=1", "group_size must be an integer >= 2"),
        ("coevolution.tau_s=0", "tau_s must be > 0"),
        ("mode=magic", "mode must be one of"),
        ("env.retriever=http", "retriever_url is empty"),
        ("rl=3", "rl must be a table"),
        ("optimizer.kind=gpt", "optimizer kind 'gpt'"),
        ("model.engine=sglang", "model.engine must be hf or vllm"),
        ("model.vllm_kv_cache_gib=-1", "vllm_kv_cache_gib must be >= 0"),
        ("nonsense", "must look like section.key=value"),
    ],
)
def test_bad_values_say_what_is_wrong(override, message):
    with pytest.raises((ConfigError, ValueError), match=message):
        resolve("cpu-tiny", None, [override])


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_config_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="top level must be a table"):
        read_config_file(bad)
    with pytest.raises(ConfigError, match="unknown preset"):
        resolve("huge")
    assert parse_override("rl.report_to=[tensorboard]") == {"rl": {"report_to": ["tensorboard"]}}


def test_rl_seed_is_the_run_seed_of_every_coevolution_stream():
    # issue 12.5: rl.seed used to leave the co-evolution on coevolution.seed = 0
    assert resolve("cpu-tiny", overrides=["rl.seed=7"]).coevolution.seed == 7
    assert resolve("cpu-tiny", overrides=["rl.seed=7", "coevolution.seed=3"]).coevolution.seed == 3
    assert resolve("paper").coevolution.seed == 0
    with pytest.raises(ConfigError, match="seed must be an integer"):
        resolve("cpu-tiny", overrides=["coevolution.seed=abc"])


@pytest.mark.parametrize("mode", ["pre-policy", "post-policy"])
def test_offline_stage_plans_the_online_runs_evolution_rounds(mode):
    online = plan_run(preset("paper"))
    plan = plan_run(resolve("paper", overrides=[f"mode={mode}"]))
    # the same 9 rounds + P_0 as the online run (2 verify rounds each), not a stage too short to evolve
    assert (plan.optimizer_calls_min, plan.verification_rollouts_min) == (20, 2 * 6 * 200 * 10)
    assert (plan.optimizer_calls_min, plan.optimizer_calls_max) == (online.optimizer_calls_min, online.optimizer_calls_max)
    assert plan.schedule == []  # the GRPO stage is static
    assert [p.step for p in plan.offline_schedule if p.evolve] == list(range(3, 28, 3))  # K_e 15 -> 3 over 30 steps
    assert [p.step for p in plan.offline_schedule if p.prune][:3] == [1, 2, 3]  # K_p 5 -> 1: halved thrice per refill
    assert plan.offline_rollouts == 30 * 512 * 5 and f"{mode} stage, frozen policy" in "\n".join(plan.lines())


def test_offline_schedule_is_configurable_and_a_stage_without_evolution_is_refused():
    unchanged = plan_run(resolve("paper", overrides=["mode=pre-policy", "offline_schedule=unchanged",
                                                     "offline_steps=150"]))
    assert [p.step for p in unchanged.offline_schedule if p.evolve] == list(range(15, 150, 15))
    for overrides, message in (
        (["offline_schedule=unchanged", "offline_steps=10"], "no evolution round in offline_steps=10"),
        (["offline_steps=9"], "offline_steps >= 10"),
        (["offline_schedule=later"], "offline_schedule must be"),
    ):
        with pytest.raises(ConfigError, match=message):
            resolve("paper", overrides=["mode=pre-policy", *overrides])
    resolve("paper", overrides=["offline_steps=1"])  # the online modes have no offline stage


def test_exponent_without_a_dot_is_a_number():
    # YAML 1.1 reads 3e-7 as a string; the override used to fail with "'>' not supported"
    assert resolve("paper", overrides=["rl.learning_rate=3e-7"]).rl.learning_rate == 3e-7
    assert parse_override("model.name_or_path=1e5x") == {"model": {"name_or_path": "1e5x"}}


def test_verification_batches_are_bounded():
    # issue 12.9: at App. B settings one verification generate call held 512 x 5 = 2,560 rows
    assert preset("paper").rl.eval_batch_size(1) == 256 and preset("paper").rl.eval_batch_size(8) == 256
    assert resolve("paper", overrides=["rl.max_eval_batch=64"]).rl.eval_batch_size(1) == 64
    assert preset("cpu-tiny").rl.eval_batch_size(1) == 8
    with pytest.raises(ConfigError, match="rl.eval_every must be"):
        resolve("cpu-tiny", overrides=["rl.eval_every=-1"])


def test_a_lora_preset_switched_to_full_fine_tuning_at_its_lora_rate_warns():
    import warnings

    with pytest.warns(UserWarning, match=r"model.lora=false trains every weight at rl.learning_rate 2e-05, the preset's"):
        full = resolve("cpu-tiny", overrides=["model.lora=false"])
    assert not full.model.lora and full.rl.learning_rate == 2e-5  # warned, not changed behind the user's back
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chosen = resolve("cpu-tiny", overrides=["rl.learning_rate=1e-6", "model.lora=false"])  # the user's rate, any order
        lora = resolve("cpu-tiny")
    assert chosen.rl.learning_rate == 1e-6 and lora.model.lora and lora.rl.learning_rate == 2e-5
