"""Evaluation: policies x instructions x datasets -> the environment's reward and metrics, tool
calls, turns (Search-R1: EM, F1, searches, format failures).

- :func:`summarize` turns the rollouts of one (policy, instruction, dataset) cell into an
  :class:`EvalCell` (pure), and :func:`question_scores` into its per-question rows, which
  ``eval.json`` keeps under ``questions`` so that two evaluations can be paired question by
  question;
- error rollouts (an episode that raised: the retriever or the policy endpoint down, a tool that
  raised or hung, an engine crash) are not the policy's answers: a cell counts them in ``errors``
  and every mean (reward, metrics, tool calls, turns, no answer) is over the other
  ``n - errors`` rollouts; they get no per-question row;
- :func:`run_eval` plays every cell through the agent's ``evaluate`` seam, batched, with a
  progress bar, and returns an :class:`EvalReport`. When the evaluate function stops on
  :class:`~inspo.records.TooManyErrors` (its ``max_error_rate`` spent), the cells done so far and
  the partial cell (marked ``stopped``) are kept and ``EvalReport.stopped`` holds the message;
- :meth:`EvalReport.markdown` / ``to_dict`` give the Markdown table and the JSON, each with the
  ``settings`` the cells were measured under (where the config came from, the overrides put on
  top of it, the agent, the environment, the question filter), so two evaluations can be compared.

Dataset specs are ``SOURCE[@SPLIT]`` (``env@test``: the environment's own; ``world@test``,
``data/nq.jsonl``, ``hf:nq_open@validation``); instruction specs are ``seed`` (the run's seed
instruction), ``@NAME`` (one of the environment's), a run directory (its
``best_instruction.txt``) or a text file; policy specs are a model name or folder, or a run
directory (its ``model/``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from inspo.artifacts import BEST_INSTRUCTION_FILE, MODEL_DIR
from inspo.records import EvaluateFn, Instruction, Question, Rollout, TooManyErrors, scored


@dataclass(frozen=True)
class NamedInstruction:
    label: str
    instruction: Instruction


@dataclass(frozen=True)
class Dataset:
    label: str
    questions: tuple[Question, ...]


@dataclass
class EvalCell:
    """Scores of one policy under one instruction on one dataset: ``n`` rollouts played, ``errors``
    of them failed on an error (never scored); the means are over the ``n - errors`` others, and
    None (no data, never 0) when every rollout failed.
    ``stopped``: the run stopped during this cell (``n`` is what was played).

    ``reward`` is the environment's reward; ``metrics`` are the means of its per-episode numbers
    (``env.metrics``: Search-R1's ``em``, ``f1``, ``format_failures``; the calculator's ``correct``,
    ``calc_errors``), readable as attributes (``cell.em``); ``tool_calls`` the mean calls of each
    tool (``{"search": 1.2}``)."""

    policy: str
    instruction: str
    dataset: str
    n: int
    reward: float | None
    turns: float | None
    no_answer: float | None
    errors: int
    metrics: dict[str, float] = field(default_factory=dict)
    tool_calls: dict[str, float] = field(default_factory=dict)
    stopped: bool = False

    @property
    def scored(self) -> int:
        return self.n - self.errors

    @property
    def calls(self) -> float:
        """Mean tool calls per episode, all tools."""
        return sum(self.tool_calls.values())

    def __getattr__(self, name: str) -> float:  # cell.em: one of the environment's metrics
        metrics = self.__dict__.get("metrics") or {}
        if name in metrics:
            return metrics[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or metric {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalCell:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class QuestionScore:
    """One question's scores in one cell: what pairs two cells (or two evaluations) question by
    question."""

    policy: str
    instruction: str
    dataset: str
    question_id: str
    reward: float
    metrics: dict[str, float] = field(default_factory=dict)
    tool_calls: int = 0

    def value(self, metric: str) -> float:
        """``reward``, or one of the environment's metrics."""
        return self.reward if metric == "reward" else self.metrics[metric]


