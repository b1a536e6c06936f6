"""The run report as one self-contained HTML page.

Rules: the page loads nothing (no scripts, fonts, images or styles from anywhere: CSS is
inline and charts are inline SVG from :mod:`inspo.report.charts`); every piece of run text
(instructions, critiques, questions, responses, ids, config values) goes through
:func:`html.escape`; what a run did not record is shown as "not recorded", never guessed.
The stylesheet is :mod:`inspo.report.style`; the behaviour and evolution-rounds sections are
:mod:`inspo.report.behaviour` and :mod:`inspo.report.rounds`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from inspo.artifacts import CONFIG_FILE, DEMO_CONFIG_FILE, REPORT_FILE, SUMMARY_FILE
from inspo.report.behaviour import behaviour
from inspo.report.charts import Marker, Series, legend, line_chart, share_bar
from inspo.report.data import load_run
from inspo.report.diff import word_diff
from inspo.report.markup import NOT_RECORDED, esc, num, pre
from inspo.report.records import InstructionInfo, RunData
from inspo.report.rounds import rounds
from inspo.report.style import CSS

log = logging.getLogger(__name__)


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Read ``run_dir`` and write its report to ``out`` (default ``RUN_DIR/report.html``).

    Raises :class:`FileNotFoundError` when ``run_dir`` or its ``events.jsonl`` is missing.
    Returns the path written.
    """
    run = load_run(run_dir)
    path = Path(out) if out is not None else run.path / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(build_report_html(run), encoding="utf-8")
    return path


def write_run_report(run_dir: str | Path) -> Path | None:
    """The report written at the end of a run (``inspo train``, ``inspo evolve`` and their Python
    functions): ``RUN_DIR/report.html``, by the main process only (``RANK`` 0). A report problem
    never fails a finished run: it is logged as a warning with the command that retries, and None
    is returned (also on another process)."""
    if int(os.environ.get("RANK", "0")) != 0:
        return None  # one process writes the run directory
    try:
        return write_report(run_dir)
    except Exception as exc:  # noqa: BLE001 - the run itself succeeded
        log.warning(
            "could not write the HTML report of %s: %s (run 'inspo report %s' to retry)",
            run_dir,
            exc,
            run_dir,
        )
        return None


