"""One evaluation under a resolved config: what ``inspo eval`` runs after reading its flags, and
what :func:`inspo.evaluate` runs from Python.

The config gives the agent's environment (``env``: its tools, protocol, reward and questions;
built by :mod:`inspo.envs.build`, the layer training and the trained agent share), how it plays
(turns, tokens per turn, prefill, last-turn nudge), the seed instruction, the question filter
(``data.max_hops``) and the default policy and questions; the arguments name what to cross:
policies x instructions x datasets (spec strings as in :mod:`inspo.eval`). Every policy's model
folder is found, and the environment built, before any model loads; models then load one at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from inspo.eval import EvalReport, parse_dataset, parse_instruction, parse_policy, run_eval

log = logging.getLogger("inspo.eval")


@dataclass(frozen=True)
class EvalGrid:
    """What an evaluation crosses: policies x instructions x datasets (spec strings as in
    :mod:`inspo.eval`), at most ``limit`` questions per dataset (0: all)."""

    policies: Sequence[str] = ()
    """Model names or folders, or run directories (their trained ``model/``); empty: the config's
    model."""
    instructions: Sequence[str] = ()
    """``seed``, ``@NAME``, a run directory (its ``best_instruction.txt``) or a text file; empty:
    ``["seed"]``."""
    datasets: Sequence[str] = ()
    """``SOURCE[@SPLIT]`` (``env@test``: the environment's own); empty: ``data.eval`` at
    ``data.test_split``."""
    limit: int = 0


@dataclass(frozen=True)
class EvalPlay:
    """How the policies play: decoding, weights dtype, batch, engine, progress bars."""

    temperature: float = 0.0
    """0: greedy, as a run's own end-of-run evaluation."""
    dtype: str = "auto"
    """The policies' weights dtype; ``auto``: bfloat16 where the device multiplies it fast, else
    float32 (:mod:`inspo.models.precision`; resolved once, logged, and recorded in the report's
    settings)."""
    batch_size: int = 16
    engine: str = "hf"
    """``hf`` (transformers) or ``vllm`` with ``vllm``'s
    :class:`~inspo.engines.vllm_engine.VLLMOptions`."""
    vllm: Any = None
    progress: bool = True


@dataclass(frozen=True)
class EvalOrigin:
    """Where the settings came from (recorded in the report's ``settings``), and how messages name
    two of them: the CLI says ``--dtype``, Python ``dtype``."""

    config: str = ""
    overrides: Sequence[Any] = ()
    """The :class:`~inspo.core.config.SettingChange` s put on top of the config."""
    error_setting: str = "rl.max_error_rate"
    dtype_setting: str = "dtype"


def evaluate_config(
    config: Any,
    grid: EvalGrid = EvalGrid(),
    play: EvalPlay = EvalPlay(),
    origin: EvalOrigin = EvalOrigin(),
    *,
    env: Any = None,
) -> EvalReport:
    """Play every policy x instruction x dataset of ``grid`` with ``config``'s agent (a resolved
    :class:`~inspo.config.train.TrainConfig`), as ``play`` says; the report's ``settings``
    record what the cells were measured under. ``env``: an environment object instead of the one
    ``config.env`` names. A cell whose rollouts fail on errors beyond ``rl.max_error_rate`` stops
    the evaluation: the report's ``stopped`` says why.

    Raises:
        ValueError: a bad ``limit``, no questions named, an empty dataset.
        FileNotFoundError: an instruction or dataset that does not exist.
        SetupError: a policy that is no model, an environment that cannot be built (a retriever).
        ImportError: ``engine="vllm"`` without the ``vllm`` module (with the install command).
    """
    from inspo.envs.build import agent_config, build_env, check_prefill, resolve_model_dir
    from inspo.models.precision import default_device, resolve_precision

    specs = _dataset_specs(config.data, grid)
    # (label, model folder): every policy is found before the environment or a model loads
    models = []
    for spec in list(grid.policies) or [config.model.name_or_path]:
        label, model = parse_policy(spec)
        models.append((label, str(resolve_model_dir(model))))
    given = env is not None
    env = build_env(config, env)
    check_prefill(env, config.rl.prefill)
    data = config.data
    sets = [
        parse_dataset(spec, limit=grid.limit, max_hops=data.max_hops, env=env) for spec in specs
    ]
    named = [
        parse_instruction(spec, seed_text=config.seed_instruction, env=env)
        for spec in list(grid.instructions) or ["seed"]
    ]
    device = default_device()
    precision = resolve_precision(play.dtype, device=device, dtype_key=origin.dtype_setting)
    log.info("%s", precision.line())
    for warning in precision.warnings():
        log.warning("%s", warning)
    # greedy unless temperature says otherwise, as the run's own end-of-run evaluation
    agent = replace(agent_config(config.rl), temperature=play.temperature)
    settings = {
        "config": origin.config,
        "overrides": [{"key": c.key, "old": c.old, "new": c.new} for c in origin.overrides],
        "agent": asdict(agent),
        "decoding": ("greedy" if agent.temperature == 0 else f"temperature {agent.temperature}")
        + f" (--temperature; training sampled at rl.temperature={config.rl.temperature})",
        "env": {"name": str(env.name), "python": True} if given else config.env.to_dict(),
        "questions": {"max_hops": data.max_hops, "limit": grid.limit},
        "precision": precision.describe(),
    }

    def factory(model: str):
        return _evaluate_maker(model, env, agent, play, origin, precision, device, config)

    report = run_eval([(label, factory(model)) for label, model in models], named, sets, env=env)
    report.settings = settings
    return report


def _dataset_specs(data: Any, grid: EvalGrid) -> list[str]:
    """The datasets the grid names, or the config's ``data.eval`` test split; refuses a negative
    ``limit`` and no questions at all."""
    if grid.limit < 0:
        raise ValueError(
            "limit must be >= 0 (at most this many questions per dataset; 0: all), "
            f"got {grid.limit}"
        )
    if not grid.datasets and not data.eval:
        raise ValueError(
            "name the questions with a dataset SOURCE[@SPLIT] (the config's data.eval is empty)"
        )
    return list(grid.datasets) or [f"{data.eval}@{data.test_split or 'test'}"]


def _evaluate_maker(
    model: str,
    env: Any,
    agent: Any,
    play: EvalPlay,
    origin: EvalOrigin,
    precision: Any,
    device: str,
    config: Any,
):
    """A function that loads ``model`` (when its cells are played, not before) and returns its
    evaluate function for ``env``'s agent."""

    def make():
        from inspo.engines.load import load_engine
        from inspo.envs.evaluate import make_evaluate

        policy = load_engine(
            model, kind=play.engine, dtype=precision.dtype, device=device, vllm=play.vllm
        )
        return make_evaluate(
            policy,
            env,
            agent,
            batch_size=play.batch_size,
            progress=play.progress,
            max_error_rate=config.rl.max_error_rate,
            error_setting=origin.error_setting,
        )

    return make
