"""The run directory, defined once: its file names, and the readers and writers every layer uses.

Layout (``inspo train``; ``inspo evolve`` writes the same minus ``model/`` and checkpoints; the
demo writes ``config.json`` instead of ``config.yaml`` and no choices)::

    config.yaml            CONFIG_FILE: the resolved config (after a resume: under a comment naming
                           what changed)
    resume.json            RESUME_FILE: one entry per resume: the checkpoint and the settings it
                           changed
    config.json            DEMO_CONFIG_FILE: the demo's settings (the report reads either)
    events.jsonl           EVENTS_FILE: the core's typed events, one per line (main process only)
    metrics.jsonl          METRICS_FILE: one line per INSPO step (schema: inspo.training.metrics)
    choices.rank<R>.jsonl  choices_file(R): which instruction each process used for each question
                           group
    inspo_state.json       STATE_FILE: the core state at the end (population, buffer, ledger, RNG)
    best_instruction.txt   BEST_INSTRUCTION_FILE: the returned instruction
    summary.json           SUMMARY_FILE: the run's summary (inspo.training.summary.RunSummary),
                           written when it ends
    training_summary.json  TRAINING_SUMMARY_FILE: post-policy only, the finished GRPO stage's
                           summary (resume)
    report.html            REPORT_FILE: the HTML report (inspo.report)
    model/                 MODEL_DIR: the trained model + tokenizer (LoRA merged)
    agent/                 AGENT_DIR: the trained agent as one folder (inspo.trained.export_agent:
                           model/'s files hard-linked, instruction.txt, population.json,
                           agent.json, the model card)
    checkpoint-N/          TRL checkpoints, each with STATE_FILE and STEP_FILE (inspo_step.json)
    pre-policy/, post-policy/  the offline stage of those modes: a run directory of its own

Writers: :func:`write_json` and :func:`write_text_atomic` (atomic replace), :func:`append_jsonl`,
:func:`write_best_instruction`. Readers: :func:`read_json`, :func:`read_jsonl` (a torn last line
is skipped), :func:`checkpoints` / :func:`find_checkpoint`, :func:`read_step`.

Rules:

- every JSONL line carries ``step`` (the INSPO step; 0 is initialisation);
- on resume from a checkpoint at INSPO step ``s``, lines with ``step > s`` (written by the
  killed run after its last checkpoint) are dropped, so no step is logged twice; a state saved
  inside the initial population (step 0) also counts its events, and the event log is cut back to
  them (:func:`truncate_events`);
- a checkpoint counts only when it holds ``trainer_state.json`` and ``inspo_state.json``
  (written last), so a run killed while saving resumes from the previous one.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from inspo.core.events import read_events

CONFIG_FILE = "config.yaml"
DEMO_CONFIG_FILE = "config.json"
EVENTS_FILE = "events.jsonl"
METRICS_FILE = "metrics.jsonl"
STATE_FILE = "inspo_state.json"
BEST_INSTRUCTION_FILE = "best_instruction.txt"
SUMMARY_FILE = "summary.json"
TRAINING_SUMMARY_FILE = "training_summary.json"
REPORT_FILE = "report.html"
MODEL_DIR = "model"
AGENT_DIR = "agent"
STEP_FILE = "inspo_step.json"
RESUME_FILE = "resume.json"
OPTIMIZER_ANSWERS_FILE = (
    "optimizer_answers.jsonl"  # the optimizer answers paid for (inspo.core.answer_cache)
)
STOP_FILE = "STOP"  # put there by a user: the run stops at its next save (honour_stop)
CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
JSONL_FILES = (EVENTS_FILE, METRICS_FILE)


def honour_stop(stop_file: Path | None, saved: str) -> None:
    """Raise :class:`~inspo.records.RunStopped` when ``stop_file`` is there, after removing it (so
    the resumed run goes on); ``saved`` says what the state just saved holds. Called right after a
    save, so a stop loses nothing."""
    if stop_file is None or not stop_file.exists():
        return
    from inspo.records import RunStopped

    stop_file.unlink(missing_ok=True)
    raise RunStopped(
        f"stopped as asked ({stop_file} was there, now removed) {saved}; "
        "the same command with --resume continues"
    )


def choices_file(rank: int) -> str:
    """The file a process writes its instruction choices to."""
    return f"choices.rank{rank}.jsonl"


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


class RunFileError(ValueError):
    """A run-directory file that cannot be read as what it should be; the message names it."""


def read_json(path: Path) -> Any:
    """A JSON file's data; :class:`RunFileError` naming the file when it is not UTF-8 JSON (cut
    off or damaged)."""
    path = Path(path)
    try:
        return json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RunFileError(
            f"{path} is not valid JSON: not UTF-8 at byte offset {exc.start} (the file is damaged)"
        ) from exc
    except json.JSONDecodeError as exc:
        raise RunFileError(
            f"{path} is not valid JSON ({exc}; the file is cut off or damaged)"
        ) from exc


def write_best_instruction(run_dir: Path, text: str) -> None:
    """The returned instruction, as the text file portable to inference."""
    (Path(run_dir) / BEST_INSTRUCTION_FILE).write_text(text + "\n", encoding="utf-8")


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False, default=float) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL file; a torn last line (a killed writer) is skipped."""
    return read_events(path) if path.is_file() else []