def build_report_html(run: RunData) -> str:
    """The whole page for ``run`` (pure: reads no file)."""
    title = f"inspo run report: {run.path.name or run.path}"
    sections = [
        _header(run),
        _notes(run),
        _section("best", "Best instruction", _best(run)),
        _section("training", "Training curves", _training(run)),
        _section(
            "behaviour", "Tool calls and prompt length (Fig. 2 b/c)", behaviour(run, _markers(run))
        ),
        _section("lineage", "Lineage of instructions", _lineage(run)),
        _section(
            "rounds", "Evolution rounds: critiques and the failures they reflected on", rounds(run)
        ),
        _section("cost", "Cost ledger (App. C)", _cost(run)),
        _section("config", "Configuration and summary", _config(run)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>"
        + "".join(sections)
        + "</main></body></html>\n"
    )


# ------------------------------------------------------------------------------------ helpers
def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{body}</section>'


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _moving_average(values: Sequence[float | None], window: int) -> list[float | None]:
    out: list[float | None] = []
    for i in range(len(values)):
        recent = [v for v in values[max(0, i - window + 1) : i + 1] if v is not None]
        out.append(_mean(recent) if values[i] is not None else None)
    return out


def _markers(run: RunData) -> list[Marker]:
    return [Marker(s, "evolve", "evolution") for s in run.evolution_steps] + [
        Marker(s, "prune", "pruning") for s in run.prune_steps
    ]


# ------------------------------------------------------------------------------------ sections
def _header(run: RunData) -> str:
    cfg = run.config or {}
    summary = run.summary or {}
    rewards = [s.reward for s in run.steps if s.reward is not None]
    k = max(1, min(5, len(rewards) // 4)) if rewards else 0
    first, last = (_mean(rewards[:k]), _mean(rewards[-k:])) if rewards else (None, None)
    ledger = run.ledger
    pop = run.steps[-1].population_size if run.steps else None
    tiles = [
        ("steps", str(run.steps[-1].step) if run.steps else NOT_RECORDED),
        ("mode", esc(cfg.get("mode") or summary.get("mode") or "") or NOT_RECORDED),
        ("policy", esc(_policy(cfg, summary)) or NOT_RECORDED),
        ("optimizer", esc(_optimizer(cfg, summary)) or NOT_RECORDED),
        (
            f"reward, first {k} → last {k} steps" if k else "reward",
            f"{num(first)} → {num(last)}" if rewards else NOT_RECORDED,
        ),
        (
            "rollouts failed on errors (not scored)",
            str(sum(s.errors for s in run.steps if s.errors is not None))
            if any(s.errors is not None for s in run.steps)
            else NOT_RECORDED,
        ),
        ("final population", str(pop) if pop is not None else NOT_RECORDED),
        ("instructions ever", str(len(run.instructions))),
        ("evolution rounds", str(len(run.rounds))),
        ("optimizer calls", str(ledger.optimizer_calls) if ledger else NOT_RECORDED),
        (
            "verification share",
            f"{100 * ledger.verification_rollouts / ledger.training_rollouts:.1f}%"
            if ledger and ledger.training_rollouts
            else NOT_RECORDED,
        ),
        ("best instruction", esc(run.best_id) if run.best_id else NOT_RECORDED),
    ]
    tile_html = "".join(
        f'<div class="tile"><div class="k">{k_}</div><div class="v">{v}</div></div>'
        for k_, v in tiles
    )
    toc = "".join(
        f'<a href="#{a}">{esc(t)}</a>'
        for a, t in (
            ("best", "best instruction"),
            ("training", "training"),
            ("behaviour", "tool calls & length"),
            ("lineage", "lineage"),
            ("rounds", "evolution rounds"),
            ("cost", "cost"),
            ("config", "config"),
        )
    )
    return (
        f'<header><h1>inspo run report</h1><div class="path">{esc(run.path)}</div>'
        f'<nav>{toc}</nav><div class="tiles">{tile_html}</div></header>'
    )


def _policy(cfg: dict, summary: dict) -> str:
    model = cfg.get("model")
    if isinstance(model, dict) and model.get("name_or_path"):
        return str(model["name_or_path"])
    if summary.get("policy"):
        return str(summary["policy"])
    return "synthetic environment" if cfg.get("mode") == "demo" else ""


def _optimizer(cfg: dict, summary: dict) -> str:
    if isinstance(summary.get("optimizer"), str):
        return summary["optimizer"]
    opt = cfg.get("optimizer")
    if isinstance(opt, dict):
        return " ".join(str(opt[k]) for k in ("kind", "model") if opt.get(k))
    return str(opt or "")


def _notes(run: RunData) -> str:
    if not run.notes:
        return ""
    items = "".join(f"<li>{esc(n)}</li>" for n in run.notes)
    return f'<div class="notes"><b>Not recorded in this run:</b><ul>{items}</ul></div>'


def _best(run: RunData) -> str:
    if run.best_instruction is None:
        return f"<p>{NOT_RECORDED}</p>"
    info = run.instruction(run.best_id) if run.best_id else None
    meta = ""
    if info is not None:
        meta = (
            f'<p class="meta">{esc(info.id)} · origin {esc(info.origin)} · created at step '
            f"{info.step_created} · last weight {num(info.last_weight)} · "
            f"{len(run.best_instruction)} characters, {len(run.best_instruction.split())} words</p>"
        )
    return (
        meta
        + f'<pre class="text best">{esc(run.best_instruction)}</pre>'
        + _final_choice(run.summary or {})
    )


def _final_choice(summary: dict) -> str:
    """How the returned instruction was chosen and how it did against the seed on held-out test
    questions (``summary.json``'s ``evaluation`` written by :mod:`inspo.training.final_choice`)."""
    ev = summary.get("evaluation")
    if not isinstance(ev, dict) or "rule" not in ev:
        return ""
    metric, seed_id = esc(str(ev.get("metric", ""))), str(ev.get("seed_id", ""))
    rule = (
        "the importance weights (I* = argmax w, Algorithm 1)"
        if ev["rule"] == "weight"
        else f"{metric} on {ev.get('dev_questions')} {esc(str(ev.get('dev_split', '')))} "
        "questions, the seed winning ties"
    )
    rows = "".join(
        f"<tr><td>{esc(i)}{' (seed)' if i == seed_id else ''}"
        f"{' ← returned' if i == ev.get('returned_id') else ''}</td>"
        f"<td>{num(v)}</td></tr>"
        for i, v in sorted((ev.get("dev_scores") or {}).items(), key=lambda kv: -kv[1])
    )
    out = f"<h3>How it was chosen</h3><p>By {rule}.</p>"
    if rows:
        out += (
            f"<table><tr><th>instruction</th><th>{esc(str(ev.get('dev_split', '')))} {metric}</th>"
            f"</tr>{rows}</table>"
        )
    diff = ev.get("test_vs_seed")
    if isinstance(diff, dict):
        ci = (
            f"95% CI [{diff['low']:+.3f}, {diff['high']:+.3f}]"
            if diff.get("n", 0) >= 2
            else "no interval"
        )
        out += (
            f"<p><b>Held-out test</b> ({metric} on {ev.get('test_questions')} "
            f"{esc(str(ev.get('test_split', '')))} questions the choice never saw): returned "
            f"{num(ev.get('test_returned'))}, seed {num(ev.get('test_seed'))}; paired difference "
            f"{diff['mean']:+.3f}, {ci}.</p>"
        )
    return out


def _training(run: RunData) -> str:
    steps = run.steps
    markers = _markers(run)
    xs = [s.step for s in steps]
    rewards = [s.reward for s in steps]
    window = 5
    reward_series = [
        Series("reward/mean", list(zip(xs, rewards, strict=True)), "#9ecae1", width=1.2),
        Series(
            f"moving average ({window} steps)",
            list(zip(xs, _moving_average(rewards, window), strict=True)),
            "#1f77b4",
            width=2.4,
        ),
    ]
    reward_chart = line_chart(
        reward_series,
        title="Mean training reward per step",
        x_label="INSPO step",
        y_label="reward",
        markers=markers,
        y_min=0.0,
        chart_id="reward",
    )

    ids = list(dict.fromkeys(i for s in steps for i in s.weights))
    order = {info.id: n for n, info in enumerate(run.instructions)}
    ids.sort(key=lambda i: order.get(i, len(order)))
    weight_series = [Series(i, [(s.step, s.weights.get(i)) for s in steps]) for i in ids]
    weight_chart = line_chart(
        weight_series,
        title="Importance weight of each instruction",
        x_label="INSPO step",
        y_label="weight w",
        markers=markers,
        y_min=0.0,
        chart_id="weights",
        height=340,
    )
    pop_series = [
        Series("population size", [(s.step, s.population_size) for s in steps], "#2ca02c")
    ]
    pop_chart = line_chart(
        pop_series,
        title="Population size",
        x_label="INSPO step",
        y_label="instructions",
        markers=markers,
        y_min=0.0,
        chart_id="population",
        height=220,
    )
    return (
        f"<figure>{reward_chart}{legend(reward_series, markers)}</figure>"
        f"<figure>{weight_chart}{legend(weight_series, markers)}<figcaption>One line per "
        f"instruction id ({len(weight_series)} in all), drawn while it was a member. Weights are "
        "after attribution, before pruning.</figcaption></figure>"
        f"<figure>{pop_chart}{legend([], markers)}</figure>"
    )


def _lineage(run: RunData) -> str:
    if not run.instructions:
        return f"<p>{NOT_RECORDED}</p>"
    by_id = {i.id: i for i in run.instructions}
    children: dict[str, list[InstructionInfo]] = {}
    roots = []
    for info in run.instructions:
        parent = next((p for p in info.parent_ids if p in by_id), None)
        if parent is None:
            roots.append(info)
        else:
            children.setdefault(parent, []).append(info)
    best_path = set()
    node = by_id.get(run.best_id or "")
    while node is not None and node.id not in best_path:
        best_path.add(node.id)
        node = next((by_id[p] for p in node.parent_ids if p in by_id), None)

    def render(info: InstructionInfo) -> str:
        kids = "".join(render(c) for c in children.get(info.id, []))
        sub = f'<ul class="tree">{kids}</ul>' if kids else ""
        return f"<li>{_node(info, by_id, info.id in best_path, info.id == run.best_id)}{sub}</li>"

    intro = (
        '<p class="meta">Each child shows the critique that produced it and a word-level diff of '
        "its text against its parent (<ins>inserted</ins>, <del>deleted</del>). Diffs along the "
        "path to the best instruction are open.</p>"
    )
    return intro + '<ul class="tree root">' + "".join(render(r) for r in roots) + "</ul>"


def _node(
    info: InstructionInfo, by_id: dict[str, InstructionInfo], on_best_path: bool, is_best: bool
) -> str:
    if info.alive:
        fate = '<span class="badge alive">in final population</span>'
    elif info.removed_step is not None:
        fate = (
            f'<span class="badge gone">{esc(info.removed_how)} at step {info.removed_step}</span>'
        )
    else:
        fate = ""
    best = '<span class="badge best">best</span>' if is_best else ""
    score = "" if info.origin == "seed" else f" · D_B score {num(info.score)}"
    head = (
        f'<div class="node-head"><b>{esc(info.id)}</b> · {esc(info.origin)} · step '
        f"{info.step_created}{score} · last w {num(info.last_weight)} {fate}{best}</div>"
    )
    parent = next((by_id[p] for p in info.parent_ids if p in by_id), None)
    body = []
    if info.critique:
        body.append(
            f"<details><summary>critique</summary>{pre(info.critique, 'critique')}</details>"
        )
    if info.text is None:
        body.append(f'<div class="meta">text {NOT_RECORDED}</div>')
    elif parent is None or parent.text is None:
        label = "text" if parent is None else f"text (parent {esc(parent.id)}'s text not recorded)"
        body.append(f"<details><summary>{label}</summary>{pre(info.text)}</details>")
    else:
        diff, stats = word_diff(parent.text, info.text)
        open_ = " open" if on_best_path else ""
        body.append(
            f"<details{open_}><summary>diff against {esc(parent.id)} "
            f'(<span class="plus">+{stats.inserted_words}</span> / '
            f'<span class="minus">−{stats.deleted_words}</span> words)</summary>'
            f'<div class="diff">{diff}</div></details>'
        )
    cls = "node best-path" if on_best_path else "node"
    return f'<div class="{cls}" data-id="{esc(info.id)}">{head}{"".join(body)}</div>'


def _cost(run: RunData) -> str:
    ledger = run.ledger
    if ledger is None:
        return f"<p>{NOT_RECORDED}</p>"
    train = ledger.training_rollouts

    def share(n: int) -> str:
        return (
            f"{100 * n / train:.1f}% of training rollouts"
            if train
            else "share not defined (no training rollouts)"
        )

    rows = [
        ("optimizer calls", f"{ledger.optimizer_calls} ({ledger.optimizer_failures} failed)"),
        ("optimizer prompt tokens", str(ledger.optimizer_prompt_tokens)),
        ("optimizer completion tokens", str(ledger.optimizer_completion_tokens)),
        (
            "candidates proposed / rejected / admitted",
            f"{ledger.candidates_proposed} / {ledger.candidates_rejected} / "
            f"{ledger.candidates_admitted}",
        ),
        ("training rollouts", str(train)),
        (
            "verification rollouts",
            f"{ledger.verification_rollouts} ({share(ledger.verification_rollouts)})",
        ),
        ("warm-up rollouts", f"{ledger.warmup_rollouts} ({share(ledger.warmup_rollouts)})"),
        (
            "extra inference (verification + warm-up)",
            f"{100 * ledger.extra_inference_share:.1f}% of training rollouts (the paper's App. C "
            "reports 1.4–7%)",
        ),
    ]
    table = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    bar = share_bar(
        [
            ("training", train, "#1f77b4"),
            ("verification", ledger.verification_rollouts, "#ff7f0e"),
            ("warm-up", ledger.warmup_rollouts, "#2ca02c"),
        ]
    )
    bar_legend = (
        '<div class="legend flush"><span class="legend-item"><i class="sw" '
        'style="background:#1f77b4"></i>training</span><span class="legend-item"><i class="sw" '
        'style="background:#ff7f0e"></i>verification</span><span class="legend-item"><i class="sw" '
        'style="background:#2ca02c"></i>warm-up</span></div>'
    )
    return (
        f'<table class="ledger">{table}</table><p class="meta">Rollouts '
        f"generated:</p>{bar}{bar_legend}"
    )


def _config(run: RunData) -> str:
    parts = []
    for name, data in (
        (run.config_file or f"{DEMO_CONFIG_FILE} / {CONFIG_FILE}", run.config),
        (SUMMARY_FILE, run.summary),
    ):
        if data is None:
            parts.append(f"<p>{esc(name)}: {NOT_RECORDED}</p>")
            continue
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
        parts.append(
            f'<details><summary>{esc(name)}</summary><pre class="text">{esc(text)}</pre></details>'
        )
    return "".join(parts)
