"""``inspo export`` (a run's trained agent as one folder, optionally pushed to the Hugging Face hub)
and ``inspo ask`` (play a trained run, an exported agent or any model on questions, turn by
turn)."""

from __future__ import annotations

import argparse
import sys

from inspo.cli_common import CLIError, env_settings


def cmd_export(args: argparse.Namespace) -> int:
    from inspo.trained.export import ExportError, export_agent, push_agent

    try:
        out = export_agent(args.run_dir, args.out, grid=args.grid, name=args.name)
    except ExportError as exc:
        raise CLIError(str(exc)) from exc
    print(
        f"agent written: {out} (weights, instruction.txt, population.json, agent.json, README.md)"
    )
    if args.push_to_hub:
        try:
            url = push_agent(out, args.push_to_hub, private=args.private)
        except ExportError as exc:
            raise CLIError(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - huggingface_hub's errors (auth, network) are the user's to fix
            raise CLIError(
                f"--push-to-hub {args.push_to_hub}: the upload failed: {type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''} (log in with 'hf auth login' or "
                f"set HF_TOKEN; the folder {out} is complete, push it again with --push-to-hub)"
            ) from exc
        print(f"pushed to the hub: {url}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from inspo.models import ModelError
    from inspo.trained.play import load_agent

    if args.temperature is not None and args.temperature < 0:
        raise CLIError(f"--temperature must be >= 0 (0: greedy), got {args.temperature}")
    for flag, value in (
        ("--topk", args.topk),
        ("--max-turns", args.max_turns),
        ("--max-response-tokens", args.max_response_tokens),
    ):
        if value is not None and value < 1:
            raise CLIError(f"{flag} must be >= 1, got {value}")
    try:
        agent = load_agent(
            args.agent,
            instruction=args.instruction,
            env_options=_env_options(args),
            max_turns=args.max_turns,
            max_response_tokens=args.max_response_tokens,
            temperature=args.temperature,
            prefill=args.prefill,
            dtype=args.dtype,
            seed=args.seed,
        )
    except (FileNotFoundError, ValueError, ModelError) as exc:
        said = str(exc)
        raise CLIError(
            said
            if str(args.agent) in said or said.startswith(("environment", "env.", "unknown"))
            else f"{args.agent}: {exc}"
        ) from exc
    print("\n".join(agent.describe()), flush=True)
    questions = [args.question] if args.question is not None else None
    if questions is None and sys.stdin.isatty():
        print("ask a question a line (end with Ctrl-D):", file=sys.stderr, flush=True)
    for question in questions if questions is not None else sys.stdin:
        if not question.strip():
            continue
        answer = agent.ask(question, detail=args.detail)
        print("")
        print("\n".join(answer.lines()), flush=True)
    return 0


#: ``inspo ask`` flags that are shortcuts for settings of the search-r1 environment (flag dest ->
#: setting).
ASK_SHORTCUTS = {
    "corpus": "corpus",
    "retriever": "retriever",
    "retriever_url": "retriever_url",
    "index_dir": "index_dir",
    "topk": "topk",
}


def _env_options(args: argparse.Namespace) -> dict:
    """The environment settings ``--env``, ``--set env.KEY=VALUE`` and the search shortcuts ask
    for."""
    options: dict = {"name": args.env} if args.env else {}
    options.update(
        env_settings(
            args.overrides,
            "inspo ask (the agent's own flags are --max-turns, --temperature ...)",
            "env.topk=5",
        )
    )
    options.update(
        {
            key: getattr(args, dest)
            for dest, key in ASK_SHORTCUTS.items()
            if getattr(args, dest) is not None
        }
    )
    if args.retriever_url and args.retriever is None:
        options["retriever"] = "http"
    return options


def add_agent_parsers(sub) -> None:
    """Register ``export`` and ``ask`` on the ``inspo`` subparsers ``sub``."""
    _add_export_parser(sub)
    _add_ask_parser(sub)


def _add_export_parser(sub) -> None:
    """``inspo export``: the run, the folder to write, the card's grid and title, the hub push."""
    p = sub.add_parser(
        "export",
        help="write a run's trained agent as one folder transformers loads "
        "(weights, instruction, settings, model card)",
        description="The folder holds the trained weights and tokenizer, instruction.txt (the "
        "returned instruction), population.json, agent.json (the environment and its settings, "
        "turns, tokens, prefill) and README.md, inspo's model card. inspo train writes it into "
        "RUN/agent at the end of every run.",
    )
    p.add_argument("run_dir", metavar="RUN", help="an 'inspo train' run directory that finished")
    p.add_argument(
        "--out", required=True, metavar="DIR", help="folder to write (must not exist, or be empty)"
    )
    p.add_argument(
        "--grid",
        default=None,
        metavar="EVAL_JSON",
        help="the eval.json of 'inspo eval --grid RUN': the card shows its 2x2",
    )
    p.add_argument(
        "--name", default=None, help="the card's title (default: the run directory's name)"
    )
    p.add_argument(
        "--push-to-hub",
        default=None,
        metavar="REPO",
        help="upload the folder to this Hugging Face hub repository (created when missing; "
        "needs a login or HF_TOKEN)",
    )
    p.add_argument(
        "--private", action="store_true", help="--push-to-hub: create the repository private"
    )
    p.set_defaults(func=cmd_export)


def _add_ask_parser(sub) -> None:
    """``inspo ask``: the agent, the question, the instruction and environment, the search
    shortcuts and how the agent plays."""
    p = sub.add_parser(
        "ask",
        help="play a trained agent (a run, an exported folder or any model) on a question, "
        "turn by turn",
        description="Prints each turn: the reasoning, each tool call and its result (for "
        "Search-R1 the titles retrieved), and the answer. A run directory plays its "
        "trained model/ with best_instruction.txt and the agent and environment of its "
        "config.yaml; an exported folder plays with its agent.json; any other model plays "
        "with the cpu-tiny preset's agent (Search-R1's, BM25 over the built-in world "
        "corpus) and the environment's seed instruction (--env names another). Flags change "
        "single settings. Without QUESTION, questions are read from stdin, one a line.",
    )
    p.add_argument(
        "agent",
        metavar="RUN_OR_MODEL",
        help="a run directory, an exported agent folder (or its hub id), a registered model name, "
        "a Hugging Face folder or a .gguf file",
    )
    p.add_argument(
        "question",
        nargs="?",
        default=None,
        help="the question (default: read questions from stdin)",
    )
    p.add_argument(
        "--instruction",
        default=None,
        help="one of the environment's named instructions (@search-r1, @weak ...), a text file, a "
        "run directory / exported folder, or the text itself (default: the run's or folder's "
        "instruction; for a model, the environment's seed)",
    )
    p.add_argument(
        "--env",
        default=None,
        metavar="NAME",
        help="play in this environment instead of the agent's (search-r1, calculator, module:attr)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="env.KEY=VALUE",
        help="change one of the environment's settings, e.g. --set env.topk=5",
    )
    _add_ask_search_shortcuts(p)
    _add_ask_play_args(p)
    p.set_defaults(func=cmd_ask)


def _add_ask_search_shortcuts(p: argparse.ArgumentParser) -> None:
    """``inspo ask``'s search-r1 shortcuts for ``--set env.KEY=VALUE``."""
    g = p.add_argument_group("search-r1 shortcuts for --set env.KEY=VALUE")
    g.add_argument(
        "--corpus",
        default=None,
        help="corpus to search: a file/folder, world[:SEED], wiki-lite, hf:NAME",
    )
    g.add_argument(
        "--retriever", default=None, choices=["bm25", "dense", "http"], help="retriever kind"
    )
    g.add_argument(
        "--retriever-url",
        default=None,
        help="a Search-R1 POST /retrieve server (implies --retriever http)",
    )
    g.add_argument(
        "--index-dir", default=None, help="load the index from here, or save the built one here"
    )
    g.add_argument("--topk", type=int, default=None, help="passages per search")


def _add_ask_play_args(p: argparse.ArgumentParser) -> None:
    """How ``inspo ask``'s agent plays: turns, tokens, decoding, seed, dtype, and how much of each
    tool result is printed."""
    p.add_argument(
        "--max-turns", type=int, default=None, help="tool turns; one final answer turn follows"
    )
    p.add_argument("--max-response-tokens", type=int, default=None, help="new tokens per turn")
    p.add_argument(
        "--temperature", type=float, default=None, help="0: greedy (the default); > 0 samples"
    )
    p.add_argument(
        "--prefill",
        default=None,
        help="text forced at the start of the first turn, e.g. '<search>' ('' for none; default: "
        "the run's)",
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed for --temperature > 0")
    p.add_argument(
        "--dtype",
        default=None,
        choices=["auto", "bfloat16", "float32", "float16"],
        help="weights dtype (default: the agent's, float32 where it is bfloat16 and this device "
        "has no fast bf16; auto: bfloat16 where the device multiplies it fast, else float32)",
    )
    p.add_argument(
        "--detail",
        "--passage-chars",
        dest="detail",
        type=int,
        default=0,
        help="print this many characters of each tool result item beyond its summary (Search-R1: "
        "of each retrieved passage after its title; default: the summary only)",
    )
