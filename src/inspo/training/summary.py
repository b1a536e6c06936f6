"""What a run did: one :class:`RunSummary` for ``inspo train``, ``inspo evolve`` and ``inspo demo``.

It is written to the run directory's ``summary.json`` (:meth:`RunSummary.to_dict`: its fields,
the derived ``verification_share``, and the numbers only one kind of run has, such as the demo's
``seed_quality`` / ``best_quality``, at the top level) and printed at the end of a run
(``str(summary)``). :meth:`RunSummary.read` reads a ``summary.json`` back, also one written
before the three summaries were one.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.core.coevolution import CoEvolution
from inspo.core.events import read_events
from inspo.records import Instruction
from inspo.training.memory import peak_memory_gb


@dataclass
class RunSummary:
    """What a run did; ``str(summary)`` is the printed report."""

    run_dir: str
    mode: str
    """A training mode (inspo, static, pre-policy, post-policy), ``evolve`` or ``demo``."""
    steps: int
    reward_start: float
    reward_end: float
    tool_calls_start: float | None
    """Mean tool calls (Search-R1: searches) per trajectory over the first steps; None when the run
    logs none (the demo)."""
    tool_calls_end: float | None
    window: int
    """How many steps ``*_start`` and ``*_end`` average over (see :func:`start_end`)."""
    best_instruction_id: str
    best_instruction: str
    """The returned instruction (I* = argmax w, or the final choice's, see ``evaluation``)."""
    best_weight: float | None
    population: list[str]
    optimizer: str
    ledger: dict[str, Any]
    wall_seconds: float
    """Seconds this invocation ran: since the resume for a resumed run (``resumed_from``), whose
    earlier pieces' time is in their own logs."""
    peak_memory_gb: float = 0.0
    policy: str = ""
    """``inspo evolve``: the frozen policy."""
    precision: str = ""
    """The policy's weights and compute dtypes as they ran, ``auto`` resolved, and why
    (:meth:`inspo.models.precision.Precision.describe`); '' in summaries written before it."""
    resumed_from: str | None = None
    evaluation: dict[str, Any] | None = None
    """The final choice (``final_choice``) and held-out test, as
    :class:`inspo.training.final_choice.FinalChoice`."""
    stages: dict[str, Any] = field(default_factory=dict)
    """pre-/post-policy modes: the offline stage's summary."""
    eval_history: list[dict[str, float]] = field(default_factory=list)
    """``rl.eval_every``: the step and the greedy dev score of the I* of that step."""
    resume_changes: list[str] = field(default_factory=list)
    """Settings the last resume changed (``key: old -> new``; all resumes: ``resume.json``)."""
    selection_rollouts: int = 0
    """Rollouts the final choice played on dev questions (beyond the ledger's; the held-out test's
    are not counted: they inform the user, not the choice)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Numbers only this kind of run has (the demo: ``seed_quality``, ``best_quality``)."""
    fates: dict[str, int] = field(default_factory=dict)
    """What became of the optimizer's candidates (:func:`candidate_fates`): proposed, refused at
    each stage (guard, leak, gate, race, parent, top_n, verify) and admitted."""

    @property
    def verification_share(self) -> float:
        trained = self.ledger.get("training_rollouts", 0)
        return self.ledger.get("verification_rollouts", 0) / trained if trained else 0.0

    def lines(self) -> list[str]:
        led = self.ledger
        out = [
            f"run directory:        {self.run_dir}",
            f"mode:                 {self.mode}"
            + (f" (resumed from {self.resumed_from})" if self.resumed_from else ""),
            *(
                [f"changed on resume:    {'; '.join(self.resume_changes)}"]
                if self.resume_changes
                else []
            ),
        ]
        if self.policy:
            out.append(f"policy (frozen):      {self.policy}")
        if self.precision:
            out.append(f"precision:            {self.precision}")
        out += [
            f"steps:                {self.steps}",
            f"reward:               {self.reward_start:.3f} -> {self.reward_end:.3f} "
            f"(mean of the first/last {self.window} step(s))",
        ]
        if self.tool_calls_start is not None and self.tool_calls_end is not None:
            out.append(
                f"tool calls / episode: {self.tool_calls_start:.2f} -> {self.tool_calls_end:.2f}"
            )
        out += [
            f"optimizer:            {self.optimizer}",
            f"optimizer cost:       {led.get('optimizer_calls', 0)} calls, "
            f"{led.get('optimizer_prompt_tokens', 0)} prompt + "
            f"{led.get('optimizer_completion_tokens', 0)} completion tokens",
            f"verification:         {led.get('verification_rollouts', 0)} rollouts = "
            f"{100 * self.verification_share:.1f}% of {led.get('training_rollouts', 0)} step "
            f"rollouts (+ {led.get('warmup_rollouts', 0)} warm-up)",
            f"population:           {', '.join(self.population)}",
        ]
        if self.fates.get("proposed"):
            refused = ", ".join(
                f"{stage} {self.fates[stage]}" for stage in REFUSAL_STAGES if self.fates.get(stage)
            )
            out.append(
                f"candidates:           {self.fates['proposed']} proposed; refused: "
                f"{refused or 'none'}; admitted {self.fates.get('admitted', 0)}"
            )
        out += [
            f"{key.replace('_', ' ') + ':':<22}{value:.3f}"
            for key, value in self.extra.items()
            if isinstance(value, (int, float))
        ]
        return out + self._outcome_lines()

    def _outcome_lines(self) -> list[str]:
        """The periodic evaluations, the final choice, the stages, the time and the returned
        instruction."""
        out: list[str] = []
        if self.eval_history:
            best = max(self.eval_history, key=lambda h: h["eval/reward"])
            out.append(
                "periodic eval:        I* of the step, greedy on dev: "
                + ", ".join(
                    f"step {h['step']:.0f} {h['eval/reward']:.3f}" for h in self.eval_history
                )
                + f" (best at step {best['step']:.0f})"
            )
        if self.evaluation:
            from inspo.training.final_choice import final_choice_lines

            out += final_choice_lines(self.evaluation)
        for name, stage in self.stages.items():
            out.append(
                f"{name} stage:      {stage.get('steps')} steps, reward "
                f"{stage.get('reward_start', 0):.3f} -> {stage.get('reward_end', 0):.3f}, best "
                f"{stage.get('best_instruction_id')}"
            )
        weight = (
            f"weight {self.best_weight:.3f}"
            if self.best_weight is not None
            else "not in the final population"
        )
        chosen = self.evaluation is not None or bool(self.stages)  # else I* = argmax w of this run
        out += [
            f"wall time:            {self.wall_seconds:.0f} s"
            + (" (since the resume)" if self.resumed_from else "")
            + f"; peak memory (RSS) {self.peak_memory_gb:.1f} GiB",
            f"returned instruction: {self.best_instruction_id} ({weight})"
            if chosen
            else f"best instruction:     {self.best_instruction_id} (I* = argmax w, {weight})",
            self.best_instruction,
        ]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "extra"}
        return {**data, **self.extra, "verification_share": self.verification_share}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSummary:
        """The inverse of :meth:`to_dict`; keys it does not know go to ``extra``."""
        known = {f.name for f in fields(cls)}
        data = dict(data)
        for old in ("start", "end"):  # written before the environment seam: Search-R1's searches
            if f"searches_{old}" in data:
                data.setdefault(f"tool_calls_{old}", data.pop(f"searches_{old}"))
        extra = {**data.get("extra", {}), **{k: v for k, v in data.items() if k not in known}}
        extra.pop("verification_share", None)
        values = {k: v for k, v in data.items() if k in known and k != "extra"}
        values.setdefault(
            "mode", "evolve"
        )  # the one summary written without a mode: inspo evolve's
        return cls(**values, extra=extra)

    @classmethod
    def read(cls, path: str | Path) -> RunSummary:
        return cls.from_dict(artifacts.read_json(Path(path)))

    def write(self) -> None:
        """``summary.json`` in the run directory."""
        artifacts.write_json(Path(self.run_dir) / artifacts.SUMMARY_FILE, self.to_dict())


