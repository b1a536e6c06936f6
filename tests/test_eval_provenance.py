"""inspo.eval.provenance: a result names its commit, command and versions."""

import json
import subprocess

from inspo.eval.provenance import library_versions, provenance


def committed_repo(path) -> str:
    """A git repository at ``path`` with one commit of ``a.txt``; returns its HEAD."""
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "a.txt").write_text("one\n")
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "a.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def test_provenance_names_the_commit_the_command_and_the_versions(tmp_path):
    head = committed_repo(tmp_path)
    info = provenance(["bench.py", "--seed", "3", "a b"], repo=tmp_path)
    assert info["commit"] == head and info["dirty"] is False and info["commit_from"] == "git"
    assert info["command"].endswith("bench.py --seed 3 'a b'")
    assert info["versions"]["inspo"] is not None
    json.dumps(info)  # JSON-ready

    (tmp_path / "a.txt").write_text("two\n")
    assert provenance([], repo=tmp_path)["dirty"] is True


def test_a_commit_told_by_the_environment_wins_over_a_lagging_git_and_both_are_kept(tmp_path, monkeypatch):
    head = committed_repo(tmp_path)
    monkeypatch.setenv("INSPO_COMMIT", "f" * 40)  # the GPU machine: today's files, the start's .git
    info = provenance([], repo=tmp_path)
    assert (info["commit"], info["commit_from"], info["git_commit"]) == ("f" * 40, "INSPO_COMMIT", head)
    (tmp_path / "a.txt").write_text("two\n")  # today's files: git would call them dirty against its HEAD
    assert provenance([], repo=tmp_path)["dirty"] is None
    monkeypatch.setenv("INSPO_COMMIT", head)  # told what git says: nothing to mark
    info = provenance([], repo=tmp_path)
    assert (info["commit"], info["commit_from"]) == (head, "git") and "git_commit" not in info


def test_outside_a_repository_and_a_missing_library_are_none_not_guesses(tmp_path, monkeypatch):
    monkeypatch.delenv("INSPO_COMMIT", raising=False)
    info = provenance([], repo=tmp_path)
    assert info["commit"] is None and info["dirty"] is None and info["commit_from"] is None
    monkeypatch.setenv("INSPO_COMMIT", "abc123")  # a copy without .git (the GPU machine) is told it
    assert provenance([], repo=tmp_path)["commit"] == "abc123"
    assert provenance([], repo=tmp_path)["commit_from"] == "INSPO_COMMIT"
    assert library_versions(["no-such-distribution-xyz"]) == {"no-such-distribution-xyz": None}


def test_the_machine_names_the_cpu_and_only_the_flags_that_choose_kernels(tmp_path):
    from inspo.eval.provenance import machine

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Test CPU 9000\nflags\t\t: fpu sse avx2 fma avx512f amx_bf16\n"
                       "processor\t: 1\nmodel name\t: Other\nflags\t\t: fpu\n")
    info = machine(cpuinfo)
    assert info["cpu"] == "Test CPU 9000" and info["cpu_flags"] == ["avx2", "fma", "avx512f", "amx_bf16"]
    assert info["cores"] >= 1
    missing = machine(tmp_path / "absent")
    assert missing["cpu"] is None and missing["cpu_flags"] is None


def test_the_harness_records_device_dtype_and_threads_and_refuses_a_result_without_provenance(tmp_path, capsys):
    import argparse

    import pytest

    from inspo.lab.harness import add_common, start, write_result

    args = add_common(argparse.ArgumentParser(), threads=1).parse_args(["--json", str(tmp_path / "r.json")])
    assert (args.threads, args.seed) == (1, 0)
    bare = add_common(argparse.ArgumentParser(), threads=None, seed=False).parse_args([])
    assert vars(bare) == {"json": None}  # a script that runs no torch gets no --threads
    info = start("benchmarks/x.py", ["--json", "r.json"], threads=args.threads, dtype="float32")
    assert info["device"] in {"cpu", "cuda"} and info["dtype"] == "float32" and info["torch_threads"] == 1
    assert info["command"].endswith("benchmarks/x.py --json r.json") and info["machine"]["cores"] >= 1
    assert "benchmarks/x.py --json r.json" in capsys.readouterr().out
    written = write_result(args.json, {"value": 1, "provenance": info})
    assert json.loads(written.read_text())["provenance"]["dtype"] == "float32"
    assert write_result(None, {"value": 1}) is None
    with pytest.raises(ValueError, match="needs its 'provenance'"):
        write_result(tmp_path / "bare.json", {"value": 1})



def test_the_harness_resolves_an_auto_dtype_for_the_device_and_keeps_a_scripts_own_help(capsys):
    import argparse

    from inspo.lab.harness import add_common, start
    from inspo.models.precision import concrete_dtype

    parser = add_common(argparse.ArgumentParser(), seed_help="question order", json_help="also write it here")
    assert {a.dest: a.help for a in parser._actions}["seed"] == "question order"
    info = start("benchmarks/x.py", [], device="cpu", dtype="auto", quiet=True)
    assert info["dtype"] == concrete_dtype("auto", "cpu") and info["dtype"] in {"float32", "bfloat16"}
    assert capsys.readouterr().out == ""
