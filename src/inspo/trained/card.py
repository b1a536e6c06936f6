"""inspo's model card (``README.md`` of an exported agent), with the YAML front matter the
Hugging Face hub reads (``license``, ``base_model``, ``tags``, ``library_name``, ``pipeline_tag``).

The card says what the folder is (a policy AND an instruction AND an environment: its tools and
protocol; the weights alone are not the agent), the base model and its licence, how the instruction
was chosen, the held-out test of the returned instruction against the seed with its 95% interval,
the paper's 2x2 when an ``inspo eval --grid`` result is given, the training settings, the paper's
citation, and a Python snippet that plays the agent (run by the tests, so it cannot rot).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CITATION = """@article{zhou2025inspo,
  title   = {Agentic Policy Optimization via Instruction-Policy Co-Evolution},
  author  = {Zhou, Han and Wan, Xingchen and Vuli{\\'c}, Ivan and Korhonen, Anna},
  journal = {arXiv preprint arXiv:2512.01945},
  year    = {2025},
  url     = {https://arxiv.org/abs/2512.01945}
}"""

#: The line of the snippet that names where the agent is: the exported folder's name, relative to
#: the directory the snippet runs in (never an absolute path of the machine that trained it);
#: :func:`inspo.trained.push_agent` points it at the hub repository before uploading.
LOAD_LINE = 'agent = inspo.load_agent("{location}")'
_LOAD_RE = re.compile(r'^agent = inspo\.load_agent\("[^"\n]*"\)$', re.MULTILINE)


def point_card_at(card: str, location: str) -> str:
    """``card`` with its snippet loading the agent from ``location`` (a folder or a hub id)."""
    return _LOAD_RE.sub(lambda _: LOAD_LINE.format(location=location), card, count=1)


@dataclass(frozen=True)
class BaseModel:
    """What the card says about the model training started from."""

    name: str
    """``model.name_or_path`` as the run's config has it."""
    hub_id: str = ""
    """Its Hugging Face hub id (the card's ``base_model``; '' when there is none, e.g. random
    weights)."""
    license: str = "other"
    """The hub's licence identifier (apache-2.0 ...; 'other' when unknown)."""
    attribution: str = ""
    licence_file: str = ""
    """The file under inspo's ``licenses/`` holding its licence text."""


#: The registered models (``inspo.models``) the card knows (NOTICE has the same attributions).
KNOWN_BASES: dict[str, BaseModel] = {
    "qwen2.5-coder-0.5b": BaseModel(
        "qwen2.5-coder-0.5b",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "apache-2.0",
        "Qwen2.5-Coder-0.5B-Instruct, by the Qwen team, Alibaba Cloud (Copyright 2024 Alibaba "
        "Cloud), Apache License 2.0. inspo converted the official q4_k_m GGUF file to bfloat16 "
        "Hugging Face weights before training.",
        "Qwen2.5-Coder-LICENSE",
    ),
    "smollm2-135m": BaseModel(
        "smollm2-135m",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
        "apache-2.0",
        "SmolLM2-135M-Instruct, by Hugging Face (HuggingFaceTB), Apache License 2.0. inspo "
        "converted its GGUF file to bfloat16 Hugging Face weights before training.",
        "SmolLM2-LICENSE",
    ),
    "tiny-qwen2": BaseModel(
        "tiny-qwen2",
        "",
        "apache-2.0",
        "a tiny randomly initialised Qwen2 (inspo's test model, no pretrained weights) with the "
        "tokenizer of Qwen2.5-Coder-0.5B-Instruct (Qwen team, Alibaba Cloud, Apache License 2.0).",
        "Qwen2.5-Coder-LICENSE",
    ),
}
KNOWN_BASES["tiny-qwen2-hd32"] = KNOWN_BASES["tiny-qwen2"]


def base_model_info(name: str) -> BaseModel:
    """What inspo knows of base model ``name``: a registered model, else the hub id it is (or
    nothing), with the licence its own card's front matter declares (the local folder's, or the
    hub cache's README.md; nothing is downloaded or converted)."""
    if name in KNOWN_BASES:
        return KNOWN_BASES[name]
    from inspo.models.registry import hub_snapshot, is_hub_name

    hub_id = name if is_hub_name(name) else ""
    folder = hub_snapshot(name) if hub_id else Path(name).expanduser()
    licence = (
        _front_matter_license(folder / "README.md")
        if folder is not None and folder.is_dir()
        else None
    )
    what = f"{hub_id or name}"
    return BaseModel(
        name,
        hub_id,
        licence or "other",
        f"{what}; its own licence applies"
        + (f" ({licence})." if licence else " (see its model card)."),
    )


def _front_matter_license(card: Path) -> str | None:
    if not card.is_file():
        return None
    text = card.read_text(encoding="utf-8", errors="replace")
    if not text.startswith("---"):
        return None
    for line in text.split("---", 2)[1].splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "license" and value.strip():
            return value.strip().strip("'\"")
    return None


def licence_text(base: BaseModel) -> str | None:
    """The licence text inspo ships for ``base`` (``licenses/`` in a source tree or the installed
    distribution's licence files), or None."""
    if not base.licence_file:
        return None
    here = Path(__file__).resolve().parents[3] / "licenses" / base.licence_file
    if here.is_file():
        return here.read_text(encoding="utf-8")
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        for f in distribution("inspo").files or []:
            if f.name == base.licence_file:
                return Path(f.locate()).read_text(encoding="utf-8")
    except (PackageNotFoundError, OSError):
        return None
    return None


def _front_matter(base: BaseModel, tags: list[str]) -> str:
    lines = ["---", f"license: {base.license}"]
    if base.hub_id:
        lines += ["base_model:", f"- {base.hub_id}", "base_model_relation: finetune"]
    lines += [
        "library_name: transformers",
        "pipeline_tag: text-generation",
        "tags:",
        *[f"- {t}" for t in tags],
        "---",
    ]
    return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _held_out(evaluation: dict[str, Any] | None) -> list[str]:
    if not evaluation or not evaluation.get("test_vs_seed"):
        return [
            "No held-out test was run (`data.eval` or `data.max_test_questions` was empty), so "
            "this card has no measured result: evaluate the agent with `inspo eval` before relying "
            "on it."
        ]
    d = evaluation["test_vs_seed"]
    metric = str(evaluation.get("metric", "em")).upper()
    interval = (
        "no interval (fewer than 2 questions)"
        if d.get("n", 0) < 2
        or d.get("low") is None
        or (isinstance(d.get("low"), float) and math.isnan(d["low"]))
        else f"95% CI [{d['low']:+.3f}, {d['high']:+.3f}]"
    )
    out = [
        f"On {evaluation.get('test_questions')} `{evaluation.get('test_split')}` questions that "
        "neither training nor the choice of the instruction saw, the trained policy, decoding "
        "greedily:",
        "",
        f"| instruction | {metric} |",
        "|---|---:|",
        f"| returned ({evaluation.get('returned_id')}) | {_pct(evaluation.get('test_returned'))} |",
        f"| seed ({evaluation.get('seed_id')}) | {_pct(evaluation.get('test_seed'))} |",
        "",
        f"Paired difference, returned minus seed: **{d['mean']:+.3f}**, {interval} over "
        f"{d.get('n')} questions.",
    ]
    if evaluation.get("returned_id") == evaluation.get("seed_id"):
        out += [
            "",
            "The returned instruction is the seed itself, so the difference is 0 by construction.",
        ]
    return out


def _choice(evaluation: dict[str, Any] | None, summary: dict[str, Any]) -> list[str]:
    if not evaluation or "rule" not in evaluation:
        if summary.get("stages"):
            name = next(iter(summary["stages"]))
            return [
                f"The instruction is the best of the {name} stage (instruction evolution with a "
                "frozen policy), by importance weight."
            ]
        return [
            "I* = argmax of the importance weights of the final population (Algorithm 1 of the "
            "paper)."
        ]
    if evaluation["rule"] == "weight":
        out = [
            "I* = argmax of the importance weights of the final population (Algorithm 1 of the "
            "paper)."
        ]
    else:
        out = [
            f"A paired greedy evaluation on {evaluation.get('dev_questions')} "
            f"`{evaluation.get('dev_split')}` questions of every member of the final population "
            "and the seed; the highest mean won, the seed winning ties (`final_choice: dev`)."
        ]
    if evaluation.get("dev_scores"):
        ranked = sorted(evaluation["dev_scores"].items(), key=lambda kv: -kv[1])
        out += ["", "Dev scores: " + ", ".join(f"{i} {s:.3f}" for i, s in ranked) + "."]
    if evaluation.get("note"):
        out += ["", f"Note: {evaluation['note']}"]
    return out


def _grid(grid: dict[str, Any] | None) -> list[str]:
    if not grid or not grid.get("cells"):
        return []
    cells = grid["cells"]
    metrics = list(dict.fromkeys(m for c in cells for m in c.get("metrics", {})))
    tools = list(dict.fromkeys(t for c in cells for t in c.get("tool_calls", {})))
    names = ["reward", *metrics, *(f"{t} calls" for t in tools)]
    rows = [
        f"| {c['policy']} | {c['instruction']} | {c['dataset']} | {c['n']} | "
        + (
            "no data | " * len(names)
            if c.get("reward") is None
            else f"{c['reward']:.3f} | "
            + "".join(f"{c.get('metrics', {}).get(m, 0.0):.3f} | " for m in metrics)
            + "".join(f"{c.get('tool_calls', {}).get(t, 0.0):.2f} | " for t in tools)
        )
        for c in cells
    ]
    return [
        "",
        "### The paper's 2x2 (`inspo eval --grid`)",
        "",
        "{base, trained policy} x {seed, returned instruction}, greedy:",
        "",
        "| policy | instruction | dataset | n | " + " | ".join(names) + " |",
        "|---|---|---|---:|" + "---:|" * len(names),
        *rows,
    ]


def _env_import(name: str, copy: Any = None) -> str:
    """What must be importable to play an agent whose environment is a user's module (a built-in
    needs nothing more), or where its copy travels (``env.source``, :mod:`inspo.trained.export`)."""
    from inspo.envs.registry import BUILTINS

    module = name.rpartition(":")[0]
    if isinstance(copy, str):
        return (
            f"; its module travels in this folder (`{copy.rpartition(':')[0]}`) and plays from "
            f"there where `{module}` does not import (it must import nothing beside itself that is "
            "not installed)"
        )
    if name in BUILTINS or not module or module.endswith(".py"):
        return ""
    return (
        f"; to play it, the module `{module}` must be importable (run from the folder that holds "
        f"`{module.replace('.', '/')}.py`, or put that folder on `PYTHONPATH`)"
    )


def _env_about(settings: Any) -> str:
    """The environment in a few words: a built-in's description, or the user's factory."""
    from inspo.envs.registry import BUILTINS

    name = settings.env_name
    if name in BUILTINS:
        return f"`{name}`: {BUILTINS[name].about}"
    how = "an object given in Python" if settings.env.get("python") else "a user's environment"
    return f"`{name}` ({how})"


def _env_settings(settings: Any) -> str:
    options = settings.env_options
    shown = ", ".join(f"`{k}={v}`" for k, v in options.items() if v not in ("", 0, None, [], {}))
    return shown or "its defaults"


def _training(config: Any, summary: dict[str, Any]) -> list[str]:
    rl, co, data, model = config.rl, config.coevolution, config.data, config.model
    led = summary.get("ledger", {})
    seed_default = "(the environment's own)"
    tuning = (
        f"LoRA r={model.lora_r}, alpha={model.lora_alpha} (merged into these weights)"
        if model.lora
        else "all weights"
    )
    return [
        f"- mode: `{config.mode}`; {summary.get('steps')} GRPO steps (TRL) of "
        f"{rl.questions_per_step} questions x {rl.group_size} rollouts; learning rate "
        f"{rl.learning_rate}, KL beta {rl.beta}, clip {rl.clip_epsilon}, loss `{rl.loss_type}`; "
        f"{tuning}; dtype {model.dtype}",
        f"- training data: `{data.train}` (split `{data.train_split}`) in the environment "
        f"`{config.env.name}`",
        "- reward: the environment's, on the response only",
        f"- instruction population: N_P {co.population_size}, prune every {co.prune_every} steps, "
        f"evolve every {co.evolve_every} steps until step {co.evolve_until}, |D_B| "
        f"{co.validation_size}, template `{co.template}`",
        f"- optimizer LLM: {summary.get('optimizer', '')}",
        f"- reward during training: {summary.get('reward_start', 0):.3f} -> "
        f"{summary.get('reward_end', 0):.3f}; rollouts: {led.get('training_rollouts', 0)} "
        f"training, {led.get('verification_rollouts', 0)} verification",
        f"- seed instruction: `{config.seed_instruction or seed_default}`; sampling temperature in "
        f"training {rl.temperature}",
    ]


def model_card(
    run: Any,
    *,
    name: str,
    settings: Any,
    base: BaseModel,
    location: str,
    example: str,
    grid: dict[str, Any] | None = None,
    has_licence_file: bool = False,
) -> str:
    """The card's Markdown (module docstring) for ``run``, the facts of the run directory
    (:class:`~inspo.trained.export.RunFacts`: its config, summary, returned instruction and final
    population). ``settings``: the agent's :class:`~inspo.trained.settings.AgentSettings`;
    ``location``: where the snippet loads the agent from (the folder's name, relative to its
    parent, or a hub id); ``example``: the question the snippet asks; ``grid``: an ``inspo eval
    --grid`` result whose 2x2 the card shows."""
    evaluation = run.summary.get("evaluation")
    body = [
        _front_matter(base, _tags(settings)),
        "",
        *_intro(name, settings),
        "",
        *_use_it(location, example),
        "",
        *_the_agent(settings, base, has_licence_file),
        "",
        *_the_instruction(run, evaluation),
        "",
        "## Results",
        "",
        *_held_out(evaluation),
        *_grid(grid),
        "",
        "These numbers come from a small held-out set of the training distribution; they say "
        "nothing about other corpora or question types.",
        "",
        "## Training",
        "",
        *_training(run.config, run.summary),
        "",
        "## Citation",
        "",
        "```bibtex",
        CITATION,
        "```",
        "",
    ]
    return "\n".join(body)


#: The hub tags of every card, and those a Search-R1 agent's card adds.
TAGS = ("inspo", "grpo", "trl", "tool-use", "agent", "instruction-optimization")
SEARCH_TAGS = ("search-agent", "retrieval-augmented-generation")


def _tags(settings: Any) -> list[str]:
    """The hub tags of the card's front matter: inspo's, and Search-R1's for a search agent."""
    return [*TAGS, *(SEARCH_TAGS if settings.env_name == "search-r1" else ())]


def _intro(name: str, settings: Any) -> list[str]:
    """The card's title and first paragraphs: what the agent is and that the weights alone are
    not the agent."""
    from inspo import __version__

    return [
        f"# {name}: a tool-using agent trained with INSPO",
        "",
        f"An agent of the environment {_env_about(settings)}, trained with GRPO while its "
        "instruction co-evolved with the policy (INSPO, [arXiv "
        f"2512.01945](https://arxiv.org/abs/2512.01945)), by inspo {__version__}.",
        "",
        "The weights alone are not the agent: it is these weights **with** `instruction.txt` (the "
        "instruction the run returned) and the environment recorded in `agent.json` (its tools, "
        "turn protocol and settings). Prompted otherwise it may not call its tools at all.",
    ]


def _use_it(location: str, example: str) -> list[str]:
    """The "Use it" section: how to install inspo, the snippet that loads the agent from
    ``location`` and asks it ``example``, and how else the agent can be played."""
    snippet = "\n".join(
        [
            "import inspo",
            "",
            LOAD_LINE.format(location=location),
            f"answer = agent.ask({json.dumps(example)})",
            "print(answer)         # every turn: reasoning, tool call and its result, answer",
            "print(answer.answer)  # the final answer alone",
        ]
    )
    return [
        "## Use it",
        "",
        "```bash",
        'pip install -e ".[all]"   # in a clone of inspo',
        "```",
        "",
        "```python",
        snippet,
        "```",
        "",
        "`load_agent` takes the agent's folder (as the snippet names it: from the directory that "
        "holds the folder) or its hub id once pushed. `load_agent` also takes `env_options={...}` "
        "(the environment's settings, e.g. Search-R1's `corpus`, `retriever_url` of a `POST "
        "/retrieve` server, `topk`), `env=` (an environment object), `temperature=` and "
        '`instruction=`; `inspo ask FOLDER "question"` does the same from a shell. The weights '
        "load with plain transformers too (`AutoModelForCausalLM.from_pretrained`), without inspo: "
        "put `instruction.txt` before the question in one user message, stop generation at the end "
        "of a tool call's tag, and insert the tool's result as the environment writes it.",
    ]


def _the_agent(settings: Any, base: BaseModel, has_licence_file: bool) -> list[str]:
    """The "The agent" section: the base model and its licence, the environment and its
    settings, the turn protocol, the reward and the decoding."""
    a = settings.agent
    licence = f"`{base.license}`" + (" (its text is in `LICENSE`)" if has_licence_file else "")
    return [
        "## The agent",
        "",
        f"- base model: {base.attribution}"
        + (f" (`{base.hub_id}`)" if base.hub_id and base.hub_id not in base.attribution else ""),
        f"- licence: {licence}; this derived model is distributed under the base model's licence",
        f"- environment: `{settings.env_name}` with {_env_settings(settings)}"
        + _env_import(settings.env_name, settings.env.get("source")),
        f"- turns: up to {a.max_turns} tool turn(s), then one answer turn; {a.max_response_tokens} "
        f"new tokens a turn; observations cut at {a.max_obs_tokens} tokens"
        + (f"; the first turn starts with `{a.prefill}` (forced)" if a.prefill else "")
        + ("; a last-turn nudge" if a.last_turn_nudge else ""),
        "- reward it was trained on: the environment's (see its settings above)",
        "- decoding: greedy (as the run's own evaluation)",
    ]


def _the_instruction(run: Any, evaluation: dict[str, Any] | None) -> list[str]:
    """The "The instruction" section: the returned instruction, how it was chosen, and the final
    population with its importance weights."""
    returned_id = run.returned_id
    members = [
        f"| {m['id']}{' (returned)' if m['id'] == returned_id else ''} | {m.get('origin', '')} | "
        f"{_pct(m.get('weight'))} |"
        for m in run.population
    ]
    return [
        "## The instruction",
        "",
        f"Returned instruction `{returned_id}` (`instruction.txt`):",
        "",
        "```text",
        run.instruction.strip(),
        "```",
        "",
        "How it was chosen:",
        "",
        *_choice(evaluation, run.summary),
        "",
        "The final population (`population.json`), importance weights w:",
        "",
        "| instruction | origin | w |",
        "|---|---|---:|",
        *members,
    ]


def snippet_of(card: str) -> str:
    """The card's first ``python`` code block (what the tests run)."""
    start = card.index("```python\n") + len("```python\n")
    return card[start : card.index("\n```", start)]
