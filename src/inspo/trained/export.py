"""The trained agent as one folder: :func:`export_agent` (``inspo export``, and the end of every
``inspo train`` run into ``RUN/agent``) and :func:`push_agent` (``--push-to-hub``).

The folder (layout in :mod:`inspo.trained.settings`) loads with
``transformers.AutoModelForCausalLM.from_pretrained(folder)`` and ``AutoTokenizer``: the run's
``model/`` already holds full weights (training merges a LoRA adapter before saving), and a
``model/`` that holds only a peft adapter is merged into its base here, so a user needs neither
peft nor the base model. Beside the weights: ``instruction.txt``, ``population.json``,
``agent.json`` and inspo's model card (:mod:`inspo.trained.card`); a user's environment module
(a ``.py`` path, or a one-file importable module) is copied into ``environment/``, and plays from
there where its recorded name does not import.

Rules:

- the source must be an ``inspo train`` run directory (``config.yaml``) with a trained
  ``model/`` and a ``best_instruction.txt``; :class:`ExportError` says which is missing;
- ``out`` must not exist or be empty, unless ``overwrite`` (the end of a run re-exports into
  ``RUN/agent``); the folder is written beside ``out`` and renamed into place, so a failed
  export leaves no half folder;
- ``link=True`` hard-links the weight files of ``model/`` instead of copying them (the export
  inside the run directory costs no disk); elsewhere they are copied, so the exported folder does
  not change when the run's ``model/`` is written again.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.trained.card import base_model_info, licence_text, model_card, point_card_at
from inspo.trained.settings import (
    CARD_FILE,
    ENVIRONMENT_DIR,
    INSTRUCTION_FILE,
    LICENSE_FILE,
    POPULATION_FILE,
    AgentSettings,
)

log = logging.getLogger("inspo.trained")

#: The question the card's snippet asks when the run's data gives none.
FALLBACK_EXAMPLE = "Who wrote the novel that the city's largest library is named after?"


class ExportError(ValueError):
    """The run cannot be exported as asked; the message says what is missing and what to do."""


@dataclass
class RunFacts:
    """What an export reads from a run directory."""

    run_dir: Path
    config: Any
    """The run's :class:`~inspo.config.train.TrainConfig` (its config.yaml)."""
    summary: dict[str, Any]
    instruction: str
    returned_id: str
    population: list[dict[str, Any]]
    """The final population (each member's id, text, origin, parents, weight), the returned
    instruction first when it is not a member (e.g. the seed, chosen on dev)."""


def read_run(run_dir: str | Path) -> RunFacts:
    """The facts of a finished ``inspo train`` run (:class:`ExportError` naming what is missing)."""
    from inspo.config.train import from_dict, read_config_file

    run = Path(run_dir)
    if not run.is_dir():
        raise ExportError(f"{run} does not exist: name an 'inspo train' run directory")
    if not (run / artifacts.CONFIG_FILE).is_file():
        raise ExportError(
            f"{run} is not an 'inspo train' run directory (no {artifacts.CONFIG_FILE} in it)"
        )
    if not (run / artifacts.MODEL_DIR / "config.json").is_file():
        raise ExportError(
            f"{run} has no trained model ({artifacts.MODEL_DIR}/ is missing or empty): an 'inspo "
            "evolve' run trains no policy, and a training run writes model/ only when it finishes"
        )
    best = run / artifacts.BEST_INSTRUCTION_FILE
    summary_path = run / artifacts.SUMMARY_FILE
    if not best.is_file() or not summary_path.is_file():
        raise ExportError(
            f"{run} has no {best.name if not best.is_file() else summary_path.name}: the run did "
            "not finish; resume it with 'inspo train --resume --output-dir " + f"{run}' first"
        )
    config = from_dict(read_config_file(run / artifacts.CONFIG_FILE))
    summary = artifacts.read_json(summary_path)
    returned_id = str(summary.get("best_instruction_id", ""))
    return RunFacts(
        run_dir=run,
        config=config,
        summary=summary,
        instruction=best.read_text(encoding="utf-8").strip(),
        returned_id=returned_id,
        population=_population(run, summary, returned_id),
    )


