"""What plays a trained agent besides its weights: the exported folder's files and ``agent.json``.

An exported agent (:func:`inspo.trained.export_agent`) is one folder::

    config.json, model.safetensors, tokenizer files ...   the trained policy (transformers loads it)
    instruction.txt     INSTRUCTION_FILE: the instruction the run returned
    population.json     POPULATION_FILE: the final population, weights and the returned id
    agent.json          AGENT_FILE: :class:`AgentSettings` (the environment, turns, tokens, prefill)
    README.md           CARD_FILE: inspo's model card
    LICENSE             the base model's licence text, when inspo knows it
    environment/        ENVIRONMENT_DIR: a user's environment module, copied (``env.source``)

:class:`AgentSettings` is the agent of a training config (:meth:`AgentSettings.from_config`):
the environment the policy was trained in (``env``: its name and settings; for Search-R1 the
retriever, corpus, top-k and reward), the same turns, tokens per turn, observation cap, prefill and
nudge, and greedy decoding (``temperature`` 0), as the run's own end-of-run evaluation.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from inspo.envs.loop import AgentConfig

AGENT_FILE = "agent.json"
INSTRUCTION_FILE = "instruction.txt"
POPULATION_FILE = "population.json"
CARD_FILE = "README.md"
LICENSE_FILE = "LICENSE"
ENVIRONMENT_DIR = "environment"
#: ``agent.json``'s ``format`` value and its schema version.
FORMAT = "inspo-agent"
SCHEMA_VERSION = 2


#: agent.json schema 1 kept the search agent's retriever and reward in the file; schema 2 keeps the
#: environment (``env``: its name and settings) instead. Schema 1 files are read as ``search-r1``.
_V1_RETRIEVER = {
    "kind": "retriever",
    "url": "retriever_url",
    "model": "retriever_model",
    "corpus": "corpus",
    "index_dir": "index_dir",
    "index_path": "index_path",
    "faiss_index": "faiss_index",
    "faiss_nprobe": "faiss_nprobe",
    "faiss_ef_search": "faiss_ef_search",
    "faiss_device": "faiss_device",
}


@dataclass
class AgentSettings:
    """``agent.json``: how the trained policy plays (see the module docstring)."""

    agent: AgentConfig
    """Turns, tokens per turn and per observation, decoding, prefill, nudge."""
    env: dict[str, Any] = field(default_factory=lambda: {"name": "search-r1"})
    """The environment the policy was trained in: ``{"name": ..., **its settings}`` as the run's
    ``env:`` section (``python: true`` when it was an object given in Python: loading the agent
    then needs it again; ``source``: a user's module file copied into the folder, as
    ``environment/FILE.py:attr``, what plays when the recorded name does not import)."""
    dtype: str = "auto"
    """The weights dtype the policy trained in and plays in: concrete in an exported run (its
    config.yaml records ``model.dtype`` resolved); ``auto`` only from a hand-written config
    (resolved where it plays, :func:`inspo.models.precision.play_precision`)."""
    base_model: str = ""
    """The ``model.name_or_path`` training started from."""
    training_temperature: float | None = None
    """The temperature the policy sampled at in training (it plays greedily,
    ``agent.temperature``)."""

    @classmethod
    def from_config(cls, config: Any) -> AgentSettings:
        """The agent of a :class:`~inspo.config.train.TrainConfig`, decoding greedily."""
        from inspo.envs.build import agent_config

        return cls(
            agent=replace(agent_config(config.rl), temperature=0.0),
            env=config.env.to_dict(),
            dtype=config.model.dtype,
            base_model=config.model.name_or_path,
            training_temperature=config.rl.temperature,
        )

    @property
    def env_name(self) -> str:
        return str(self.env.get("name", "search-r1"))

    @property
    def env_options(self) -> dict[str, Any]:
        """The environment's own settings (the section without ``name``, ``python`` and
        ``source``)."""
        return {k: v for k, v in self.env.items() if k not in ("name", "python", "source")}

    def to_dict(self) -> dict[str, Any]:
        from inspo import __version__

        return {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "inspo_version": __version__,
            "agent": asdict(self.agent),
            "env": dict(self.env),
            "dtype": self.dtype,
            "base_model": self.base_model,
            "training_temperature": self.training_temperature,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = AGENT_FILE) -> AgentSettings:
        version = data.get("schema_version")
        if data.get("format") != FORMAT or version not in (1, SCHEMA_VERSION):
            raise ValueError(
                f"{where} is not an inspo agent file of schema 1 or {SCHEMA_VERSION} "
                f"(format {data.get('format')!r}, schema {version!r})"
            )
        try:
            agent = AgentConfig(**_known(AgentConfig, data["agent"]))
            env = dict(data["env"]) if version == SCHEMA_VERSION else _v1_env(data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where}: {exc}") from exc
        if not isinstance(env.get("name"), str):
            raise ValueError(f"{where}: env.name is missing")
        return cls(
            agent=agent,
            env=env,
            dtype=data.get("dtype", "auto"),
            base_model=data.get("base_model", ""),
            training_temperature=data.get("training_temperature"),
        )

    def write(self, folder: Path) -> Path:
        path = Path(folder) / AGENT_FILE
        path.write_text(
            json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        return path

    @classmethod
    def read(cls, folder: Path) -> AgentSettings:
        from inspo.artifacts import read_json

        path = Path(folder) / AGENT_FILE
        return cls.from_dict(read_json(path), where=str(path))

    def lines(self) -> list[str]:
        a = self.agent
        decoding = (
            "greedy" if a.temperature == 0 else f"temperature {a.temperature}, top-p {a.top_p}"
        )
        options = ", ".join(
            f"{k}={v!r}" for k, v in self.env_options.items() if v not in ("", 0, None, [], {})
        )
        return [
            f"environment: {self.env_name}"
            + (f" ({options})" if options else "")
            + (" (an object given in Python)" if self.env.get("python") else ""),
            f"turns:       up to {a.max_turns} tool turn(s) + 1 answer turn, "
            f"{a.max_response_tokens} tokens a turn, observations cut at {a.max_obs_tokens} tokens"
            + (f", prefill {a.prefill!r}" if a.prefill else "")
            + (", last-turn nudge" if a.last_turn_nudge else ""),
            f"decoding:    {decoding}",
        ]


def _v1_env(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 agent.json's search agent as the ``search-r1`` environment's settings."""
    retriever = data.get("retriever", {})
    env: dict[str, Any] = {"name": "search-r1"}
    env.update({new: retriever[old] for old, new in _V1_RETRIEVER.items() if old in retriever})
    for key in ("topk", "reward", "format_weight"):
        if key in data["agent"]:
            env[key] = data["agent"][key]
    return env


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}
