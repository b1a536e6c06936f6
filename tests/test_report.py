"""The HTML run report on a real demo run directory (rule-based optimizer, synthetic env)."""

from __future__ import annotations

import html
import json
import random
import re
import shutil

import pytest

from inspo.core.reflector import RuleBasedReflector
from inspo.demo import run_demo
from inspo.report import build_report_html, load_run, write_report
from inspo.report.charts import Series, line_chart, nice_ticks
from inspo.report.diff import word_diff

EVIL = "<script>alert('pwned')</script> & <b>bold</b>"


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    run_demo(out, RuleBasedReflector(rng=random.Random(7)), steps=30, progress=False)
    return out


@pytest.fixture
def run_copy(demo_dir, tmp_path):
    """A private copy of the demo run that a test may edit."""
    return shutil.copytree(demo_dir, tmp_path / "run")


@pytest.fixture(scope="module")
def page(demo_dir):
    return build_report_html(load_run(demo_dir))


def _chart(page: str, name: str) -> str:
    match = re.search(rf'<svg class="chart" data-chart="{name}".*?</svg>', page, re.S)
    assert match, f"chart {name} missing"
    return match.group(0)


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# ------------------------------------------------------------------------------------ content
def test_page_shows_best_instruction(demo_dir, page):
    best = (demo_dir / "best_instruction.txt").read_text().strip()
    summary = json.loads((demo_dir / "summary.json").read_text())
    assert html.escape(best) in page
    assert summary["best_instruction"].strip() == best
    run = load_run(demo_dir)
    assert run.best_id is not None and run.instruction(run.best_id).text.strip() == best


def test_one_weight_line_per_instruction(demo_dir, page):
    ids = {k.split("/", 2)[2] for m in _jsonl(demo_dir / "metrics.jsonl") for k in m if k.startswith("inspo/weight/")}
    chart = _chart(page, "weights")
    drawn = re.findall(r'<g class="series" data-series="([^"]+)"', chart)
    assert len(ids) > 7  # the demo evolved: more ids than the population size
    assert sorted(drawn) == sorted(ids)
    # every series has a line or a dot; markers for pruning and evolution steps are drawn
    assert chart.count("<polyline") + chart.count("<circle") >= len(ids)
    prunes = {e["step"] for e in _jsonl(demo_dir / "events.jsonl") if e["kind"] == "pruned"}
    assert chart.count('class="marker marker-prune"') == len(prunes) > 0
    evolutions = {e["step"] for e in _jsonl(demo_dir / "events.jsonl") if e["kind"] == "evolution_started"}
    assert chart.count('class="marker marker-evolve"') == len(evolutions) >= 2  # initial + step 15


def test_reward_population_and_fig2_charts(page):
    for name in ("reward", "population", "tool-calls", "instruction-length"):
        assert "<polyline" in _chart(page, name)
    # the demo logs no rollout/prompt_tokens: no token chart, and the derived length says characters
    assert 'data-chart="prompt-tokens"' not in page
    assert "characters, not tokens" in page
    assert "derived from the replay buffer" in page


def test_lineage_has_critiques_and_word_diffs(demo_dir, page):
    state = json.loads((demo_dir / "inspo_state.json").read_text())
    children = [i for i in state["population"]["archive"] if i["parent_ids"]]
    assert children
    nodes = re.findall(r'<div class="node(?: best-path)?" data-id="([^"]+)"', page)
    assert sorted(nodes) == sorted(i["id"] for i in state["population"]["archive"])
    assert page.count("<ins>") >= len(children)
    assert html.escape(children[0]["critique"]) in page
    assert f"diff against {children[0]['parent_ids'][0]}" in page


def test_failure_examples_are_joined_with_the_buffer(demo_dir, page):
    run = load_run(demo_dir)
    assert run.rounds and all(r.failures for r in run.rounds)
    failure = run.rounds[0].failures[0]
    assert failure.question is not None and failure.response is not None and failure.gold
    assert failure.reward is not None and failure.reward < 1.0
    assert html.escape(failure.question) in page
    proposed = [e for e in _jsonl(demo_dir / "events.jsonl") if e["kind"] == "proposed"]
    assert [f.question_id for f in run.rounds[0].failures] == proposed[0]["failures"]


def test_cost_ledger(demo_dir, page):
    ledger = json.loads((demo_dir / "inspo_state.json").read_text())["ledger"]
    share = 100 * ledger["verification_rollouts"] / ledger["training_rollouts"]
    assert f"{share:.1f}% of training rollouts" in page
    assert f"<td>{ledger['optimizer_calls']} (0 failed)</td>" in page


def test_write_report_default_and_explicit_path(run_copy, tmp_path):
    default = write_report(run_copy)
    assert default == run_copy / "report.html" and default.stat().st_size > 10_000
    other = write_report(run_copy, tmp_path / "out" / "r.html")
    assert other.read_text() == default.read_text()


