"""Environments by name: ``env.name`` in a config, :func:`make_env` in Python.

A name is one of:

- a built-in environment (:data:`BUILTINS`): ``search-r1`` (the default: the paper's search agent)
  or ``calculator`` (arithmetic word problems with a calculator tool);
- ``module:attr``, a user's environment, as verifiers' ``load_environment``: ``attr`` is a factory
  called with the ``env:`` section's other settings as keywords (a function or a class), or an
  environment object (then the section takes no other setting). The module is imported as it is,
  else from the current directory (``my_env:load_environment`` finds ``./my_env.py``);
- ``path/to/file.py:attr``: the same, from a file.

Rules: an unknown name fails with the built-ins listed; a ``module:attr`` that does not import fails
with the import error shown; a factory that raises fails with its error; what it returns is checked
for every part of an environment (:func:`~inspo.envs.base.check_environment`, which names a missing
part). The built-ins' settings are checked when a config is read (:func:`resolve_options`), before
anything is built; a user factory checks its own when it is called.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inspo.envs.base import check_environment

DEFAULT = "search-r1"


@dataclass(frozen=True)
class Builtin:
    """Where a built-in environment's parts live (``module:attr`` strings, imported when used)."""

    factory: str
    """``load_environment(**settings)``."""
    options: str
    """``options_from(settings) -> the settings dataclass``: checks them without building
    anything."""
    instructions: str
    """The named seed instructions (``@NAME``)."""
    about: str


BUILTINS: dict[str, Builtin] = {
    "search-r1": Builtin(
        "inspo.envs.search_r1.env:load_environment",
        "inspo.envs.search_r1.env:options_from",
        "inspo.envs.search_r1.protocol:NAMED_INSTRUCTIONS",
        "Search-R1's search agent (the paper's): <search>, <information>, <answer>",
    ),
    "calculator": Builtin(
        "inspo.envs.calculator.env:load_environment",
        "inspo.envs.calculator.env:options_from",
        "inspo.envs.calculator.env:NAMED_INSTRUCTIONS",
        "arithmetic word problems with a calculator: <calc>, <result>, <answer>",
    ),
}


class EnvNameError(ValueError):
    """``env.name`` names no environment that can be built; the message says why and what to do."""


def builtin_names() -> list[str]:
    return list(BUILTINS)