def _population(run: Path, summary: dict[str, Any], returned_id: str) -> list[dict[str, Any]]:
    """The final population with weights, read from the core state that decided it (an offline
    stage after training decides the returned instruction: its state)."""
    from inspo.core.population import Population
    from inspo.core.state import read_state

    state_path = run / artifacts.STATE_FILE
    if (
        "post-policy" in summary.get("stages", {})
        and (run / "post-policy" / artifacts.STATE_FILE).is_file()
    ):
        state_path = run / "post-policy" / artifacts.STATE_FILE
    if not state_path.is_file():
        return []
    pop = Population.from_dict(read_state(state_path)["population"])
    ids = [i.id for i in pop.instructions]
    order = (
        [returned_id]
        if returned_id and returned_id not in ids and returned_id in pop.archive
        else []
    ) + ids
    out = []
    for i in order:
        ins = pop.archive[i]
        out.append(
            {
                "id": ins.id,
                "text": ins.text,
                "origin": ins.origin,
                "parent_ids": list(ins.parent_ids),
                "step_created": ins.step_created,
                "member": i in ids,
                "weight": pop.weight_of(i) if i in ids else None,
                "returned": i == returned_id,
            }
        )
    return out


def export_agent(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    link: bool = False,
    grid: str | Path | None = None,
    name: str | None = None,
) -> Path:
    """Write the trained agent of ``run_dir`` into ``out_dir`` (module docstring); returns
    ``out_dir``.

    ``grid``: an ``eval.json`` of ``inspo eval --grid RUN`` whose 2x2 the card shows. ``name``:
    the card's title (default: the run directory's name).
    """
    facts = read_run(run_dir)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file; name a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ExportError(
            f"--out {out} exists and is not empty; name a new or empty folder (nothing was written)"
        )
    grid_data = _read_grid(grid) if grid is not None else None
    settings = AgentSettings.from_config(facts.config)
    source = environment_file(settings.env_name) if not settings.env.get("python") else None
    if source is not None:
        settings.env["source"] = (
            f"{ENVIRONMENT_DIR}/{source.name}:{settings.env_name.rpartition(':')[2]}"
        )
    base = base_model_info(facts.config.model.name_or_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        _write_model(facts.run_dir / artifacts.MODEL_DIR, tmp, link=link)
        (tmp / INSTRUCTION_FILE).write_text(facts.instruction + "\n", encoding="utf-8")
        artifacts.write_json(
            tmp / POPULATION_FILE, {"returned_id": facts.returned_id, "members": facts.population}
        )
        settings.write(tmp)
        if source is not None:
            (tmp / ENVIRONMENT_DIR).mkdir()
            shutil.copy2(source, tmp / ENVIRONMENT_DIR / source.name)
        text = licence_text(base)
        if text:
            (tmp / LICENSE_FILE).write_text(text, encoding="utf-8")
        card = model_card(
            facts,
            name=name or facts.run_dir.resolve().name,
            settings=settings,
            base=base,
            location=out.name,
            example=example_question(facts.config),
            grid=grid_data,
            has_licence_file=bool(text),
        )
        (tmp / CARD_FILE).write_text(card, encoding="utf-8")
        os.chmod(tmp, 0o755)  # a folder to share: readable by all, as save_pretrained's own files
        for path in tmp.rglob("*"):
            if not path.is_symlink():
                os.chmod(path, 0o755 if path.is_dir() else 0o644)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def environment_file(name: str) -> Path | None:
    """The file of a user's environment module, to travel in the agent folder: a ``.py`` path's
    file, or an importable module's own file (a one-file module, not a package); None for a
    built-in or what cannot be found here (the card then says what must be importable)."""
    import importlib.util

    from inspo.envs.registry import BUILTINS

    where = name.rpartition(":")[0]
    if name in BUILTINS or not where:
        return None
    if where.endswith(".py"):
        path = Path(where).expanduser()
        return path if path.is_file() else None
    try:
        spec = importlib.util.find_spec(where)
    except (ImportError, ValueError):
        return None
    origin = (
        Path(spec.origin)
        if spec is not None and spec.origin and spec.origin.endswith(".py")
        else None
    )
    return (
        origin if origin is not None and origin.name != "__init__.py" and origin.is_file() else None
    )


def _write_model(model_dir: Path, dest: Path, *, link: bool) -> None:
    """The full weights and tokenizer of ``model_dir`` into ``dest`` (a peft adapter is merged)."""
    if (model_dir / "adapter_config.json").is_file():
        _merge_adapter(model_dir, dest)
        return
    for src in sorted(model_dir.iterdir()):
        if not src.is_file():
            continue
        if link:
            try:
                os.link(src, dest / src.name)
                continue
            except OSError:  # another file system, or links not allowed: copy
                pass
        shutil.copy2(src, dest / src.name)


def _merge_adapter(model_dir: Path, dest: Path) -> None:
    """A peft adapter folder merged into its base model, saved as full weights with its
    tokenizer."""
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoTokenizer

    model = AutoPeftModelForCausalLM.from_pretrained(str(model_dir)).merge_and_unload()
    model.save_pretrained(str(dest))
    AutoTokenizer.from_pretrained(str(model_dir)).save_pretrained(str(dest))


def _read_grid(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ExportError(
            f"--grid {path}: no such file (the eval.json 'inspo eval --grid RUN' writes)"
        )
    data = artifacts.read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ExportError(f"--grid {path} is not an 'inspo eval' result (no 'cells' list in it)")
    return data


def example_question(config: Any) -> str:
    """A held-out question of the run's own data for the card's snippet (the first test, else
    dev, question), or :data:`FALLBACK_EXAMPLE` when the data cannot be read here."""
    from inspo.data.sources import load_qa_source

    data = config.data
    env = None
    for source, split in (
        (data.eval, data.test_split),
        (data.eval, data.eval_split),
        (data.train, data.train_split),
    ):
        if not source or not split:
            continue
        try:
            if (
                source == "env"
            ):  # the environment's own questions: build it (the card is written once)
                env = env if env is not None else _env_of(config)
                questions = list(env.questions(split))[:1]
            else:
                questions = load_qa_source(source, split=split, limit=1)
        except Exception as exc:  # noqa: BLE001 - only the card's example; the fallback says nothing false
            log.info("card example: %s@%s cannot be read here (%s)", source, split, exc)
            continue
        if questions:
            return questions[0].question
    return FALLBACK_EXAMPLE


def _env_of(config: Any) -> Any:
    from inspo.envs.registry import make_env

    if config.env.python:
        raise ValueError(f"the environment {config.env.name!r} was an object given in Python")
    return make_env(config.env.name, config.env.options)


def push_agent(
    folder: str | Path,
    repo_id: str,
    *,
    private: bool = False,
    token: str | None = None,
    commit_message: str = "Upload an inspo agent",
) -> str:
    """Upload an exported agent ``folder`` to the Hugging Face hub repository ``repo_id``
    (created when missing) with ``huggingface_hub``; returns the commit's URL.

    The card's snippet is first pointed at ``repo_id`` (``inspo.load_agent(repo_id)`` downloads
    it; the local card is restored when the upload fails). ``HF_ENDPOINT`` and ``HF_TOKEN`` are read
    when the call is made.
    """
    from huggingface_hub import HfApi

    folder = Path(folder)
    if not (folder / CARD_FILE).is_file() or not (folder / INSTRUCTION_FILE).is_file():
        raise ExportError(
            f"{folder} is not an exported inspo agent (no {CARD_FILE} / {INSTRUCTION_FILE})"
        )
    card = (folder / CARD_FILE).read_text(encoding="utf-8")
    (folder / CARD_FILE).write_text(point_card_at(card, repo_id), encoding="utf-8")
    try:
        api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=token)
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        info = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            commit_message=commit_message,
        )
    except BaseException:
        (folder / CARD_FILE).write_text(
            card, encoding="utf-8"
        )  # the local card keeps loading the local folder
        raise
    return str(getattr(info, "commit_url", info))
