"""A step's metrics line (:func:`step_metrics`) and a run's ``metrics.jsonl``
(:class:`MetricsLog`).

Metrics (one line per INSPO step; :func:`step_metrics`):

- ``step``; ``reward/mean``, ``reward/std`` over the step's trajectories that did not fail on an
  error (error rollouts, an outage, are never scored); ``rollout/errors`` (how many failed) and
  ``inspo/error_rate`` (their share of the step's trajectories);
- ``inspo/population_size`` (after the step), ``inspo/weight/<id>`` and ``inspo/best_weight``
  (after attribution, before pruning), ``inspo/admitted``, ``inspo/rejected``, ``inspo/pruned``
  (this step), ``inspo/optimizer_calls``, ``inspo/verification_rollouts`` (running totals);
- for agent episodes (not the synthetic environment's rollouts, which have no turns or tokens):
  ``rollout/tool_calls`` (mean tool calls per trajectory) and ``rollout/<tool>_calls`` for each
  of the environment's tools (Search-R1: ``rollout/search_calls``, mean searches),
  ``rollout/tool_errors`` (mean calls a tool refused, e.g. calc's ``error: ...``),
  ``rollout/obs_truncated`` (mean observations cut to ``rl.max_obs_tokens``), ``env/<name>`` (the
  mean of each of the environment's metrics: Search-R1's ``em``, a rubric's functions),
  ``rollout/turns``, ``rollout/prompt_tokens``, ``rollout/completion_tokens``, ``rollout/answered``
  (share that ended with an answer; these means too leave error rollouts out), ``rollout/count``
  (all), and ``rollout/finish/<reason>`` for each of :data:`~inspo.envs.loop.FINISH_REASONS`
  (``answer``, ``eos``, ``length``, ``turn_limit``, ``error``): the share of trajectories that ended
  that way. Read these, not TRL's ``completions/clipped_ratio``: TRL counts every completion that
  does not end in EOS as clipped, and an answered episode ends at ``</answer>``, without EOS;
- :class:`MetricsLog` adds ``system/rss_gib`` (the process's resident memory as the line is
  written, after the step's evolution: the level between steps; absent where the OS has no
  ``/proc``), ``system/peak_rss_gib`` (its peak so far, training's transients included) and, in
  training and ``inspo evolve``, which first hand freed memory back to the OS
  (:mod:`inspo.training.memory`), ``system/released_gib`` (what that gave back: garbage plus the
  allocator's retention), so a run's memory growth reads off its log step by step;
- a driver may add its own: training adds ``eval/reward`` and ``eval/<tool>_calls``
  (``rl.eval_every``), ``global_step`` and TRL's metrics; the demo adds
  ``inspo/best_true_quality``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.core.accounting import CostLedger
from inspo.core.coevolution import CoEvolution, StepReport
from inspo.envs.loop import FINISH_REASONS
from inspo.records import Rollout, scored
from inspo.training.memory import memory_metrics

log = logging.getLogger("inspo.training")


def env_means(
    rollouts: Sequence[Rollout], env_metrics: Callable[[Rollout], dict[str, float]]
) -> dict[str, float]:
    """``env/<name>``: the mean of each of the environment's metrics over the scored rollouts."""
    rows = [env_metrics(r) for r in scored(rollouts)]
    names = list(dict.fromkeys(k for row in rows for k in row))
    return {f"env/{k}": _mean([row.get(k, 0.0) for row in rows]) for k in names}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def step_metrics(
    step: int,
    rollouts: Sequence[Rollout],
    report: StepReport,
    coevo: CoEvolution,
    before: CostLedger,
    *,
    episodes: bool = True,
    tools: Sequence[str] = (),
) -> dict[str, float]:
    """The metrics line of one INSPO step (names in the module docstring); ``before`` is the
    cost ledger before the step, ``tools`` the environment's tool names."""
    ok = scored(rollouts)
    rewards = [r.reward for r in ok]
    ledger = coevo.ledger
    weights = report.weights
    errors = len(rollouts) - len(ok)
    out: dict[str, float] = {
        "step": step,
        "reward/mean": _mean(rewards),
        "reward/std": _std(rewards),
        "rollout/errors": float(errors),
        "inspo/error_rate": errors / len(rollouts) if rollouts else 0.0,
    }
    if episodes:
        out.update(
            {
                "rollout/tool_calls": _mean([float(len(r.tool_calls)) for r in ok]),
                "rollout/tool_errors": _mean([r.metrics.get("n_tool_errors", 0.0) for r in ok]),
                "rollout/obs_truncated": _mean([r.metrics.get("n_obs_truncated", 0.0) for r in ok]),
                **{
                    f"rollout/{tool}_calls": _mean([float(len(r.calls_of(tool))) for r in ok])
                    for tool in tools
                },
                "rollout/turns": _mean([float(r.turns) for r in ok]),
                "rollout/prompt_tokens": _mean([r.metrics.get("n_prompt_tokens", 0.0) for r in ok]),
                "rollout/completion_tokens": _mean([r.metrics.get("n_tokens", 0.0) for r in ok]),
                "rollout/answered": _mean([float(r.finish_reason == "answer") for r in ok]),
                **{
                    f"rollout/finish/{reason}": _mean(
                        [float(r.finish_reason == reason) for r in rollouts]
                    )
                    for reason in FINISH_REASONS
                },
                "rollout/count": float(len(rollouts)),
            }
        )
    out.update(
        {
            "inspo/population_size": float(len(coevo.population)),
            "inspo/best_weight": max(weights.values()) if weights else 0.0,
            "inspo/admitted": float(len(report.admitted)),
            "inspo/rejected": float(ledger.candidates_rejected - before.candidates_rejected),
            "inspo/pruned": float(len(report.pruned)),
            "inspo/optimizer_calls": float(ledger.optimizer_calls),
            "inspo/verification_rollouts": float(ledger.verification_rollouts),
        }
    )
    out.update({f"inspo/weight/{k}": float(v) for k, v in weights.items()})
    return out