def _attr(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def _import_module(module: str) -> Any:
    """``module`` imported; from the current directory when it is not found elsewhere."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        here = os.getcwd()
        if (
            exc.name != top
            or here in sys.path
            or not (Path(here, f"{top}.py").is_file() or Path(here, top).is_dir())
        ):
            raise
        sys.path.append(here)
        return importlib.import_module(module)


def load_factory(name: str) -> Any:
    """What ``name`` points at (a built-in's factory, or a user's ``module:attr``); EnvNameError
    naming the built-ins, the import error or the missing attribute."""
    if name in BUILTINS:
        return _attr(BUILTINS[name].factory)
    if ":" not in name:
        raise EnvNameError(
            f"unknown env.name {name!r}; the built-in environments are: {', '.join(BUILTINS)}; or "
            "name your own as module:attr (a factory such as my_env:load_environment)"
            + _did_you_mean(name)
        )
    where, _, attr = name.rpartition(":")
    if not where or not attr:
        raise EnvNameError(f"env.name {name!r}: write module:attr (e.g. my_env:load_environment)")
    try:
        module = _load_module(where)
    except EnvNameError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module: its own error, shown whole
        hint = ""
        if (
            isinstance(exc, ModuleNotFoundError) and exc.name == where.split(".")[0]
        ):  # the module itself, not an import in it
            hint = (
                f"; the module {where!r} must be importable here: run from the folder that holds "
                f"{where.replace('.', '/')}.py, or add that folder to PYTHONPATH"
            )
        raise EnvNameError(
            f"env.name {name!r}: importing {where!r} failed: {type(exc).__name__}: {exc}{hint}"
        ) from exc
    if not hasattr(module, attr):
        raise EnvNameError(f"env.name {name!r}: module {where!r} has no attribute {attr!r}")
    return getattr(module, attr)


def _load_module(where: str) -> Any:
    """The module ``where`` names: a ``.py`` file's path or an importable module name."""
    if not where.endswith(".py"):
        return _import_module(where)
    path = Path(where).expanduser()
    if not path.is_file():
        raise EnvNameError(f"env.name {where!r}: no file {path}")
    spec = importlib.util.spec_from_file_location(f"inspo_user_env_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _did_you_mean(name: str) -> str:
    """'; did you mean ...?' when ``name`` (no ``:attr``) is a module or ``.py`` file that imports
    and defines ``load_environment`` (else its public functions, at most three); '' otherwise."""
    try:
        module = _load_module(name)
    except Exception:  # noqa: BLE001 - only a hint: the error above is the answer
        return ""
    found = (
        ["load_environment"]
        if callable(getattr(module, "load_environment", None))
        else [
            a
            for a, v in vars(module).items()
            if not a.startswith("_")
            and callable(v)
            and getattr(v, "__module__", None) == module.__name__
        ][:3]
    )
    return "; did you mean " + " or ".join(f"{name}:{a}" for a in found) + "?" if found else ""


def resolve_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``env:`` settings of ``name``, checked: a built-in's with its defaults filled in
    (ValueError naming an unknown or wrong setting); a user's as given (its factory checks them)."""
    if name in BUILTINS:
        return _attr(BUILTINS[name].options)(dict(options)).to_dict()
    load_factory(name)  # an unknown name or a module that does not import fails now, not mid-run
    return dict(options)


def named_instructions(name: str) -> Mapping[str, str] | None:
    """The ``@NAME`` seed instructions of a built-in (None for a user's: known once it is built)."""
    return _attr(BUILTINS[name].instructions) if name in BUILTINS else None


def make_env(name: str = DEFAULT, options: Mapping[str, Any] | None = None) -> Any:
    """The environment ``name`` with ``options`` (the ``env:`` section's other settings), checked
    for every part (module docstring)."""
    options = dict(options or {})
    target = load_factory(name)
    if callable(target) and not _is_environment(target):
        try:
            env = target(**options)
        except TypeError as exc:
            raise EnvNameError(
                f"env.name {name!r}: calling it with the env settings {sorted(options)} failed: "
                f"{exc}"
            ) from exc
        if env is None:
            raise EnvNameError(
                f"env.name {name!r}: the factory returned None; it must return the environment "
                "(a missing `return`?)"
            )
    elif options:
        raise EnvNameError(
            f"env.name {name!r} is an environment object: it takes no settings, got "
            f"{sorted(options)}"
        )
    else:
        env = target
    return check_environment(env, where=repr(name))


def _is_environment(obj: Any) -> bool:
    return not isinstance(obj, type) and hasattr(obj, "parse") and hasattr(obj, "tools")


def resolve_seed(env: Any, text: str) -> str:
    """A seed instruction as a config writes it: '' is the environment's own, ``@NAME`` one of its
    named ones, anything else the text itself. ValueError for an unknown name."""
    if not text:
        return env.seed_instruction
    if text.startswith("@"):
        named: Mapping[str, str] = env.instructions
        if text[1:] not in named:
            raise ValueError(
                f"unknown named instruction {text!r} for environment {env.name!r}; its named ones "
                "are: " + ", ".join("@" + k for k in named)
            )
        return named[text[1:]]
    return text


def check_seed_name(name: str, text: str) -> None:
    """ValueError when ``text`` names (``@NAME``) a seed that built-in environment ``name``
    lacks."""
    named = named_instructions(name)
    if named is not None and text.startswith("@") and text[1:] not in named:
        raise ValueError(
            f"unknown named instruction {text!r} for env.name={name}; its named ones are: "
            + ", ".join("@" + k for k in named)
        )
