"""The report's behaviour section (Fig. 2 b/c): tool calls, prompt length, instruction length,
and the environment's own per-step metrics (``env/<name>`` in ``metrics.jsonl``: a rubric's
functions one by one). Rules as :mod:`inspo.report.html`'s: run text escaped, nothing guessed."""

from __future__ import annotations

import html

from inspo.report.charts import Marker, Series, legend, line_chart
from inspo.report.records import RunData

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _e(value: object) -> str:
    return html.escape(str(value))


def behaviour(run: RunData, markers: list[Marker]) -> str:
    """The section's figures: tool calls, prompt tokens, instruction length, the environment's own
    metrics."""
    steps = run.steps
    parts = []
    source = {
        "metrics": "logged as rollout/tool_calls (Search-R1: searches)",
        "replay buffer": "derived from the replay buffer's rollouts (steps it still holds)",
    }
    calls = [
        Series("tool calls per trajectory", [(s.step, s.tool_calls) for s in steps], "#9467bd")
    ]
    chart = line_chart(
        calls,
        title="Tool calls per trajectory (mean)",
        x_label="INSPO step",
        y_label="tool calls",
        markers=markers,
        y_min=0.0,
        chart_id="tool-calls",
    )
    parts.append(
        f"<figure>{chart}<figcaption>{_e(source.get(run.calls_source or '', 'not recorded'))}"
        "</figcaption></figure>"
    )
    if any(s.prompt_tokens for s in steps):
        tokens = [Series("prompt tokens", [(s.step, s.prompt_tokens) for s in steps], "#8c564b")]
        chart = line_chart(
            tokens,
            title="Prompt length in tokens (mean per trajectory)",
            x_label="INSPO step",
            y_label="tokens",
            markers=markers,
            y_min=0.0,
            chart_id="prompt-tokens",
        )
        parts.append(
            f"<figure>{chart}<figcaption>logged as rollout/prompt_tokens: the policy's prompt "
            "(instruction + question), in the policy tokenizer's tokens</figcaption></figure>"
        )
    chars = [
        Series("instruction characters", [(s.step, s.instruction_chars) for s in steps], "#ff7f0e")
    ]
    chart = line_chart(
        chars,
        title="Instruction length in characters (mean over the step’s question groups)",
        x_label="INSPO step",
        y_label="characters",
        markers=markers,
        y_min=0.0,
        chart_id="instruction-length",
    )
    parts.append(
        f"<figure>{chart}<figcaption>derived: each question group's sampled instruction (sampled "
        "events) × its text; characters, not tokens</figcaption></figure>"
    )
    parts.append(_env_metrics(run, markers))
    return "".join(parts)


def _env_metrics(run: RunData, markers: list[Marker]) -> str:
    """One line per environment metric (a rubric's functions, each under its name); '' when the run
    logged none."""
    names = sorted({name for s in run.steps for name in s.env_metrics})
    if not names:
        return ""
    series = [
        Series(
            name,
            [(s.step, s.env_metrics.get(name)) for s in run.steps],
            _PALETTE[i % len(_PALETTE)],
        )
        for i, name in enumerate(names)
    ]
    chart = line_chart(
        series,
        title="The environment's metrics per step (mean per trajectory)",
        x_label="INSPO step",
        y_label="value",
        markers=markers,
        chart_id="env-metrics",
    )
    return (
        f"<figure>{chart}{legend(series, markers)}<figcaption>logged as env/NAME: the "
        "environment's metrics (env.metrics: a rubric's functions one by one, unweighted, or the "
        "environment's own numbers)</figcaption></figure>"
    )
