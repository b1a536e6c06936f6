"""Smoke test of benchmarks/reliability/reliability.py (issue 21): its quick run works end to end and its
result has the promised shape. Only outcomes are asserted (status codes, exit codes, messages,
memory an order of magnitude apart), never a timing."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "reliability" / "reliability.py"


def load_script():
    from inspo.lab.harness import load_script as load

    return load(SCRIPT, "inspo_benchmark_reliability")


def test_queries_body_is_valid_json_of_about_the_size_asked():
    bench = load_script()
    body = bench.queries_body(10_000)
    assert 9_990 <= len(body) <= 10_000 and set(json.loads(body)["queries"]) == {"ab"}


def test_reliability_quick(tmp_path, capsys):
    bench = load_script()
    result = bench.main(["--quick", "--json", str(tmp_path / "r.json")])
    printed = capsys.readouterr().out
    assert "(a) oversized bodies" in printed and "(b) mixed load" in printed and "(c) bad inputs" in printed

    info = json.loads((tmp_path / "r.json").read_text())["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", info["commit"] or "") and "benchmarks/reliability/reliability.py" in info["command"]
    assert "--quick" in info["command"]

    bodies = {(r["case"], r["max_body_mb"]): r for r in result["bodies"]}
    limit, none = bench.DEFAULT_LIMIT_MB, bench.NO_LIMIT_MB
    for case in ("content-length", "chunked"):
        assert bodies[case, limit]["statuses"] == {"413": 1} and bodies[case, none]["statuses"] == {"400": 1}
        assert bodies[case, limit]["healthy_after"] and bodies[case, none]["healthy_after"]
    if bodies["content-length", limit]["rss_added_mb"] is not None:  # psutil installed
        # refused from its Content-Length: the 12 MB body is never held; parsed, it costs ~200 MB
        assert bodies["content-length", limit]["rss_added_mb"] * 10 < bodies["content-length", none]["rss_added_mb"]
    assert bodies["under-limit", limit]["statuses"] == {"400": 1}  # let in, then refused for its query count

    loads = {r["max_body_mb"]: r for r in result["load"]}
    fixed = loads[limit]
    assert fixed["requests"] == 150 and fixed["healthy_after"]
    assert fixed["lost_good"] == 0 and fixed["bad_answered_wrongly"] == 0
    assert {r["kind"] for r in fixed["kinds"]} == set(bench.LOAD_KINDS)
    before = {r["kind"]: r for r in loads[none]["kinds"]}
    assert before["oversized"]["as_expected"] == 0  # the server without a limit parses them: 400, not 413

    assert len(result["cli"]) == 5
    for row in result["cli"]:
        assert row["ok"], row
        assert row["exit_code"] == 2 and not row["traceback"] and row["message"]


def test_outages_quick_run_counts_errors_apart_and_stops_within_the_budget(tmp_path):
    """benchmarks/reliability/outages.py (issue 21, item 1): an outage never lowers the scored EM, is counted
    apart, and max_error_rate 0.1 stops the call after fewer requests to a frozen server."""
    spec = importlib.util.spec_from_file_location("inspo_benchmark_outages", SCRIPT.parent / "outages.py")
    outages = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(outages)
    out = tmp_path / "outages.json"
    result = outages.main(["--quick", "--json", str(out)])
    assert json.loads(out.read_text())["rows"] == result["rows"] and result["provenance"]["command"]
    rows = {(r["fault"].split()[0], r["max_error_rate"]): r for r in result["rows"]}
    frozen_all, frozen_budget = rows[("frozen", 1.0)], rows[("frozen", 0.1)]
    assert frozen_all["errors"] == frozen_all["played"] == result["questions"] and not frozen_all["stopped"]
    assert frozen_budget["stopped"] and frozen_budget["requests"] < frozen_all["requests"]
    killed_all, killed_budget = rows[("killed", 1.0)], rows[("killed", 0.1)]
    for row in (killed_all, killed_budget):
        assert row["errors"] > 0 and row["scored"] > 0 and row["em_scored"] == 1.0  # never scored as 0
    assert killed_budget["stopped"] and not killed_all["stopped"]
