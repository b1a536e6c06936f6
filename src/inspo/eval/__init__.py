"""Evaluation: policies x instructions x datasets -> EM, F1, searches, turns, format failures.

- :func:`summarize` turns the rollouts of one (policy, instruction, dataset) cell into an
  :class:`EvalCell` (pure), and :func:`question_scores` into its per-question rows, which
  ``eval.json`` keeps under ``questions`` so that two evaluations can be paired question by question;
- :func:`run_eval` plays every cell through the agent's ``evaluate`` seam, batched, with a
  progress bar, and returns an :class:`EvalReport`;
- :meth:`EvalReport.markdown` / ``to_dict`` give the Markdown table and the JSON, each with the
  ``settings`` the cells were measured under (where the config came from, the overrides put on
  top of it, the agent, the retriever, the question filter), so two evaluations can be compared.

Dataset specs are ``SOURCE[@SPLIT]`` (``world@test``, ``data/nq.jsonl``, ``hf:nq_open@validation``);
instruction specs are ``seed`` (Search-R1's instruction), a run directory (its
``best_instruction.txt``) or a text file; policy specs are a model name or folder, or a run
directory (its ``model/``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inspo.artifacts import BEST_INSTRUCTION_FILE, MODEL_DIR
from inspo.records import EvaluateFn, Instruction, Question, Rollout


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
    """Scores of one policy under one instruction on one dataset (means over questions)."""

    policy: str
    instruction: str
    dataset: str
    n: int
    em: float
    f1: float
    searches: float
    turns: float
    format_failures: float
    no_answer: float
    errors: int


@dataclass(frozen=True)
class QuestionScore:
    """One question's scores in one cell: what pairs two cells (or two evaluations) question by question."""

    policy: str
    instruction: str
    dataset: str
    question_id: str
    em: float
    f1: float
    searches: int


@dataclass
class EvalReport:
    cells: list[EvalCell] = field(default_factory=list)
    questions: list[QuestionScore] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    """What the cells were measured under: ``config`` (where it came from), ``overrides`` (a list
    of ``{"key", "old", "new"}`` put on top of it), ``agent``, ``retriever``, ``questions``."""

    def averages(self) -> list[EvalCell]:
        """One row per (policy, instruction): the unweighted mean over datasets (the paper's Avg.)."""
        out = []
        keys = list(dict.fromkeys((c.policy, c.instruction) for c in self.cells))
        for policy, instruction in keys:
            group = [c for c in self.cells if (c.policy, c.instruction) == (policy, instruction)]
            k = len(group)
            out.append(EvalCell(
                policy, instruction, "average", sum(c.n for c in group),
                *(sum(getattr(c, f) for c in group) / k for f in ("em", "f1", "searches", "turns", "format_failures", "no_answer")),
                sum(c.errors for c in group),
            ))
        return out

    def to_dict(self) -> dict:
        return {"cells": [asdict(c) for c in self.cells], "average": [asdict(c) for c in self.averages()],
                "settings": self.settings, "questions": [asdict(q) for q in self.questions]}

    def scores(self, policy: str, instruction: str, dataset: str, metric: str = "em") -> list[float]:
        """One cell's per-question ``metric`` (em or f1), in the dataset's question order."""
        return [getattr(q, metric) for q in self.questions
                if (q.policy, q.instruction, q.dataset) == (policy, instruction, dataset)]

    def markdown(self) -> str:
        head = "| policy | instruction | dataset | n | EM | F1 | searches | turns | format failures | no answer |"
        rule = "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"
        rows = [
            f"| {c.policy} | {c.instruction} | {c.dataset} | {c.n} | {c.em:.3f} | {c.f1:.3f} | "
            f"{c.searches:.2f} | {c.turns:.2f} | {c.format_failures:.1%} | {c.no_answer:.1%} |"
            for c in self.cells + (self.averages() if len({c.dataset for c in self.cells}) > 1 else [])
        ]
        return "\n".join([head, rule, *rows, *settings_lines(self.settings)]) + "\n"

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
        listed = "; ".join(f"`{o['key']}`: {o['old']!r} -> {o['new']!r}" for o in settings["overrides"])
        out.append(f"- overrides on top of it: {listed or 'none'}")
    for key, value in settings.items():
        if key not in ("config", "overrides"):
            out.append(f"- {key}: {pairs(value) if isinstance(value, dict) else value}")
    return out


def question_scores(policy: str, instruction: str, dataset: str, rollouts: Sequence[Rollout]) -> list[QuestionScore]:
    """Each rollout's EM, F1 and searches (one rollout per question)."""
    from inspo.agent.rewards import exact_match, f1_score

    return [QuestionScore(policy, instruction, dataset, r.question.id,
                          exact_match(r.answer, r.question.answers) if r.answer is not None else 0.0,
                          f1_score(r.answer, r.question.answers) if r.answer is not None else 0.0,
                          len(r.searches)) for r in rollouts]


