"""``run_evolve``: INSPO's instruction side with a frozen policy (no weight updates).

Each step takes the next ``rl.questions_per_step`` training questions (a seeded order,
reshuffled every pass) and runs the INSPO step's two halves (:class:`inspo.training.step.InspoStep`)
with no update between them: each question rolled out ``rl.group_size`` times under the instruction
its group drew, then weights, pruning and verified evolution, with ``evaluate`` using the same
frozen policy; the same metrics as training.

The policy is one of: an engine passed in (the pre-/post-policy modes hand over the base or
the trained model), an OpenAI-compatible endpoint (``policy_url`` + ``policy_model``: vLLM,
llama.cpp, Ollama … through :class:`~inspo.engines.openai_engine.OpenAIEngine`), or by default
``config.model`` loaded locally by ``model.engine``: :class:`~inspo.engines.hf.HFEngine`
(``hf``) or :class:`~inspo.engines.vllm_engine.VLLMEngine` (``vllm``, token ids end to end; an
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.config.train import DEV_CHOICES, EnvConfig, TrainConfig
from inspo.core.state import save_state
from inspo.engines.base import PolicyEngine
from inspo.records import Question, TooManyErrors, check_error_rate
from inspo.rng import derived_rng
from inspo.training.evaluators import greedy_evaluate, reseed, verification_evaluate
from inspo.training.lifecycle import (
    build_run_core,
    final_choice,
    initialize_core,
    open_run,
    resume_core,
    returned_instruction,
)
from inspo.training.memory import freed_blocks_kept
from inspo.training.metrics import MetricsLog
from inspo.training.precision import announce, run_precision
from inspo.training.preflight import RunInputs, SetupError, prepare
from inspo.training.progress import announce_events, say
from inspo.training.resume import check_run_dir, plan_evolve_resume
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
        SetupError: as :func:`inspo.training.preflight.prepare` and :func:`check_run_dir`
            (before any rollout).
    """
    run = _setup(
        config,
        steps=steps,
        policy_url=policy_url,
        policy_model=policy_model,
        engine=engine,
        out_dir=out_dir,
        resume=resume,
        overwrite=overwrite,
        progress=progress,
        reward_fn=reward_fn,
        env=env,
        stop_file=stop_file,
    )
    try:  # an engine started here is shut down however the run ends (a stop, an outage, an error)
        with freed_blocks_kept():  # freed tensors' pages reused until each step's release
            summary = run.run()
    finally:
        run.close()
    if progress:
        print(summary, flush=True)
    return summary


def _setup(
    config: TrainConfig,
    *,
    steps: int | None,
    policy_url: str | None,
    policy_model: str | None,
    engine: PolicyEngine | None,
    out_dir: str | Path | None,
    resume: bool,
    overwrite: bool,
    progress: bool,
    reward_fn: RewardFn | None,
    env: Any,
    stop_file: str | Path | None,
) -> EvolveRun:
    """Pre-flight (:mod:`inspo.training.lifecycle`, step 1): every check before anything loads,
    then the inputs and the frozen policy."""
    started = time.time()
    if env is not None and not config.env.python:  # recorded by name, as an object given in Python
        config = replace(config, env=EnvConfig.of(env))
    steps = steps if steps is not None else config.offline_steps
    if steps < 1:
        raise SetupError(f"run_evolve: steps must be >= 1, got {steps}")
    run_dir = Path(out_dir if out_dir is not None else config.output_dir)
    if policy_url and not policy_model:
        raise SetupError("run_evolve: policy_url needs policy_model (the served model's name)")
    owned = engine is None and not policy_url
    precision = ""
    if owned:  # the frozen policy loads here: its dtype resolved once (given engines have theirs)
        config, resolved = run_precision(config, training=False)
        announce(resolved)
        precision = resolved.describe()
    if owned and config.model.engine == "vllm":
        from inspo.engines.vllm_engine import INSTALL_HINT, vllm_available

        if not vllm_available():
            raise SetupError(f"model.engine=vllm: no module named 'vllm'; {INSTALL_HINT}")
    check_run_dir(run_dir, resume=resume, overwrite=overwrite)
    plan, saved_state = None, None
    if resume:  # a refused change stops here, before anything loads
        plan, saved_state = plan_evolve_resume(config, run_dir, steps)
    remote = _remote_policy(policy_url, policy_model) if engine is None and policy_url else None
    inputs = prepare(
        config,
        need_optimizer=True,
        need_model=engine is None and not policy_url,
        need_eval=config.final_choice in DEV_CHOICES,
        env=env,
    )
    engine, policy = _policy(config, engine, remote, inputs.model_dir)
    log.info("optimizer LLM: %s; frozen policy: %s", inputs.optimizer_note, policy)
    return EvolveRun(
        config=config,
        inputs=inputs,
        engine=engine,
        policy=policy,
        owned=owned,
        precision=precision,
        run_dir=run_dir,
        steps=steps,
        plan=plan,
        saved_state=saved_state,
        progress=progress,
        reward_fn=reward_fn,
        stop_file=Path(stop_file) if stop_file is not None else run_dir / artifacts.STOP_FILE,
        own_stop=stop_file is None,
        started=started,
    )


