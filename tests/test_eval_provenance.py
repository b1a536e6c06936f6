"""inspo.eval.provenance: a result names its commit, command and versions."""

import json
import subprocess

from inspo.eval.provenance import library_versions, provenance


def test_provenance_names_the_commit_the_command_and_the_versions(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("one\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

    info = provenance(["bench.py", "--seed", "3", "a b"], repo=tmp_path)
    assert info["commit"] == head and info["dirty"] is False and info["commit_from"] == "git"
    assert info["command"].endswith("bench.py --seed 3 'a b'")
    assert info["versions"]["inspo"] is not None
    json.dumps(info)  # JSON-ready

    (tmp_path / "a.txt").write_text("two\n")
    assert provenance([], repo=tmp_path)["dirty"] is True


def test_outside_a_repository_and_a_missing_library_are_none_not_guesses(tmp_path, monkeypatch):
    monkeypatch.delenv("INSPO_COMMIT", raising=False)
    info = provenance([], repo=tmp_path)
    assert info["commit"] is None and info["dirty"] is None and info["commit_from"] is None
    monkeypatch.setenv("INSPO_COMMIT", "abc123")  # a copy without .git (the GPU machine) is told it
    assert provenance([], repo=tmp_path)["commit"] == "abc123"
    assert provenance([], repo=tmp_path)["commit_from"] == "INSPO_COMMIT"
    assert library_versions(["no-such-distribution-xyz"]) == {"no-such-distribution-xyz": None}
