"""What the TRL hooks of one process share (:class:`RolloutContext`): the core, the environment and
agent, the process's rank, and the policies built on the training model for the step's halves,
verification, the periodic evaluation and the final choice. Nothing here touches TRL."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.core.coevolution import CoEvolution
from inspo.core.population import Population
from inspo.engines.hf import HFEngine
from inspo.envs.loop import AgentConfig
from inspo.models.packed import PackedLinears
from inspo.records import EvaluateFn, Question, Rollout, scored
from inspo.training.evaluators import greedy_evaluate, verification_evaluate
from inspo.training.progress import say
from inspo.training.step import InspoStep, RewardFn


@dataclass
class RolloutContext:
    """What the rollout function, the reward function and the callback share on one process."""

    coevo: CoEvolution
    env: Any
    """The agent's environment (:class:`~inspo.envs.base.Environment`)."""
    agent: AgentConfig
    questions: dict[str, Question]
    tokenizer: Any
    mini_batches: int
    seed: int
    rank: int = 0
    world_size: int = 1
    reward_fn: RewardFn | None = None
    choices_path: Path | None = None
    eval_batch_size: int = 32
    eval_questions: list[Question] = field(default_factory=list)
    """Dev questions of the periodic evaluation (``rl.eval_every``)."""
    eval_every: int = 0
    progress: bool = False
    """Show bars over the episodes of verification and evaluation (the main process of a run
    with progress on); the phases are announced either way (:mod:`inspo.training.progress`)."""
    max_error_rate: float | None = None
    """``rl.max_error_rate``: a verification or evaluation call with more error rollouts stops the
    run."""
    vllm_sync: Any = None
    """``rl.use_vllm``: the :class:`~inspo.training.vllm_sync.WeightSync` (full weights) or
    :class:`~inspo.training.vllm_sync.AdapterSync` (LoRA) that plays the policy in vLLM."""
    keep_turns: bool = True
    """``rl.keep_turns``: transformers rollouts prefill only what each turn adds."""
    packed: PackedLinears = field(default_factory=PackedLinears)
    """The training model's bf16 weights packed for CPU generation, kept across the run's
    engines (:mod:`inspo.models.packed`)."""
    in_flight: list[Rollout] = field(default_factory=list)
    pending: list[Rollout] = field(default_factory=list)
    sampled: set[str] = field(default_factory=set)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def inspo_step(self, global_step: int) -> int:
        return global_step // self.mini_batches + 1

    @property
    def step(self) -> InspoStep:
        """The INSPO step's two halves, on this process's core and environment."""
        return InspoStep(self.coevo, self.env, self.agent, self.reward_fn)

    def policy(self, model: Any, version: int | None = None, rng: Any = None) -> Any:
        """The engine that plays ``model``: with ``rl.use_vllm``, vLLM on ``model``'s weights (or
        LoRA adapter) as of ``version`` (the trainer's global step; synced when newer); else
        transformers."""
        if self.vllm_sync is not None and version is not None:
            return self.vllm_sync.engine_for(model, version, rng)
        return HFEngine(
            model, self.tokenizer, rng=rng, packed=self.packed, keep_turns=self.keep_turns
        )

    def make_evaluate(
        self, model: Any, step: int, tag: str = "verify", version: int | None = None
    ) -> EvaluateFn:
        """``evaluate(instruction, questions)`` with ``model`` as the policy (one rollout per
        question; the same questions get the same sampling seeds whatever the instruction: paired;
        greedy under ``coevolution.verify_greedy``)."""
        return verification_evaluate(
            self.policy(model, version),
            self.env,
            self.agent,
            seed=self.seed,
            tag=tag,
            step=step,
            batch_size=self.eval_batch_size,
            reward_fn=self.reward_fn,
            progress=self.progress,
            max_error_rate=self.max_error_rate,
            greedy=self.coevo.config.verify_greedy,
        )

    def greedy_evaluate(
        self, model: Any, *, progress: bool = False, version: int | None = None
    ) -> EvaluateFn:
        """``evaluate(instruction, questions)`` with ``model`` decoding greedily (one rollout per
        question)."""
        return greedy_evaluate(
            self.policy(model, version),
            self.env,
            self.agent,
            batch_size=self.eval_batch_size,
            reward_fn=self.reward_fn,
            progress=progress,
            max_error_rate=self.max_error_rate,
        )

    def periodic_eval(self, model: Any, step: int, version: int | None = None) -> dict[str, float]:
        """``rl.eval_every``: the current policy, greedy, with the current I* on the dev
        questions."""
        if not (self.eval_every and self.eval_questions and step % self.eval_every == 0):
            return {}
        best = self.coevo.best()
        say(
            f"step {step} evaluation: {best.id} on {len(self.eval_questions)} dev question(s), "
            "greedy",
            self.progress,
        )
        played = self.greedy_evaluate(model, version=version, progress=self.progress)(
            best, self.eval_questions
        )
        rollouts = scored(played)
        n = max(len(rollouts), 1)
        metrics = {
            "eval/reward": sum(r.reward for r in rollouts) / n,
            "eval/tool_calls": sum(len(r.tool_calls) for r in rollouts) / n,
            **{
                f"eval/{tool}_calls": sum(len(r.calls_of(tool)) for r in rollouts) / n
                for tool in self.env.tools
            },
            "eval/errors": float(len(played) - len(rollouts)),
        }
        say(
            f"step {step} evaluation: reward {metrics['eval/reward']:.3f}, tool calls "
            f"{metrics['eval/tool_calls']:.2f}, errors {len(played) - len(rollouts)} (not scored)",
            self.progress,
        )
        return metrics

    def trace(self, step: int, groups: list[tuple[str, str]]) -> None:
        if self.choices_path is None:
            return
        version = self.coevo.population.version
        for qid, iid in groups:
            artifacts.append_jsonl(
                self.choices_path,
                {
                    "step": step,
                    "rank": self.rank,
                    "question_id": qid,
                    "instruction_id": iid,
                    "population_version": version,
                },
            )


def set_population(coevo: CoEvolution, data: dict[str, Any], last_step: int) -> None:
    """Make ``coevo`` hold exactly the population ``data`` (as broadcast by the main process)."""
    coevo.population = Population.from_dict(data)
    coevo.last_step = last_step
