"""``run_evolve``: INSPO's instruction side with a frozen policy (no weight updates).

Each step takes the next ``rl.questions_per_step`` training questions (a seeded order,
reshuffled every pass), rolls each out ``rl.group_size`` times under the instruction its group
drew, and calls ``coevo.update(t, rollouts, evaluate)`` — weights, pruning and verified
evolution exactly as in training, with ``evaluate`` using the same frozen policy.

The policy is one of: an engine passed in (the pre-/post-policy modes hand over the base or
the trained model), an OpenAI-compatible endpoint (``policy_url`` + ``policy_model``: vLLM,
llama.cpp, Ollama … through :class:`~inspo.agent.engines.OpenAIEngine`), or by default
``config.model`` loaded locally by ``model.engine``: :class:`~inspo.agent.engines.HFEngine`
(``hf``) or :class:`~inspo.agent.vllm_engine.VLLMEngine` (``vllm``, token ids end to end; an
engine started here is shut down when the run ends).

The run directory gets the same files as a training run minus ``model/`` and checkpoints;
``inspo_state.json`` is rewritten after every step, so ``resume=True`` continues after the last
finished step (log lines after it are dropped).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from inspo.agent.engines import PolicyEngine
from inspo.agent.evaluate import make_evaluate, play_isolated
from inspo.agent.rollout import Episode
from inspo.core.events import EventLog
from inspo.core.state import read_state, save_state
from inspo.records import Question, Rollout
from inspo.rng import derived_rng
from inspo.train import artifacts
from inspo.train.config import TrainConfig, dump
from inspo.train.final import choose_instruction, final_choice_lines
from inspo.train.grpo import RewardFn
from inspo.train.setup import SetupError, prepare
from inspo.train.stepper import (
    choose_groups,
    ledger_copy,
    light,
    outcome_lines,
    step_line,
    step_metrics,
)

log = logging.getLogger("inspo.train")


@dataclass
class EvolveSummary:
    """What an instruction-only run did; ``str(summary)`` is the printed report."""

    run_dir: str
    steps: int
    policy: str
    reward_start: float
    reward_end: float
    searches_start: float
    searches_end: float
    window: int
    best_instruction_id: str
    best_instruction: str
    best_weight: float | None
    population: list[str]
    optimizer: str
    ledger: dict[str, Any]
    wall_seconds: float
    extra: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, Any] | None = None
    """The final choice (``final_choice``) and held-out test, as :class:`inspo.train.final.FinalChoice`."""
    selection_rollouts: int = 0
    """Rollouts the final choice played on dev questions (beyond the ledger's; the held-out test's
    are not counted: they inform the user, not the choice)."""

    def lines(self) -> list[str]:
        led = self.ledger
        return [
            f"run directory:        {self.run_dir}",
            f"policy (frozen):      {self.policy}",
            f"steps:                {self.steps}",
            *outcome_lines(self),
            f"verification:         {led.get('verification_rollouts', 0)} rollouts for "
            f"{led.get('training_rollouts', 0)} step rollouts (+ {led.get('warmup_rollouts', 0)} warm-up)",
            f"population:           {', '.join(self.population)}",
            *(final_choice_lines(self.evaluation) if self.evaluation else []),
            f"wall time:            {self.wall_seconds:.0f} s",
            f"returned instruction ({self.best_instruction_id}"
            + (f", weight {self.best_weight:.3f}):" if self.best_weight is not None else "):"),
            self.best_instruction,
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def read(cls, path: str | Path) -> EvolveSummary:
        return cls(**artifacts.read_json(Path(path)))


def step_questions(questions: list[Question], step: int, per_step: int, seed: int) -> list[Question]:
    """The ``per_step`` questions of step ``step`` (1-based): consecutive slices of a seeded
    permutation, a new permutation each pass (an incomplete tail of a pass is skipped)."""
    per_pass = len(questions) // per_step
    if per_pass == 0:
        raise SetupError(f"{len(questions)} training questions are fewer than rl.questions_per_step={per_step}")
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
    progress: bool = True,
    reward_fn: RewardFn | None = None,
) -> EvolveSummary:
    """Evolve ``config``'s instruction population with a frozen policy (module docstring).

    Args:
        config: the resolved config; ``rl`` gives the batch, group size and agent settings,
            ``coevolution`` the schedule, ``optimizer`` the optimizer LLM.
        steps: how many steps (default ``config.offline_steps``).
        policy_url / policy_model: an OpenAI-compatible completions endpoint and its model
            name (the policy is then text-only; ``config.model`` is not loaded).
        engine: a ready policy engine (takes precedence over the other two).
        out_dir: the run directory (default ``config.output_dir``).
        resume: continue after the last finished step recorded in ``out_dir/inspo_state.json``.
        progress: a tqdm bar over steps and one line per step.
        reward_fn: replaces the response-only EM/F1 reward (see :data:`inspo.train.grpo.RewardFn`).

    Raises:
        SetupError: as :func:`inspo.train.setup.prepare` (before any rollout).
    """
    started = time.time()
    steps = steps if steps is not None else config.offline_steps
    if steps < 1:
        raise SetupError(f"run_evolve: steps must be >= 1, got {steps}")
    run_dir = Path(out_dir if out_dir is not None else config.output_dir)
    rl = config.rl
    if policy_url and not policy_model:
        raise SetupError("run_evolve: policy_url needs policy_model (the served model's name)")
    choose_on_dev = config.final_choice == "dev"
    owned = engine is None and not policy_url
    if owned and config.model.engine == "vllm":
        from inspo.agent.vllm_engine import INSTALL_HINT, vllm_available

        if not vllm_available():
            raise SetupError(f"model.engine=vllm: no module named 'vllm'; {INSTALL_HINT}")
    inputs = prepare(config, need_optimizer=True, need_model=engine is None and not policy_url,
                     need_eval=choose_on_dev)
    engine, policy = _policy(config, engine, policy_url, policy_model, inputs.model_dir)
    log.info("optimizer LLM: %s; frozen policy: %s", inputs.optimizer_note, policy)

    from inspo.train.run import build_coevolution, start_end, warmup_questions

    run_dir.mkdir(parents=True, exist_ok=True)
    state_path = run_dir / artifacts.STATE_FILE
    if not resume:
        artifacts.clear_run_files(run_dir)
    (run_dir / "config.yaml").write_text(dump(config), encoding="utf-8")
    events = EventLog(run_dir / "events.jsonl")
    coevo = build_coevolution(config.coevolution, inputs.seed_instruction, inputs.optimizer, events, static=False,
                              fits=inputs.fits)

    def evaluate_at(step: int, tag: str = "verify"):
        _reseed(engine, config.rl.seed, tag, step)
        evaluate = make_evaluate(engine, inputs.retriever, inputs.agent, group_size=1,
                                 batch_size=max(rl.micro_batch_size, rl.trajectories_per_step),
                                 paired_seed=(config.rl.seed, tag, step))
        if reward_fn is None:
            return evaluate
        return lambda ins, qs: _rescore(evaluate(ins, qs), reward_fn)

    first = 1
    if resume and state_path.is_file():
        coevo.load_state_dict(read_state(state_path))
        first = coevo.last_step + 1
        dropped = artifacts.truncate_after(run_dir, coevo.last_step)
        log.info("resuming evolution after step %d (dropped %d log line(s))", coevo.last_step, dropped)
    else:
        warm = warmup_questions(inputs.questions, config.data.warmup_questions, coevo.config.seed)
        coevo.initialize(evaluate_at(0, "init"), warm)
        save_state(coevo, state_path)

    from tqdm.auto import tqdm

    bar = tqdm(total=steps, initial=first - 1, desc="inspo evolve", unit="step", disable=not progress)
    history = [h for h in artifacts.read_jsonl(run_dir / "metrics.jsonl")]
    for t in range(first, steps + 1):
        batch = step_questions(inputs.questions, t, rl.questions_per_step, rl.seed)
        rows = [q for q in batch for _ in range(rl.group_size)]
        instructions, _ = choose_groups(coevo, t, rows)
        _reseed(engine, rl.seed, "rollout", t)
        episodes = [Episode(q, ins) for q, ins in zip(rows, instructions, strict=True)]
        rollouts = [light(r) for r in play_isolated(engine, inputs.retriever, inputs.agent, episodes)]
        if reward_fn is not None:
            rollouts = _rescore(rollouts, reward_fn)
        before = ledger_copy(coevo.ledger)
        report = coevo.update(t, rollouts, evaluate_at(t))
        metrics = step_metrics(t, rollouts, report, coevo, before)
        artifacts.append_jsonl(run_dir / "metrics.jsonl", metrics)
        history.append(metrics)
        save_state(coevo, state_path)
        line = step_line(metrics, steps)
        if progress:
            bar.write(line)
        else:
            log.info(line)
        bar.update(1)
    bar.close()

    best = coevo.best()
    final, played = None, 0
    if choose_on_dev:
        final, played = _final_choice(config, engine, inputs, coevo, reward_fn)
        best = next(i for i in coevo.population.archive.values() if i.id == final.returned_id)
    (run_dir / "best_instruction.txt").write_text(best.text + "\n", encoding="utf-8")
    reward_start, reward_end, window = start_end(history, "reward/mean")
    searches_start, searches_end, _ = start_end(history, "rollout/search_calls")
    summary = EvolveSummary(
        run_dir=str(run_dir),
        steps=steps,
        policy=policy,
        reward_start=reward_start,
        reward_end=reward_end,
        searches_start=searches_start,
        searches_end=searches_end,
        window=window,
        best_instruction_id=best.id,
        best_instruction=best.text,
        best_weight=coevo.population.weight_of(best.id) if best.id in coevo.population else None,
        population=[i.id for i in coevo.population.instructions],
        optimizer=inputs.optimizer_note,
        ledger=coevo.ledger.to_dict(),
        wall_seconds=time.time() - started,
        evaluation=final.to_dict() if final else None,
        selection_rollouts=played,
    )
    artifacts.write_json(run_dir / "summary.json", summary.to_dict())
    if owned and hasattr(engine, "shutdown"):
        engine.shutdown()
    if progress:
        print(summary, flush=True)
    return summary


def _final_choice(config: TrainConfig, engine: PolicyEngine, inputs, coevo, reward_fn):
    """``final_choice: dev`` for a frozen policy: the final population and the seed on the dev
    questions (greedy), then the returned one and the seed on the test questions; returns the
    :class:`~inspo.train.final.FinalChoice` and the rollouts the choice itself played (dev only)."""
    greedy = replace(inputs.agent, temperature=0.0)
    evaluate = make_evaluate(engine, inputs.retriever, greedy, group_size=1,
                             batch_size=max(config.rl.micro_batch_size, config.rl.trajectories_per_step))

    def scored(ins, qs):
        rollouts = evaluate(ins, qs)
        return _rescore(rollouts, reward_fn) if reward_fn is not None else rollouts

    seed = next(i for i in coevo.population.archive.values() if i.origin == "seed")
    final = choose_instruction(scored, rule="dev", population=coevo.population.instructions, seed=seed,
                               by_weight=coevo.best(), dev_questions=inputs.eval_questions,
                               test_questions=inputs.test_questions, metric=config.rl.reward,
                               dev_split=config.data.eval_split, test_split=config.data.test_split)
    return final, final.dev_questions * len(final.dev_scores)


def _policy(config: TrainConfig, engine, policy_url, policy_model, model_dir) -> tuple[PolicyEngine, str]:
    if engine is not None:
        return engine, type(engine).__name__ + " (given)"
    if policy_url:
        from inspo.agent.engines import OpenAIEngine

        return OpenAIEngine(policy_model, base_url=policy_url), f"{policy_model} at {policy_url}"
    model = config.model
    if model.engine == "vllm":
        from inspo.agent.engines import load_engine
        from inspo.agent.vllm_engine import VLLMOptions

        options = VLLMOptions(kv_cache_gib=model.vllm_kv_cache_gib, max_model_len=model.vllm_max_model_len,
                              enforce_eager=model.vllm_enforce_eager)
        try:
            engine = load_engine(model_dir, kind="vllm", dtype=model.dtype, vllm=options)
        except ImportError as exc:
            raise SetupError(f"model.engine=vllm: {exc}") from exc
        return engine, f"{model.name_or_path} (vLLM, {model.dtype})"
    import torch

    from inspo.agent.engines import HFEngine
    from inspo.models import load_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    loaded = load_model(model_dir, dtype=model.dtype, device=device)
    return HFEngine(loaded.model, loaded.tokenizer), f"{model.name_or_path} ({model.dtype}, {device})"


def _reseed(engine: PolicyEngine, seed: int, tag: str, step: int) -> None:
    """Give an engine with an ``rng`` a stream derived from (seed, tag, step): a resumed run
    samples exactly what the uninterrupted one did."""
    if hasattr(engine, "rng"):
        engine.rng = derived_rng(seed, tag, step)


def _rescore(rollouts: list[Rollout], reward_fn: RewardFn) -> list[Rollout]:
    return [replace(r, reward=float(reward_fn(r))) for r in rollouts]
