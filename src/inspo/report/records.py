"""The records the report renders: what is known about each step, instruction and evolution
round of a run (:func:`inspo.report.data.load_run` builds them). ``None`` means "not recorded"."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo.core.accounting import CostLedger


@dataclass(frozen=True)
class StepRecord:
    """What is known about one INSPO step. ``None`` means not recorded.

    ``weights`` are the members' importance weights after attribution (before pruning).
    ``instruction_chars`` / ``instruction_words`` are the mean length of the instructions
    sampled for the step's question groups (derived from ``sampled`` events).
    ``prompt_tokens`` is the logged mean prompt length in tokens (instruction + question).
    ``errors``: the step's rollouts that failed on an error (an outage; never scored, so
    ``reward`` is over the others). ``env_metrics``: the environment's own means (``env/<name>``
    in metrics.jsonl: a rubric's functions one by one).
    """

    step: int
    reward: float | None = None
    population_size: int | None = None
    weights: dict[str, float] = field(default_factory=dict)
    tool_calls: float | None = None
    turns: float | None = None
    prompt_tokens: float | None = None
    completion_tokens: float | None = None
    instruction_chars: float | None = None
    instruction_words: float | None = None
    errors: int | None = None
    env_metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class InstructionInfo:
    """One instruction that ever lived, with its fate.

    ``text`` is ``None`` when neither the state nor an ``admitted`` event recorded it (the
    seed, when ``inspo_state.json`` is missing). ``score`` is the verification score on D_B.
    ``removed_step``/``removed_how`` say when and why it left the population (``None`` while
    alive or unknown).
    """

    id: str
    text: str | None
    parent_ids: tuple[str, ...] = ()
    origin: str = "seed"
    step_created: int = 0
    critique: str = ""
    score: float | None = None
    last_weight: float | None = None
    alive: bool | None = None
    removed_step: int | None = None
    removed_how: str = ""


@dataclass(frozen=True)
class FailureExample:
    """A failed trajectory the optimizer reflected on, joined from the replay buffer.

    Only ``question_id`` is certain; the rest is ``None`` when the buffer no longer holds a
    rollout of that question from before the round.
    """

    question_id: str
    question: str | None = None
    gold: tuple[str, ...] = ()
    answer: str | None = None
    response: str | None = None
    reward: float | None = None
    step: int | None = None
    instruction_id: str | None = None


@dataclass(frozen=True)
class CandidateOutcome:
    """A candidate of one optimizer call: ``status`` is admitted, rejected, verified or unknown."""

    id: str
    status: str
    score: float | None = None
    reason: str = ""
    text: str | None = None


@dataclass(frozen=True)
class EvolutionRound:
    """One optimizer call (a ``proposed`` event) with its failures and candidates."""

    step: int
    round: int
    parent_id: str
    template: str
    critique: str
    prompt_tokens: int
    completion_tokens: int
    failures: tuple[FailureExample, ...]
    candidates: tuple[CandidateOutcome, ...]


@dataclass(frozen=True)
class OptimizerFailure:
    step: int
    round: int
    reason: str


@dataclass(frozen=True)
class RunData:
    """Everything the report shows about one run directory.

    ``calls_source`` / ``prompt_source`` say where the Fig. 2 (b)/(c) numbers came from
    (``"metrics"``, ``"replay buffer"``, ``"sampled events"``) or are ``None`` when nothing
    recorded them.
    """

    path: Path
    config: dict[str, Any] | None
    config_file: str | None
    steps: tuple[StepRecord, ...]
    instructions: tuple[InstructionInfo, ...]
    rounds: tuple[EvolutionRound, ...]
    optimizer_failures: tuple[OptimizerFailure, ...]
    prune_steps: tuple[int, ...]
    evolution_steps: tuple[int, ...]
    ledger: CostLedger | None
    best_instruction: str | None
    best_id: str | None
    summary: dict[str, Any] | None
    calls_source: str | None = None
    prompt_source: str | None = None
    notes: tuple[str, ...] = ()

    def instruction(self, instruction_id: str) -> InstructionInfo | None:
        for info in self.instructions:
            if info.id == instruction_id:
                return info
        return None
