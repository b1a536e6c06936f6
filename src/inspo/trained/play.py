"""Play a trained agent on questions of one's own: :func:`load_agent` and :meth:`Agent.ask`.

``load_agent(source)`` takes:

- an exported agent folder (``agent.json`` beside the weights; :func:`inspo.trained.export_agent`):
  its weights, ``instruction.txt`` and settings;
- an ``inspo train`` run directory (``config.yaml`` and ``model/``): its trained ``model/``, its
  ``best_instruction.txt`` and the agent and retriever of its config;
- a Hugging Face hub repository id of an exported agent, downloaded with ``snapshot_download``
  (network) when no local folder has that name;
- any other model (a registered name such as ``qwen2.5-coder-0.5b``, a Hugging Face folder or a
  .gguf file): the ``cpu-tiny`` preset's agent (BM25 over the built-in ``world`` corpus) and its
  seed instruction (Search-R1's).

Keyword arguments change single settings (``instruction``, ``corpus``, ``topk``, ``temperature``
...). An episode is played by the rollout engine every other part of inspo uses
(:func:`inspo.agent.rollout.run_rollouts`); :class:`Answer` holds it turn by turn
(:mod:`inspo.agent.transcript`). Decoding is greedy unless ``temperature`` > 0; sampled episodes
draw their seeds from the agent's ``rng`` (``seed``), so a session replays.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from inspo.agent.rollout import AgentConfig, Episode, run_rollouts
from inspo.agent.transcript import RecordingRetriever, Turn, transcript_lines, turns_of
from inspo.records import Instruction, Question, Rollout
from inspo.trained.settings import AGENT_FILE, INSTRUCTION_FILE, AgentSettings, RetrieverSettings

log = logging.getLogger("inspo.trained")


@dataclass
class Answer:
    """One question played: the final answer, the turns and the raw rollout."""

    question: str
    answer: str | None
    """The content of the last ``<answer>`` (None: the agent gave none)."""
    turns: list[Turn]
    rollout: Rollout
    passage_chars: int = 0
    """Characters of each passage printed after its title (0: titles only)."""

    @property
    def searches(self) -> list[str]:
        return [t.content for t in self.turns if t.action == "search" and t.executed]

    def lines(self) -> list[str]:
        return [f"question: {self.question}", *transcript_lines(self.turns, self.rollout,
                                                                passage_chars=self.passage_chars)]

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


class Agent:
    """A policy, its instruction and its search engine, ready to answer questions."""

    def __init__(self, engine: Any, retriever: Any, instruction: Instruction, settings: AgentSettings, *,
                 rng: random.Random, notes: list[str] | None = None):
        self.engine = engine
        self.retriever = RecordingRetriever(retriever)
        self.instruction = instruction
        self.settings = settings
        self.rng = rng
        self.notes = list(notes or [])
        self._asked = 0

    @property
    def config(self) -> AgentConfig:
        return self.settings.agent

    def ask(self, question: str, *, answers: tuple[str, ...] = (), passage_chars: int = 0) -> Answer:
        """Play ``question`` once (``answers``: gold answers, to score the rollout's reward)."""
        if not question.strip():
            raise ValueError("ask: the question is empty")
        self._asked += 1
        seed = self.rng.randrange(2**31) if self.config.temperature > 0 else None
        episode = Episode(Question(id=f"ask-{self._asked}", question=question.strip(), answers=tuple(answers)),
                          self.instruction, seed=seed)
        self.retriever.take()
        rollout = run_rollouts(self.engine, self.retriever, self.config, [episode])[0]
        found = [passages for _, passages in self.retriever.take()]
        return Answer(question=question.strip(), answer=rollout.answer, turns=turns_of(rollout, found),
                      rollout=rollout, passage_chars=passage_chars)

    def describe(self) -> list[str]:
        """Where the parts came from and how the agent plays (a header for ``inspo ask``)."""
        text = " ".join(self.instruction.text.split())
        return [*self.notes, f"             {text[:150]}{' ...' if len(text) > 150 else ''}", *self.settings.lines()]


def load_agent(
    source: str | Path,
    *,
    instruction: str | None = None,
    corpus: str | None = None,
    retriever: str | None = None,
    retriever_url: str | None = None,
    index_dir: str | None = None,
    topk: int | None = None,
    max_turns: int | None = None,
    max_response_tokens: int | None = None,
    temperature: float | None = None,
    prefill: str | None = None,
    dtype: str | None = None,
    device: str | None = None,
    seed: int = 0,
) -> Agent:
    """The agent of ``source`` (module docstring), its settings changed by the keywords.

    ``instruction``: ``@NAME`` (``@search-r1``, ``@weak``), a text file, a run directory or
    exported folder (its instruction), or the instruction's text. ``prefill``: text forced at the
    start of the first turn ('' for none). ``device``: None picks cuda
    when there is one, else cpu. ``dtype``: None plays in the agent's dtype (``agent.json``), in
    float32 where that is bfloat16 and the device has no fast bf16 (``describe()`` says which:
    :func:`inspo.models.precision.play_precision`); ``"auto"`` or a dtype name as given.
    Raises FileNotFoundError / ValueError with what is wrong.
    """
    found = resolve_source(source)
    settings = found.settings
    agent = settings.agent
    changes = {k: v for k, v in (("topk", topk), ("max_turns", max_turns), ("max_response_tokens", max_response_tokens),
                                 ("temperature", temperature), ("prefill", prefill)) if v is not None}
    if changes:
        agent = replace(agent, **changes)
    ret = settings.retriever
    if retriever is not None or corpus is not None or retriever_url is not None or index_dir is not None:
        ret = replace(ret, kind=retriever or ("http" if retriever_url else ret.kind), corpus=corpus or ret.corpus,
                      url=retriever_url or ret.url, index_dir=index_dir if index_dir is not None else ret.index_dir)
    from inspo.models.precision import default_device, play_precision

    device = device or default_device()
    precision = play_precision(settings.dtype, dtype, device=device, asked_key="dtype")
    for warning in precision.warnings():
        log.warning("%s", warning)
    settings = replace(settings, agent=agent, retriever=ret, dtype=precision.dtype)
    chosen, notes = found.instruction, [*found.notes, f"precision:   {precision.describe()}"]
    if instruction is not None:
        chosen = parse_instruction(instruction)
        notes = [n for n in notes if not n.startswith("instruction:")] + [f"instruction: {instruction_origin(instruction)}"]
    from inspo.agent.load import load_engine

    try:  # before the model loads: a wrong corpus or an unreachable server fails fast
        search = settings.retriever.build()
    except Exception as exc:  # noqa: BLE001 - any failure here stops with its reason
        raise ValueError(f"retriever {settings.retriever.describe()} is not usable: {exc} (choose another: --corpus, "
                         "--retriever, --retriever-url; in Python corpus=, retriever=, retriever_url=)") from exc
    rng = random.Random(seed)
    engine = load_engine(found.model, kind="hf", dtype=settings.dtype, device=device,
                         rng=random.Random(rng.randrange(2**31)))
    return Agent(engine, search, chosen, settings, rng=rng, notes=notes)


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

            folder = Path(snapshot_download(str(source), endpoint=os.environ.get("HF_ENDPOINT") or None))
            if (folder / AGENT_FILE).is_file():
                return _exported(folder)
    return _model(str(source))


def _exported(folder: Path) -> AgentSource:
    text_file = folder / INSTRUCTION_FILE
    if not text_file.is_file():
        raise FileNotFoundError(f"{folder} has {AGENT_FILE} but no {INSTRUCTION_FILE}: an incomplete export; "
                                "export the run again with 'inspo export RUN --out DIR'")
    settings = AgentSettings.read(folder)
    instruction = Instruction(id=_returned_id(folder) or "exported", text=text_file.read_text(encoding="utf-8").strip())
    return AgentSource(model=str(folder), instruction=instruction, settings=settings, kind="export",
                       notes=[f"agent:       {folder} (exported by inspo)",
                              f"instruction: {instruction.id} from {text_file}"])


def _returned_id(folder: Path) -> str:
    from inspo.trained.settings import POPULATION_FILE

    path = folder / POPULATION_FILE
    if not path.is_file():
        return ""
    import json

    return str(json.loads(path.read_text(encoding="utf-8")).get("returned_id", ""))


def _run(run: Path) -> AgentSource:
    from inspo import artifacts
    from inspo.train.config import from_dict, read_config_file

    model = run / artifacts.MODEL_DIR
    if not (model / "config.json").is_file():
        raise FileNotFoundError(f"{run} has no trained model ({artifacts.MODEL_DIR}/ is missing: an 'inspo evolve' run, "
                                "or a training run that did not finish); name a model to play instead")
    best = run / artifacts.BEST_INSTRUCTION_FILE
    if not best.is_file():
        raise FileNotFoundError(f"{run} has no {artifacts.BEST_INSTRUCTION_FILE}: the run did not finish")
    config = from_dict(read_config_file(run / artifacts.CONFIG_FILE))
    summary_path = run / artifacts.SUMMARY_FILE
    returned = artifacts.read_json(summary_path).get("best_instruction_id", "best") if summary_path.is_file() else "best"
    instruction = Instruction(id=str(returned), text=best.read_text(encoding="utf-8").strip())
    return AgentSource(model=str(model), instruction=instruction, settings=AgentSettings.from_config(config), kind="run",
                       notes=[f"policy:      {model} (trained by the run {run})",
                              f"instruction: {instruction.id} from {best}"])


def _model(name: str) -> AgentSource:
    from inspo.agent.protocol import resolve_instruction
    from inspo.train.config import resolve

    config = resolve("cpu-tiny")
    settings = replace(AgentSettings.from_config(config), base_model=name, training_temperature=None)
    text = resolve_instruction(config.seed_instruction)
    return AgentSource(model=name, instruction=Instruction(id="seed", text=text), settings=settings, kind="model",
                       notes=[f"policy:      {name}", "instruction: the seed (Search-R1's instruction, App. F)"])


def parse_instruction(spec: str) -> Instruction:
    """``@NAME``, a text file, a run directory or exported folder, or the instruction's own text."""
    from inspo.agent.protocol import resolve_instruction

    if spec.startswith("@"):
        return Instruction(id=spec[1:], text=resolve_instruction(spec))
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


__all__ = ["Agent", "AgentSource", "Answer", "RetrieverSettings", "load_agent", "parse_instruction", "resolve_source"]
