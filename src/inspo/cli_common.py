"""What the ``inspo`` subcommands share: the user-facing error and the config flags
(``--preset``, ``--env``, ``--config``, ``--set``, ``--output-dir``) with their resolution."""

from __future__ import annotations

import argparse


class CLIError(RuntimeError):
    """A user-facing error: printed without a traceback, exit status 2."""


def add_config_args(
    p: argparse.ArgumentParser, default_preset: str | None = "cpu-tiny", *, output_dir: bool = True
) -> None:
    from inspo.config.presets import PRESETS

    p.add_argument(
        "--preset",
        default=default_preset,
        choices=list(PRESETS),
        help="starting point (default: cpu-tiny, the embedded CPU default; paper and "
        "paper-7b are the paper's setup and ask for the parts you must supply)",
    )
    p.add_argument(
        "--env",
        default=None,
        metavar="NAME",
        help="env.name: the agent's environment: search-r1 (the paper's search agent, the "
        "default), calculator, or module:attr for your own (docs/your-own-agent.md); its settings "
        "are --set env.KEY=VALUE",
    )
    p.add_argument("--config", default=None, help="YAML or TOML file applied over the preset")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one setting, e.g. --set rl.steps=20 --set coevolution.template=history",
    )
    if output_dir:
        p.add_argument("--output-dir", default=None, help="run directory (default: the preset's)")


def env_settings(overrides: list[str], command: str, example: str) -> dict:
    """The ``--set env.KEY=VALUE`` settings of a command that takes only an environment's settings
    (``inspo ask``, ``inspo data``); CLIError naming the command for any other key."""
    from inspo.config.files import parse_override

    settings: dict = {}
    for text in overrides:
        parsed = parse_override(text)
        if set(parsed) != {"env"}:
            raise CLIError(
                f"--set {text}: {command} takes only the environment's settings as --set "
                f"env.KEY=VALUE (e.g. {example})"
            )
        settings.update(parsed["env"])
    return settings


def resolve_config(args: argparse.Namespace, base: dict | None = None, extra: list[str] = ()):
    """``--preset`` (or ``base``), then ``--config``, then ``--env``, ``--set`` and ``extra`` (a
    command's shortcut flags as ``--set`` strings), and ``--output-dir``."""
    from inspo.config.train import resolve

    env = [f"env.name={args.env}"] if getattr(args, "env", None) else []
    overrides = [*env, *args.overrides, *extra]
    if getattr(args, "output_dir", None):
        overrides.append(f"output_dir={args.output_dir}")
    return resolve(args.preset or "cpu-tiny", args.config, overrides, base=base)
