"""Reading a run directory into the records the report renders (:mod:`inspo.report.records`).

A run directory (written by ``inspo demo``, ``inspo evolve`` or ``inspo train``) holds:

- ``events.jsonl`` (required): the core's typed events (see :mod:`inspo.core.events`);
- ``metrics.jsonl``: one JSON object per INSPO step (``reward/mean``, ``inspo/population_size``,
  ``inspo/weight/<id>``, ``rollout/tool_calls``, ``rollout/prompt_tokens`` …);
- ``inspo_state.json``: the core state (population archive, replay buffer, cost ledger);
- ``config.json`` or ``config.yaml``, ``best_instruction.txt``, ``summary.json``.

Rules of :func:`load_run`:

- a missing run directory, or one without ``events.jsonl``, raises :class:`FileNotFoundError`
  naming what is missing;
- every other file is optional: what it would have given is ``None`` (or empty) in the
  records, and a line in :attr:`RunData.notes` says what was not recorded;
- a torn last JSONL line (a killed writer) is skipped; a metrics line without ``step`` is
  ignored; several lines of one step are merged (later keys win);
- numbers the run did not log but the files imply are derived and labelled as such:
  per-step weights from ``weights`` events, tool calls per trajectory from the replay buffer's
  rollouts, and the length of the instructions sampled each step (``sampled`` events x
  instruction texts, in characters and whitespace-separated words).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from inspo.artifacts import (
    BEST_INSTRUCTION_FILE,
    EVENTS_FILE,
    METRICS_FILE,
    STATE_FILE,
    SUMMARY_FILE,
)
from inspo.core.accounting import CostLedger
from inspo.core.events import read_events
from inspo.records import Instruction
from inspo.report.records import (
    CandidateOutcome,
    EvolutionRound,
    FailureExample,
    InstructionInfo,
    OptimizerFailure,
    RunData,
    StepRecord,
)
from inspo.report.run_files import read_config, read_json, read_metrics

REQUIRED_FILE = EVENTS_FILE


# ------------------------------------------------------------------------------------ loading
def load_run(run_dir: str | Path) -> RunData:
    """Read ``run_dir`` into a :class:`RunData` (rules in the module docstring)."""
    path = Path(run_dir)
    if not path.exists():
        raise FileNotFoundError(
            f"run directory {path} does not exist: pass the directory that 'inspo demo', "
            f"'inspo evolve' or 'inspo train' wrote (it holds {REQUIRED_FILE})"
        )
    if not path.is_dir():
        raise NotADirectoryError(
            f"{path} is a file, not a run directory (one holding {REQUIRED_FILE})"
        )
    events_path = path / REQUIRED_FILE
    if not events_path.is_file():
        present = sorted(p.name for p in path.iterdir())[:12]
        raise FileNotFoundError(
            f"{events_path} is missing: {path} is not an inspo run directory or its run has not "
            f"started logging yet (found: {', '.join(present) if present else 'nothing'})"
        )

    notes: list[str] = []
    events = [e for e in read_events(events_path) if isinstance(e, dict) and "kind" in e]
    metrics = read_metrics(path / METRICS_FILE, notes)
    state = read_json(path / STATE_FILE, notes)
    summary = read_json(path / SUMMARY_FILE, notes)
    config, config_file = read_config(path, notes)

    archive = _archive(state, events)
    steps, calls_source, prompt_source = _steps(metrics, events, state, archive, notes)
    instructions = _instructions(archive, state, events, steps)
    rounds = _rounds(events, state)
    ledger = _ledger(state, summary, notes)
    best_text, best_id = _best(path, summary, state, instructions, steps, notes)
    if state is not None and not state.get("buffer", {}).get("items"):
        notes.append(
            "the replay buffer in inspo_state.json is empty: failure examples show ids only"
        )

    return RunData(
        path=path,
        config=config,
        config_file=config_file,
        steps=steps,
        instructions=instructions,
        rounds=rounds,
        optimizer_failures=tuple(
            OptimizerFailure(
                int(e.get("step", 0)), int(e.get("round", 0)), str(e.get("reason", ""))
            )
            for e in events
            if e["kind"] == "optimizer_failed"
        ),
        prune_steps=tuple(sorted({int(e.get("step", 0)) for e in events if e["kind"] == "pruned"})),
        evolution_steps=tuple(
            sorted({int(e.get("step", 0)) for e in events if e["kind"] == "evolution_started"})
        ),
        ledger=ledger,
        best_instruction=best_text,
        best_id=best_id,
        summary=summary,
        calls_source=calls_source,
        prompt_source=prompt_source,
        notes=tuple(notes),
    )


def _number(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` (missing, not a number, NaN or infinite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


# ------------------------------------------------------------------------------------ steps
def _archive(state: dict[str, Any] | None, events: list[dict[str, Any]]) -> dict[str, Instruction]:
    """Every instruction text known: the state's archive, then admitted events."""
    archive: dict[str, Instruction] = {}
    population = (state or {}).get("population") or {}
    for d in population.get("archive") or []:
        if isinstance(d, dict) and "id" in d:
            archive[str(d["id"])] = Instruction.from_dict(d)
    for member in population.get("members") or []:
        d = member.get("instruction") if isinstance(member, dict) else None
        if isinstance(d, dict) and "id" in d:
            archive.setdefault(str(d["id"]), Instruction.from_dict(d))
    for e in events:
        d = e.get("instruction") if e["kind"] == "admitted" else None
        if isinstance(d, dict) and "id" in d:
            archive.setdefault(str(d["id"]), Instruction.from_dict(d))
    return archive


