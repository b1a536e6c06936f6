"""The run report as one self-contained HTML page.

Rules: the page loads nothing (no scripts, fonts, images or styles from anywhere: CSS is
inline and charts are inline SVG from :mod:`inspo.report.charts`); every piece of run text
(instructions, critiques, questions, responses, ids, config values) goes through
:func:`html.escape`; what a run did not record is shown as "not recorded", never guessed.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

from inspo.artifacts import CONFIG_FILE, DEMO_CONFIG_FILE, REPORT_FILE, SUMMARY_FILE
from inspo.report.behaviour import behaviour
from inspo.report.charts import Marker, Series, legend, line_chart, share_bar
from inspo.report.data import load_run
from inspo.report.diff import word_diff
from inspo.report.records import EvolutionRound, FailureExample, InstructionInfo, RunData

NOT_RECORDED = '<span class="nr">not recorded</span>'
RESPONSE_EXCERPT = 600


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
            "rounds", "Evolution rounds: critiques and the failures they reflected on", _rounds(run)
        ),
        _section("cost", "Cost ledger (App. C)", _cost(run)),
        _section("config", "Configuration and summary", _config(run)),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>"
        + "".join(sections)
        + "</main></body></html>\n"
    )


# ------------------------------------------------------------------------------------ helpers
def _e(value: object) -> str:
    return html.escape(str(value))


def _num(value: float | None, fmt: str = "{:.3f}") -> str:
    return NOT_RECORDED if value is None else fmt.format(value)


def _section(anchor: str, title: str, body: str) -> str:
    return f'<section id="{anchor}"><h2>{_e(title)}</h2>{body}</section>'


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


def _pre(text: str | None, cls: str = "text") -> str:
    return NOT_RECORDED if text is None else f'<pre class="{cls}">{_e(text)}</pre>'


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
        ("mode", _e(cfg.get("mode") or summary.get("mode") or "") or NOT_RECORDED),
        ("policy", _e(_policy(cfg, summary)) or NOT_RECORDED),
        ("optimizer", _e(_optimizer(cfg, summary)) or NOT_RECORDED),
        (
            f"reward, first {k} → last {k} steps" if k else "reward",
            f"{_num(first)} → {_num(last)}" if rewards else NOT_RECORDED,
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
        ("best instruction", _e(run.best_id) if run.best_id else NOT_RECORDED),
    ]
    tile_html = "".join(
        f'<div class="tile"><div class="k">{k_}</div><div class="v">{v}</div></div>'
        for k_, v in tiles
    )
    toc = "".join(
        f'<a href="#{a}">{_e(t)}</a>'
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
        f'<header><h1>inspo run report</h1><div class="path">{_e(run.path)}</div>'
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
    items = "".join(f"<li>{_e(n)}</li>" for n in run.notes)
    return f'<div class="notes"><b>Not recorded in this run:</b><ul>{items}</ul></div>'


def _best(run: RunData) -> str:
    if run.best_instruction is None:
        return f"<p>{NOT_RECORDED}</p>"
    info = run.instruction(run.best_id) if run.best_id else None
    meta = ""
    if info is not None:
        meta = (
            f'<p class="meta">{_e(info.id)} · origin {_e(info.origin)} · created at step '
            f"{info.step_created} · last weight {_num(info.last_weight)} · "
            f"{len(run.best_instruction)} characters, {len(run.best_instruction.split())} words</p>"
        )
    return (
        meta
        + f'<pre class="text best">{_e(run.best_instruction)}</pre>'
        + _final_choice(run.summary or {})
    )


def _final_choice(summary: dict) -> str:
    """How the returned instruction was chosen and how it did against the seed on held-out test
    questions (``summary.json``'s ``evaluation`` written by :mod:`inspo.training.final`)."""
    ev = summary.get("evaluation")
    if not isinstance(ev, dict) or "rule" not in ev:
        return ""
    metric, seed_id = _e(str(ev.get("metric", ""))), str(ev.get("seed_id", ""))
    rule = (
        "the importance weights (I* = argmax w, Algorithm 1)"
        if ev["rule"] == "weight"
        else f"{metric} on {ev.get('dev_questions')} {_e(str(ev.get('dev_split', '')))} questions, "
        "the seed winning ties"
    )
    rows = "".join(
        f"<tr><td>{_e(i)}{' (seed)' if i == seed_id else ''}"
        f"{' ← returned' if i == ev.get('returned_id') else ''}</td>"
        f"<td>{_num(v)}</td></tr>"
        for i, v in sorted((ev.get("dev_scores") or {}).items(), key=lambda kv: -kv[1])
    )
    out = f"<h3>How it was chosen</h3><p>By {rule}.</p>"
    if rows:
        out += (
            f"<table><tr><th>instruction</th><th>{_e(str(ev.get('dev_split', '')))} {metric}</th>"
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
            f"{_e(str(ev.get('test_split', '')))} questions the choice never saw): returned "
            f"{_num(ev.get('test_returned'))}, seed {_num(ev.get('test_seed'))}; paired difference "
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
        fate = f'<span class="badge gone">{_e(info.removed_how)} at step {info.removed_step}</span>'
    else:
        fate = ""
    best = '<span class="badge best">best</span>' if is_best else ""
    score = "" if info.origin == "seed" else f" · D_B score {_num(info.score)}"
    head = (
        f'<div class="node-head"><b>{_e(info.id)}</b> · {_e(info.origin)} · step '
        f"{info.step_created}{score} · last w {_num(info.last_weight)} {fate}{best}</div>"
    )
    parent = next((by_id[p] for p in info.parent_ids if p in by_id), None)
    body = []
    if info.critique:
        body.append(
            f"<details><summary>critique</summary>{_pre(info.critique, 'critique')}</details>"
        )
    if info.text is None:
        body.append(f'<div class="meta">text {NOT_RECORDED}</div>')
    elif parent is None or parent.text is None:
        label = "text" if parent is None else f"text (parent {_e(parent.id)}'s text not recorded)"
        body.append(f"<details><summary>{label}</summary>{_pre(info.text)}</details>")
    else:
        diff, stats = word_diff(parent.text, info.text)
        open_ = " open" if on_best_path else ""
        body.append(
            f"<details{open_}><summary>diff against {_e(parent.id)} "
            f'(<span class="plus">+{stats.inserted_words}</span> / '
            f'<span class="minus">−{stats.deleted_words}</span> words)</summary>'
            f'<div class="diff">{diff}</div></details>'
        )
    cls = "node best-path" if on_best_path else "node"
    return f'<div class="{cls}" data-id="{_e(info.id)}">{head}{"".join(body)}</div>'


def _rounds(run: RunData) -> str:
    if not run.rounds and not run.optimizer_failures:
        return f"<p>No optimizer call in this run ({NOT_RECORDED}).</p>"
    out = []
    for r in run.rounds:
        out.append(_round(r))
    if run.optimizer_failures:
        rows = "".join(
            f"<tr><td>{f.step}</td><td>{f.round}</td><td>{_e(f.reason)}</td></tr>"
            for f in run.optimizer_failures
        )
        out.append(
            f"<h3>Rounds that produced nothing usable</h3><table><tr><th>step</th><th>round</th>"
            f"<th>reason</th></tr>{rows}</table>"
        )
    return "".join(out)


def _round(r: EvolutionRound) -> str:
    tokens = (
        f"{r.prompt_tokens} prompt + {r.completion_tokens} completion tokens"
        if r.prompt_tokens or r.completion_tokens
        else "tokens not recorded (offline optimizer?)"
    )
    failures = "".join(_failure_row(f) for f in r.failures) or (
        f'<tr><td colspan="6">{NOT_RECORDED}</td></tr>'
    )
    cands = (
        "".join(
            f'<tr><td>{_e(c.id)}</td><td class="status-{_e(c.status)}">{_e(c.status)}</td>'
            f"<td>{_num(c.score)}</td><td>{_e(c.reason)}</td></tr>"
            for c in r.candidates
        )
        or f'<tr><td colspan="4">{NOT_RECORDED}</td></tr>'
    )
    return (
        f'<div class="round"><h3>Step {r.step}{" (initial population)" if r.step == 0 else ""}, '
        f"round {r.round}: parent {_e(r.parent_id)} "
        f"({_e(r.template)} template)</h3><p class='meta'>{_e(tokens)}</p>"
        f"<details><summary>critique</summary>{_pre(r.critique or None, 'critique')}</details>"
        f"<h4>Failures reflected on ({len(r.failures)})</h4>"
        '<table class="failures"><tr><th>question</th><th>gold</th><th>answer</th><th>reward</th>'
        f"<th>from</th><th>response (excerpt)</th></tr>{failures}</table>"
        f"<h4>Candidates ({len(r.candidates)})</h4><table><tr><th>id</th><th>outcome</th>"
        f"<th>D_B score</th><th>reason</th></tr>{cands}</table></div>"
    )


def _failure_row(f: FailureExample) -> str:
    if f.question is None:
        return (
            f"<tr><td>{_e(f.question_id)}</td><td colspan='5'>no longer in the replay buffer: "
            f"{NOT_RECORDED}</td></tr>"
        )
    response = f.response or ""
    excerpt = response[:RESPONSE_EXCERPT] + ("…" if len(response) > RESPONSE_EXCERPT else "")
    source = f"step {f.step}" + (f", {_e(f.instruction_id)}" if f.instruction_id else "")
    return (
        f"<tr><td><span class='qid'>{_e(f.question_id)}</span> {_e(f.question)}</td>"
        f"<td>{_e(' | '.join(f.gold)) or NOT_RECORDED}</td>"
        f"<td>{_e(f.answer) if f.answer is not None else '<i>none</i>'}</td>"
        f"<td>{_num(f.reward, '{:.2f}')}</td><td>{source}</td>"
        f'<td><pre class="response">{_e(excerpt)}</pre></td></tr>'
    )


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
    table = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
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
            parts.append(f"<p>{_e(name)}: {NOT_RECORDED}</p>")
            continue
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
        parts.append(
            f'<details><summary>{_e(name)}</summary><pre class="text">{_e(text)}</pre></details>'
        )
    return "".join(parts)


CSS = """
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dde5; --bg: #ffffff; --panel: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Roboto, sans-serif; }
main { max-width: 960px; margin: 0 auto; padding: 20px 24px 60px; }
h1 { font-size: 24px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 2px solid \
var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; }
h4 { font-size: 13px; margin: 12px 0 4px; color: var(--muted); text-transform: uppercase; \
letter-spacing: .04em; }
.path, .meta, figcaption { color: var(--muted); font-size: 12.5px; }
nav { margin: 10px 0; display: flex; flex-wrap: wrap; gap: 6px 14px; }
nav a { color: #1f5fbf; text-decoration: none; }
.tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 8px; \
margin-top: 10px; }
.tile { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px \
10px; }
.tile .k { color: var(--muted); font-size: 11.5px; text-transform: uppercase; letter-spacing: \
.03em; }
.tile .v { font-size: 16px; font-weight: 600; word-break: break-word; }
.notes { background: #fff8e6; border: 1px solid #f0d9a0; border-radius: 6px; padding: 8px 14px; \
margin-top: 14px; }
.notes ul { margin: 4px 0 0; padding-left: 20px; }
.nr { color: #a15c00; font-style: italic; font-weight: normal; }
figure { margin: 14px 0 20px; }
svg.chart { display: block; max-width: 100%; height: auto; font-family: inherit; }
svg.chart .plot-bg { fill: #fbfbfc; stroke: none; }
svg.chart .grid { stroke: #e7e9ee; stroke-width: 1; }
svg.chart .axis { stroke: #8a93a3; stroke-width: 1; }
svg.chart .tick { font-size: 11px; fill: #5b6475; }
svg.chart .axis-label { font-size: 12px; fill: #3b4352; }
svg.chart .chart-title { font-size: 13.5px; font-weight: 600; fill: #1d2330; }
.chart-empty { background: var(--panel); border: 1px dashed var(--line); padding: 14px; \
border-radius: 6px;
  color: var(--muted); margin: 10px 0; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; margin: 4px 0 0 62px; }
.legend.flush { margin-left: 0; }
.legend-item { display: inline-flex; align-items: center; gap: 5px; }
.legend .sw { display: inline-block; width: 12px; height: 12px; border-radius: 2px; }
pre { white-space: pre-wrap; word-wrap: break-word; margin: 6px 0; font: 12.5px/1.45 ui-monospace,
  "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre.text, pre.critique { background: var(--panel); border: 1px solid var(--line); border-radius: \
6px; padding: 10px 12px; }
pre.best { border-left: 4px solid #2ca02c; }
pre.response { max-height: 180px; overflow: auto; font-size: 11.5px; margin: 0; }
ul.tree { list-style: none; margin: 0; padding-left: 18px; border-left: 2px solid var(--line); }
ul.tree.root { padding-left: 0; border-left: none; }
ul.tree li { margin: 6px 0; }
.node { border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; background: #fff; }
.node.best-path { border-color: #9bd09b; background: #fbfef9; }
.node-head { font-size: 13px; }
details { margin: 4px 0; }
summary { cursor: pointer; color: #2f4a7a; font-size: 12.5px; }
.diff { white-space: pre-wrap; font: 12.5px/1.5 ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, \
monospace;
  background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 8px 10px; }
ins { background: #d5f5d5; color: #0b5d1e; text-decoration: none; }
del { background: #fbd9d9; color: #8d1c1c; }
.skip { color: var(--muted); font-style: italic; }
.plus { color: #0b7d2a; } .minus { color: #b3261e; }
.badge { display: inline-block; font-size: 11px; border-radius: 10px; padding: 0 7px; margin-left: \
4px; }
.badge.alive { background: #e1f3e1; color: #1f6f1f; }
.badge.gone { background: #eceef2; color: #5b6475; }
.badge.best { background: #2ca02c; color: #fff; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; margin: 4px 0 10px; }
th, td { border: 1px solid var(--line); padding: 4px 7px; text-align: left; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
table.ledger th { width: 42%; }
table.failures { table-layout: fixed; }
table.failures th:nth-child(1) { width: 22%; } table.failures th:nth-child(2) { width: 10%; }
table.failures th:nth-child(3) { width: 14%; } table.failures th:nth-child(4) { width: 7%; }
table.failures th:nth-child(5) { width: 10%; }
.qid { color: var(--muted); font-size: 11px; }
.status-admitted { color: #1f6f1f; font-weight: 600; } .status-rejected { color: #8d1c1c; }
.round { border-top: 1px dashed var(--line); padding-top: 4px; }
svg.bar { display: block; max-width: 100%; border-radius: 4px; }
"""