# ------------------------------------------------------------------------------------ safety
def test_user_text_is_escaped(run_copy):
    state_path = run_copy / "inspo_state.json"
    state = json.loads(state_path.read_text())
    member = state["population"]["members"][0]["instruction"]
    member["text"] = EVIL + " " + member["text"]
    member["critique"] = EVIL
    for ins in state["population"]["archive"]:
        if ins["id"] == member["id"]:
            ins.update(text=member["text"], critique=EVIL)
    state["buffer"]["items"][-1]["rollout"]["response"] = EVIL
    state_path.write_text(json.dumps(state))
    (run_copy / "best_instruction.txt").write_text(member["text"])
    with (run_copy / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"kind": "optimizer_failed", "step": 30, "round": 9, "reason": EVIL}) + "\n")

    page = build_report_html(load_run(run_copy))
    assert "<script" not in page.lower()
    assert "<b>bold</b>" not in page
    assert html.escape(EVIL) in page
    assert page.count(html.escape("<script>alert('pwned')</script>")) >= 3  # text, critique, reason


def test_no_network_resources(page):
    assert not re.search(r"""(src|href|xlink:href)\s*=\s*["']?\s*(https?:|//)""", page, re.I)
    assert not re.search(r"url\(|@import", page, re.I)
    for tag in ("<script", "<link", "<img", "<iframe", "<object", "<embed"):
        assert tag not in page.lower()
    assert set(re.findall(r'href="([^"]*)"', page)) <= {f"#{a}" for a in re.findall(r'<section id="([^"]+)"', page)}


# ------------------------------------------------------------------------------------ robustness
def test_missing_run_dir_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("")
    with pytest.raises(FileNotFoundError, match=r"events\.jsonl is missing.*found: metrics\.jsonl"):
        write_report(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        load_run(tmp_path / "file")


def test_events_only_run_still_renders(demo_dir, tmp_path):
    run_dir = tmp_path / "bare"
    run_dir.mkdir()
    shutil.copy(demo_dir / "events.jsonl", run_dir)
    with (run_dir / "events.jsonl").open("a") as fh:
        fh.write('{"kind": "sampled", "step": 31, "question')  # a torn last line
    run = load_run(run_dir)
    assert run.ledger is None and run.config is None and run.summary is None
    assert any("inspo_state.json not recorded" in n for n in run.notes)
    # weights and rewards come from the events
    assert run.steps[-1].weights and run.steps[0].reward is not None
    assert run.calls_source is None
    page = build_report_html(run)
    assert "not recorded" in page
    assert 'data-chart="weights"' in page and 'data-chart="reward"' in page
    assert 'data-chart="tool-calls"' in page  # the empty-chart box keeps its name
    # admitted instructions are known from events, the seed's text is not
    seed = run.instruction("ins-0001")
    assert seed is not None and seed.text is None
    # failure ids are shown even without the buffer
    assert "no longer in the replay buffer" in page


def test_training_run_metrics_and_yaml_config(run_copy):
    pytest.importorskip("yaml")
    import yaml

    lines = _jsonl(run_copy / "metrics.jsonl")
    with (run_copy / "metrics.jsonl").open("w") as fh:
        for m in lines:
            m.update({"rollout/tool_calls": 1.5, "rollout/search_calls": 1.5, "rollout/prompt_tokens": 300.0 + m["step"]})
            fh.write(json.dumps(m) + "\n")
            fh.write(json.dumps({"step": m["step"], "loss": 0.1}) + "\n")  # TRL's own line, merged
    config = json.loads((run_copy / "config.json").read_text())
    (run_copy / "config.json").unlink()
    config.update(mode="inspo", model={"name_or_path": "tiny-qwen2"})
    (run_copy / "config.yaml").write_text(yaml.safe_dump(config))

    run = load_run(run_copy)
    assert run.config_file == "config.yaml" and run.config["mode"] == "inspo"
    assert run.calls_source == "metrics" and run.prompt_source == "metrics"
    assert [s.tool_calls for s in run.steps] == [1.5] * len(lines)
    assert run.steps[-1].prompt_tokens == 300.0 + lines[-1]["step"]
    page = build_report_html(run)
    assert "<polyline" in _chart(page, "prompt-tokens")
    assert "logged as rollout/tool_calls" in page
    assert "tiny-qwen2" in page


def test_buffer_without_the_failures(run_copy):
    state_path = run_copy / "inspo_state.json"
    state = json.loads(state_path.read_text())
    state["buffer"]["items"] = []
    state_path.write_text(json.dumps(state))
    run = load_run(run_copy)
    assert all(f.question is None for r in run.rounds for f in r.failures)
    assert "no longer in the replay buffer" in build_report_html(run)


# ------------------------------------------------------------------------------------ pieces
def test_word_diff_marks_and_escapes():
    out, stats = word_diff("keep <a> old tail", "keep <a> new tail & more")
    assert "<del>old</del><ins>new</ins>" in out
    assert "<ins> &amp; more</ins>" in out
    assert "&lt;a&gt;" in out and "<a>" not in out
    assert (stats.inserted_words, stats.deleted_words) == (3, 1)


def test_word_diff_shortens_long_unchanged_runs():
    base = " ".join(f"w{i}" for i in range(100))
    out, _ = word_diff(base, base + " extra", context=5)
    assert "[… 90 unchanged words …]" in out and "<ins> extra</ins>" in out
    assert "w0 w1 w2 w3 w4" in out and "w95 w96 w97 w98 w99" in out


def test_a_nan_or_infinite_value_is_a_gap_and_an_all_nan_chart_is_not_recorded():
    nan = float("nan")
    svg = line_chart([Series("a", [(1, 0.0), (2, nan), (3, 1.0), (4, float("inf")), (5, 2.0)])],
                     title="t", x_label="x", y_label="y")
    assert "nan" not in svg.lower() and svg.count("<circle") == 3  # three runs of one point
    empty = line_chart([Series("a", [(1, nan), (2, nan)])], title="All NaN", x_label="x", y_label="y")
    assert "not recorded" in empty  # raised ZeroDivisionError before


def test_line_chart_basics():
    svg = line_chart([Series("a", [(1, 0.0), (2, None), (3, 1.0), (4, 2.0)])], title="t<", x_label="x", y_label="y")
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1  # gap: a dot and a line
    assert "t&lt;" in svg
    empty = line_chart([Series("a", [(1, None)])], title="Empty", x_label="x", y_label="y", chart_id="e")
    assert "not recorded" in empty and "<svg" not in empty
    assert nice_ticks(0, 0.83) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(1, 60, 8)[0] == 0 and nice_ticks(1, 60, 8)[-1] >= 60


def test_repeated_failure_ids_get_distinct_rollouts(tmp_path):
    """A hand-written run: one round listed q1 twice (two trajectories of its group)."""
    def item(step, response, reward):
        question = {"id": "q1", "question": "Who?", "answers": ["Ada"], "meta": {}}
        return {"step": step, "rollout": {"question": question, "instruction_id": "ins-0001",
                                          "response": response, "reward": reward, "searches": []}}

    events = [
        {"kind": "proposed", "step": 2, "round": 1, "parent_id": "ins-0001", "template": "reflection",
         "failures": ["q1", "q1", "q9"], "candidate_ids": ["ins-0002"], "critique": "c"},
        {"kind": "rejected", "step": 2, "candidate_id": "ins-0002", "reason": "dropped <answer>", "text": "t"},
    ]
    state = {"population": {"members": [], "archive": [{"id": "ins-0001", "text": "seed"}]},
             "buffer": {"items": [item(1, "first", 0.0), item(2, "second", 0.0), item(3, "too late", 0.0),
                                  item(2, "solved", 1.0)]}}
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "inspo_state.json").write_text(json.dumps(state))
    run = load_run(tmp_path)
    (round_,) = run.rounds
    assert [f.response for f in round_.failures] == ["second", "first", None]
    assert round_.candidates[0].status == "rejected" and round_.candidates[0].reason == "dropped <answer>"
    page = build_report_html(run)
    assert "dropped &lt;answer&gt;" in page and "no longer in the replay buffer" in page


