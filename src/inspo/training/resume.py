"""What a resumed run may change, checked before any work, and how the change is reported.

``inspo train --resume`` (and ``inspo evolve --resume``) continue a run under the config they are
given (``--preset/--config/--set``), which may differ from the config that wrote the checkpoint.
:func:`plan_resume` compares the two before anything loads. The old config is the one recorded
in the checkpoint's ``inspo_step.json`` (``inspo train``), else the run directory's
``config.yaml`` as it was before this resume; the old co-evolution settings are always the
saved state's own.

- A change the checkpoint cannot honour is refused: :meth:`ResumePlan.check` raises
  :class:`ResumeRefused` (a ``SetupError``), one message naming each key with its old and new
  value, why, and how to go on. Refused are the co-evolution settings the saved state was built
  with (:data:`inspo.core.config.FIXED_ON_RESUME`) and, for ``inspo train``,
  :data:`FIXED_ON_TRAIN_RESUME`: the model whose weights the checkpoint holds, the learning rate
  and scheduler TRL restores from it, and the batch shape, seed and question set TRL's place in
  the question order is counted in.
- Every other change is applied from the step after the checkpoint's and recorded: printed, one
  ``settings_changed`` event in ``events.jsonl`` at the checkpoint's step, one entry per resume
  in ``resume.json``, a comment at the top of ``config.yaml`` and a line in the summary.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.config.schedule import core_config
from inspo.config.train import TrainConfig, dump, setting_changes
from inspo.core.config import FIXED_ON_RESUME, CoEvolutionConfig, config_changes
from inspo.core.events import SettingsChanged
from inspo.core.state import read_state
from inspo.training.preflight import SetupError

_WEIGHTS = "the checkpoint holds this model's weights (or LoRA adapters)"
_OPTIMIZER = (
    "TRL restores the optimizer and the learning-rate scheduler from the checkpoint, with the old "
    "base learning rate: the new value would be ignored"
)
_SHAPE = (
    "TRL finds its place in the question order by counting the batches already consumed in this "
    "shape: another shape would repeat or skip questions"
)
_QUESTIONS = (
    "TRL's place in the question order indexes this question set: another set would be read from "
    "the old place"
)

_ENV = (
    "the saved population, replay buffer and policy were made in this environment (its tools, "
    "protocol and reward); another one is another run"
)

#: Settings outside ``coevolution`` that ``inspo train --resume`` refuses to change, and why.
FIXED_ON_TRAIN_RESUME: dict[str, str] = {
    "mode": "the checkpoint was written by a run of this mode",
    "seed_instruction": "the saved population grew from it",
    "env.name": _ENV,
    "model.name_or_path": _WEIGHTS,
    "model.dtype": _WEIGHTS,
    "model.lora": _WEIGHTS,
    "model.lora_r": _WEIGHTS,
    "model.lora_alpha": _WEIGHTS,
    "model.lora_target_modules": _WEIGHTS,
    "rl.learning_rate": _OPTIMIZER,
    "rl.lr_scheduler": _OPTIMIZER,
    "rl.seed": "the question order and the checkpoint's random streams were drawn from it "
    "(coevolution.seed follows it when it is not set)",
    "rl.questions_per_step": _SHAPE,
    "rl.group_size": _SHAPE,
    "rl.mini_batches": _SHAPE,
    "rl.micro_batch_size": _SHAPE + " (its gradient accumulation is part of the count)",
    "data.train": _QUESTIONS,
    "data.train_split": _QUESTIONS,
    "data.max_train_questions": _QUESTIONS,
    "data.max_hops": _QUESTIONS,
}

#: ``inspo evolve --resume`` has no TRL checkpoint: only the seed instruction is fixed there.
FIXED_ON_EVOLVE_RESUME: dict[str, str] = {
    "seed_instruction": "the saved population grew from it",
    "env.name": _ENV,
}

_CORE_FIXED = "the saved co-evolution state was built with it"
_SCHEDULE = (
    "TRL recomputes the learning-rate schedule over the new total: the rate from the next step "
    "follows the new curve"
)

#: How some applied changes take effect (every other one: read when next used, from the next step
#: on).
NOTES: dict[str, str] = {
    "rl.steps": _SCHEDULE,
    "rl.warmup_ratio": _SCHEDULE,
    "data.warmup_questions": "no effect: the warm-up rollouts happened before step 1",
    "coevolution.init_population": "no effect: the initial population was built before step 1",
}

#: Keys never compared: the run directory itself (a checkpoint may be resumed into another).
NOT_COMPARED = ("output_dir",)


@dataclass(frozen=True)
class ResumeChange:
    """One setting that differs from the checkpoint's: applied (``note`` says how) or refused
    (``note`` says why)."""

    key: str
    old: Any
    new: Any
    note: str = ""

    def __str__(self) -> str:
        return f"{self.key}: {self.old!r} -> {self.new!r}"


class ResumeRefused(SetupError):
    """A resume changes settings the checkpoint cannot honour; ``plan.refused`` lists them."""

    def __init__(self, plan: ResumePlan):
        self.plan = plan
        listed = "\n".join(f"  {c} ({c.note})" for c in plan.refused)
        where = f"; the old settings are in {plan.compared_with}" if plan.compared_with else ""
        super().__init__(
            f"cannot resume from {plan.checkpoint} with these settings changed:\n{listed}\n"
            f"Resume with the old values (drop or change those --set / --config entries{where}), "
            "or start a new run in another --output-dir."
        )


@dataclass
class ResumePlan:
    """How a resume from ``checkpoint`` (saved after INSPO step ``step``) treats each changed
    setting."""

    checkpoint: str
    step: int
    compared_with: str | None
    """The file the old run-level settings came from (None: unknown, only the co-evolution
    settings of the saved state were compared)."""
    applied: list[ResumeChange] = field(default_factory=list)
    refused: list[ResumeChange] = field(default_factory=list)

    def check(self) -> None:
        """Raise :class:`ResumeRefused` when a change is refused (call it before any work)."""
        if self.refused:
            raise ResumeRefused(self)

    def lines(self) -> list[str]:
        """What the user is told when the run resumes."""
        head = f"resuming from {self.checkpoint} (INSPO step {self.step})"
        if not self.applied:
            return [f"{head}; settings unchanged"]
        return [
            f"{head} with {len(self.applied)} changed setting(s), applied from step "
            f"{self.step + 1} on:",
            *(f"  {c}" + (f" ({c.note})" if c.note else "") for c in self.applied),
        ]

    def event(self) -> SettingsChanged:
        return SettingsChanged(
            self.step, changes={c.key: {"old": c.old, "new": c.new} for c in self.applied}
        )

    def record(self) -> dict[str, Any]:
        """The entry of this resume in ``resume.json``."""
        return {
            "checkpoint": self.checkpoint,
            "step": self.step,
            "compared_with": self.compared_with,
            "changes": [asdict(c) for c in self.applied],
        }

    def write(self, run_dir: Path) -> Path:
        """Append :meth:`record` to ``run_dir/resume.json`` (``{"resumes": [...]}``, oldest
        first)."""
        path = Path(run_dir) / artifacts.RESUME_FILE
        data = artifacts.read_json(path) if path.is_file() else {"resumes": []}
        data["resumes"].append(self.record())
        artifacts.write_json(path, data)
        return path

    def config_text(self, config: TrainConfig) -> str:
        """``config.yaml`` of the resumed run: the resolved config under a comment saying what
        changed."""
        header = [
            f"# resumed from {self.checkpoint} (INSPO step {self.step}); "
            + (
                "settings unchanged"
                if not self.applied
                else f"changed from step {self.step + 1} on:"
            )
        ]
        header += [f"#   {c}" for c in self.applied]
        return "\n".join(header) + "\n" + dump(config)


def plan_resume(
    current: TrainConfig,
    *,
    saved_core: dict[str, Any],
    saved: dict[str, Any] | None,
    checkpoint: str,
    step: int,
    compared_with: str | None,
    static: bool,
    fixed: dict[str, str] | None = None,
) -> ResumePlan:
    """Compare the resuming config with the checkpoint's.

    Args:
        current: the resolved config of the resuming run.
        saved_core: the saved state's ``config`` (the core's settings as the core ran them).
        saved: the resolved config that wrote the checkpoint, as a dict (``None``: unknown, only
            the co-evolution settings are compared).
        checkpoint / step / compared_with: where the old settings come from (see
        :class:`ResumePlan`).
        static: the core runs as a population of one (``core_config``), as when it was saved.
        fixed: the run-level keys refused, with why (default :data:`FIXED_ON_TRAIN_RESUME`).
    """
    fixed = FIXED_ON_TRAIN_RESUME if fixed is None else fixed
    plan = ResumePlan(checkpoint=checkpoint, step=step, compared_with=compared_with)
    if saved is not None:
        for c in setting_changes(saved, current):
            if c.key.startswith("coevolution.") or c.key in NOT_COMPARED:
                continue  # the core's settings are compared with the state's own below
            if c.key in fixed:
                plan.refused.append(ResumeChange(c.key, c.old, c.new, fixed[c.key]))
            else:
                plan.applied.append(ResumeChange(c.key, c.old, c.new, NOTES.get(c.key, "")))
    effective = core_config(current.coevolution, static=static)
    for c in config_changes(CoEvolutionConfig.from_dict(saved_core), effective):
        key = f"coevolution.{c.key}"
        if c.key in FIXED_ON_RESUME:
            plan.refused.append(ResumeChange(key, c.old, c.new, _CORE_FIXED))
        else:
            plan.applied.append(ResumeChange(key, c.old, c.new, NOTES.get(key, "")))
    return plan


#: Checkpoint files written by ``torch.save`` (zip archives: checked entry by entry with CRC).
TORCH_FILES = ("*.pt", "*.pth", "*.bin")


def check_checkpoint(checkpoint: Path) -> dict[str, Any]:
    """Read every file of ``checkpoint`` that a resume loads, before anything loads it; returns its
    ``inspo_step.json``. A file that is cut off or damaged (``*.json`` that does not parse, the
    INSPO state, a ``torch.save`` archive — optimizer, scheduler, RNG state — whose zip
    directory or CRC fails, a ``*.safetensors`` model or adapter whose header does not cover the
    file) raises :class:`SetupError` naming it and saying which checkpoint to resume from instead.

    Costs one read of the checkpoint (a few seconds for a full fine-tuning optimizer state);
    nothing is unpickled."""
    import zipfile

    from inspo.core.state import read_state

    checkpoint = Path(checkpoint)

    def damaged(path: Path, problem: str) -> SetupError:
        return SetupError(
            f"cannot resume from {checkpoint}: {path.name} is damaged ({problem}). "
            + _instead(checkpoint)
        )

    for path in sorted(checkpoint.glob("*.json")):
        try:
            artifacts.read_json(path)
        except ValueError as exc:
            raise SetupError(
                f"cannot resume from {checkpoint}: {exc}. " + _instead(checkpoint)
            ) from exc
    try:
        step = artifacts.read_step(checkpoint)
        read_state(checkpoint / artifacts.STATE_FILE)
    except (ValueError, FileNotFoundError) as exc:
        raise SetupError(
            f"cannot resume from {checkpoint}: {exc}. " + _instead(checkpoint)
        ) from exc
    for path in sorted(p for pattern in TORCH_FILES for p in checkpoint.glob(pattern)):
        try:
            with zipfile.ZipFile(path) as archive:
                bad = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise damaged(path, f"not a complete torch.save archive: {exc}") from exc
        if bad is not None:
            raise damaged(path, f"its entry {bad} fails its CRC check")
    for path in sorted(checkpoint.glob("*.safetensors")):
        try:
            from safetensors import safe_open

            with safe_open(str(path), framework="numpy") as fh:
                fh.keys()
        except ImportError:
            break
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
            raise damaged(path, f"{type(exc).__name__}: {exc}") from exc
    return step


def _instead(checkpoint: Path) -> str:
    """What to resume from when ``checkpoint`` cannot be read."""
    earlier = [
        path
        for _, path in artifacts.checkpoints(checkpoint.parent)
        if path != checkpoint
        and int(path.name.rsplit("-", 1)[1]) < int(checkpoint.name.rsplit("-", 1)[1])
    ]
    if earlier:
        return (
            f"Resume from the checkpoint before it with --resume {earlier[-1]} (or move "
            f"{checkpoint.name} away and --resume takes the last one left)"
        )
    return (
        f"There is no earlier checkpoint in {checkpoint.parent}: start a new run in another "
        f"--output-dir (or move {checkpoint.parent} away)"
    )


def read_old_config(
    run_dir: Path, checkpoint: Path | None = None
) -> tuple[dict[str, Any] | None, str | None]:
    """The config that wrote a checkpoint, and where it came from: the one the checkpoint's
    ``inspo_step.json`` records (``inspo train``), else the run directory's ``config.yaml`` as the
    last start left it (call this before the resume rewrites it)."""
    if checkpoint is not None:
        step_file = Path(checkpoint) / artifacts.STEP_FILE
        recorded = artifacts.read_json(step_file).get("config") if step_file.is_file() else None
        if isinstance(recorded, dict):
            return recorded, str(step_file)
    path = Path(run_dir) / artifacts.CONFIG_FILE
    if path.is_file():
        from inspo.config.train import read_config_file

        return read_config_file(path), str(path)
    return None, None


def plan_evolve_resume(config: TrainConfig, run_dir: Path, steps: int):
    """The resume plan of the evolve run saved in ``run_dir`` under ``config`` for ``steps`` steps,
    and its saved state: refused (SetupError) for a damaged state, a change the saved state cannot
    honour, or a saved step past ``steps``. Reads files only, so a caller checks before loading."""
    state_path = run_dir / artifacts.STATE_FILE
    try:
        saved_state = read_state(state_path)
    except ValueError as exc:
        raise SetupError(
            f"cannot resume: {exc}. Restore that file, or start over: run without --resume in "
            f"another --output-dir (or delete {run_dir} first)"
        ) from exc
    saved, where = read_old_config(run_dir)
    plan = plan_resume(
        config,
        saved_core=saved_state["config"],
        saved=saved,
        checkpoint=str(state_path),
        step=int(saved_state["last_step"]),
        compared_with=where,
        static=False,
        fixed=FIXED_ON_EVOLVE_RESUME,
    )
    plan.check()
    if plan.step > steps:
        raise SetupError(
            f"{state_path} holds step {plan.step}, past the {steps} step(s) asked (offline_steps): "
            f"resume with --set offline_steps={plan.step} (or more), or start over in another "
            "--output-dir"
        )
    return plan, saved_state


def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool = False) -> None:
    """Refuse (``SetupError``, saying what is there and what to do) a run directory that does not
    fit the run: a resume without a saved state to continue from (the folder is missing, the run
    stopped before its first state was saved, or the folder holds no evolve run), and a new run
    (unless ``overwrite``) over a saved evolve state or ``inspo train`` checkpoints. A new run
    over the logs of a run that never saved a state removes them and starts clean."""
    state = run_dir / artifacts.STATE_FILE
    checkpoints = artifacts.any_checkpoint_dirs(run_dir)
    if resume:
        if checkpoints:
            raise SetupError(
                f"nothing to resume with inspo evolve in {run_dir}: it is an inspo train run (it "
                f"holds {checkpoints[-1].name}); continue it with inspo train --resume, or give "
                "inspo evolve another --output-dir"
            )
        if state.is_file():
            return
        if not run_dir.is_dir():
            raise SetupError(
                f"nothing to resume: {run_dir} does not exist (check --output-dir / output_dir); "
                "run without --resume to start a new run there"
            )
        logs = {
            p.name: artifacts.read_jsonl(p) for p in artifacts.jsonl_paths(run_dir) if p.is_file()
        }
        last = max((int(r.get("step", 0)) for records in logs.values() for r in records), default=0)
        found = ", ".join(f"{name} ({len(records)} lines)" for name, records in logs.items())
        if not logs:
            why = "it holds no inspo evolve run"
        elif last == 0:
            why = (
                f"found {found}: the run stopped before it saved its first state, during the "
                "warm-up"
            )
        else:
            why = (
                f"found {found} reaching step {last}: the state saved with them is gone (moved or "
                "deleted?)"
            )
        raise SetupError(
            f"nothing to resume in {run_dir}: {artifacts.STATE_FILE} is missing ({why}); run "
            "without --resume to start over" + (", which removes those logs" if logs else "")
        )
    if overwrite:
        return
    if state.is_file() or checkpoints:
        what = (
            f"an inspo evolve run ({artifacts.STATE_FILE}{_saved_step(state)})"
            if not checkpoints
            else f"inspo train checkpoints ({checkpoints[-1].name})"
        )
        raise SetupError(
            f"{run_dir} already holds {what}; pass --resume (resume=True) to continue it, or "
            f"choose another --output-dir; to start over there, delete {run_dir} first"
        )


def _saved_step(state: Path) -> str:
    try:
        saved = artifacts.read_json(state)
        if saved.get("init"):
            return f", saved after round {int(saved['init']['rounds'])} of its initial population"
        return f", saved after step {int(saved['last_step'])}"
    except Exception:  # noqa: BLE001 - only a detail of a message about the file
        return ""
