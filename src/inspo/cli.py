"""The ``inspo`` command line.

Each subcommand is a small function; heavy modules are imported inside it, so ``inspo --help``
is instant. Their parsers (flags, help texts, defaults) are in :mod:`inspo.cli_parsers`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from inspo.cli_agent import add_agent_parsers
from inspo.cli_common import CLIError, env_settings, resolve_config
from inspo.cli_eval import cmd_eval
from inspo.cli_parsers import (
    add_data_parser,
    add_demo_parser,
    add_eval_parser,
    add_evolve_parser,
    add_report_parser,
    add_serve_retriever_parser,
    add_train_parser,
)
from inspo.records import RunStopped, TooManyErrors

log = logging.getLogger("inspo.cli")


# ------------------------------------------------------------------------------------------ demo
def _optimizer_from_args(args: argparse.Namespace, seed: int):
    from inspo.llm.factory import OptimizerLLMConfig, make_optimizer_llm

    cfg = OptimizerLLMConfig(
        kind=args.optimizer,
        base_url=args.optimizer_base_url,
        model=args.optimizer_model,
        local_model_path=args.optimizer_local_model,
    )
    import random

    from inspo.synthetic import reflector_rules

    return make_optimizer_llm(
        cfg, random.Random(seed), rules=reflector_rules()
    )  # the demo's synthetic agent


def cmd_demo(args: argparse.Namespace) -> int:
    from inspo.core.config import CoEvolutionConfig
    from inspo.demo import run_demo

    if args.steps < 1:
        raise CLIError(f"--steps must be >= 1 (training steps to simulate), got {args.steps}")
    if args.validation_size < 1:
        raise CLIError(
            "--validation-size must be >= 1 (|D_B|, the questions each candidate instruction is "
            "verified on; with 0 every candidate would be admitted unverified), got "
            f"{args.validation_size}"
        )
    config = CoEvolutionConfig(
        seed=args.seed,
        evolve_until=args.steps,
        validation_size=args.validation_size,
        template=args.template,
    )
    llm = _optimizer_from_args(args, args.seed)
    summary = run_demo(
        args.out, llm, config=config, steps=args.steps, progress=not args.no_progress
    )
    print("\n".join(summary.lines()))
    return 0


# ------------------------------------------------------------------------------------ train
def cmd_train(args: argparse.Namespace) -> int:
    from inspo.config.paper import paper_lines
    from inspo.config.train import dump
    from inspo.training.dry_run import plan_run, rollout_engine
    from inspo.training.precision import run_precision

    config = resolve_config(args)
    from inspo.records import SetupError

    if args.dry_run:  # no training: what a run would use and cost, and whether it could start
        print(dump(config))
        precision = run_precision(config)[1]
        print(
            "\n".join(
                plan_run(config).lines()
                + [rollout_engine(config).line(), f"{'precision:':<24}{precision.describe()}"]
                + [f"warning: {w}" for w in precision.warnings()]
                + paper_lines(config)
            )
        )
        if config.require_paper_parts:
            return 0  # the parts above say what is missing
        from inspo.training.preflight import dry_checks

        try:
            print("\n".join(dry_checks(config)))
        except SetupError as exc:
            raise CLIError(f"--dry-run: the run would stop here: {exc}") from exc
        return 0
    from inspo.training.run import run_training

    try:
        summary = run_training(config, resume=args.resume or False, progress=not args.no_progress)
    except SetupError as exc:
        raise CLIError(str(exc)) from exc
    if (
        args.no_progress
    ):  # with progress on, run_training has printed the summary and the agent already
        print(summary)
        _print_agent(summary.run_dir)
    _write_report_quietly(summary.run_dir)
    return 0


def _print_agent(run_dir: str) -> None:
    from pathlib import Path

    from inspo.artifacts import AGENT_DIR

    if (Path(run_dir) / AGENT_DIR / "agent.json").is_file():
        print(f"agent: {Path(run_dir) / AGENT_DIR}")


def _write_report_quietly(run_dir: str) -> None:
    """The HTML report at the end of a run; a report problem never fails a finished run."""
    from inspo.report import write_run_report

    path = write_run_report(run_dir)
    if path is not None:
        print(f"report: {path}")


def cmd_evolve(args: argparse.Namespace) -> int:
    from inspo.records import SetupError
    from inspo.training.evolve import run_evolve

    config = resolve_config(args)
    try:
        summary = run_evolve(
            config,
            steps=args.steps,
            policy_url=args.policy_url,
            policy_model=args.policy_model,
            resume=args.resume,
            progress=not args.no_progress,
        )
    except SetupError as exc:
        raise CLIError(str(exc)) from exc
    if args.no_progress:  # with progress on, run_evolve has printed the summary already
        print(summary)
    _write_report_quietly(summary.run_dir)
    return 0


# ------------------------------------------------------------------------------- serve-retriever
def cmd_serve_retriever(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from inspo.retrieval.factory import load_retriever
    from inspo.retrieval.faiss_index import IndexOptions
    from inspo.retrieval.server import MIB, ServerLimits, check_port, serve

    if args.kind == "http":
        raise CLIError("serve-retriever serves a local index: use --kind bm25 or dense")
    if args.corpus is None and args.index_dir is None:
        raise CLIError(
            "give --corpus (a file, folder, world, wiki-lite or hf:NAME) and/or --index-dir"
        )
    if not args.max_body_mb > 0:
        raise CLIError(
            f"--max-body-mb must be > 0 (the largest request body, in MiB), got {args.max_body_mb}"
        )
    try:  # every limit and the port are checked before the index loads
        check_port(args.port)
        limits = ServerLimits(
            max_queries=args.max_queries,
            max_query_chars=args.max_query_chars,
            max_topk=args.max_topk,
            default_topk=args.topk,
            max_body_bytes=max(1, round(args.max_body_mb * MIB)),
        )
        index = IndexOptions(
            kind=args.faiss_index,
            nprobe=args.nprobe,
            ef_search=args.ef_search,
            device=args.faiss_device,
        )
    except ValueError as exc:
        raise CLIError(_flag_message(str(exc))) from exc
    retriever = load_retriever(
        args.kind,
        corpus=args.corpus,
        index_dir=args.index_dir,
        model=args.model,
        index_path=args.index_path,
        index=index,
    )
    serve(retriever, host=args.host, port=args.port, **asdict(limits))
    return 0


#: serve-retriever's flags by the ServerLimits field (or argument) they set.
_SERVER_FLAGS = {
    "max_queries": "--max-queries",
    "max_query_chars": "--max-query-chars",
    "max_topk": "--max-topk",
    "default_topk": "--topk",
    "max_body_bytes": "--max-body-mb",
    "port": "--port",
}


def _flag_message(message: str) -> str:
    """A ServerLimits / check_port message with the flag that sets the field named first."""
    name = message.split(" ", 1)[0]
    flag = _SERVER_FLAGS.get(name)
    return f"{flag}: {message}" if flag else message


# ------------------------------------------------------------------------------------------ data
def cmd_data(args: argparse.Namespace) -> int:
    from pathlib import Path

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CLIError(
            f"--out {out} is a file, not a folder: name a folder to write the dataset into "
            "(it is created when missing)"
        )
    if args.dataset == "calculator":  # the calculator environment's generated word problems
        from inspo.envs.calculator.env import options_from

        settings = {
            "seed": args.seed,
            **env_settings(args.overrides, "inspo data calculator", "env.steps=3"),
        }
        try:
            spec = options_from(settings)
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
        from inspo.envs.calculator.data import write_splits

        paths = write_splits(out, spec)
    elif args.dataset != "wiki-lite":
        from inspo.data.world import build_world, world_config, write_world

        paths = write_world(build_world(args.seed, world_config(args.dataset)), out)
    else:
        from inspo.data.wiki_lite import write_wiki_lite

        paths = write_wiki_lite(out)
    if args.dataset != "calculator" and not args.no_index:
        from inspo.retrieval.bm25 import write_index

        paths["bm25"] = write_index(paths["corpus"], out / "bm25")
    for name, path in paths.items():
        print(f"{name:>10}: {path}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from inspo.report import write_report

    try:
        path = write_report(args.run_dir, args.out)
    except OSError as exc:
        raise CLIError(str(exc)) from exc
    print(f"report written: {path}")
    return 0


# ------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    from inspo import __version__

    parser = argparse.ArgumentParser(
        prog="inspo",
        description="INSPO: instruction-policy co-evolution for agentic RL of LLMs.",
    )
    parser.add_argument("--version", action="version", version=f"inspo {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_train_parser(sub).set_defaults(func=cmd_train)
    add_evolve_parser(sub).set_defaults(func=cmd_evolve)
    add_demo_parser(sub).set_defaults(func=cmd_demo)
    add_serve_retriever_parser(sub).set_defaults(func=cmd_serve_retriever)
    add_eval_parser(sub).set_defaults(func=cmd_eval)
    add_report_parser(sub).set_defaults(func=cmd_report)
    add_data_parser(sub).set_defaults(func=cmd_data)
    add_agent_parsers(sub)  # export, ask
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(
        sys.argv[1:] if argv is None else argv
    )  # the command as given, for a result's provenance
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        print(f"inspo: error: {exc}", file=sys.stderr)
        return 2
    except TooManyErrors as exc:  # an outage, not bad input: what was done before it is kept
        print(f"inspo: error: {exc}", file=sys.stderr)
        return 1
    except RunStopped as exc:  # asked for (a STOP file): not done, not failed
        print(f"inspo: {exc}", file=sys.stderr)
        return 3
    except (ValueError, FileNotFoundError) as exc:
        # Config and input errors carry messages written for users.
        print(f"inspo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