def _steps(metrics, events, state, archive, notes):
    """One :class:`StepRecord` per step: the numbers ``metrics.jsonl`` logged, else those the
    events and the replay buffer imply; and where tool calls and prompt length came from."""
    weights_by_step, sampled, attributed, errors_by_step = _step_events(events)
    buffer_calls = _buffer_calls(state)
    metric_by_step = {int(m["step"]): m for m in metrics}
    all_steps = sorted(set(metric_by_step) | set(weights_by_step) | set(sampled) | set(attributed))
    all_steps = [s for s in all_steps if s >= 1 or s in metric_by_step]

    records = []
    missing_text: set[str] = set()
    for s in all_steps:
        m = metric_by_step.get(s, {})
        weights = {
            k[len("inspo/weight/") :]: float(v)
            for k, v in m.items()
            if k.startswith("inspo/weight/") and _number(v) is not None
        }
        if not weights:
            weights = weights_by_step.get(s, {})
        reward = _number(m.get("reward/mean"))
        if reward is None and attributed.get(s):
            n = sum(k for k, _ in attributed[s])
            reward = sum(k * r for k, r in attributed[s]) / n if n else None
        pop = _number(m.get("inspo/population_size"))
        errors = _number(m.get("rollout/errors"))
        errors = int(errors) if errors is not None else errors_by_step.get(s)
        calls = _number(m.get("rollout/tool_calls", m.get("rollout/search_calls")))
        if calls is None:
            calls = buffer_calls.get(s)
        lengths = [archive[i].text for i in sampled.get(s, []) if i in archive]
        missing_text.update(i for i in sampled.get(s, []) if i not in archive)
        records.append(
            StepRecord(
                step=s,
                reward=reward,
                population_size=int(pop) if pop is not None else None,
                weights=weights,
                tool_calls=calls,
                turns=_number(m.get("rollout/turns")),
                prompt_tokens=_number(m.get("rollout/prompt_tokens")),
                completion_tokens=_number(m.get("rollout/completion_tokens")),
                instruction_chars=sum(len(t) for t in lengths) / len(lengths) if lengths else None,
                instruction_words=sum(len(t.split()) for t in lengths) / len(lengths)
                if lengths
                else None,
                errors=errors,
                env_metrics={
                    k[len("env/") :]: float(v)
                    for k, v in m.items()
                    if k.startswith("env/") and _number(v) is not None
                },
            )
        )
    if missing_text:
        notes.append(
            f"texts of {len(missing_text)} sampled instruction(s) not recorded "
            f"({', '.join(sorted(missing_text)[:5])}): instruction length leaves them out"
        )
    calls_source, prompt_source = _sources(metrics, records)
    return tuple(records), calls_source, prompt_source


