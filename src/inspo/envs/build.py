"""An agent from a run's config: its environment, its questions, its seed instruction and how it
plays. Training, evaluation and the trained agent all stand on this layer (none of them reaches
into another's).

- :func:`build_env`: the environment the config's ``env:`` section names (or the object given in
  Python), checked; a failure is a :class:`~inspo.records.SetupError` naming the setting;
- :func:`load_questions`: questions of a split from ``data.*`` (``env``: the environment's own;
  else a file, a directory, a built-in world or ``hf:NAME``:
  :func:`inspo.data.sources.load_qa_source`);
- :func:`agent_config`: how an episode is played (turns, tokens, decoding, prefill, nudge) from the
  ``rl`` section; :func:`check_prefill` refuses a prefill that opens a tag the environment lacks;
- :func:`seed_of`: the seed instruction a config names ('' the environment's, ``@NAME``, or text);
- :func:`resolve_model_dir`: the policy's model folder (``model.name_or_path``), found or built.

The config is read by attribute (``config.env``, ``config.data``, ``config.rl``): this layer does
not import the training package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inspo.envs.base import EnvError
from inspo.envs.loop import AgentConfig
from inspo.envs.registry import EnvNameError, make_env, resolve_seed
from inspo.records import Question, SetupError

#: ``data.train`` / ``data.eval`` value meaning "the environment's own questions".
ENV_DATA = "env"


def agent_config(rl: Any, **changes: Any) -> AgentConfig:
    """The agent's settings from the RL section (one place, so training and verification agree)."""
    values = dict(
        max_turns=rl.max_turns,
        max_response_tokens=rl.max_response_tokens,
        max_obs_tokens=rl.max_obs_tokens,
        temperature=rl.temperature,
        top_p=rl.top_p,
        prefill=rl.prefill,
        last_turn_nudge=rl.last_turn_nudge,
    )
    values.update(changes)
    return AgentConfig(**values)


def check_prefill(env: Any, prefill: str, *, setting: str = "rl.prefill") -> None:
    """SetupError when ``prefill`` (forced text at the start of the first turn) opens a tag the
    environment's protocol does not have (``<search>`` with the calculator): its first turn would
    start a call no tool answers. The tags it knows are those its turns stop at (``env.stop``),
    and ``<think>``."""
    import re

    known = {s[2:-1] for s in env.stop if s.startswith("</") and s.endswith(">")} | {"think"}
    opened = [t for t in re.findall(r"<([A-Za-z_][\w-]*)>", prefill) if t not in known]
    if opened:
        raise SetupError(
            f"{setting}={prefill!r} opens <{opened[0]}>, which the {env.name} environment does not "
            f"know (its tags: {', '.join('<' + t + '>' for t in sorted(known))}); set {setting}= "
            "(none) or one of those"
        )


def build_env(config: Any, env: Any = None) -> Any:
    """The environment of ``config.env`` (``env``: an environment object given in Python instead,
    checked). Raises SetupError with the setting and the cause: an unknown name, a module that does
    not import, a factory that fails (a corpus that cannot be read, a server down), a missing
    part."""
    from inspo.envs.base import check_environment

    if env is not None:
        try:
            return check_environment(env)
        except EnvError as exc:
            raise SetupError(str(exc)) from exc
    spec = config.env
    if getattr(spec, "python", False):
        raise SetupError(
            f"this run's environment ({spec.name!r}) was an object passed in Python, not a name "
            "inspo can build: pass it again (env=...), or give it a name that imports "
            "(env.name=module:attr)"
        )
    try:
        return make_env(spec.name, spec.options)
    except (EnvNameError, EnvError) as exc:
        raise SetupError(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - a factory's own failure (a corpus, a server): said with its setting
        where = ", ".join(
            f"env.{k}={v!r}" for k, v in spec.options.items() if v not in ("", 0, None, [], {})
        )
        raise SetupError(
            f"environment {spec.name!r}"
            + (f" ({where})" if where else "")
            + f" cannot be built: {type(exc).__name__}: {exc}"
        ) from exc


def seed_of(env: Any, text: str) -> str:
    """The seed instruction ``text`` names for ``env`` (SetupError for an unknown ``@NAME``)."""
    try:
        seed = resolve_seed(env, text)
    except ValueError as exc:
        raise SetupError(f"seed_instruction: {exc}") from exc
    if not seed.strip():
        raise SetupError(
            "seed_instruction is blank; leave it '' for the environment's own, name one (@NAME) or "
            "write one"
        )
    return seed


def load_questions(
    env: Any, source: str, split: str, limit: int, *, field_name: str, max_hops: int = 0
) -> list[Question]:
    """Questions of ``split`` from ``source`` with errors that name ``field_name``.

    ``source`` ``env`` is the environment's own questions; anything else goes through
    :func:`inspo.data.sources.load_qa_source`. ``max_hops > 0`` keeps the questions whose
    ``meta["hops"]`` is at most that (questions without it are kept); ``limit`` applies after that
    filter. Ids must be unique (they key each group's instruction choice).
    """
    from inspo.data.sources import load_qa_source, within_hops

    try:
        if source == ENV_DATA:
            questions = env.questions(split)
        else:
            questions = load_qa_source(
                source, split=split, limit=None if max_hops else (limit or None)
            )
    except (FileNotFoundError, ValueError, OSError, KeyError) as exc:
        what = f"the {env.name} environment's own questions" if source == ENV_DATA else repr(source)
        raise SetupError(
            f"{field_name}={source!r}: {what} (split {split!r}) cannot be read: {exc}"
        ) from exc
    questions = within_hops(list(questions), max_hops)[: limit or None]
    if not questions:
        extra = f" with at most {max_hops} hop(s)" if max_hops else ""
        raise SetupError(f"{field_name}={source!r} (split {split!r}) has no questions{extra}")
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise SetupError(
                f"{field_name}={source!r}: question id {q.id!r} appears twice; ids must be unique "
                "(they key each group's instruction choice)"
            )
        seen.add(q.id)
    return questions


def dataset_label(env: Any, source: str, split: str) -> str:
    """How a dataset is named in tables: ``SOURCE@SPLIT``, the environment's name for its own."""
    return f"{env.name if source == ENV_DATA else source}@{split}"


def resolve_model_dir(name_or_path: str) -> Path:
    """The policy's model folder (a packaged model is built into the cache); SetupError naming
    ``model.name_or_path`` when it cannot be found or built."""
    from inspo.models import ModelError, model_path

    try:
        return Path(model_path(name_or_path))
    except (ModelError, FileNotFoundError, OSError, ValueError) as exc:
        raise SetupError(f"model.name_or_path={name_or_path!r} is not usable: {exc}") from exc
