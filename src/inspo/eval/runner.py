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
from dataclasses import asdict, replace
from typing import Any

from inspo.eval import EvalReport, parse_dataset, parse_instruction, parse_policy, run_eval

log = logging.getLogger("inspo.eval")


def evaluate_config(
    config: Any,
    *,
    policies: Sequence[str] = (),
    instructions: Sequence[str] = (),
    datasets: Sequence[str] = (),
    limit: int = 0,
    temperature: float = 0.0,
    dtype: str = "auto",
    batch_size: int = 16,
    engine: str = "hf",
    vllm: Any = None,
    progress: bool = True,
    origin: str = "",
    overrides: Sequence[Any] = (),
    error_setting: str = "rl.max_error_rate",
    dtype_setting: str = "dtype",
    env: Any = None,
) -> EvalReport:
    """Play every policy x instruction x dataset with ``config``'s agent; the report's
    ``settings`` record what the cells were measured under.

    Args:
        config: a resolved :class:`~inspo.training.config.TrainConfig`.
        policies: model names or folders, or run directories (their trained ``model/``);
            empty: ``config.model.name_or_path``.
        instructions: ``seed``, ``@NAME``, a run directory (its ``best_instruction.txt``) or a
            text file; empty: ``["seed"]``.
        datasets: ``SOURCE[@SPLIT]`` (``env@test``: the environment's own); empty:
            ``config.data.eval`` at ``data.test_split``.
        limit: at most this many questions per dataset (0: all).
        temperature: decoding temperature (0: greedy, as a run's own end-of-run evaluation).
        dtype: the policies' weights dtype; ``auto``: bfloat16 where the device multiplies it fast,
            else float32 (:mod:`inspo.models.precision`; resolved once, logged, and recorded in
            the report's ``settings["precision"]``). ``dtype_setting`` names it in that line.
        engine / vllm: ``hf`` (transformers) or ``vllm`` with its
            :class:`~inspo.agent.vllm_engine.VLLMOptions`.
        progress: a tqdm bar over each cell's episodes.
        origin / overrides: where the config came from and the
            :class:`~inspo.core.config.SettingChange` s put on top (recorded in ``settings``).
        error_setting: how the stop message names ``rl.max_error_rate`` (a cell whose rollouts
            fail on errors beyond it stops the evaluation: the report's ``stopped`` says why).
        env: an environment object instead of the one ``config.env`` names.

    Raises:
        ValueError: a bad ``limit``, no questions named, an empty dataset.
        FileNotFoundError: an instruction or dataset that does not exist.
        SetupError: a policy that is no model, an environment that cannot be built (a retriever).
        ImportError: ``engine="vllm"`` without the ``vllm`` module (with the install command).
    """
    from inspo.envs.build import agent_config, build_env, check_prefill, resolve_model_dir
    from inspo.models.precision import default_device, resolve_precision

    if limit < 0:
        raise ValueError(f"limit must be >= 0 (at most this many questions per dataset; 0: all), got {limit}")
    data = config.data
    if not datasets and not data.eval:
        raise ValueError("name the questions with a dataset SOURCE[@SPLIT] (the config's data.eval is empty)")
    specs = list(datasets) or [f"{data.eval}@{data.test_split or 'test'}"]
    models = []  # (label, model folder): every policy is found before the environment or a model loads
    for spec in list(policies) or [config.model.name_or_path]:
        label, model = parse_policy(spec)
        models.append((label, str(resolve_model_dir(model))))
    given = env is not None
    env = build_env(config, env)
    check_prefill(env, config.rl.prefill)
    sets = [parse_dataset(spec, limit=limit, max_hops=data.max_hops, env=env) for spec in specs]
    named = [parse_instruction(spec, seed_text=config.seed_instruction, env=env)
             for spec in list(instructions) or ["seed"]]
    device = default_device()
    precision = resolve_precision(dtype, device=device, dtype_key=dtype_setting)
    log.info("%s", precision.line())
    for warning in precision.warnings():
        log.warning("%s", warning)
    # greedy unless temperature says otherwise, as the run's own end-of-run evaluation
    agent = replace(agent_config(config.rl), temperature=temperature)
    settings = {
        "config": origin,
        "overrides": [{"key": c.key, "old": c.old, "new": c.new} for c in overrides],
        "agent": asdict(agent),
        "decoding": ("greedy" if agent.temperature == 0 else f"temperature {agent.temperature}")
                    + f" (--temperature; training sampled at rl.temperature={config.rl.temperature})",
        "env": {"name": str(env.name), "python": True} if given else config.env.to_dict(),
        "questions": {"max_hops": data.max_hops, "limit": limit},
        "precision": precision.describe(),
    }

    def factory(model: str):
        def make():
            from inspo.agent.load import load_engine
            from inspo.envs.evaluate import make_evaluate

            policy = load_engine(model, kind=engine, dtype=precision.dtype, device=device, vllm=vllm)
            return make_evaluate(policy, env, agent, batch_size=batch_size, progress=progress,
                                 max_error_rate=config.rl.max_error_rate, error_setting=error_setting)
        return make

    report = run_eval([(label, factory(model)) for label, model in models], named, sets, env=env)
    report.settings = settings
    return report
