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
    assert info["commit"] == head and info["dirty"] is False
    assert info["command"].endswith("bench.py --seed 3 'a b'")
    assert info["versions"]["inspo"] is not None
    json.dumps(info)  # JSON-ready

    (tmp_path / "a.txt").write_text("two\n")
    assert provenance([], repo=tmp_path)["dirty"] is True


def test_outside_a_repository_and_a_missing_library_are_none_not_guesses(tmp_path):
    info = provenance([], repo=tmp_path)
    assert info["commit"] is None and info["dirty"] is None
    assert library_versions(["no-such-distribution-xyz"]) == {"no-such-distribution-xyz": None}