def truncate_jsonl(path: Path, keep: Callable[[dict[str, Any]], bool]) -> int:
    """Rewrite ``path`` with only the records ``keep`` accepts; returns how many were dropped."""
    if not path.is_file():
        return 0
    records = read_jsonl(path)
    kept = [r for r in records if keep(r)]
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
    return len(records) - len(kept)


def truncate_after(run_dir: Path, step: int) -> int:
    """Drop every JSONL line of ``run_dir`` whose INSPO step is after ``step``."""
    dropped = 0
    for path in jsonl_paths(run_dir):
        dropped += truncate_jsonl(path, lambda r: int(r.get("step", 0)) <= step)
    return dropped


def truncate_events(run_dir: Path, keep: int) -> int:
    """Keep the first ``keep`` events of ``run_dir``'s event log (a state saved inside the initial
    population counts the events it had: those after it came from a round the state lost)."""
    seen = itertools.count()
    return truncate_jsonl(run_dir / EVENTS_FILE, lambda _: next(seen) < keep)


def jsonl_paths(run_dir: Path) -> Iterable[Path]:
    yield from (run_dir / name for name in JSONL_FILES)
    yield from sorted(run_dir.glob(choices_file("*")))


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (see the module rules), oldest first, as (global step, path)."""
    found = []
    if not run_dir.is_dir():
        return found
    for child in run_dir.iterdir():
        match = CHECKPOINT_RE.match(child.name)
        if match and (child / "trainer_state.json").is_file() and (child / STATE_FILE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def any_checkpoint_dirs(run_dir: Path) -> list[Path]:
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.iterdir() if CHECKPOINT_RE.match(p.name))


def names_checkpoint(resume: bool | str) -> bool:
    """Whether ``resume`` names a checkpoint folder, rather than asking for the run's last one
    (``True``, ``"true"``, ``"last"``) or for no resume."""
    return isinstance(resume, str) and resume not in ("", "true", "True", "last")


def find_checkpoint(run_dir: Path, resume: bool | str) -> Path:
    """The checkpoint to resume from: the last complete one (``resume=True``) or the given path.

    Raises FileNotFoundError with what was looked for when there is none.
    """
    if names_checkpoint(resume):
        path = Path(resume)
        if not path.is_dir():
            raise FileNotFoundError(f"--resume {resume}: no such checkpoint directory")
        if not (path / STATE_FILE).is_file():
            raise FileNotFoundError(
                f"--resume {resume}: {STATE_FILE} is missing (not an inspo checkpoint, or cut off "
                "while saving)"
            )
        return path
    complete = checkpoints(run_dir)
    if not complete:
        partial = any_checkpoint_dirs(run_dir)
        extra = f" ({len(partial)} incomplete checkpoint dir(s) found)" if partial else ""
        raise FileNotFoundError(
            f"nothing to resume in {run_dir}: no checkpoint-N with {STATE_FILE}{extra}; "
            "run without --resume to start a new run"
        )
    return complete[-1][1]


def read_step(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's ``inspo_step.json`` (``inspo_step``, ``global_step``, ``mini_batches``,
    ``config``); :class:`RunFileError` naming the file when it is damaged or lacks
    ``inspo_step``."""
    path = Path(checkpoint) / STEP_FILE
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("inspo_step"), int):
        raise RunFileError(
            f"{path} has no whole-number 'inspo_step' (it holds {str(data)[:80]}); "
            "it is not the file inspo train writes, or it was damaged"
        )
    return data


def clear_run_files(run_dir: Path) -> None:
    """Remove the log files of an earlier run in ``run_dir`` (a new run starts clean)."""
    for path in list(jsonl_paths(run_dir)):
        path.unlink(missing_ok=True)
    for name in (
        STATE_FILE,
        SUMMARY_FILE,
        BEST_INSTRUCTION_FILE,
        RESUME_FILE,
        OPTIMIZER_ANSWERS_FILE,
    ):
        (run_dir / name).unlink(missing_ok=True)
