"""How a config is put together from layers: a preset (or a run's config.yaml), then a file, then
``--set`` overrides, each a nested dict merged over the last; the one warning a combination of
layers earns; and the hint an environment's setting written in the wrong section gets. Pure
dict-to-dict functions: validation happens once, on the merged result, in
:func:`inspo.config.train.from_dict`."""

from __future__ import annotations

import copy
from typing import Any

from inspo.envs.registry import DEFAULT as DEFAULT_ENV


def merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``update`` into a copy of ``base`` (tables merge, values replace)."""
    out = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


#: The environment whose settings :func:`env_setting_hint` points to.
HINTED_ENV = "search-r1"


def env_setting_hint(keys: list[str]) -> str:
    """What to write for ``keys`` that a section refused but that are settings of the search-r1
    environment (``data.corpus``, ``rl.topk`` ... before the environment seam): ``"; corpus is a
    setting of the search-r1 environment: write env.corpus"``, or '' when none is."""
    from inspo.envs.registry import resolve_options

    ours = [k for k in keys if k in resolve_options(HINTED_ENV, {})]
    if not ours:
        return ""
    return (
        f"; {', '.join(ours)} {'is a setting' if len(ours) == 1 else 'are settings'} of the "
        f"{HINTED_ENV} environment: write {', '.join('env.' + k for k in ours)}"
    )


def warn_full_fine_tuning_rate(
    start: dict[str, Any],
    data: dict[str, Any],
    layers: list[dict[str, Any]],
    *,
    lora_default: bool = False,
) -> None:
    """Warn when a LoRA starting point (a preset) is switched to full fine-tuning
    (``model.lora=false``) by later layers that never set ``rl.learning_rate``: the preset's rate
    is meant for an adapter, and one AdamW step on all weights of the 0.5B at cpu-tiny's 2e-5
    visibly changed its answers (benchmarks/notes/history.md, training rollouts from vLLM). The rate
    is left as set. ``lora_default``: ``model.lora`` where no layer gives it (ModelConfig's
    default)."""
    import warnings

    def section(d: dict[str, Any], name: str) -> dict[str, Any]:
        return (
            d[name] if isinstance(d.get(name), dict) else {}
        )  # a bad value is from_dict's to refuse

    def lora(d: dict[str, Any]) -> bool:
        return section(d, "model").get("lora", lora_default) is True

    rate = section(data, "rl").get("learning_rate")
    if (
        lora(start)
        and not lora(data)
        and not any("learning_rate" in section(layer, "rl") for layer in layers)
        and isinstance(rate, (int, float))
        and rate > FULL_FINE_TUNING_RATE
    ):
        warnings.warn(
            f"model.lora=false trains every weight at rl.learning_rate {rate:g}, the preset's rate "
            f"for a LoRA adapter; full fine-tuning usually wants {FULL_FINE_TUNING_RATE:g} or less "
            "(the paper trains at 1e-6 and below): set rl.learning_rate",
            UserWarning,
            stacklevel=3,
        )


#: The largest rate :func:`warn_full_fine_tuning_rate` lets pass silently.
FULL_FINE_TUNING_RATE = 1e-6


#: Settings outside ``env:`` that belong to the environment a preset was written for: a layer that
#: switches ``env.name`` puts them back to their defaults (unless it sets them itself).
ENV_BOUND: dict[str, tuple[str, ...]] = {"rl": ("prefill",)}


def merge_layer(
    data: dict[str, Any], layer: dict[str, Any], keep: dict[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """``layer`` merged over ``data``, except that a layer naming ANOTHER environment
    (``env.name``) starts the ``env:`` section afresh and resets :data:`ENV_BOUND`: the earlier
    layers' settings belong to the environment it replaces (cpu-tiny's corpus and its forced
    ``<search>`` mean nothing to the calculator). ``keep``: the env-bound settings the user's own
    earlier layers gave without naming an environment (:func:`user_bound`), which stay."""
    env = layer.get("env")
    if isinstance(env, dict) and "name" in env:
        before = data.get("env") if isinstance(data.get("env"), dict) else {}
        if env["name"] != before.get("name", DEFAULT_ENV):
            data = {**data, "env": {}}
            for section, keys in ENV_BOUND.items():
                if isinstance(data.get(section), dict):
                    data[section] = {k: v for k, v in data[section].items() if k not in keys}
                    data[section].update((keep or {}).get(section, {}))
    return merge(data, layer)


def user_bound(
    layer: dict[str, Any], so_far: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """``so_far`` with the :data:`ENV_BOUND` settings ``layer`` (a config file or an override) sets
    added, when it names no environment: written for whichever one the run uses, so a later
    ``--env`` keeps them (a ``--config`` file's ``rl.prefill`` was reset in silence). A layer that
    names one starts afresh: its settings go with that environment."""
    env = layer.get("env")
    if isinstance(env, dict) and "name" in env:
        return {}
    out = {k: dict(v) for k, v in (so_far or {}).items()}
    for section, keys in ENV_BOUND.items():
        given = layer.get(section)
        if isinstance(given, dict):
            out.setdefault(section, {}).update({k: given[k] for k in keys if k in given})
    return out