def step_line(metrics: dict[str, float], total: int) -> str:
    """A one-line progress report of a step."""
    parts = [f"step {int(metrics['step'])}/{total}", f"reward {metrics['reward/mean']:.3f}"]
    if "rollout/tool_calls" in metrics:
        parts.append(f"tool calls {metrics['rollout/tool_calls']:.2f}")
    parts += [
        f"population {int(metrics['inspo/population_size'])}",
        f"best w {metrics['inspo/best_weight']:.3f}",
    ]
    if metrics.get("rollout/errors"):
        parts.append(f"errors {int(metrics['rollout/errors'])} (not scored)")
    if metrics.get("inspo/pruned"):
        parts.append(f"pruned {int(metrics['inspo/pruned'])}")
    if metrics.get("inspo/admitted") or metrics.get("inspo/rejected"):
        parts.append(
            f"admitted {int(metrics['inspo/admitted'])} rejected {int(metrics['inspo/rejected'])}"
        )
    if "loss" in metrics:
        parts.append(f"loss {metrics['loss']:.4f}")
    if "system/rss_gib" in metrics:
        more = [
            f"{name} {metrics[f'system/{key}']:.1f}"
            for name, key in (("peak", "peak_rss_gib"), ("released", "released_gib"))
            if f"system/{key}" in metrics
        ]
        parts.append(
            f"memory {metrics['system/rss_gib']:.1f} GiB"
            + (f" ({', '.join(more)})" if more else "")
        )
    return " | ".join(parts)


class MetricsLog:
    """A run's ``metrics.jsonl``: :meth:`write` appends a step's line, keeps it in ``history``
    and shows its progress line (through tqdm, above any bar, with ``progress``; else to the
    ``inspo.training`` log). ``read_existing`` starts ``history`` with the lines already there (a
    resumed run). With ``release_memory`` each write first hands freed memory back to the OS
    (:func:`inspo.training.memory.release_memory`; training and ``inspo evolve``, whose steps take
    minutes, not the demo's)."""

    def __init__(
        self,
        path: str | Path,
        total_steps: int,
        *,
        progress: bool,
        read_existing: bool = False,
        release_memory: bool = False,
    ):
        self.path = Path(path)
        self.total_steps = total_steps
        self.progress = progress
        self.release_memory = release_memory
        self.history: list[dict[str, Any]] = (
            artifacts.read_jsonl(self.path) if read_existing else []
        )

    def write(self, line: dict[str, Any]) -> None:
        line = {**line, **memory_metrics(release=self.release_memory)}
        artifacts.append_jsonl(self.path, line)
        self.history.append(line)
        text = step_line(line, self.total_steps)
        if self.progress:
            from tqdm.auto import tqdm

            tqdm.write(text)
        else:
            log.info(text)
