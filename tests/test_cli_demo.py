import json

from inspo.cli import main


def test_demo_writes_a_complete_run_directory(tmp_path, capsys, monkeypatch):
    for var in ("INSPO_OPTIMIZER_BASE_URL", "OPENAI_BASE_URL", "INSPO_OPTIMIZER_MODEL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    out = tmp_path / "run"
    assert main(["demo", "--out", str(out), "--steps", "30", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "optimizer:            rule-based" in printed and "best instruction:" in printed
    for name in ("config.json", "events.jsonl", "metrics.jsonl", "inspo_state.json", "best_instruction.txt", "summary.json"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_quality"] > summary["seed_quality"]
    kinds = {json.loads(line)["kind"] for line in (out / "events.jsonl").read_text().splitlines()}
    assert {"sampled", "attributed", "pruned", "proposed", "verified", "admitted"} <= kinds
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 30


def test_cli_reports_bad_values_without_traceback(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--steps", "10", "--validation-size", "-1", "--no-progress"]) == 2
    assert "--validation-size must be >= 1" in capsys.readouterr().err