def _step_events(events: list[dict[str, Any]]) -> tuple[dict[int, Any], ...]:
    """What the events say of each step: the weights and the count of failed rollouts
    (``weights``), the ids of the instructions sampled (``sampled``), and the rollout count and
    mean reward of each attribution (``attributed``)."""
    weights_by_step: dict[int, dict[str, float]] = {}
    sampled: dict[int, list[str]] = defaultdict(list)
    attributed: dict[int, list[tuple[int, float]]] = defaultdict(list)
    errors_by_step: dict[int, int] = {}
    for e in events:
        step = int(e.get("step", 0))
        if e["kind"] == "weights" and isinstance(e.get("weights"), dict):
            weights_by_step[step] = {str(k): float(v) for k, v in e["weights"].items()}
            if _number(e.get("n_errors")) is not None:
                errors_by_step[step] = int(e["n_errors"])
        elif e["kind"] == "sampled":
            sampled[step].append(str(e.get("instruction_id", "")))
        elif e["kind"] == "attributed":
            attributed[step].append((int(e.get("n_rollouts", 0)), float(e.get("mean_reward", 0.0))))
    return weights_by_step, sampled, attributed, errors_by_step


def _sources(
    metrics: list[dict[str, Any]], records: list[StepRecord]
) -> tuple[str | None, str | None]:
    """Where the step records' tool calls came from (``metrics``, ``replay buffer`` or ``None``)
    and their prompt length (``metrics``, ``sampled events`` or ``None``)."""
    if any(
        _number(m.get("rollout/tool_calls", m.get("rollout/search_calls"))) is not None
        for m in metrics
    ):
        calls_source = "metrics"
    elif any(r.tool_calls is not None for r in records):
        calls_source = "replay buffer"
    else:
        calls_source = None
    if any(r.prompt_tokens for r in records):
        prompt_source = "metrics"
    elif any(r.instruction_chars is not None for r in records):
        prompt_source = "sampled events"
    else:
        prompt_source = None
    return calls_source, prompt_source


def _buffer_items(state: dict[str, Any] | None) -> list[dict[str, Any]]:
    items = ((state or {}).get("buffer") or {}).get("items") or []
    return [i for i in items if isinstance(i, dict) and isinstance(i.get("rollout"), dict)]


def _buffer_calls(state: dict[str, Any] | None) -> dict[int, float]:
    """Mean tool calls per trajectory for each step the replay buffer still holds (step >= 1);
    a state written before the environment seam has Search-R1's ``searches`` instead."""
    counts: dict[int, list[int]] = defaultdict(list)
    for item in _buffer_items(state):
        rollout = item["rollout"]
        calls = rollout.get("tool_calls", rollout.get("searches"))
        if isinstance(calls, list) and int(item.get("step", 0)) >= 1:
            counts[int(item["step"])].append(len(calls))
    return {s: sum(v) / len(v) for s, v in counts.items()}


# ------------------------------------------------------------------------------------ lineage
#: how an instruction left the population (:func:`removals`): Algorithm 1's lines 10-12 and 17
PRUNED, NOT_A_PARENT = "pruned", "not kept as a parent at evolution"


