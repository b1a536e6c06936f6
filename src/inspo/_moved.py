"""Old import paths that moved: ``inspo.train.X`` is ``inspo.training.X`` now.

Importing ``inspo.train.config`` (or ``from inspo.train.run import ...``) raises ImportError
with a message that names the new module: ``inspo.train.config moved to inspo.training.config``.
Three training modules also got names that say what they hold: ``grpo`` is ``grpo_trainer``,
``trainer`` is ``grpo_config`` and ``grpo_run`` is ``grpo_stage``.

``inspo.train`` is the function :func:`inspo.api.train`, so no module may sit at that name (the
import system would set the module as ``inspo.train`` and hide the function). Without help
Python would stop at the parent, "No module named 'inspo.train'", and never say where the module
went. Two small pieces, put in place by :func:`install` when ``inspo`` is imported:

- an empty package ``inspo.train`` in ``sys.modules``: with it Python looks for the module itself
  (``inspo.train.config``) and asks the finder below. It is never set on ``inspo``, whose
  ``train`` stays the function;
- :class:`MovedFinder`, last on ``sys.meta_path``, so only names that nothing else found reach
  it; for ``inspo.train`` and its modules it raises the ImportError, for any other name it
  returns None.
"""

from __future__ import annotations

import sys
import types
from importlib.machinery import ModuleSpec

OLD, NEW = "inspo.train", "inspo.training"
#: Modules that also changed their own name: old -> new, in ``inspo.training``.
RENAMED = {"grpo": "grpo_trainer", "trainer": "grpo_config", "grpo_run": "grpo_stage"}


def new_name(old: str) -> str:
    """Where the module ``old`` (``inspo.train`` or ``inspo.train.X``) is now."""
    if old == OLD:
        return NEW
    module = old[len(OLD) + 1:]
    return f"{NEW}.{RENAMED.get(module, module)}"


class MovedFinder:
    """Raises ImportError naming the new module for ``inspo.train`` and ``inspo.train.*``."""

    inspo_moved = True  # how install() recognises one already in place

    def find_spec(self, name: str, path=None, target=None):
        if name == OLD:
            raise ImportError(f"{OLD} is the function inspo.api.train now; the training package moved "
                              f"to {NEW} ({OLD}.X is {NEW}.X)", name=name)
        if name.startswith(OLD + "."):
            raise ImportError(f"{name} moved to {new_name(name)} ({OLD} is the function "
                              f"inspo.api.train now; the training package is {NEW})", name=name)
        return None


def install() -> None:
    """Put the empty ``inspo.train`` package and :class:`MovedFinder` in place (once)."""
    if OLD not in sys.modules:
        placeholder = types.ModuleType(OLD, f"Moved: {OLD}.X is {NEW}.X now; see inspo._moved.")
        placeholder.__spec__ = ModuleSpec(OLD, None, is_package=True)
        placeholder.__path__ = []
        sys.modules[OLD] = placeholder
    if not any(getattr(finder, "inspo_moved", False) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