@dataclass
class EvalReport:
    cells: list[EvalCell] = field(default_factory=list)
    questions: list[QuestionScore] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    """What the cells were measured under: ``config`` (where it came from), ``overrides`` (a list
    of ``{"key", "old", "new"}`` put on top of it), ``agent``, ``env``, ``questions``."""
    stopped: str = ""
    """Why the evaluation stopped before its end ('' : it finished)."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """Where the result came from (:func:`inspo.eval.provenance.provenance`: commit, command,
    versions, machine); ``inspo eval`` fills it."""
    errored: list[dict[str, str]] = field(default_factory=list)
    """The rollouts that failed on an error (never scored): policy, instruction, dataset,
    question_id and the error."""

    def averages(self) -> list[EvalCell]:
        """One row per (policy, instruction): the unweighted mean over datasets (the paper's
        Avg.)."""
        out = []
        keys = list(dict.fromkeys((c.policy, c.instruction) for c in self.cells))
        for policy, instruction in keys:
            cells = [c for c in self.cells if (c.policy, c.instruction) == (policy, instruction)]
            group = [c for c in cells if c.scored]  # a cell with no data is left out of the means
            k = len(group)

            def mean(get: Callable[[EvalCell], float], g=group, k=k) -> float | None:
                return sum(get(c) for c in g) / k if k else None

            metric_names = list(dict.fromkeys(m for c in group for m in c.metrics))
            tools = list(dict.fromkeys(t for c in group for t in c.tool_calls))
            out.append(
                EvalCell(
                    policy,
                    instruction,
                    "average",
                    sum(c.n for c in cells),
                    mean(lambda c: c.reward),
                    mean(lambda c: c.turns),
                    mean(lambda c: c.no_answer),
                    sum(c.errors for c in cells),
                    metrics={m: mean(lambda c, m=m: c.metrics.get(m, 0.0)) for m in metric_names},
                    tool_calls={t: mean(lambda c, t=t: c.tool_calls.get(t, 0.0)) for t in tools},
                    stopped=any(c.stopped for c in cells),
                )
            )
        return out

    @property
    def errors(self) -> int:
        return sum(c.errors for c in self.cells)

    def to_dict(self) -> dict:
        return {
            "cells": [c.to_dict() for c in self.cells],
            "average": [c.to_dict() for c in self.averages()],
            "settings": self.settings,
            "questions": [asdict(q) for q in self.questions],
            "errors": self.errors,
            "errored": self.errored,
            "stopped": self.stopped,
            "provenance": self.provenance,
        }

    def scores(
        self, policy: str, instruction: str, dataset: str, metric: str = "reward"
    ) -> list[float]:
        """One cell's per-question ``metric`` (``reward`` or one of the environment's metrics, e.g.
        ``em``), in the dataset's question order."""
        return [
            q.value(metric)
            for q in self.questions
            if (q.policy, q.instruction, q.dataset) == (policy, instruction, dataset)
        ]

    def markdown(self) -> str:
        shown = self.cells + (self.averages() if len({c.dataset for c in self.cells}) > 1 else [])
        metric_names = list(dict.fromkeys(m for c in shown for m in c.metrics))
        tools = list(dict.fromkeys(t for c in shown for t in c.tool_calls))
        names = ["reward", *metric_names, *(f"{t} calls" for t in tools), "turns", "no answer"]
        head = "| policy | instruction | dataset | n | errors | " + " | ".join(names) + " |"
        rule = "|---|---|---|---:|---:|" + "---:|" * len(names)

        def row(c: EvalCell) -> str:
            values = (
                ["no data"] * len(names)
                if c.reward is None
                else [
                    f"{c.reward:.3f}",
                    *(_number(m, c.metrics.get(m)) for m in metric_names),
                    *(f"{c.tool_calls.get(t, 0.0):.2f}" for t in tools),
                    f"{c.turns:.2f}",
                    f"{c.no_answer:.1%}",
                ]
            )
            return (
                f"| {c.policy} | {c.instruction} | {c.dataset}{' (stopped)' if c.stopped else ''} "
                f"| {c.n} | {c.errors} | " + " | ".join(values) + " |"
            )

        notes = []
        if self.errors:
            notes = [
                "",
                f"{self.errors} rollout(s) failed on an error (an endpoint down, a tool that "
                "raised, an engine crash) and are not scored: each row's means are over its n - "
                "errors other rollouts ('no data' where none is left); eval.json's `errored` lists "
                "them.",
            ]
        if self.stopped:
            notes += ["", f"Stopped before the end: {self.stopped}"]
        return (
            "\n".join(
                [
                    head,
                    rule,
                    *map(row, shown),
                    *notes,
                    *settings_lines(self.settings),
                    *provenance_lines(self.provenance),
                ]
            )
            + "\n"
        )

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "eval.json").write_text(json.dumps(self.to_dict(), indent=2))
        (out / "eval.md").write_text(self.markdown())
        return out / "eval.json", out / "eval.md"