def removals(events: list[dict[str, Any]]) -> dict[str, tuple[int, str]]:
    """How each instruction left the population, from a run's events: ``(step, PRUNED)`` or
    ``(step, NOT_A_PARENT)`` (a member at an evolution step that line 17 did not keep); the first
    removal counts. An instruction still in the population has no entry."""
    removed: dict[str, tuple[int, str]] = {}
    members_at: dict[int, set[str]] = {}
    for e in events:
        step = int(e.get("step", 0))
        if e["kind"] == "weights" and isinstance(e.get("weights"), dict):
            members_at[step] = set(e["weights"])
        elif e["kind"] == "pruned":
            for i in e.get("removed") or []:
                removed.setdefault(str(i), (step, PRUNED))
            members_at[step] = set(map(str, e.get("kept") or []))
        elif e["kind"] == "evolution_started":
            parents = set(map(str, e.get("parents") or []))
            for i in members_at.get(step, set()) - parents:
                removed.setdefault(i, (step, NOT_A_PARENT))
    return removed


def _instructions(archive, state, events, steps) -> tuple[InstructionInfo, ...]:
    scores: dict[str, float] = {}
    for e in events:
        if e["kind"] == "verified":
            scores[str(e.get("candidate_id"))] = float(e.get("score", 0.0))
        elif e["kind"] == "admitted" and _number(e.get("score")) is not None:
            scores[str((e.get("instruction") or {}).get("id"))] = float(e["score"])

    removed = removals(events)

    last_weight: dict[str, float] = {}
    for record in steps:
        last_weight.update(record.weights)
    population = (state or {}).get("population") or {}
    for k, v in (population.get("last_weight") or {}).items():
        if _number(v) is not None:
            last_weight[str(k)] = float(v)

    alive: set[str] | None = None
    if population.get("members"):
        alive = {str(m["instruction"]["id"]) for m in population["members"] if isinstance(m, dict)}
    elif steps and steps[-1].weights:
        last = steps[-1].step
        alive = set(steps[-1].weights) - {i for i, (s, _) in removed.items() if s == last}
        finished = [
            e for e in events if e["kind"] == "evolution_finished" and int(e.get("step", 0)) == last
        ]
        if finished:
            alive = set(map(str, finished[-1].get("population") or []))

    ids = set(archive) | set(last_weight) | set(removed)
    for e in events:
        if e["kind"] == "evolution_started":
            ids.update(map(str, e.get("parents") or []))
    infos = []
    for i in sorted(ids, key=_id_key):
        ins = archive.get(i)
        gone = removed.get(i)
        infos.append(
            InstructionInfo(
                id=i,
                text=ins.text if ins else None,
                parent_ids=ins.parent_ids if ins else (),
                origin=ins.origin if ins else "unknown",
                step_created=ins.step_created if ins else 0,
                critique=ins.critique if ins else "",
                score=scores.get(i),
                last_weight=last_weight.get(i),
                alive=(i in alive) if alive is not None else None,
                removed_step=gone[0] if gone and not (alive and i in alive) else None,
                removed_how=gone[1] if gone and not (alive and i in alive) else "",
            )
        )
    return tuple(infos)


def _id_key(instruction_id: str) -> tuple[str, int, str]:
    head, _, tail = instruction_id.rpartition("-")
    return (head, int(tail), "") if tail.isdigit() else (instruction_id, -1, instruction_id)


# ------------------------------------------------------------------------------------ rounds
def _rounds(events, state) -> tuple[EvolutionRound, ...]:
    outcomes: dict[str, CandidateOutcome] = {}
    for e in events:
        kind = e["kind"]
        if kind == "verified":
            cid = str(e.get("candidate_id"))
            outcomes[cid] = CandidateOutcome(cid, "verified", _number(e.get("score")))
        elif kind == "rejected":
            cid = str(e.get("candidate_id"))
            prev = outcomes.get(cid)
            outcomes[cid] = CandidateOutcome(
                cid,
                "rejected",
                prev.score if prev else None,
                str(e.get("reason", "")),
                e.get("text"),
            )
        elif kind == "admitted":
            d = e.get("instruction") or {}
            cid = str(d.get("id"))
            outcomes[cid] = CandidateOutcome(
                cid, "admitted", _number(e.get("score")), "", d.get("text")
            )

    buffer = _buffer_items(state)
    rounds = []
    for e in events:
        if e["kind"] != "proposed":
            continue
        step = int(e.get("step", 0))
        rounds.append(
            EvolutionRound(
                step=step,
                round=int(e.get("round", 0)),
                parent_id=str(e.get("parent_id", "")),
                template=str(e.get("template", "")),
                critique=str(e.get("critique", "")),
                prompt_tokens=int(e.get("prompt_tokens", 0) or 0),
                completion_tokens=int(e.get("completion_tokens", 0) or 0),
                failures=_failures([str(q) for q in e.get("failures") or []], step, buffer),
                candidates=tuple(
                    outcomes.get(str(c), CandidateOutcome(str(c), "unknown"))
                    for c in e.get("candidate_ids") or []
                ),
            )
        )
    return tuple(rounds)


