"""``inspo eval``: policies x instructions x datasets, under the config a run recorded (``--grid``)
or a preset, with the agent's settings changed by ``--config``/``--set`` and shortcut flags."""

from __future__ import annotations

import argparse

from inspo.cli_common import CLIError, resolve_config
from inspo.eval import parse_policy
from inspo.eval.provenance import provenance

#: ``inspo eval`` flags that are shortcuts for a config setting (flag dest -> section, field); the
#: ``env`` ones are the search-r1 environment's settings.
EVAL_SHORTCUTS: dict[str, tuple[str, str]] = {
    "max_turns": ("rl", "max_turns"),
    "max_response_tokens": ("rl", "max_response_tokens"),
    "max_obs_tokens": ("rl", "max_obs_tokens"),
    "topk": ("env", "topk"),
    "corpus": ("env", "corpus"),
    "retriever": ("env", "retriever"),
    "retriever_url": ("env", "retriever_url"),
    "index_dir": ("env", "index_dir"),
    "max_error_rate": ("rl", "max_error_rate"),
}


def _run_config(run_dir: str) -> dict:
    """The resolved config a training run directory recorded (config.yaml, or config.json)."""
    from pathlib import Path

    from inspo.artifacts import CONFIG_FILE, DEMO_CONFIG_FILE
    from inspo.config.train import read_config_file

    run = Path(run_dir)
    for name in (CONFIG_FILE, DEMO_CONFIG_FILE):
        if (run / name).is_file():
            return read_config_file(run / name)
    raise CLIError(f"{run} has no {CONFIG_FILE}: is it an 'inspo train' run directory?")


def _eval_config(args: argparse.Namespace):
    """The config an evaluation runs under and what the user changed in it.

    The starting point is ``--grid``'s recorded config.yaml (the agent that was trained) or the
    preset (default cpu-tiny, the agent ``inspo train`` trains); ``--config``, ``--set`` and the
    shortcut flags (``--max-turns`` ...) go on top, as in ``inspo train``. Returns the config,
    where it started, and the settings changed on top of the start.
    """
    from inspo.config.train import resolve, setting_changes

    if args.grid and args.preset:
        raise CLIError(
            "--grid evaluates with the run's config.yaml; --preset would replace it "
            "(change single settings with --config / --set)"
        )
    base = _run_config(args.grid) if args.grid else None
    origin = (
        f"{args.grid}/config.yaml (the run's resolved config)"
        if args.grid
        else f"preset {args.preset or 'cpu-tiny'}"
    )
    start = resolve(args.preset or "cpu-tiny", base=base)
    shortcuts = [
        f"{section}.{name}={getattr(args, dest)}"
        for dest, (section, name) in EVAL_SHORTCUTS.items()
        if getattr(args, dest) is not None
    ]
    if args.retriever_url and args.retriever is None:
        shortcuts.append("env.retriever=http")
    config = resolve_config(args, base=base, extra=shortcuts)
    changes = [c for c in setting_changes(start, config) if c.key != "output_dir"]
    if (
        start.env.name != config.env.name
    ):  # another environment: its settings are listed once, not as changes
        changes = [
            c
            for c in changes
            if not c.key.startswith("env.")
            or c.key == "env.name"
            or (c.old is not None and c.new is not None)
        ]
    return config, origin, changes


def _grid_from_run(run_dir: str, base_model: str) -> tuple[list[str], list[str]]:
    """The paper's 2x2: {base, trained} x {seed, evolved} for a training run directory."""
    from pathlib import Path

    from inspo.artifacts import MODEL_DIR

    run = Path(run_dir)
    if not (run / MODEL_DIR).is_dir():
        raise CLIError(f"{run} has no trained model/ folder: the run did not finish")
    return [base_model, str(run)], ["seed", str(run)]


def _policy_dir(spec: str, model: str) -> str:
    """The model folder of ``--policy spec``, found before any work (a registered name is built
    into the cache once); CLIError saying what is accepted when there is none."""
    from inspo.envs.build import resolve_model_dir
    from inspo.records import SetupError

    try:
        return str(resolve_model_dir(model))
    except SetupError as exc:
        raise CLIError(f"--policy {spec}: {str(exc.__cause__ or exc)}") from exc


def cmd_eval(args: argparse.Namespace) -> int:
    from inspo.eval.runner import EvalGrid, EvalOrigin, EvalPlay, evaluate_config
    from inspo.records import SetupError

    if args.limit < 0:
        raise CLIError(
            "--limit must be >= 0 (at most this many questions per dataset; 0: all), got "
            f"{args.limit}"
        )
    config, origin, changes = _eval_config(args)
    policies, instructions = list(args.policy or []), list(args.instruction or [])
    if args.grid:
        grid_policies, grid_instructions = _grid_from_run(args.grid, config.model.name_or_path)
        policies += grid_policies
        instructions += grid_instructions
    vllm = None
    if args.engine == "vllm":
        from inspo.engines.vllm_engine import INSTALL_HINT, VLLMOptions, vllm_available
        from inspo.training.vllm_sync import agent_budget

        if not vllm_available():
            raise CLIError(f"--engine vllm: no module named 'vllm'; {INSTALL_HINT}")
        try:
            vllm = VLLMOptions(
                kv_cache_gib=args.vllm_kv_cache_gib,
                max_model_len=args.vllm_max_model_len,
                enforce_eager=args.vllm_eager,
            ).sized(agent_budget(config.rl))
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
    if not args.dataset and not config.data.eval:
        raise CLIError(
            "name the questions with --dataset SOURCE[@SPLIT] (the config's data.eval is empty)"
        )
    for spec in policies:  # named by its flag, before any work
        _policy_dir(spec, parse_policy(spec)[1])
    try:
        report = evaluate_config(
            config,
            EvalGrid(
                policies=policies,
                instructions=instructions,
                datasets=args.dataset or [],
                limit=args.limit,
            ),
            EvalPlay(
                temperature=args.temperature,
                dtype=args.dtype or (config.model.dtype if args.grid else "auto"),
                batch_size=args.batch_size,
                engine=args.engine,
                vllm=vllm,
                progress=not args.no_progress,
            ),
            EvalOrigin(
                config=origin,
                overrides=changes,
                error_setting="--max-error-rate (rl.max_error_rate)",
                dtype_setting="--dtype",
            ),
        )
    except (SetupError, ImportError) as exc:
        raise CLIError(str(exc)) from exc
    report.provenance = provenance(["inspo", *args.argv])  # the result names its code and command
    json_path, md_path = report.write(args.out)
    print(report.markdown())
    print(f"written: {json_path} and {md_path}")
    if (
        report.stopped
    ):  # an outage: what was played is written above, the exit status says it failed
        from inspo.records import TooManyErrors

        raise TooManyErrors(
            f"{report.stopped} (the {len(report.cells)} cell(s) played so far are in {json_path})"
        )
    return 0
