"""inspo from Python: the three commands as functions, and the config they take.

::

    import inspo

    config = inspo.load_config("cpu-tiny", overrides={"rl.steps": 2, "output_dir": "runs/mine"})
    summary = inspo.train(config)  # inspo train: GRPO while the instruction co-evolves
    print(summary.best_instruction)  # what the run returns (also runs/mine/best_instruction.txt)
    report = inspo.evaluate(
        config, policies=[summary.run_dir], instructions=["seed", summary.run_dir]
    )
    print(report.markdown())  # inspo eval: EM, F1, searches, turns per cell

    evolved = inspo.evolve(config, steps=4)  # inspo evolve: instruction-only, the policy frozen

Each function is a thin wrapper over what the command runs (:func:`inspo.training.run.run_training`,
:func:`inspo.training.evolve.run_evolve`, :func:`inspo.eval.runner.evaluate_config`), so a run
started here leaves the same run directory, logs and summary as one started from the shell.
Heavy modules (torch, transformers, TRL) load when a function is called, not on ``import inspo``.

``inspo.train`` (or ``from inspo import train``) is :func:`train` itself, a plain function; the
training package behind it is :mod:`inspo.training`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inspo.config.train import TrainConfig
    from inspo.eval import EvalReport
    from inspo.training.step import RewardFn
    from inspo.training.summary import RunSummary

__all__ = ["evaluate", "evolve", "load_config", "train"]


def load_config(
    preset: str = "cpu-tiny",
    *,
    file: str | Path | None = None,
    overrides: Mapping[str, Any] | Sequence[str] = (),
) -> TrainConfig:
    """The resolved, validated config: ``preset``, then ``file`` (YAML/TOML), then ``overrides``,
    as ``--preset``, ``--config`` and ``--set`` resolve it for the commands.

    Args:
        preset: ``cpu-tiny`` (the CPU default), ``multihop``, ``paper`` or ``paper-7b``.
        file: a YAML or TOML file of settings applied over the preset.
        overrides: dotted keys and Python values, ``{"rl.steps": 2, "rl.report_to": ["tensorboard"],
            "output_dir": "runs/mine"}``; or ``--set`` strings, ``["rl.steps=2"]``.

    Raises:
        ConfigError: an unknown preset or key, or a value out of range (the message names it).
        FileNotFoundError: ``file`` does not exist.
    """
    from inspo.config.files import read_config_file
    from inspo.config.layers import merge_layer, user_bound
    from inspo.config.train import from_dict, resolve

    if isinstance(overrides, Mapping):
        config = resolve(preset, file)
        data = config.to_dict()
        kept = user_bound(read_config_file(file)) if file is not None else {}
        for key, value in overrides.items():
            node: dict[str, Any] = {}
            cursor = node
            parts = str(key).split(".")
            for part in parts[:-1]:
                cursor = cursor.setdefault(part, {})
            cursor[parts[-1]] = value
            data = merge_layer(data, node, kept)
            kept = user_bound(node, kept)
        return from_dict(data)
    return resolve(preset, file, [overrides] if isinstance(overrides, str) else list(overrides))


def train(
    config: TrainConfig | None = None,
    *,
    resume: bool | str = False,
    progress: bool = True,
    reward_fn: RewardFn | None = None,
    env: Any = None,
) -> RunSummary:
    """``inspo train``: GRPO on TRL while the instruction population co-evolves (``config.mode``:
    ``inspo``, ``static``, ``pre-policy`` or ``post-policy``), into ``config.output_dir``.

    Args:
        config: from :func:`load_config` (None: the ``cpu-tiny`` preset as it is).
        resume: True continues the run in ``output_dir`` from its last checkpoint; a path, from
            that checkpoint.
        progress: bars and one line per phase and step on stdout; False logs the lines at INFO
            on the ``inspo.training`` logger instead.
        reward_fn: replaces the environment's response-only reward of every rollout
            (``reward_fn(rollout) -> float``; it must read the response, never the prompt).
        env: the agent's environment as an object (:class:`~inspo.envs.base.Environment`, e.g.
            an :class:`~inspo.envs.TaggedToolEnv` of your own tools), instead of the one
            ``config.env.name`` names; see docs/your-own-agent.md.

    Returns:
        The run's :class:`~inspo.training.summary.RunSummary` (also ``summary.json``; the run's
        ``report.html`` is written beside it, as by ``inspo train``):
        ``best_instruction``, ``evaluation`` (the final choice and held-out test), ``run_dir`` ...

    Raises:
        SetupError: before anything trains: a tracker that is not installed, a bad path, an
            unreachable server, a batch that does not divide ... (the message says what to change).
    """
    from inspo.report import write_run_report
    from inspo.training.run import run_training

    summary = run_training(
        config if config is not None else load_config(),
        resume=resume,
        progress=progress,
        reward_fn=reward_fn,
        env=env,
    )
    write_run_report(summary.run_dir)  # as inspo train: report.html beside summary.json
    return summary


def evolve(
    config: TrainConfig | None = None,
    *,
    steps: int | None = None,
    policy_url: str | None = None,
    policy_model: str | None = None,
    engine: Any = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    reward_fn: RewardFn | None = None,
    env: Any = None,
) -> RunSummary:
    """``inspo evolve``: evolve the instruction population with a frozen policy (no weight
    updates), into ``out_dir`` (default ``config.output_dir``).

    Args:
        config: from :func:`load_config` (None: ``cpu-tiny``).
        steps: evolution steps (default ``config.offline_steps``).
        policy_url / policy_model: an OpenAI-compatible completions endpoint and its model name
            (vLLM, llama.cpp, Ollama ...); default: ``config.model`` loaded locally.
        engine: a ready policy engine (:class:`~inspo.engines.base.PolicyEngine`), instead.
        resume: continue after the last step saved in the run directory.
        progress / reward_fn / env: as in :func:`train`.

    Returns:
        The run's summary (also ``summary.json``), as :func:`train`'s without a trained model.
    """
    from inspo.report import write_run_report
    from inspo.training.evolve import run_evolve

    summary = run_evolve(
        config if config is not None else load_config(),
        steps=steps,
        policy_url=policy_url,
        policy_model=policy_model,
        engine=engine,
        out_dir=out_dir,
        resume=resume,
        progress=progress,
        reward_fn=reward_fn,
        env=env,
    )
    write_run_report(summary.run_dir)  # as inspo evolve
    return summary


def evaluate(
    config: TrainConfig | None = None,
    *,
    policies: Sequence[str] = (),
    instructions: Sequence[str] = (),
    datasets: Sequence[str] = (),
    limit: int = 0,
    temperature: float = 0.0,
    batch_size: int = 16,
    dtype: str = "auto",
    progress: bool = True,
    out: str | Path | None = None,
    env: Any = None,
) -> EvalReport:
    """``inspo eval``: every policy x instruction x dataset, played with ``config``'s agent in its
    environment (greedy by default), scored by the environment's reward and metrics, tool calls
    and turns.

    Args:
        config: from :func:`load_config` (None: ``cpu-tiny``); a run's own agent is
            ``load_config(file="RUN/config.yaml")``.
        policies: model names or folders, or run directories (their trained ``model/``);
            default: ``config.model.name_or_path``.
        instructions: ``"seed"`` (the config's seed instruction), ``"@NAME"`` (one of the
            environment's: ``"@weak"``, ``"@search-r1"``), a run directory (its
            ``best_instruction.txt``) or a text file; default ``["seed"]``.
        datasets: ``SOURCE[@SPLIT]`` (``"env@test"``: the environment's own questions;
            ``"world@test"``, a JSONL/parquet file, ``"hf:NAME@SPLIT"``); default:
            ``config.data.eval`` at ``config.data.test_split``.
        limit: at most this many questions per dataset (0: all).
        temperature: 0 decodes greedily.
        dtype: the policies' weights dtype: auto (bfloat16 where the device multiplies it fast,
            else float32), bfloat16, float32 or float16.
        out: a folder to write ``eval.json`` and ``eval.md`` into (None: write nothing).
        env: an environment object instead of the one ``config.env.name`` names (as in
            :func:`train`).

    Returns:
        The :class:`~inspo.eval.EvalReport`: ``cells`` (one per policy x instruction x dataset),
        per-question ``questions``, ``markdown()``.

    Raises:
        TooManyErrors: more than ``rl.max_error_rate`` of a cell's rollouts failed on errors
            (an outage, never scored); the cells played are written to ``out`` first.
    """
    from inspo.eval.runner import EvalGrid, EvalOrigin, EvalPlay, evaluate_config

    report = evaluate_config(
        config if config is not None else load_config(),
        EvalGrid(policies=policies, instructions=instructions, datasets=datasets, limit=limit),
        EvalPlay(temperature=temperature, dtype=dtype, batch_size=batch_size, progress=progress),
        EvalOrigin(config="inspo.evaluate"),
        env=env,
    )
    if out is not None:
        report.write(out)
    if report.stopped:  # an outage: never a score; what was played is in the report (and in out)
        from inspo.records import TooManyErrors

        raise TooManyErrors(
            f"{report.stopped} ({len(report.cells)} cell(s) played"
            + (f", written to {out})" if out is not None else ")")
        )
    return report