def test_rollouts_that_failed_on_errors_are_counted_apart(run_copy, page):
    assert "rollouts failed on errors (not scored)</div><div class=\"v\">0<" in page  # the demo had none
    metrics = _jsonl(run_copy / "metrics.jsonl")
    metrics[3]["rollout/errors"], metrics[5]["rollout/errors"] = 4.0, 3.0
    (run_copy / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    run = load_run(run_copy)
    assert [s.errors for s in run.steps[3:6]] == [4, 0, 3]
    assert "rollouts failed on errors (not scored)</div><div class=\"v\">7<" in build_report_html(run)


def test_a_rubrics_functions_are_charted_one_by_one(run_copy, page):
    """Issue 67 item 4: ``env/<name>`` means (a rubric's functions) get one line each; a run that
    logged none has no such chart."""
    assert 'data-chart="env-metrics"' not in page
    lines = _jsonl(run_copy / "metrics.jsonl")
    for m in lines:
        m.update({"env/correct": 0.25, "env/brief": 1.0 if m["step"] % 2 else None})
    (run_copy / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    run = load_run(run_copy)
    assert run.steps[0].env_metrics["correct"] == 0.25
    assert [s.env_metrics.get("brief") for s in run.steps[:2]] == [1.0 if lines[i]["step"] % 2 else None for i in (0, 1)]
    page = build_report_html(run)
    assert "<polyline" in _chart(page, "env-metrics")  # correct's line (brief's steps are apart: points)
    legend = page[page.index('data-chart="env-metrics"'):].split("</figure>", 1)[0]
    assert "correct" in legend and "brief" in legend
