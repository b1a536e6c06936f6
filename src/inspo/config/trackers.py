"""The experiment trackers ``rl.report_to`` may name, and the packages they need.

TRL (through transformers' ``report_to``) logs every training metric to the trackers named in
``rl.report_to``: TRL's own (``loss``, ``reward`` ...) and inspo's, which the step's callback adds
to TRL's logs (``inspo/population_size``, ``inspo/weight/<id>``, ``rollout/search_calls``,
``rollout/finish/<reason>``...; see :mod:`inspo.training.step`). transformers prefixes them with
``train/`` (``train/inspo/population_size``). Where each tracker writes:

- ``tensorboard``: event files under ``<output_dir>/runs/<date>_<host>/`` (or
  ``$TENSORBOARD_LOGGING_DIR``); offline; ``tensorboard --logdir <output_dir>/runs``;
- ``trackio``: a local database (``~/.cache/huggingface/trackio``), offline unless told to sync to
  a Space; ``trackio show``;
- ``wandb``: Weights & Biases (needs ``wandb login``, or ``WANDB_MODE=offline``).

A name that is not in :data:`TRACKERS` is a config error (:func:`check_tracker_names`, when the
config is built); a named tracker whose package is missing is refused by
:func:`missing_tracker_message` before a run loads anything, with the install command.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Tracker:
    name: str
    modules: tuple[str, ...]
    """Any one of these importable is enough."""
    extra: str
    """The extra of inspo that installs it."""


TRACKERS: dict[str, Tracker] = {
    "tensorboard": Tracker("tensorboard", ("tensorboard", "tensorboardX"), "tensorboard"),
    "trackio": Tracker("trackio", ("trackio",), "trackio"),
    "wandb": Tracker("wandb", ("wandb",), "wandb"),
}


def check_tracker_names(names: Sequence[str]) -> str | None:
    """The error message for ``rl.report_to`` values that are not trackers inspo knows (None: all
    known)."""
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        return f"rl.report_to must be a list of tracker names such as [tensorboard]; got {names!r}"
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        return (
            f"rl.report_to: unknown tracker(s) {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(TRACKERS)} (or [] for none)"
        )
    return None


def install_command(names: Sequence[str]) -> str:
    """The pip command that installs the extras of the trackers ``names``."""
    return f"pip install 'inspo[{','.join(TRACKERS[n].extra for n in names)}]'"


def missing_trackers(names: Sequence[str]) -> list[str]:
    """The trackers among ``names`` none of whose modules can be imported here."""
    return [
        n
        for n in names
        if not any(importlib.util.find_spec(m) is not None for m in TRACKERS[n].modules)
    ]


def missing_tracker_message(names: Sequence[str]) -> str | None:
    """One line saying which trackers of ``rl.report_to`` are not installed and how to install
    them (None: every one is)."""
    missing = missing_trackers(names)
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"rl.report_to names {', '.join(missing)}, which {verb} not installed: run "
        f"{install_command(missing)} (or drop it from rl.report_to)"
    )
