"""The training package moved from ``inspo.train`` to ``inspo.training`` (inspo/_moved.py):
every old path raises an ImportError that names the new module, also as the first import of a
fresh interpreter; ``inspo.train`` is a plain function and ``inspo.training`` a package."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

import inspo
from inspo._moved import RENAMED, MovedFinder, install

TRAINING = Path(inspo.__file__).parent / "training"
NEW_NAMES = sorted(p.stem for p in TRAINING.glob("*.py") if p.stem != "__init__")
OLD_OF = {new: old for old, new in RENAMED.items()}


def test_the_renamed_modules_exist_under_their_new_names_and_not_under_their_old_ones():
    assert set(RENAMED.values()) <= set(NEW_NAMES)
    assert not set(RENAMED) & set(NEW_NAMES)
    assert {"config", "run", "setup", "loop"} <= set(NEW_NAMES)  # the walk found the package


@pytest.mark.parametrize("new", NEW_NAMES)
def test_every_old_module_path_raises_an_import_error_naming_the_new_module(new):
    old = OLD_OF.get(new, new)
    expected = rf"^inspo\.train\.{old} moved to inspo\.training\.{new} "
    with pytest.raises(ImportError, match=expected) as raised:
        importlib.import_module(f"inspo.train.{old}")
    assert not isinstance(raised.value, ModuleNotFoundError)  # `from inspo.train import X` must not swallow it
    with pytest.raises(ImportError, match=expected):
        exec(f"from inspo.train import {old}", {})
    with pytest.raises(ImportError, match=expected):
        exec(f"from inspo.train.{old} import something", {})
    assert importlib.util.find_spec(f"inspo.training.{new}") is not None  # where the message points


def test_the_first_import_of_a_fresh_interpreter_names_the_new_module_and_train_stays_the_function():
    code = ("import inspect\n"
            "try:\n"
            "    import inspo.train.config\n"
            "except ImportError as exc:\n"
            "    print(exc)\n"
            "import inspo\n"
            "from inspo import train\n"
            "print(inspect.isfunction(inspo.train), train is inspo.train)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr[-3000:]
    message, function = done.stdout.strip().splitlines()
    assert message.startswith("inspo.train.config moved to inspo.training.config ")
    assert function == "True True"


def test_train_is_a_plain_function_and_training_a_package_whatever_was_imported_first():
    import inspo.training.config  # noqa: F401 - importing a training module must not hide the function
    from inspo import train

    assert inspect.isfunction(inspo.train) and train is inspo.train is inspo.api.train
    assert inspect.ismodule(inspo.training) and hasattr(inspo.training, "__path__")
    assert not callable(inspo.training)
    with pytest.raises(ImportError, match=r"^inspo\.train\.run moved to inspo\.training\.run "):
        import inspo.train.run  # noqa: F401
    assert inspect.isfunction(inspo.train)  # a failed old import leaves the function in place


def test_without_the_placeholder_the_old_package_itself_says_where_it_went(monkeypatch):
    monkeypatch.delitem(sys.modules, "inspo.train")
    with pytest.raises(ImportError, match=r"^inspo\.train is the function inspo\.api\.train now; the "
                                          r"training package moved to inspo\.training"):
        importlib.import_module("inspo.train.config")


def test_the_finder_answers_only_for_the_old_package_and_is_installed_once():
    finder = MovedFinder()
    for name in ("inspo.training", "inspo.training.config", "inspo.trained", "inspo.trainer", "inspo", "train"):
        assert finder.find_spec(name) is None
    before = [f for f in sys.meta_path if getattr(f, "inspo_moved", False)]
    install()
    install()
    assert [f for f in sys.meta_path if getattr(f, "inspo_moved", False)] == before and len(before) == 1
