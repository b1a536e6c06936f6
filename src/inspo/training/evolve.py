"""``run_evolve``: INSPO's instruction side with a frozen policy (no weight updates).

Each step takes the next ``rl.questions_per_step`` training questions (a seeded order,
reshuffled every pass) and runs the INSPO step's two halves (:class:`inspo.training.step.InspoStep`)
with no update between them: each question rolled out ``rl.group_size`` times under the instruction
its group drew, then weights, pruning and verified evolution, with ``evaluate`` using the same
frozen policy; the same metrics as training.

The policy is one of: an engine passed in (the pre-/post-policy modes hand over the base or
the trained model), an OpenAI-compatible endpoint (``policy_url`` + ``policy_model``: vLLM,
llama.cpp, Ollama … through :class:`~inspo.agent.openai_engine.OpenAIEngine`), or by default
``config.model`` loaded locally by ``model.engine``: :class:`~inspo.agent.engines.HFEngine`
(``hf``) or :class:`~inspo.agent.vllm_engine.VLLMEngine` (``vllm``, token ids end to end; an
engine started here is shut down when the run ends).

The run directory gets the same files as a training run minus ``model/`` and checkpoints;
``inspo_state.json`` is rewritten after every step and after every round of the initial
population, so ``resume=True`` continues after the last finished step or round (log lines after
it are dropped). A file named ``STOP`` in the run directory (``stop_file``) stops the run
right after its next save with :class:`~inspo.records.RunStopped` (exit status 3 from the CLI),
so a long run can be cut into pieces without losing a step. The run directory is checked before
anything loads (:func:`check_run_dir`): a resume needs a saved state, and a new run does not write
over another run's. A ``policy_url`` is asked for its models once before any work (a dead endpoint
or a model it does not serve is refused with a one-line SetupError).

Outages: a step whose rollouts failed on errors (an endpoint down) more than
``rl.max_error_rate`` of the time stops the run with
:class:`~inspo.records.TooManyErrors` before the step is credited, as does a verification or
final evaluation over that rate; every step before it is saved, so ``resume=True`` continues
once the endpoint is back. Below the rate, error rollouts are counted (``rollout/errors``,
``inspo/error_rate``) and never scored.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.agent.engines import PolicyEngine
from inspo.config.train import DEV_CHOICES, EnvConfig, TrainConfig, dump
from inspo.core.events import EventLog
from inspo.core.state import save_state
from inspo.records import Question, TooManyErrors, check_error_rate
from inspo.rng import derived_rng
from inspo.training.build_core import build_coevolution, keep_paid_answers, warmup_questions
from inspo.training.evaluators import greedy_evaluate, reseed, verification_evaluate
from inspo.training.final import choose_for_run
from inspo.training.metrics import MetricsLog
from inspo.training.precision import announce, run_precision
from inspo.training.progress import announce_events, say
from inspo.training.resume import check_run_dir, plan_evolve_resume
from inspo.training.setup import SetupError, prepare
from inspo.training.step import InspoStep, RewardFn, light
from inspo.training.summary import RunSummary, summarize

log = logging.getLogger("inspo.training")


def step_questions(
    questions: list[Question], step: int, per_step: int, seed: int
) -> list[Question]:
    """The ``per_step`` questions of step ``step`` (1-based): consecutive slices of a seeded
    permutation, a new permutation each pass (an incomplete tail of a pass is skipped)."""
    per_pass = len(questions) // per_step
    if per_pass == 0:
        raise SetupError(
            f"{len(questions)} training questions are fewer than rl.questions_per_step={per_step}"
        )
    epoch, index = divmod(step - 1, per_pass)
    order = list(questions)
    derived_rng(seed, "evolve-order", epoch).shuffle(order)
    return order[index * per_step : (index + 1) * per_step]


def run_evolve(
    config: TrainConfig,
    *,
    steps: int | None = None,
    policy_url: str | None = None,
    policy_model: str | None = None,
    engine: PolicyEngine | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    reward_fn: RewardFn | None = None,
    env: Any = None,
    stop_file: str | Path | None = None,
) -> RunSummary:
    """Evolve ``config``'s instruction population with a frozen policy (module docstring).

    Args:
        config: the resolved config; ``rl`` gives the batch, group size and agent settings,
            ``coevolution`` the schedule, ``optimizer`` the optimizer LLM.
        steps: how many steps (default ``config.offline_steps``).
        policy_url / policy_model: an OpenAI-compatible completions endpoint and its model
            name (the policy is then text-only; ``config.model`` is not loaded).
        engine: a ready policy engine (takes precedence over the other two).
        out_dir: the run directory (default ``config.output_dir``).
        resume: continue after the last finished step (or round of the initial population)
            recorded in ``out_dir/inspo_state.json`` (refused when there is none: see
            :func:`check_run_dir`).
        overwrite: a new run (``resume=False``) may replace an earlier run's state and logs in
            ``out_dir`` (``inspo train``'s offline stages, whose run decides); without it that is
            refused, as :func:`check_run_dir` says.
        progress: a tqdm bar over steps and over long evaluations, one line per phase and per
            step; off, those lines go to the ``inspo.training`` log at INFO.
        reward_fn: replaces the environment's response-only reward (see
            :data:`inspo.training.step.RewardFn`).
        env: an environment object given in Python instead of the one ``config.env`` names.
        stop_file: when this file is there at a save (after a round of the initial population or a
            step), the run removes it and stops there with :class:`~inspo.records.RunStopped`;
            default ``out_dir/STOP``, which the run also removes when it arrived after its last
            save (the run finished); a file given here is the caller's to clear then.

    Raises:
        SetupError: as :func:`inspo.training.setup.prepare` and :func:`check_run_dir` (before any
            rollout).
    """
    started = time.time()
    if env is not None and not config.env.python:  # recorded by name, as an object given in Python
        config = replace(config, env=EnvConfig.of(env))
    steps = steps if steps is not None else config.offline_steps
    if steps < 1:
        raise SetupError(f"run_evolve: steps must be >= 1, got {steps}")
    run_dir = Path(out_dir if out_dir is not None else config.output_dir)
    rl = config.rl
    if policy_url and not policy_model:
        raise SetupError("run_evolve: policy_url needs policy_model (the served model's name)")
    choose_on_dev = config.final_choice in DEV_CHOICES
    owned = engine is None and not policy_url
    # the frozen policy loads here: its dtype resolved once (given engines and endpoints have
    # theirs)
    if owned:
        config, precision = run_precision(config, training=False)
        announce(precision)
    if owned and config.model.engine == "vllm":
        from inspo.agent.vllm_engine import INSTALL_HINT, vllm_available

        if not vllm_available():
            raise SetupError(f"model.engine=vllm: no module named 'vllm'; {INSTALL_HINT}")
    state_path = run_dir / artifacts.STATE_FILE
    own_stop = stop_file is None
    stop_file = Path(stop_file) if stop_file is not None else run_dir / artifacts.STOP_FILE
    check_run_dir(run_dir, resume=resume, overwrite=overwrite)
    plan, saved_state = None, None
    if resume:  # a refused change stops here, before anything loads
        plan, saved_state = plan_evolve_resume(config, run_dir, steps)
    remote = _remote_policy(policy_url, policy_model) if engine is None and policy_url else None
    inputs = prepare(
        config,
        need_optimizer=True,
        need_model=engine is None and not policy_url,
        need_eval=choose_on_dev,
        env=env,
    )
    engine, policy = _policy(config, engine, remote, inputs.model_dir)
    try:  # an engine started here is shut down however the run ends (a stop, an outage, an error)
        log.info("optimizer LLM: %s; frozen policy: %s", inputs.optimizer_note, policy)

        run_dir.mkdir(parents=True, exist_ok=True)
        if not resume:
            leftovers = [p.name for p in artifacts.jsonl_paths(run_dir) if p.is_file()]
            if leftovers:
                log.info(
                    "starting a new run in %s: removing %s of an earlier run",
                    run_dir,
                    ", ".join(leftovers),
                )
            artifacts.clear_run_files(run_dir)
        (run_dir / artifacts.CONFIG_FILE).write_text(
            plan.config_text(config) if plan else dump(config), encoding="utf-8"
        )
        events = EventLog(run_dir / artifacts.EVENTS_FILE)
        announcer = announce_events(events, progress, max_rounds=config.coevolution.max_rounds)
        coevo = build_coevolution(
            config.coevolution,
            inputs.seed_instruction,
            inputs.optimizer,
            events,
            static=False,
            fits=inputs.fits,
            env=inputs.env,
            questions=inputs.questions,
            held_out=inputs.eval_questions + inputs.test_questions,
        )
        keep_paid_answers(coevo, run_dir)
        batch_size = max(rl.micro_batch_size, rl.trajectories_per_step)

        def evaluate_at(step: int, tag: str = "verify"):
            return verification_evaluate(
                engine,
                inputs.env,
                inputs.agent,
                seed=rl.seed,
                tag=tag,
                step=step,
                batch_size=batch_size,
                reward_fn=reward_fn,
                progress=progress,
                max_error_rate=rl.max_error_rate,
                greedy=config.coevolution.verify_greedy,
            )

        first = 1

        def save() -> None:  # after every step and every round of the initial population
            save_state(coevo, state_path)
            saved = (
                f"after round {coevo.init.rounds} of its initial population"
                if coevo.init is not None
                else f"after step {coevo.last_step}"
                if coevo.last_step
                else "after its initial population"
            )
            artifacts.honour_stop(stop_file, f"{saved} (saved in {state_path})")

        if plan is not None:
            coevo.load_state_dict(
                saved_state, emit=False
            )  # every section's changes go in one event below
            first = coevo.last_step + 1
            dropped = artifacts.truncate_after(run_dir, coevo.last_step)
            if (
                coevo.init is not None
            ):  # saved inside the initial population: the lost round's events go too
                dropped += artifacts.truncate_events(run_dir, coevo.init.events)
            if plan.applied:
                events.emit(plan.event())
            plan.write(run_dir)
            say(plan.lines(), progress)
            if coevo.init is None:
                log.info(
                    "resuming evolution after step %d (dropped %d log line(s))",
                    coevo.last_step,
                    dropped,
                )
            else:
                say(
                    f"initial population: resuming after round {coevo.init.rounds} with "
                    f"{len(coevo.population)} of {coevo.config.population_size} instruction(s) "
                    f"(dropped {dropped} log line(s))",
                    progress,
                )
                announcer.resumed(len(coevo.population), coevo.config.population_size)
                coevo.continue_initialize(evaluate_at(0, "init"), after_round=save)
                save()
        else:
            warm = warmup_questions(
                inputs.questions, config.data.warmup_questions, coevo.config.seed
            )
            if warm:
                say(
                    f"warm-up: rolling the seed out on {len(warm)} training question(s) (they fill "
                    "the replay buffer)",
                    progress,
                )
            coevo.initialize(evaluate_at(0, "init"), warm, after_round=save)
            save()

        from tqdm.auto import tqdm

        bar = tqdm(
            total=steps, initial=first - 1, desc="inspo evolve", unit="step", disable=not progress
        )
        metrics = MetricsLog(
            run_dir / artifacts.METRICS_FILE,
            steps,
            progress=progress,
            read_existing=True,
            release_memory=True,
        )

        step = InspoStep(coevo, inputs.env, inputs.agent, reward_fn)

        def play_step(t: int) -> None:  # the step's two halves, no policy update between them
            batch = step_questions(inputs.questions, t, rl.questions_per_step, rl.seed)
            rows = [q for q in batch for _ in range(rl.group_size)]
            reseed(engine, rl.seed, "rollout", t)
            rollouts = [light(r) for r in step.play(t, rows, engine, isolated=True).rollouts]
            # an outage stops here, before the step is credited: the state saved after step t-1
            # resumes it
            check_error_rate(
                rollouts,
                max_error_rate=rl.max_error_rate,
                planned=len(rollouts),
                setting="rl.max_error_rate",
            )
            metrics.write(step.finish(t, rollouts, evaluate_at(t)).metrics)
            save()

        try:
            for t in range(first, steps + 1):
                try:
                    play_step(t)
                except TooManyErrors as exc:
                    raise TooManyErrors(
                        f"step {t}: {exc} (the run up to step {t - 1} is saved in {run_dir}: "
                        "continue it with --resume)",
                        exc.rollouts,
                    ) from None
                bar.update(1)
        finally:  # a stop or an outage ends the bar too
            bar.close()

        best = coevo.best()
        final, played = None, 0
        if choose_on_dev:
            evaluate = greedy_evaluate(
                engine,
                inputs.env,
                inputs.agent,
                batch_size=batch_size,
                reward_fn=reward_fn,
                progress=progress,
                max_error_rate=rl.max_error_rate,
            )
            final = choose_for_run(
                evaluate,
                coevo,
                config,
                inputs,
                rule=config.final_choice,
                tell=lambda line: say(line, progress),
            )
            played = final.dev_rollouts
            best = next(i for i in coevo.population.archive.values() if i.id == final.returned_id)
        artifacts.write_best_instruction(run_dir, best.text)
        summary = summarize(
            run_dir=run_dir,
            mode="evolve",
            steps=steps,
            history=metrics.history,
            coevo=coevo,
            returned=best,
            optimizer=inputs.optimizer_note,
            started=started,
            policy=policy,
            evaluation=final.to_dict() if final else None,
            selection_rollouts=played,
            resume_changes=[str(c) for c in plan.applied] if plan else [],
            resumed_from=f"{plan.checkpoint} (INSPO step {plan.step})" if plan else None,
            precision=precision.describe() if owned else "",
        )
        summary.write()
        if (
            own_stop and stop_file.exists()
        ):  # asked during the final choice: nothing was left to stop
            stop_file.unlink(missing_ok=True)
            log.info(
                "%s arrived after the run's last save: the run finished; the file is removed",
                stop_file,
            )
    finally:
        if owned and hasattr(engine, "shutdown"):
            engine.shutdown()
    if progress:
        print(summary, flush=True)
    return summary


def _remote_policy(policy_url: str, policy_model: str):
    """The policy at ``policy_url``, asked for its models once before any work: a dead endpoint,
    or one that does not serve ``policy_model``, is refused with a one-line SetupError."""
    from inspo.agent.openai_engine import OpenAIEngine

    remote = OpenAIEngine(policy_model, base_url=policy_url)
    try:
        remote.check()
    except (ValueError, RuntimeError) as exc:
        raise SetupError(f"--policy-url {policy_url}: {exc}") from exc
    return remote


def _policy(config: TrainConfig, engine, remote, model_dir) -> tuple[PolicyEngine, str]:
    if engine is not None:
        return engine, type(engine).__name__ + " (given)"
    if remote is not None:
        return remote, f"{remote.model} at {remote.endpoint}"
    model = config.model
    if model.engine == "vllm":
        from inspo.agent.load import load_engine
        from inspo.training.vllm_sync import vllm_options

        try:
            engine = load_engine(
                model_dir, kind="vllm", dtype=model.dtype, vllm=vllm_options(config)
            )
        except ImportError as exc:
            raise SetupError(f"model.engine=vllm: {exc}") from exc
        return engine, f"{model.name_or_path} (vLLM, {model.dtype})"
    from inspo.agent.engines import HFEngine
    from inspo.models import load_model
    from inspo.models.precision import default_device

    device = default_device()  # the device run_precision resolved model.dtype for
    loaded = load_model(model_dir, dtype=model.dtype, device=device)
    return HFEngine(
        loaded.model, loaded.tokenizer
    ), f"{model.name_or_path} ({model.dtype}, {device})"