def settings_lines(settings: dict[str, Any]) -> list[str]:
    """The settings as a Markdown list under the table ([] when there are none)."""
    if not settings:
        return []

    def pairs(d: dict[str, Any]) -> str:
        return ", ".join(f"{k} {v!r}" for k, v in d.items())

    out = ["", "Settings:", ""]
    if "config" in settings:
        out.append(f"- config: {settings['config']}")
    if "overrides" in settings:
        listed = "; ".join(
            f"`{o['key']}`: {o['old']!r} -> {o['new']!r}" for o in settings["overrides"]
        )
        out.append(f"- overrides on top of it: {listed or 'none'}")
    for key, value in settings.items():
        if key not in ("config", "overrides"):
            out.append(f"- {key}: {pairs(value) if isinstance(value, dict) else value}")
    return out


def provenance_lines(record: dict[str, Any]) -> list[str]:
    """The command and commit as a Markdown line ([] when there is no record)."""
    if not record:
        return []
    commit = str(record.get("commit") or "unknown")[:12] + (
        " with uncommitted changes" if record.get("dirty") else ""
    )
    return [f"- run: `{record.get('command')}` (commit {commit}, {record.get('utc')})"]


def _number(name: str, value: float | None) -> str:
    """A metric for the table: a share (``*_failures``, ``*_rate``) as a percentage, else 3
    decimals."""
    if value is None:
        return "-"
    return f"{value:.1%}" if name.endswith(("failures", "_rate")) else f"{value:.3f}"


def question_scores(
    policy: str, instruction: str, dataset: str, rollouts: Sequence[Rollout], env: Any = None
) -> list[QuestionScore]:
    """Each rollout's reward, ``env.metrics`` and tool calls (one rollout per question; error
    rollouts get no row)."""
    return [
        QuestionScore(
            policy,
            instruction,
            dataset,
            r.question.id,
            float(r.reward),
            dict(env.metrics(r)) if env is not None else {},
            len(r.tool_calls),
        )
        for r in scored(rollouts)
    ]


def summarize(
    policy: str,
    instruction: str,
    dataset: str,
    rollouts: Sequence[Rollout],
    rows: Sequence[QuestionScore] | None = None,
    env: Any = None,
) -> EvalCell:
    """Means over the rollouts (one per question) that did not fail on an error: the reward, each
    of ``env``'s metrics, each tool's calls, turns and the share with no answer; ``errors`` counts
    the others. The reward and metrics are the means of :func:`question_scores` (``rows``, when
    already computed)."""
    ok = scored(rollouts)
    errors = len(rollouts) - len(ok)
    tools = list(
        getattr(env, "tools", None) or dict.fromkeys(c.tool for r in ok for c in r.tool_calls)
    )
    if not ok:  # no data: every rollout failed on an error, none is the policy's answer
        return EvalCell(policy, instruction, dataset, len(rollouts), None, None, None, errors)
    if rows is None:
        rows = question_scores(policy, instruction, dataset, ok, env)

    def mean(values) -> float:
        return sum(values) / len(ok)

    names = list(dict.fromkeys(m for q in rows for m in q.metrics))
    return EvalCell(
        policy=policy,
        instruction=instruction,
        dataset=dataset,
        n=len(rollouts),
        reward=mean(q.reward for q in rows),
        turns=mean(r.turns for r in ok),
        no_answer=mean(r.answer is None for r in ok),
        errors=errors,
        metrics={m: mean(q.metrics.get(m, 0.0) for q in rows) for m in names},
        tool_calls={t: mean(len(r.calls_of(t)) for r in ok) for t in tools},
    )


def run_eval(
    policies: Sequence[tuple[str, Callable[[], EvaluateFn]]],
    instructions: Sequence[NamedInstruction],
    datasets: Sequence[Dataset],
    env: Any = None,
) -> EvalReport:
    """Every policy x instruction x dataset. ``policies`` are (label, factory of an evaluate
    function); each factory is called once, so one model is loaded at a time; ``env`` (the agent's
    environment) gives the metrics and tools each cell reports. An evaluate
    function that raises :class:`~inspo.records.TooManyErrors` ends the evaluation: the report
    keeps every cell done, the partial one (``stopped``) and the message (``report.stopped``)."""
    report = EvalReport()
    for label, make in policies:
        evaluate = make()
        for named in instructions:
            for data in datasets:
                try:
                    rollouts, stopped = evaluate(named.instruction, list(data.questions)), ""
                except TooManyErrors as exc:
                    rollouts, stopped = exc.rollouts, str(exc)
                rows = question_scores(label, named.label, data.label, rollouts, env)
                report.cells.append(summarize(label, named.label, data.label, rollouts, rows, env))
                report.questions += rows
                report.errored += [
                    {
                        "policy": label,
                        "instruction": named.label,
                        "dataset": data.label,
                        "question_id": r.question.id,
                        "error": str(r.error),
                    }
                    for r in rollouts
                    if r.error is not None
                ]
                if stopped:
                    report.cells[-1].stopped = True
                    report.stopped = f"{label} x {named.label} x {data.label}: {stopped}"
                    return report
        del evaluate
    return report