@dataclass
class EvolveRun:
    """One ``inspo evolve`` run after its pre-flight: the lifecycle's steps 2-7
    (:mod:`inspo.training.lifecycle`) with a frozen policy."""

    config: TrainConfig
    inputs: RunInputs
    engine: PolicyEngine
    policy: str
    """The frozen policy, described for the log and the summary."""
    owned: bool
    """The engine was started here (shut down by :meth:`close`)."""
    precision: str
    run_dir: Path
    steps: int
    plan: Any
    saved_state: dict[str, Any] | None
    progress: bool
    reward_fn: RewardFn | None
    stop_file: Path
    own_stop: bool
    started: float
    coevo: Any = None

    def run(self) -> RunSummary:
        events = open_run(self.run_dir, self.config, self.plan, fresh=self.plan is None)
        announcer = announce_events(
            events, self.progress, max_rounds=self.config.coevolution.max_rounds
        )
        self.coevo = build_run_core(
            self.config, self.inputs, events, self.run_dir, seed_text=self.inputs.seed_instruction
        )
        first = self._population(events, announcer)
        metrics = self._steps(first)
        final = None
        if self.config.final_choice in DEV_CHOICES:
            final = final_choice(
                self._greedy(), self.coevo, self.config, self.inputs, self.progress
            )
        best = returned_instruction(self.coevo, final)
        artifacts.write_best_instruction(self.run_dir, best.text)
        summary = self._summary(metrics, best, final)
        summary.write()
        if self.own_stop and self.stop_file.exists():  # asked during the final choice: nothing left
            self.stop_file.unlink(missing_ok=True)
            log.info(
                "%s arrived after the run's last save: the run finished; the file is removed",
                self.stop_file,
            )
        return summary

    def close(self) -> None:
        if self.owned and hasattr(self.engine, "shutdown"):
            self.engine.shutdown()

    @property
    def _batch_size(self) -> int:
        rl = self.config.rl
        return max(rl.micro_batch_size, rl.trajectories_per_step)

    def _evaluate_at(self, step: int, tag: str = "verify"):
        rl = self.config.rl
        return verification_evaluate(
            self.engine,
            self.inputs.env,
            self.inputs.agent,
            seed=rl.seed,
            tag=tag,
            step=step,
            batch_size=self._batch_size,
            reward_fn=self.reward_fn,
            progress=self.progress,
            max_error_rate=rl.max_error_rate,
            greedy=self.config.coevolution.verify_greedy,
        )

    def _greedy(self):
        return greedy_evaluate(
            self.engine,
            self.inputs.env,
            self.inputs.agent,
            batch_size=self._batch_size,
            reward_fn=self.reward_fn,
            progress=self.progress,
            max_error_rate=self.config.rl.max_error_rate,
        )

    def _save(self) -> None:
        """After every step and every round of the initial population; a STOP file stops here."""
        coevo, state_path = self.coevo, self.run_dir / artifacts.STATE_FILE
        save_state(coevo, state_path)
        saved = (
            f"after round {coevo.init.rounds} of its initial population"
            if coevo.init is not None
            else f"after step {coevo.last_step}"
            if coevo.last_step
            else "after its initial population"
        )
        artifacts.honour_stop(self.stop_file, f"{saved} (saved in {state_path})")

    def _population(self, events, announcer) -> int:
        """The saved state (a resume) or P_0; returns the first step to play."""
        coevo, progress = self.coevo, self.progress
        if self.plan is None:
            initialize_core(
                coevo,
                self._evaluate_at(0, "init"),
                self.inputs,
                self.config,
                progress=progress,
                after_round=self._save,
            )
            self._save()
            return 1
        dropped = resume_core(
            coevo,
            self.saved_state,
            self.plan,
            self.run_dir,
            events,
            progress=progress,
        )
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
            coevo.continue_initialize(self._evaluate_at(0, "init"), after_round=self._save)
            self._save()
        return coevo.last_step + 1

    def _steps(self, first: int) -> MetricsLog:
        """Steps ``first`` to the last, each the INSPO step's two halves with no update between."""
        from tqdm.auto import tqdm

        rl, run_dir = self.config.rl, self.run_dir
        bar = tqdm(
            total=self.steps,
            initial=first - 1,
            desc="inspo evolve",
            unit="step",
            disable=not self.progress,
        )
        metrics = MetricsLog(
            run_dir / artifacts.METRICS_FILE,
            self.steps,
            progress=self.progress,
            read_existing=True,
            release_memory=True,
        )
        step = InspoStep(self.coevo, self.inputs.env, self.inputs.agent, self.reward_fn)
        try:
            for t in range(first, self.steps + 1):
                batch = step_questions(self.inputs.questions, t, rl.questions_per_step, rl.seed)
                rows = [q for q in batch for _ in range(rl.group_size)]
                reseed(self.engine, rl.seed, "rollout", t)
                try:
                    played = step.play(t, rows, self.engine, isolated=True)
                    rollouts = [light(r) for r in played.rollouts]
                    # an outage stops here, before the step is credited: the state saved after
                    # step t-1 resumes it
                    check_error_rate(
                        rollouts,
                        max_error_rate=rl.max_error_rate,
                        planned=len(rollouts),
                        setting="rl.max_error_rate",
                    )
                    metrics.write(step.finish(t, rollouts, self._evaluate_at(t)).metrics)
                    self._save()
                except TooManyErrors as exc:
                    raise TooManyErrors(
                        f"step {t}: {exc} (the run up to step {t - 1} is saved in {run_dir}: "
                        "continue it with --resume)",
                        exc.rollouts,
                    ) from None
                bar.update(1)
        finally:  # a stop or an outage ends the bar too
            bar.close()
        return metrics

    def _summary(self, metrics: MetricsLog, best, final) -> RunSummary:
        plan = self.plan
        return summarize(
            run_dir=self.run_dir,
            mode="evolve",
            steps=self.steps,
            history=metrics.history,
            coevo=self.coevo,
            returned=best,
            optimizer=self.inputs.optimizer_note,
            started=self.started,
            policy=self.policy,
            evaluation=final.to_dict() if final else None,
            selection_rollouts=final.dev_rollouts if final else 0,
            resume_changes=[str(c) for c in plan.applied] if plan else [],
            resumed_from=f"{plan.checkpoint} (INSPO step {plan.step})" if plan else None,
            precision=self.precision,
        )


def _remote_policy(policy_url: str, policy_model: str):
    """The policy at ``policy_url``, asked for its models once before any work: a dead endpoint,
    or one that does not serve ``policy_model``, is refused with a one-line SetupError."""
    from inspo.engines.openai_engine import OpenAIEngine

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
        from inspo.engines.load import load_engine
        from inspo.training.vllm_sync import vllm_options

        try:
            engine = load_engine(
                model_dir, kind="vllm", dtype=model.dtype, vllm=vllm_options(config)
            )
        except ImportError as exc:
            raise SetupError(f"model.engine=vllm: {exc}") from exc
        return engine, f"{model.name_or_path} (vLLM, {model.dtype})"
    from inspo.engines.hf import HFEngine
    from inspo.models import load_model
    from inspo.models.precision import default_device

    device = default_device()  # the device run_precision resolved model.dtype for
    loaded = load_model(model_dir, dtype=model.dtype, device=device)
    return HFEngine(
        loaded.model, loaded.tokenizer
    ), f"{model.name_or_path} ({model.dtype}, {device})"
