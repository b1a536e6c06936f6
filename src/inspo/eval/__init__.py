"""Evaluation: policies x instructions x datasets -> EM, F1, searches, turns, format failures.

- :func:`summarize` turns the rollouts of one (policy, instruction, dataset) cell into an
  :class:`EvalCell` (pure), and :func:`question_scores` into its per-question rows, which
  ``eval.json`` keeps under ``questions`` so that two evaluations can be paired question by question;
- error rollouts (an episode that raised: the retriever or the policy endpoint down, an engine
  crash) are not the policy's answers: a cell counts them in ``errors`` and every mean (EM, F1,
  searches, turns, format failures, no answer) is over the other ``n - errors`` rollouts; they
  get no per-question row;
- :func:`run_eval` plays every cell through the agent's ``evaluate`` seam, batched, with a
  progress bar, and returns an :class:`EvalReport`. When the evaluate function stops on
  :class:`~inspo.records.TooManyErrors` (its ``max_error_rate`` spent), the cells done so far and
  the partial cell (marked ``stopped``) are kept and ``EvalReport.stopped`` holds the message;
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
    of them failed on an error (never scored); the means are over the ``n - errors`` others.
    ``stopped``: the run stopped during this cell (``n`` is what was played)."""

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
    stopped: bool = False

    @property
    def scored(self) -> int:
        return self.n - self.errors


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
    stopped: str = ""
    """Why the evaluation stopped before its end ('' : it finished)."""

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
                sum(c.errors for c in group), any(c.stopped for c in group),
            ))
        return out

    @property
    def errors(self) -> int:
        return sum(c.errors for c in self.cells)

    def to_dict(self) -> dict:
        return {"cells": [asdict(c) for c in self.cells], "average": [asdict(c) for c in self.averages()],
                "settings": self.settings, "questions": [asdict(q) for q in self.questions],
                "errors": self.errors, "stopped": self.stopped}

    def scores(self, policy: str, instruction: str, dataset: str, metric: str = "em") -> list[float]:
        """One cell's per-question ``metric`` (em or f1), in the dataset's question order."""
        return [getattr(q, metric) for q in self.questions
                if (q.policy, q.instruction, q.dataset) == (policy, instruction, dataset)]

    def markdown(self) -> str:
        head = ("| policy | instruction | dataset | n | errors | EM | F1 | searches | turns | format failures "
                "| no answer |")
        rule = "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        rows = [
            f"| {c.policy} | {c.instruction} | {c.dataset}{' (stopped)' if c.stopped else ''} | {c.n} | {c.errors} | "
            f"{c.em:.3f} | {c.f1:.3f} | {c.searches:.2f} | {c.turns:.2f} | {c.format_failures:.1%} | {c.no_answer:.1%} |"
            for c in self.cells + (self.averages() if len({c.dataset for c in self.cells}) > 1 else [])
        ]
        notes = []
        if self.errors:
            notes = ["", f"{self.errors} rollout(s) failed on an error (an endpoint down, an engine crash) and are "
                     "not scored: each row's means are over its n - errors other rollouts."]
        if self.stopped:
            notes += ["", f"Stopped before the end: {self.stopped}"]
        return "\n".join([head, rule, *rows, *notes, *settings_lines(self.settings)]) + "\n"

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
    """Each rollout's EM, F1 and searches (one rollout per question; error rollouts get no row)."""
    from inspo.agent.rewards import exact_match, f1_score

    return [QuestionScore(policy, instruction, dataset, r.question.id,
                          exact_match(r.answer, r.question.answers) if r.answer is not None else 0.0,
                          f1_score(r.answer, r.question.answers) if r.answer is not None else 0.0,
                          len(r.searches)) for r in scored(rollouts)]


def summarize(policy: str, instruction: str, dataset: str, rollouts: Sequence[Rollout],
              rows: Sequence[QuestionScore] | None = None) -> EvalCell:
    """Means over the rollouts (one per question) that did not fail on an error, of EM and F1 of
    the extracted answer, searches, turns, the share that fails the format check and the share
    with no answer; ``errors`` counts the others. EM, F1 and searches are the means of
    :func:`question_scores` (``rows``, when already computed)."""
    from inspo.agent.rewards import format_ok

    ok = scored(rollouts)
    errors = len(rollouts) - len(ok)
    if not ok:
        return EvalCell(policy, instruction, dataset, len(rollouts), 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, errors)
    if rows is None:
        rows = question_scores(policy, instruction, dataset, ok)

    def mean(values) -> float:
        return sum(values) / len(ok)

    return EvalCell(
        policy=policy,
        instruction=instruction,
        dataset=dataset,
        n=len(rollouts),
        em=mean(q.em for q in rows),
        f1=mean(q.f1 for q in rows),
        searches=mean(q.searches for q in rows),
        turns=mean(r.turns for r in ok),
        format_failures=mean(not format_ok(r.response) for r in ok),
        no_answer=mean(r.answer is None for r in ok),
        errors=errors,
    )


def run_eval(
    policies: Sequence[tuple[str, Callable[[], EvaluateFn]]],
    instructions: Sequence[NamedInstruction],
    datasets: Sequence[Dataset],
) -> EvalReport:
    """Every policy x instruction x dataset. ``policies`` are (label, factory of an evaluate
    function); each factory is called once, so one model is loaded at a time. An evaluate
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
                rows = question_scores(label, named.label, data.label, rollouts)
                report.cells.append(summarize(label, named.label, data.label, rollouts, rows))
                report.questions += rows
                if stopped:
                    report.cells[-1].stopped = True
                    report.stopped = f"{label} x {named.label} x {data.label}: {stopped}"
                    return report
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