def start_end(history: list[dict[str, Any]], key: str) -> tuple[float, float, int]:
    """Mean of ``key`` over the first and the last ``k`` steps, ``k = clamp(n // 4, 1, 5)``."""
    values = [
        float(h[key])
        for h in sorted(history, key=lambda h: h["step"])
        if key in h and h.get("step", 0) > 0
    ]
    if not values:
        return 0.0, 0.0, 0
    k = max(1, min(5, len(values) // 4))
    return sum(values[:k]) / k, sum(values[-k:]) / k, k


#: The stages a candidate can be refused at, in the order it meets them.
REFUSAL_STAGES = ("guard", "leak", "gate", "verify", "race", "parent", "top_n", "budget")


def candidate_fates(events: list[dict[str, Any]]) -> dict[str, int]:
    """How many candidates the ``events`` (``events.jsonl`` lines) proposed, refused at each stage
    and admitted."""
    refused = Counter(e.get("stage") for e in events if e.get("kind") == "rejected")
    return {
        "proposed": sum(
            len(e.get("candidate_ids", ())) for e in events if e.get("kind") == "proposed"
        ),
        **{stage: refused[stage] for stage in REFUSAL_STAGES},
        "admitted": sum(1 for e in events if e.get("kind") == "admitted"),
    }


def summarize(
    *,
    run_dir: str | Path,
    mode: str,
    steps: int,
    history: list[dict[str, Any]],
    coevo: CoEvolution,
    returned: Instruction,
    optimizer: str,
    started: float,
    episodes: bool = True,
    **more: Any,
) -> RunSummary:
    """The summary of a run that ended with ``coevo`` and returns ``returned``; ``history`` is
    its metrics lines (rewards and, for agent ``episodes``, tool calls at start and end come from
    them); ``more`` sets the optional fields."""
    reward_start, reward_end, window = start_end(history, "reward/mean")
    log = Path(run_dir) / artifacts.EVENTS_FILE
    events = read_events(log) if log.is_file() else [e.to_dict() for e in coevo.events.events]
    calls_start, calls_end, _ = start_end(history, "rollout/tool_calls")
    return RunSummary(
        run_dir=str(run_dir),
        mode=mode,
        steps=steps,
        reward_start=reward_start,
        reward_end=reward_end,
        tool_calls_start=calls_start if episodes else None,
        tool_calls_end=calls_end if episodes else None,
        window=window,
        best_instruction_id=returned.id,
        best_instruction=returned.text,
        best_weight=coevo.population.weight_of(returned.id)
        if returned.id in coevo.population
        else None,
        population=[i.id for i in coevo.population.instructions],
        optimizer=optimizer,
        ledger=coevo.ledger.to_dict(),
        wall_seconds=time.time() - started,
        peak_memory_gb=peak_memory_gb() or 0.0,
        fates=candidate_fates(events),
        **more,
    )