# ------------------------------------------------------------------------------ spec parsing
def parse_dataset(
    spec: str, *, limit: int | None = None, max_hops: int = 0, env: Any = None
) -> Dataset:
    """``SOURCE[@SPLIT]`` (split defaults to test) -> a labelled question set; ``max_hops > 0``
    keeps the questions of at most that many hops (those without hop metadata too), then ``limit``.
    SOURCE ``env`` (or the environment's own name, ``calculator@test``) is ``env``'s own questions;
    anything else a file, a built-in world or ``hf:NAME``
    (:func:`inspo.data.sources.load_qa_source`)."""
    from inspo.data.sources import load_qa_source, within_hops

    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 (0 or None: every question), got {limit}")
    source, _, split = spec.partition("@")
    split = split or "test"
    own = (
        env is not None
        and source in ("env", getattr(env, "name", None))
        and not Path(source).exists()
    )
    if own:
        questions = list(env.questions(split))
        source = env.name
    else:
        questions = load_qa_source(source, split=split, limit=None if max_hops else (limit or None))
    questions = within_hops(questions, max_hops)[: limit or None]
    if not questions:
        raise ValueError(
            f"dataset {spec!r} has no questions"
            + (f" with at most {max_hops} hop(s)" if max_hops else "")
        )
    return Dataset(label=f"{source}@{split}", questions=tuple(questions))


def parse_instruction(spec: str, *, seed_text: str = "", env: Any = None) -> NamedInstruction:
    """``seed`` (``seed_text``, a run's seed instruction as its config writes it: '' for the
    environment's own, ``@NAME`` for a named one), ``@NAME`` (one of the environment's named
    instructions, e.g. ``@weak``), a run directory (its best_instruction.txt), an exported agent
    folder (its instruction.txt) or a text file. ``env``: the agent's environment (None: Search-R1's
    instructions)."""
    from inspo.envs.registry import named_instructions, resolve_seed

    named = dict(env.instructions) if env is not None else dict(named_instructions("search-r1"))
    if spec == "seed":
        if env is not None:
            text = resolve_seed(env, seed_text)
        else:
            text = (
                named["search-r1"]
                if not seed_text
                else named[seed_text[1:]]
                if seed_text.startswith("@")
                else seed_text
            )
        return NamedInstruction("seed", Instruction(id="seed", text=text))
    if spec.startswith("@") and spec[1:] in named:
        return NamedInstruction(spec[1:], Instruction(id=spec[1:], text=named[spec[1:]]))
    path = Path(spec)
    if path.is_dir():
        best = path / BEST_INSTRUCTION_FILE
        if (
            not best.is_file() and (path / "instruction.txt").is_file()
        ):  # an exported agent (inspo export)
            best = path / "instruction.txt"
        if not best.is_file():
            raise FileNotFoundError(
                f"{path} is neither a run directory with a best_instruction.txt nor an exported "
                "agent with an instruction.txt"
            )
        return NamedInstruction(
            f"best({path.name})", Instruction(id=f"best-{path.name}", text=best.read_text().strip())
        )
    if path.is_file():
        return NamedInstruction(path.stem, Instruction(id=path.stem, text=path.read_text().strip()))
    if spec.startswith("@"):
        raise FileNotFoundError(
            f"instruction {spec!r}: no such named instruction; the environment's are "
            + ", ".join("@" + k for k in named)
        )
    raise FileNotFoundError(
        f"instruction {spec!r}: expected 'seed', '@NAME', a run directory or a text file"
    )


def parse_policy(spec: str) -> tuple[str, str]:
    """(label, model name or folder): a run directory means its trained ``model/``."""
    path = Path(spec)
    if path.is_dir() and (path / MODEL_DIR).is_dir():
        return f"trained({path.name})", str(path / MODEL_DIR)
    return spec, spec