def _failures(
    question_ids: list[str], step: int, buffer: list[dict[str, Any]]
) -> tuple[FailureExample, ...]:
    """The buffer's rollouts the round most likely saw, one per listed question id: from a step
    no later than the round's, lowest reward first, then the latest step. A question listed
    twice (two trajectories of one group) gets two different rollouts when the buffer has them."""
    used: set[int] = set()
    out = []
    for question_id in question_ids:
        best = None
        for n, item in enumerate(buffer):
            rollout = item["rollout"]
            item_step = int(item.get("step", 0))
            if (
                n in used
                or (rollout.get("question") or {}).get("id") != question_id
                or item_step > step
            ):
                continue
            key = (_number(rollout.get("reward")) or 0.0, -item_step)
            if best is None or key < best[0]:
                best = (key, n)
        if best is None:
            out.append(FailureExample(question_id))
            continue
        used.add(best[1])
        out.append(_failure(question_id, buffer[best[1]]))
    return tuple(out)


def _failure(question_id: str, item: dict[str, Any]) -> FailureExample:
    rollout = item["rollout"]
    item_step = int(item.get("step", 0))
    question = rollout.get("question") or {}
    return FailureExample(
        question_id=question_id,
        question=question.get("question"),
        gold=tuple(map(str, question.get("answers") or ())),
        answer=rollout.get("answer"),
        response=rollout.get("response"),
        reward=_number(rollout.get("reward")),
        step=item_step,
        instruction_id=rollout.get("instruction_id"),
    )


# ------------------------------------------------------------------------------------ the rest
def _ledger(state, summary, notes) -> CostLedger | None:
    for source in ((state or {}).get("ledger"), (summary or {}).get("ledger")):
        if isinstance(source, dict):
            known = set(CostLedger.__dataclass_fields__)
            try:
                return CostLedger.from_dict({k: v for k, v in source.items() if k in known})
            except (TypeError, ValueError):
                continue
    notes.append("cost ledger not recorded (no inspo_state.json or summary.json ledger)")
    return None


def _best(path, summary, state, instructions, steps, notes) -> tuple[str | None, str | None]:
    text = None
    best_file = path / BEST_INSTRUCTION_FILE
    if best_file.is_file():
        text = best_file.read_text(encoding="utf-8").strip()
    elif isinstance((summary or {}).get("best_instruction"), str):
        text = summary["best_instruction"].strip()
    by_text = {info.text.strip(): info.id for info in instructions if info.text}
    if text is not None:
        named = (summary or {}).get("best_instruction_id")
        return text, by_text.get(text) or (str(named) if named else None)
    weights = steps[-1].weights if steps else {}
    alive = [i for i in instructions if i.alive and i.last_weight is not None] or [
        i for i in instructions if i.id in weights
    ]
    if alive:
        best = max(
            alive,
            key=lambda i: i.last_weight if i.last_weight is not None else weights.get(i.id, 0.0),
        )
        notes.append(
            "best_instruction.txt not recorded: the best instruction is argmax of the last weights"
        )
        return best.text, best.id
    notes.append("best instruction not recorded")
    return None, None
