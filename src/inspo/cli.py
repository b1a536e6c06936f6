"""The ``inspo`` command line.

Each subcommand is a small function; heavy modules are imported inside it, so ``inspo --help``
is instant.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

log = logging.getLogger("inspo.cli")


class CLIError(RuntimeError):
    """A user-facing error: printed without a traceback, exit status 2."""


# ------------------------------------------------------------------------------------------ demo
def _add_optimizer_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("optimizer LLM (default: an endpoint from the environment, else rule-based)")
    g.add_argument("--optimizer", default="auto", choices=["auto", "openai", "local", "rule-based"],
                   help="which optimizer LLM writes new instructions")
    g.add_argument("--optimizer-base-url", default=None,
                   help="OpenAI-compatible base URL (or INSPO_OPTIMIZER_BASE_URL)")
    g.add_argument("--optimizer-model", default=None, help="model name at that endpoint (or INSPO_OPTIMIZER_MODEL)")
    g.add_argument("--optimizer-local-model", default=None, help="path of a local transformers chat model")


def _optimizer_from_args(args: argparse.Namespace, seed: int):
    from inspo.llm.factory import OptimizerLLMConfig, make_optimizer_llm

    cfg = OptimizerLLMConfig(
        kind=args.optimizer,
        base_url=args.optimizer_base_url,
        model=args.optimizer_model,
        local_model_path=args.optimizer_local_model,
    )
    import random

    return make_optimizer_llm(cfg, random.Random(seed))


def cmd_demo(args: argparse.Namespace) -> int:
    from inspo.core.config import CoEvolutionConfig
    from inspo.demo import run_demo

    config = CoEvolutionConfig(
        seed=args.seed,
        evolve_until=args.steps,
        validation_size=args.validation_size,
        template=args.template,
    )
    llm = _optimizer_from_args(args, args.seed)
    summary = run_demo(args.out, llm, config=config, steps=args.steps, progress=not args.no_progress)
    print("\n".join(summary.lines()))
    return 0


# ------------------------------------------------------------------------------- serve-retriever
def cmd_serve_retriever(args: argparse.Namespace) -> int:
    from inspo.retrieval.factory import load_retriever
    from inspo.retrieval.server import serve

    if args.kind == "http":
        raise CLIError("serve-retriever serves a local index: use --kind bm25 or dense")
    if args.corpus is None and args.index_dir is None:
        raise CLIError("give --corpus (a file, folder, world, wiki-lite or hf:NAME) and/or --index-dir")
    retriever = load_retriever(args.kind, corpus=args.corpus, index_dir=args.index_dir, model=args.model)
    serve(
        retriever,
        host=args.host,
        port=args.port,
        max_queries=args.max_queries,
        max_query_chars=args.max_query_chars,
        max_topk=args.max_topk,
        default_topk=args.topk,
    )
    return 0


# ------------------------------------------------------------------------------------------ data
def cmd_data(args: argparse.Namespace) -> int:
    from pathlib import Path

    out = Path(args.out)
    if args.dataset == "world":
        from inspo.data.world import build_world, write_world

        paths = write_world(build_world(seed=args.seed), out, bm25_index=not args.no_index)
    else:
        from inspo.data.wiki_lite import write_wiki_lite

        paths = write_wiki_lite(out, bm25_index=not args.no_index)
    for name, path in paths.items():
        print(f"{name:>10}: {path}")
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

    p = sub.add_parser("demo", help="offline demo of the co-evolution loop on a synthetic task (seconds, no model)")
    p.add_argument("--out", default="runs/demo", help="run directory to write (default: runs/demo)")
    p.add_argument("--steps", type=int, default=60, help="training steps to simulate (default: 60)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--validation-size", type=int, default=50, help="|D_B| for verification (default: 50)")
    p.add_argument("--template", default="reflection", choices=["reflection", "paraphrase", "history"])
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_optimizer_args(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("serve-retriever", help="serve a corpus over Search-R1's POST /retrieve (FastAPI + uvicorn)")
    p.add_argument("--kind", default="bm25", choices=["bm25", "dense"], help="index type (default: bm25)")
    p.add_argument("--corpus", default=None,
                   help="corpus: a JSONL/parquet file or folder, 'world[:SEED]', 'wiki-lite' or 'hf:NAME'")
    p.add_argument("--index-dir", default=None, help="load the index from here, or save the built one here")
    p.add_argument("--model", default=None, help="dense model path (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--topk", type=int, default=3, help="topk when a request gives none (default: 3)")
    p.add_argument("--max-topk", type=int, default=50)
    p.add_argument("--max-queries", type=int, default=512, help="most queries in one request")
    p.add_argument("--max-query-chars", type=int, default=2000, help="longest query accepted")
    p.set_defaults(func=cmd_serve_retriever)

    p = sub.add_parser("data", help="write a built-in dataset (and its BM25 index) in Search-R1 formats")
    p.add_argument("dataset", choices=["world", "wiki-lite"],
                   help="world: the generated fictional multi-hop world; wiki-lite: ~10k Wikipedia leads")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--seed", type=int, default=0, help="world generator seed (default: 0)")
    p.add_argument("--no-index", action="store_true", help="do not build the BM25 index")
    p.set_defaults(func=cmd_data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
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
    except (ValueError, FileNotFoundError) as exc:
        # Config and input errors carry messages written for users.
        print(f"inspo: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