def summarize(policy: str, instruction: str, dataset: str, rollouts: Sequence[Rollout],
              rows: Sequence[QuestionScore] | None = None) -> EvalCell:
    """Means over the rollouts (one per question) of EM and F1 of the extracted answer, searches,
    turns, the share that fails the format check and the share with no answer. EM, F1 and
    searches are the means of :func:`question_scores` (``rows``, when already computed)."""
    from inspo.agent.rewards import format_ok

    n = len(rollouts)
    if n == 0:
        return EvalCell(policy, instruction, dataset, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0)
    if rows is None:
        rows = question_scores(policy, instruction, dataset, rollouts)

    def mean(values) -> float:
        return sum(values) / n

    return EvalCell(
        policy=policy,
        instruction=instruction,
        dataset=dataset,
        n=n,
        em=mean(q.em for q in rows),
        f1=mean(q.f1 for q in rows),
        searches=mean(q.searches for q in rows),
        turns=mean(r.turns for r in rollouts),
        format_failures=mean(not format_ok(r.response) for r in rollouts),
        no_answer=mean(r.answer is None for r in rollouts),
        errors=sum(r.error is not None for r in rollouts),
    )


def run_eval(
    policies: Sequence[tuple[str, Callable[[], EvaluateFn]]],
    instructions: Sequence[NamedInstruction],
    datasets: Sequence[Dataset],
) -> EvalReport:
    """Every policy x instruction x dataset. ``policies`` are (label, factory of an evaluate
    function); each factory is called once, so one model is loaded at a time."""
    report = EvalReport()
    for label, make in policies:
        evaluate = make()
        for named in instructions:
            for data in datasets:
                rollouts = evaluate(named.instruction, list(data.questions))
                rows = question_scores(label, named.label, data.label, rollouts)
                report.cells.append(summarize(label, named.label, data.label, rollouts, rows))
                report.questions += rows
        del evaluate
    return report


# ------------------------------------------------------------------------------ spec parsing
def parse_dataset(spec: str, *, limit: int | None = None, max_hops: int = 0) -> Dataset:
    """``SOURCE[@SPLIT]`` (split defaults to test) -> a labelled question set; ``max_hops > 0``
    keeps the questions of at most that many hops (those without hop metadata too), then ``limit``."""
    from inspo.data.sources import load_qa_source, within_hops

    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 (0 or None: every question), got {limit}")
    source, _, split = spec.partition("@")
    split = split or "test"
    questions = load_qa_source(source, split=split, limit=None if max_hops else (limit or None))
    questions = within_hops(questions, max_hops)[: limit or None]
    if not questions:
        raise ValueError(f"dataset {spec!r} has no questions" + (f" with at most {max_hops} hop(s)" if max_hops else ""))
    return Dataset(label=f"{source}@{split}", questions=tuple(questions))


def parse_instruction(spec: str, *, seed_text: str = "") -> NamedInstruction:
    """``seed`` (``seed_text``, a run's seed instruction as its config writes it: '' for
    Search-R1's, ``@NAME`` for a named one), ``@NAME`` (a named instruction, e.g. ``@weak``), a run
    directory (its best_instruction.txt), an exported agent folder (its instruction.txt) or a text file."""
    from inspo.agent.protocol import NAMED_INSTRUCTIONS, resolve_instruction

    if spec == "seed":
        return NamedInstruction("seed", Instruction(id="seed", text=resolve_instruction(seed_text)))
    if spec.startswith("@") and spec[1:] in NAMED_INSTRUCTIONS:
        return NamedInstruction(spec[1:], Instruction(id=spec[1:], text=NAMED_INSTRUCTIONS[spec[1:]]))
    path = Path(spec)
    if path.is_dir():
        best = path / BEST_INSTRUCTION_FILE
        if not best.is_file() and (path / "instruction.txt").is_file():  # an exported agent (inspo export)
            best = path / "instruction.txt"
        if not best.is_file():
            raise FileNotFoundError(f"{path} is neither a run directory with a best_instruction.txt nor an exported "
                                    "agent with an instruction.txt")
        return NamedInstruction(f"best({path.name})", Instruction(id=f"best-{path.name}", text=best.read_text().strip()))
    if path.is_file():
        return NamedInstruction(path.stem, Instruction(id=path.stem, text=path.read_text().strip()))
    raise FileNotFoundError(f"instruction {spec!r}: expected 'seed', a run directory or a text file")


def parse_policy(spec: str) -> tuple[str, str]:
    """(label, model name or folder): a run directory means its trained ``model/``."""
    path = Path(spec)
    if path.is_dir() and (path / MODEL_DIR).is_dir():
        return f"trained({path.name})", str(path / MODEL_DIR)
    return spec, spec
