"""What plays a trained agent besides its weights: the exported folder's files and ``agent.json``.

An exported agent (:func:`inspo.trained.export_agent`) is one folder::

    config.json, model.safetensors, tokenizer files ...   the trained policy (transformers loads it)
    instruction.txt     INSTRUCTION_FILE: the instruction the run returned
    population.json     POPULATION_FILE: the final population, weights and the returned id
    agent.json          AGENT_FILE: :class:`AgentSettings` (turns, tokens, prefill, retriever, reward)
    README.md           CARD_FILE: inspo's model card
    LICENSE             the base model's licence text, when inspo knows it

:class:`AgentSettings` is the agent of a training config (:meth:`AgentSettings.from_config`):
the same turns, tokens per turn, observation cap, prefill, nudge and retriever the policy was
trained with, and greedy decoding (``temperature`` 0), as the run's own end-of-run evaluation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from inspo.agent.rollout import AgentConfig

AGENT_FILE = "agent.json"
INSTRUCTION_FILE = "instruction.txt"
POPULATION_FILE = "population.json"
CARD_FILE = "README.md"
LICENSE_FILE = "LICENSE"
#: ``agent.json``'s ``format`` value and its schema version.
FORMAT = "inspo-agent"
SCHEMA_VERSION = 1


@dataclass
class RetrieverSettings:
    """The search engine the agent calls (the run's ``data.retriever`` settings)."""

    kind: str = "bm25"
    """bm25, dense or http."""
    corpus: str = "world"
    """What bm25/dense index: a file/folder, 'world[:SEED]', 'wiki-lite' or 'hf:NAME'."""
    url: str = ""
    """http: the Search-R1-compatible server."""
    model: str = ""
    """dense: the sentence-transformers model ('' : the packaged all-MiniLM-L6-v2)."""
    index_dir: str = ""
    """A saved index to load (used only where the folder exists; else the index is built in memory)."""
    index_path: str = ""
    """dense: a prebuilt faiss index whose rows are ``corpus``'s lines."""
    faiss_index: str = ""
    faiss_nprobe: int = 0
    faiss_ef_search: int = 0
    faiss_device: str = "cpu"

    def build(self):
        """The ready :class:`~inspo.retrieval.base.Retriever` (may build an index)."""
        from inspo.retrieval.factory import load_retriever
        from inspo.retrieval.faiss_index import IndexOptions

        index_dir = self.index_dir if self.index_dir and Path(self.index_dir).is_dir() else None
        return load_retriever(
            self.kind, corpus=self.corpus or None, index_dir=index_dir, url=self.url or None,
            model=self.model or None, index_path=self.index_path or None,
            index=IndexOptions(kind=self.faiss_index, nprobe=self.faiss_nprobe, ef_search=self.faiss_ef_search,
                               device=self.faiss_device),
        )

    def describe(self) -> str:
        if self.kind == "http":
            return f"http server at {self.url}"
        return f"{self.kind} over {self.corpus or '(no corpus)'}" + (f" ({self.model})" if self.model else "")


@dataclass
class AgentSettings:
    """``agent.json``: how the trained policy plays (see the module docstring)."""

    agent: AgentConfig
    """Turns, tokens per turn and per observation, top-k, decoding, reward, prefill, nudge."""
    retriever: RetrieverSettings = field(default_factory=RetrieverSettings)
    dtype: str = "auto"
    """The weights dtype the policy trained in and plays in: concrete in an exported run (its
    config.yaml records ``model.dtype`` resolved); ``auto`` only from a hand-written config
    (resolved where it plays, :func:`inspo.models.precision.play_precision`)."""
    base_model: str = ""
    """The ``model.name_or_path`` training started from."""
    training_temperature: float | None = None
    """The temperature the policy sampled at in training (it plays greedily, ``agent.temperature``)."""

    @classmethod
    def from_config(cls, config: Any) -> AgentSettings:
        """The agent of a :class:`~inspo.train.config.TrainConfig`, decoding greedily."""
        from inspo.train.setup import agent_config

        data = config.data
        retriever = RetrieverSettings(
            kind=data.retriever, corpus=data.corpus, url=data.retriever_url, model=data.retriever_model,
            index_dir=data.index_dir, index_path=data.index_path, faiss_index=data.faiss_index,
            faiss_nprobe=data.faiss_nprobe, faiss_ef_search=data.faiss_ef_search, faiss_device=data.faiss_device,
        )
        return cls(agent=replace(agent_config(config.rl), temperature=0.0), retriever=retriever,
                   dtype=config.model.dtype, base_model=config.model.name_or_path,
                   training_temperature=config.rl.temperature)

    def to_dict(self) -> dict[str, Any]:
        from inspo import __version__

        return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "inspo_version": __version__,
                "agent": asdict(self.agent), "retriever": asdict(self.retriever), "dtype": self.dtype,
                "base_model": self.base_model, "training_temperature": self.training_temperature}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = AGENT_FILE) -> AgentSettings:
        if data.get("format") != FORMAT or data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"{where} is not an inspo agent file of schema {SCHEMA_VERSION} "
                             f"(format {data.get('format')!r}, schema {data.get('schema_version')!r})")
        try:
            agent = AgentConfig(**_known(AgentConfig, data["agent"]))
            retriever = RetrieverSettings(**_known(RetrieverSettings, data.get("retriever", {})))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where}: {exc}") from exc
        return cls(agent=agent, retriever=retriever, dtype=data.get("dtype", "auto"),
                   base_model=data.get("base_model", ""), training_temperature=data.get("training_temperature"))

    def write(self, folder: Path) -> Path:
        path = Path(folder) / AGENT_FILE
        path.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, folder: Path) -> AgentSettings:
        from inspo.artifacts import read_json

        path = Path(folder) / AGENT_FILE
        return cls.from_dict(read_json(path), where=str(path))

    def lines(self) -> list[str]:
        a = self.agent
        decoding = "greedy" if a.temperature == 0 else f"temperature {a.temperature}, top-p {a.top_p}"
        return [
            f"retriever:   {self.retriever.describe()}, top {a.topk} passages a search",
            f"turns:       up to {a.max_turns} search turn(s) + 1 answer turn, {a.max_response_tokens} tokens a turn, "
            f"observations cut at {a.max_obs_tokens} tokens"
            + (f", prefill {a.prefill!r}" if a.prefill else "") + (", last-turn nudge" if a.last_turn_nudge else ""),
            f"decoding:    {decoding}",
        ]


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
