"""Play a trained agent on questions of one's own: :func:`load_agent` and :meth:`Agent.ask`.

``load_agent(source)`` takes:

- an exported agent folder (``agent.json`` beside the weights; :func:`inspo.trained.export_agent`):
  its weights, ``instruction.txt`` and settings;
- an ``inspo train`` run directory (``config.yaml`` and ``model/``): its trained ``model/``, its
  ``best_instruction.txt`` and the agent and environment of its config;
- a Hugging Face hub repository id of an exported agent, downloaded with ``snapshot_download``
  (network) when no local folder has that name;
- any other model (a registered name such as ``qwen2.5-coder-0.5b``, a Hugging Face folder or a
  .gguf file): the ``cpu-tiny`` preset's agent (Search-R1's, BM25 over the built-in ``world``
  corpus) and its seed instruction; ``env=`` names another environment.

The environment is the one the agent was trained in (``agent.json``'s ``env``), built by the
environment layer (:mod:`inspo.envs.build`); ``env=`` gives an environment object instead (one a
run was given in Python must be given again), ``env_options=`` changes its settings (Search-R1:
``{"corpus": ..., "topk": 5}``). Other keywords change single settings (``instruction``,
``temperature`` ...). An episode is played by the rollout loop every other part of inspo uses
(:func:`inspo.envs.loop.run_rollouts`); :class:`Answer` holds it turn by turn
(:mod:`inspo.envs.transcript`). Decoding is greedy unless ``temperature`` > 0; sampled episodes
draw their seeds from the agent's ``rng`` (``seed``), so a session replays.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.envs.transcript import Turn, transcript_lines, turns_of
from inspo.records import Instruction, Question, Rollout
from inspo.trained.settings import AGENT_FILE, INSTRUCTION_FILE, AgentSettings

log = logging.getLogger("inspo.trained")


@dataclass
class Answer:
    """One question played: the final answer, the turns and the raw rollout."""

    question: str
    answer: str | None
    """The content of the last ``<answer>`` (None: the agent gave none)."""
    turns: list[Turn]
    rollout: Rollout

    @property
    def calls(self) -> list[tuple[str, str]]:
        """The tool calls that ran, as (tool, arguments), in order."""
        return [(t.tool, t.content) for t in self.turns if t.action == "call" and t.executed]

    @property
    def searches(self) -> list[str]:
        """The searches that ran (Search-R1's ``search`` tool)."""
        return [content for tool, content in self.calls if tool == "search"]

    def lines(self) -> list[str]:
        return [f"question: {self.question}", *transcript_lines(self.turns, self.rollout)]

    def __str__(self) -> str:
        return "\n".join(self.lines())


@dataclass
class AgentSource:
    """Where an agent's parts come from (:func:`resolve_source`)."""

    model: str
    """The model folder or name the engine loads."""
    instruction: Instruction
    settings: AgentSettings
    kind: str
    """export, run or model."""
    notes: list[str] = field(default_factory=list)
    """Where each part came from, for the user."""
    seed_spec: str | None = None
    """A model without a run: the seed instruction as a config names it ('' the environment's own,
    ``@NAME``), resolved once the environment is built (``instruction`` is a placeholder)."""


class Agent:
    """A policy, its instruction and its environment, ready to answer questions."""

    def __init__(
        self,
        engine: Any,
        env: Any,
        instruction: Instruction,
        settings: AgentSettings,
        *,
        rng: random.Random,
        notes: list[str] | None = None,
    ):
        self.engine = engine
        self.env = env
        self.instruction = instruction
        self.settings = settings
        self.rng = rng
        self.notes = list(notes or [])
        self._asked = 0

    @property
    def config(self) -> AgentConfig:
        return self.settings.agent

    def ask(self, question: str, *, answers: tuple[str, ...] = (), detail: int = 0) -> Answer:
        """Play ``question`` once (``answers``: gold answers, to score the rollout's reward;
        ``detail``: characters of each tool result item to show beyond its summary, e.g. of each
        retrieved passage after its title)."""
        if not question.strip():
            raise ValueError("ask: the question is empty")
        self._asked += 1
        seed = self.rng.randrange(2**31) if self.config.temperature > 0 else None
        episode = Episode(
            Question(id=f"ask-{self._asked}", question=question.strip(), answers=tuple(answers)),
            self.instruction,
            seed=seed,
        )
        rollout = run_rollouts(self.engine, self.env, self.config, [episode])[0]
        return Answer(
            question=question.strip(),
            answer=rollout.answer,
            turns=turns_of(self.env, rollout, detail=detail),
            rollout=rollout,
        )

    def describe(self) -> list[str]:
        """Where the parts came from and how the agent plays (a header for ``inspo ask``)."""
        text = " ".join(self.instruction.text.split())
        return [
            *self.notes,
            f"             {text[:150]}{' ...' if len(text) > 150 else ''}",
            *self.settings.lines(),
        ]


def load_agent(
    source: str | Path,
    *,
    instruction: str | None = None,
    env: Any = None,
    env_options: Mapping[str, Any] | None = None,
    max_turns: int | None = None,
    max_response_tokens: int | None = None,
    temperature: float | None = None,
    prefill: str | None = None,
    dtype: str | None = None,
    device: str | None = None,
    seed: int = 0,
) -> Agent:
    """The agent of ``source`` (module docstring), its settings changed by the keywords.

    ``instruction``: ``@NAME`` (one of the environment's named instructions: ``@search-r1``,
    ``@weak`` ...), a text file, a run directory or exported folder (its instruction), or the
    instruction's text. ``env``: an environment object to play in (instead of the one the agent
    records; needed when training was given one in Python); ``env_options``: settings of the
    recorded environment to change (Search-R1: ``corpus``, ``retriever``, ``retriever_url``,
    ``index_dir``, ``topk`` ...), or ``{"name": ..., ...}`` to play in another built-in or
    importable environment with those settings. ``prefill``: text forced at the start of the first
    turn ('' for none). ``device``: None picks cuda when there is one, else cpu. ``dtype``: None
    plays in the agent's dtype (``agent.json``), in float32 where that is bfloat16 and the device
    has no fast bf16 (``describe()`` says which: :func:`inspo.models.precision.play_precision`);
    ``"auto"`` or a dtype name as given. Raises FileNotFoundError / ValueError with what is wrong.
    """
    options = dict(env_options or {})
    if options.get("retriever_url") and "retriever" not in options:
        options["retriever"] = "http"
    found = resolve_source(source)
    settings = found.settings
    agent = settings.agent
    changes = {
        k: v
        for k, v in (
            ("max_turns", max_turns),
            ("max_response_tokens", max_response_tokens),
            ("temperature", temperature),
            ("prefill", prefill),
        )
        if v is not None
    }
    if changes:
        agent = replace(agent, **changes)
    if options:
        settings = _with_env_options(settings, options, env)
    from inspo.models.precision import default_device, play_precision

    device = device or default_device()
    precision = play_precision(settings.dtype, dtype, device=device, asked_key="dtype")
    for warning in precision.warnings():
        log.warning("%s", warning)
    settings = replace(settings, agent=agent, dtype=precision.dtype)
    notes = [*found.notes, f"precision:   {precision.describe()}"]
    played = _build_env(
        settings, env
    )  # before the model loads: a wrong corpus or a server down fails fast
    _check_prefill(played, agent.prefill)
    if env is not None:
        settings = replace(settings, env={"name": str(played.name), "python": True})
    chosen, notes = _choose_instruction(found, played, instruction, notes)
    from inspo.engines.load import load_engine

    rng = random.Random(seed)
    engine = load_engine(
        found.model,
        kind="hf",
        dtype=settings.dtype,
        device=device,
        rng=random.Random(rng.randrange(2**31)),
    )
    return Agent(engine, played, chosen, settings, rng=rng, notes=notes)


def _with_env_options(settings: AgentSettings, options: dict[str, Any], env: Any) -> AgentSettings:
    """``settings`` with ``load_agent``'s ``env_options``: changes to the recorded environment's
    settings, or, naming another environment, that environment with its own settings. Raises
    ValueError when an environment object ``env`` is given too."""
    if env is not None:
        raise ValueError(
            "load_agent: give either env (an environment object) or env_options (settings of "
            "the agent's recorded environment), not both"
        )
    if "name" in options and options["name"] != settings.env_name:
        return replace(settings, env=dict(options))  # another environment: its own settings
    return replace(settings, env={**settings.env, **options})


def _check_prefill(played: Any, prefill: str) -> None:
    """Raise ValueError (with the ``inspo ask`` option that turns it off) when the environment
    ``played`` cannot take ``prefill`` as the start of the first turn."""
    from inspo.envs.build import check_prefill
    from inspo.records import SetupError

    try:
        check_prefill(played, prefill, setting="prefill")
    except SetupError as exc:
        raise ValueError(f"{exc} (inspo ask: --prefill '')") from exc


def _choose_instruction(
    found: AgentSource, played: Any, instruction: str | None, notes: list[str]
) -> tuple[Instruction, list[str]]:
    """The instruction the agent plays, and ``notes`` with the line saying where it came from:
    ``load_agent``'s ``instruction`` when given, else for a model without a run the seed of the
    environment ``played``, else the one ``found`` with the agent."""
    chosen = found.instruction
    if found.seed_spec is not None:  # a model without a run: the environment's own seed
        chosen = _seed(played, found.seed_spec)
        which = found.seed_spec or f"{played.name}'s own"
        notes = [n for n in notes if not n.startswith("instruction:")] + [
            f"instruction: the seed ({which})"
        ]
    if instruction is not None:
        chosen = parse_instruction(instruction, env=played)
        notes = [n for n in notes if not n.startswith("instruction:")] + [
            f"instruction: {instruction_origin(instruction)}"
        ]
    return chosen, notes


def _build_env(settings: AgentSettings, env: Any) -> Any:
    """The environment the agent plays in: ``env`` (checked) or the one ``settings`` records."""
    from inspo.envs.base import EnvError, check_environment
    from inspo.envs.registry import EnvNameError, make_env

    if env is not None:
        try:
            return check_environment(env)
        except EnvError as exc:
            raise ValueError(str(exc)) from exc
    if settings.env.get("python"):
        raise ValueError(
            f"this agent was trained in an environment given in Python ({settings.env_name!r}), "
            "which inspo cannot build by name: pass it again, load_agent(..., env=your_env)"
        )
    try:
        try:
            return make_env(settings.env_name, settings.env_options)
        except EnvNameError:
            copy = settings.env.get("source")
            if not isinstance(copy, str):
                raise
            log.warning(
                "environment %r does not import here: playing the copy exported with the agent, %s",
                settings.env_name,
                copy.rpartition(":")[0],
            )
            return make_env(copy, settings.env_options)
    except (EnvNameError, EnvError) as exc:
        raise ValueError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - the environment's own failure (a corpus, a server), with its settings
        shown = ", ".join(
            f"{k}={v!r}" for k, v in settings.env_options.items() if k in _NAMED_IN_ERRORS and v
        )
        hint = (
            " (search-r1: --corpus, --retriever, --retriever-url)"
            if settings.env_name == "search-r1"
            else ""
        )
        raise ValueError(
            f"environment {settings.env_name!r}"
            + (f" ({shown})" if shown else "")
            + f" is not usable: {type(exc).__name__}: {exc}. Change its settings with inspo ask "
            f"--set env.KEY=VALUE{hint}; in Python load_agent(..., env_options={{...}})"
        ) from exc


#: Settings named in the message of an environment that cannot be built (where its data or server
#: is).
_NAMED_IN_ERRORS = ("corpus", "retriever", "retriever_url", "index_dir", "index_path")


def _seed(env: Any, spec: str) -> Instruction:
    from inspo.envs.registry import resolve_seed

    return Instruction(id="seed", text=resolve_seed(env, spec))


def resolve_source(source: str | Path) -> AgentSource:
    """The model, instruction and settings of ``source`` (an exported folder, a run directory, a
    hub id of an exported agent, or a model), without loading anything heavy."""
    from inspo import artifacts

    path = Path(source).expanduser()
    if path.is_dir() and (path / AGENT_FILE).is_file():
        return _exported(path)
    if path.is_dir() and (path / artifacts.CONFIG_FILE).is_file():
        return _run(path)
    if not path.exists() and _hub_name(str(source)):
        from inspo.models.registry import hub_snapshot

        cached = hub_snapshot(str(source))
        if cached is not None and (cached / AGENT_FILE).is_file():
            return _exported(cached)
        if cached is None:
            import os

            from huggingface_hub import snapshot_download

            folder = Path(
                snapshot_download(str(source), endpoint=os.environ.get("HF_ENDPOINT") or None)
            )
            if (folder / AGENT_FILE).is_file():
                return _exported(folder)
    return _model(str(source))


def _exported(folder: Path) -> AgentSource:
    text_file = folder / INSTRUCTION_FILE
    if not text_file.is_file():
        raise FileNotFoundError(
            f"{folder} has {AGENT_FILE} but no {INSTRUCTION_FILE}: an incomplete export; "
            "export the run again with 'inspo export RUN --out DIR'"
        )
    settings = AgentSettings.read(folder)
    if isinstance(settings.env.get("source"), str):  # the environment module's copy in the folder
        settings.env["source"] = str(folder / settings.env["source"])
    instruction = Instruction(
        id=_returned_id(folder) or "exported", text=text_file.read_text(encoding="utf-8").strip()
    )
    return AgentSource(
        model=str(folder),
        instruction=instruction,
        settings=settings,
        kind="export",
        notes=[
            f"agent:       {folder} (exported by inspo)",
            f"instruction: {instruction.id} from {text_file}",
        ],
    )


def _returned_id(folder: Path) -> str:
    from inspo.trained.settings import POPULATION_FILE

    path = folder / POPULATION_FILE
    if not path.is_file():
        return ""
    import json

    return str(json.loads(path.read_text(encoding="utf-8")).get("returned_id", ""))


def _run(run: Path) -> AgentSource:
    from inspo import artifacts
    from inspo.config.train import from_dict, read_config_file

    model = run / artifacts.MODEL_DIR
    if not (model / "config.json").is_file():
        raise FileNotFoundError(
            f"{run} has no trained model ({artifacts.MODEL_DIR}/ is missing: an 'inspo evolve' "
            "run, or a training run that did not finish); name a model to play instead"
        )
    best = run / artifacts.BEST_INSTRUCTION_FILE
    if not best.is_file():
        raise FileNotFoundError(
            f"{run} has no {artifacts.BEST_INSTRUCTION_FILE}: the run did not finish"
        )
    config = from_dict(read_config_file(run / artifacts.CONFIG_FILE))
    summary_path = run / artifacts.SUMMARY_FILE
    returned = (
        artifacts.read_json(summary_path).get("best_instruction_id", "best")
        if summary_path.is_file()
        else "best"
    )
    instruction = Instruction(id=str(returned), text=best.read_text(encoding="utf-8").strip())
    return AgentSource(
        model=str(model),
        instruction=instruction,
        settings=AgentSettings.from_config(config),
        kind="run",
        notes=[
            f"policy:      {model} (trained by the run {run})",
            f"instruction: {instruction.id} from {best}",
        ],
    )


def _model(name: str) -> AgentSource:
    from inspo.config.train import resolve

    config = resolve("cpu-tiny")
    settings = replace(
        AgentSettings.from_config(config), base_model=name, training_temperature=None
    )
    return AgentSource(
        model=name,
        instruction=Instruction(id="seed", text=""),
        settings=settings,
        kind="model",
        notes=[f"policy:      {name}", "instruction: the environment's seed instruction"],
        seed_spec=config.seed_instruction,
    )


def parse_instruction(spec: str, *, env: Any = None) -> Instruction:
    """``@NAME`` (one of ``env``'s named instructions; Search-R1's without ``env``), a text file, a
    run directory or exported folder, or the instruction's own text."""
    if spec.startswith("@"):
        from inspo.envs.registry import named_instructions, resolve_seed

        if env is not None:
            return Instruction(id=spec[1:], text=resolve_seed(env, spec))
        named = named_instructions("search-r1")
        if spec[1:] not in named:
            raise ValueError(
                f"unknown named instruction {spec!r}; Search-R1's are: "
                + ", ".join("@" + k for k in named)
            )
        return Instruction(id=spec[1:], text=named[spec[1:]])
    path = Path(spec).expanduser()
    if path.is_dir():
        return resolve_source(path).instruction
    if path.is_file():
        return Instruction(id=path.stem, text=path.read_text(encoding="utf-8").strip())
    if not spec.strip():
        raise ValueError("the instruction is empty")
    return Instruction(id="given", text=spec)


def instruction_origin(spec: str) -> str:
    if spec.startswith("@") or Path(spec).expanduser().exists():
        return spec
    return "the text given"


def _hub_name(name: str) -> bool:
    from inspo.models.registry import is_hub_name

    return is_hub_name(name)


__all__ = ["Agent", "AgentSource", "Answer", "load_agent", "parse_instruction", "resolve_source"]
