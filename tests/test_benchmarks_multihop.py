"""The multihop benchmark's scripts (issue 23): the frozen-policy pilot, the arms runner and its
pooling with power, and the GPU campaign's packing, launching and collecting. No timing is
asserted."""

from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from inspo.lab.power import detectable_effect, seeds_needed
from inspo.records import Question, Rollout, ToolCall
from test_benchmarks import load_script

# ------------------------------------------------------------------------------ power


def test_detectable_effect_and_seeds_needed_against_hand_computed_t_quantiles():
    # t_{.975,2} = 4.3027, t_{.8,2} = 1.0607: (4.3027 + 1.0607) * 0.2 / sqrt(3)
    assert detectable_effect(0.2, 3) == pytest.approx(5.3634 * 0.2 / math.sqrt(3), abs=1e-3)
    # the issue's own figure: SD 0.20 across seeds needs about 89 seeds for +0.06 at 80% power
    assert seeds_needed(0.20, 0.06) in range(87, 92)
    n = seeds_needed(0.1, 0.05)
    assert detectable_effect(0.1, n) <= 0.05 < detectable_effect(0.1, n - 1)
    assert seeds_needed(0.0, 0.05) == 2
    assert seeds_needed(5.0, 0.001, most=50) is None
    with pytest.raises(ValueError):
        detectable_effect(0.1, 1)


# ------------------------------------------------------------------------------ pilot


def _rollout(reward: float, searches: int = 1, *, error: bool = False, answer: str | None = "x") -> Rollout:
    q = Question(id="q", question="?", answers=("a",))
    return Rollout(question=q, instruction_id="i", response="", reward=reward,
                   tool_calls=[ToolCall("search", "s")] * searches,
                   answer=None if error else answer, finish_reason="error" if error else "answered")


def test_pilot_scores_groups_and_counts_errors_apart():
    pilot = load_script("multihop_pilot")
    # two questions x G 3: q0 all fail (no signal), q1 mixed; one error rollout in q1
    rollouts = [_rollout(0), _rollout(0), _rollout(0, 2, answer=None), _rollout(1, 2), _rollout(0), _rollout(0, error=True)]
    s = pilot.summarise(rollouts, 3)
    assert s["errors"] == 1 and s["rollouts"] == 6
    assert s["pass_at_g"] == 0.5 and s["mixed_groups"] == 0.5
    assert s["mean"] == pytest.approx(1 / 5)  # the error is in no score
    assert (s["successes"], s["scored"]) == (1, 5)
    assert s["question_means"] == [0.0, 0.5]
    assert s["searches"] == pytest.approx(7 / 5) and s["no_answer"] == pytest.approx(1 / 5)
    assert pilot.instruction_text("weak+hops").startswith(pilot.instruction_text("weak"))
    with pytest.raises(SystemExit):
        pilot.instruction_text("nope")


@pytest.mark.slow
def test_pilot_quick_plays_every_instruction_on_both_hop_counts(tmp_path, capsys):
    pilot = load_script("multihop_pilot")
    out = tmp_path / "pilot.json"
    episodes = tmp_path / "episodes.jsonl"
    result = pilot.main(["--quick", "--threads", "1", "--json", str(out), "--episodes", str(episodes)])
    assert json.loads(out.read_text())["provenance"]["commit"] == result["provenance"]["commit"]
    lines = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert len(lines) == 3 * 2 * 2 * 2  # instructions x hop counts x questions x G
    assert {e["instruction_id"] for e in lines} == {"weak", "search-r1", "weak+hops"}
    assert all(e["response"].startswith("<search>") and "question" in e["question"] for e in lines)
    assert set(result["instructions"]) == {"weak", "search-r1", "weak+hops"}
    for cell in result["instructions"].values():
        assert set(cell["hops"]) == {"1", "2"} and cell["hops"]["2"]["rollouts"] == 2 * 2
    assert len(result["differences"]) == 4 and result["errors"] == 0
    assert "pass@G" in capsys.readouterr().out


# ------------------------------------------------------------------------------ arms and pooling


def _result(arm: str, seed: int, rewards: dict, hops=(1, 2, 2, 2)) -> dict:
    curves = {"reward": [0.1, 0.2], "prompt_tokens": [100.0, 120.0], "searches": [1.0, 1.5],
              "step_s": [1.0, 1.0], "population": [1.0, 1.0]}
    return {"arm": arm, "seed": seed, "test_question_ids": ["a", "b", "c", "d"], "test_hops": list(hops),
            "test_rewards": rewards, "curves": curves, "events": {}, "returned_is_seed": False, "wall_s": 1.0,
            "provenance": {"commit": "abc"}}


def test_combine_pairs_arms_by_seed_and_hop_and_sizes_the_seeds():
    bench = load_script("multihop_coevolution")
    results = [_result("untrained", 0, {"weak": [0, 0, 0, 0], "search-r1": [1, 0, 0, 0]})]
    # inspo beats static by 1/3, 2/3, 1/3 on the three two-hop questions of seeds 0, 1, 2
    for seed, inspo in ((0, [1, 1, 0, 0]), (1, [1, 1, 1, 0]), (2, [0, 0, 1, 0])):
        results.append(_result("static-weak", seed, {"seed": [1, 0, 0, 0]}))
        results.append(_result("inspo-weak", seed, {"returned": inspo, "seed": [1, 0, 0, 0]}))
    c = bench.combine(results)
    assert c["seeds"] == [0, 1, 2] and c["test_questions"] == {"2": 3, "1": 1} and c["commits"] == ["abc"]
    d = c["comparisons"]["inspo-weak - static-weak"]["hops"]["2"]
    assert [x["mean"] for x in d["per_seed"]] == pytest.approx([1 / 3, 2 / 3, 1 / 3])
    assert d["seed_mean"] == pytest.approx(4 / 9)
    assert d["seed_sd"] == pytest.approx(math.sqrt(1 / 27))
    assert d["detectable_effect"] == pytest.approx(detectable_effect(math.sqrt(1 / 27), 3))
    assert d["seeds_for_effect"] == seeds_needed(math.sqrt(1 / 27), bench.EFFECT)
    one_hop = c["comparisons"]["inspo-weak - static-weak"]["hops"]["1"]
    assert [x["mean"] for x in one_hop["per_seed"]] == [0.0, 0.0, -1.0]
    # the untrained arm, scored once, stands for every seed; the policy-versus-prompt rows exist
    assert c["comparisons"]["static-weak - untrained:weak"]["seeds"] == [0, 1, 2]
    assert c["comparisons"]["inspo-weak - inspo-weak:seed"]["hops"]["2"]["seed_mean"] == pytest.approx(4 / 9)
    assert c["curves"]["inspo-weak"]["searches"] == [1.0, 1.5]


def test_combine_refuses_an_arm_twice_and_different_questions():
    bench = load_script("multihop_coevolution")
    a = _result("static-weak", 0, {"seed": [1, 0, 0, 0]})
    with pytest.raises(SystemExit, match="given twice"):
        bench.combine([a, a])
    b = dict(_result("static-weak", 1, {"seed": [1, 0, 0, 0]}), test_question_ids=["a", "b", "c", "e"])
    with pytest.raises(SystemExit, match="same test questions"):
        bench.combine([a, b])


def test_arms_are_the_issues_four_and_differ_only_in_mode_and_seed(tmp_path):
    bench = load_script("multihop_coevolution")
    args = bench.parse_args(["--seed", "3", "--out", str(tmp_path)])
    seen = {}
    for arm in bench.ARMS:
        o = bench.overrides(args, arm)
        seen[arm] = [x for x in o if x.startswith(("mode=", "seed_instruction="))]
        assert "rl.seed=3" in o and any(x.endswith(f"{arm}-s3") for x in o)
    assert seen == {"static-weak": ["mode=static", "seed_instruction=@weak"],
                    "static-sr1": ["mode=static", "seed_instruction=@search-r1"],
                    "inspo-weak": ["mode=inspo", "seed_instruction=@weak"],
                    "pre-policy-weak": ["mode=pre-policy", "seed_instruction=@weak"]}


@pytest.mark.slow
def test_multihop_quick_runs_every_arm_on_the_same_questions_and_skips_what_is_done(tmp_path, capsys):
    bench = load_script("multihop_coevolution")
    argv = ["--quick", "--threads", "1", "--out", str(tmp_path)]
    done = bench.main(argv)
    assert set(done) == set(bench.ALL_ARMS)
    ids = {tuple(r["test_question_ids"]) for r in done.values()}
    assert len(ids) == 1
    for r in done.values():
        assert len(r["test_hops"]) == len(r["test_question_ids"]) and r["provenance"]["commit"]
    assert set(done["inspo-weak"]["test_rewards"]) >= {"returned", "seed"}
    assert done["inspo-weak"]["curves"]["searches"]  # Fig. 2's rows are kept per step
    capsys.readouterr()
    again = bench.main(argv)  # a second invocation finds every arm done and trains nothing
    assert again == done and capsys.readouterr().out.count("done before") == len(bench.ALL_ARMS)


def test_a_run_killed_before_its_first_checkpoint_or_saved_offline_step_starts_over(tmp_path):
    bench = load_script("multihop_coevolution")
    run = tmp_path / "r"
    (run / "checkpoint-partial").mkdir(parents=True)
    assert bench.has_checkpoint(run)
    (run / "checkpoint-partial").rmdir()
    (run / "metrics.jsonl").write_text("")
    assert not bench.has_checkpoint(run)
    (run / "pre-policy").mkdir()
    (run / "pre-policy" / "events.jsonl").write_text("")
    assert not bench.has_checkpoint(run)  # an offline stage killed before its first saved state
    (run / "pre-policy" / "inspo_state.json").write_text("{}")
    assert bench.has_checkpoint(run)  # ... and after: the resume continues it (issue 33)


# ------------------------------------------------------------------------------ GPU campaign


@dataclass(frozen=True)
class _Spec:
    filename: str
    size: int
    sha256: str


def _chunks(tmp_path: Path, seed: int = 0) -> tuple[list[Path], _Spec]:
    data = bytes((i + seed) % 256 for i in range(256)) * 41  # 10,496 bytes over three uneven chunks
    tmp_path.mkdir(parents=True, exist_ok=True)
    cuts = [0, 1000, 7000, len(data)]
    paths = []
    for i in range(3):
        p = tmp_path / f"chunk{i}"
        p.write_bytes(data[cuts[i]:cuts[i + 1]])
        paths.append(p)
    return paths, _Spec("m.gguf", len(data), hashlib.sha256(data).hexdigest())


def test_pack_recuts_the_model_and_receive_keeps_only_pieces_that_match(tmp_path, monkeypatch):
    campaign = load_script("gpu_campaign")
    installed = []
    monkeypatch.setattr(campaign.subprocess, "run", lambda argv, check: installed.append(argv))
    chunks, spec = _chunks(tmp_path)
    pieces = campaign.split_file(chunks, tmp_path / "cut", 4096)
    assert [p["bytes"] for p in pieces] == [4096, 4096, 2304]
    joined = b"".join((tmp_path / "cut" / p["name"]).read_bytes() for p in pieces)
    assert hashlib.sha256(joined).hexdigest() == spec.sha256
    exact = campaign.split_file(chunks, tmp_path / "exact", spec.size)  # no empty last piece
    assert [p["bytes"] for p in exact] == [spec.size]

    manifest = campaign.pack(tmp_path / "dev", 1, chunk_source=lambda: chunks, spec=spec, wheels=False)
    assert sum(p["bytes"] for p in manifest["pieces"]) == spec.size and manifest["sha256"] == spec.sha256
    # carried in two calls: the first call has piece-00 only
    first, keep = tmp_path / "call1", tmp_path / "keep"
    (first / "model").mkdir(parents=True)
    (first / "model" / "manifest.json").write_bytes((tmp_path / "dev" / "model" / "manifest.json").read_bytes())
    (first / "model" / "piece-00").write_bytes((tmp_path / "dev" / "model" / "piece-00").read_bytes())
    assert campaign.receive(first, keep, build=False) == []  # one piece of 1 MiB holds it all
    assert installed == []  # no wheels carried in this call
    (first / "whl").mkdir()
    (first / "whl" / "gepa-0.1.4-py3-none-any.whl").write_bytes(b"zip")
    campaign.receive(first, keep, build=False)
    (pip,) = installed  # the carried wheels, from nowhere else (the device has no network)
    assert pip[1:5] == ["-m", "pip", "install", "--quiet"] and "--no-index" in pip
    assert pip[-1] == str(first / "whl" / "gepa-0.1.4-py3-none-any.whl")
    kept = campaign.kept_under(keep / "model", manifest) / "piece-00"
    assert kept.read_bytes() == (tmp_path / "dev" / "model" / "piece-00").read_bytes()
    # a piece that is not what the manifest says is refused, not kept
    kept.unlink()
    (first / "model" / "piece-00").write_bytes(b"x" * spec.size)
    with pytest.raises(SystemExit, match="carry it again"):
        campaign.receive(first, keep, build=False)
    assert not kept.exists()


def test_receive_never_takes_another_models_kept_pieces_for_its_own(tmp_path, capsys):
    """Two models cut into pieces of one size, carried one after the other on one held machine:
    the second model's manifest alone finds none of its pieces, though the first's match in name
    and size."""
    campaign = load_script("gpu_campaign")
    keep = tmp_path / "keep"
    (a_chunks, a_spec), (b_chunks, b_spec) = _chunks(tmp_path / "a"), _chunks(tmp_path / "b", seed=1)
    assert a_spec.size == b_spec.size and a_spec.sha256 != b_spec.sha256
    a = campaign.pack(tmp_path / "dev-a", 1, chunk_source=lambda: a_chunks, spec=a_spec, wheels=False)
    b = campaign.pack(tmp_path / "dev-b", 1, chunk_source=lambda: b_chunks, spec=b_spec, wheels=False)
    assert [p["bytes"] for p in a["pieces"]] == [p["bytes"] for p in b["pieces"]]
    assert campaign.receive(tmp_path / "dev-a", keep, build=False) == []
    call = tmp_path / "call-b" / "model"
    call.mkdir(parents=True)
    (call / "manifest.json").write_bytes((tmp_path / "dev-b" / "model" / "manifest.json").read_bytes())
    assert campaign.receive(call.parent, keep, build=False) == ["piece-00"]
    assert "still to carry: piece-00" in capsys.readouterr().out
    (call / "piece-00").write_bytes((tmp_path / "dev-b" / "model" / "piece-00").read_bytes())
    assert campaign.receive(call.parent, keep, build=False) == []
    for spec, manifest in ((a_spec, a), (b_spec, b)):  # each model's pieces in a folder of their own
        kept = campaign.kept_under(keep / "model", manifest) / "piece-00"
        assert hashlib.sha256(kept.read_bytes()).hexdigest() == spec.sha256


def _carry(dev: Path, call: Path, names: list[str]) -> Path:
    """One device call's copy of the packed bundle: its manifest and the pieces ``names``."""
    (call / "bundle").mkdir(parents=True)
    for name in ["manifest.json", *names]:
        (call / "bundle" / name).write_bytes((dev / "bundle" / name).read_bytes())
    return call


def _wheels(payloads: dict[str, bytes]):
    """A stand-in for ``pip download``: writes ``payloads`` as the downloaded wheels."""
    def download(into):
        into.mkdir(parents=True)
        for name, data in payloads.items():
            (into / name).write_bytes(data)
    return download


def test_pack_vllm_bundles_wheels_in_pieces_and_receive_installs_them_once_all_are_checked(tmp_path, monkeypatch):
    campaign = load_script("gpu_campaign")
    installed = []
    monkeypatch.setattr(campaign.subprocess, "run", lambda argv, check: installed.append(argv))
    rng = __import__("random").Random(0)
    payloads = {"vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl": rng.randbytes(1_500_000),  # over a piece
                "msgspec-0.22.0-cp312-cp312-manylinux_2_17_x86_64.whl": rng.randbytes(300_000)}
    dev, keep = tmp_path / "dev", tmp_path / "keep"
    manifest = campaign.pack_vllm(dev, 1, download=_wheels(payloads))
    assert manifest["wheels"] == 2 and [p["name"] for p in manifest["pieces"]] == ["piece-00", "piece-01"]
    assert not (dev / "bundle.tar").exists()  # only the pieces travel
    # the first call carries piece-00: kept, nothing installed yet
    assert campaign.receive(_carry(dev, tmp_path / "call1", ["piece-00"]), keep, build=False) == ["bundle/piece-01"]
    assert installed == [] and (campaign.kept_under(keep / "bundle", manifest) / "piece-00").is_file()
    # the second carries piece-01: joined, checked, unpacked, installed from the carried files alone
    assert campaign.receive(_carry(dev, tmp_path / "call2", ["piece-01"]), keep, build=False) == []
    (pip,) = installed
    assert pip[1:4] == ["-m", "pip", "install"] and "--no-index" in pip and "--no-deps" in pip
    wheels = [Path(a) for a in pip if a.endswith(".whl")]
    assert sorted(w.name for w in wheels) == sorted(payloads)
    assert all(w.read_bytes() == payloads[w.name] for w in wheels)
    # a later call with the bundle's manifest does not install again
    campaign.receive(_carry(dev, tmp_path / "call3", []), keep, build=False)
    assert len(installed) == 1
    # packed again with other wheels into the same folder, on the same machine: only the new ones
    # travel, and the old bundle's kept pieces (of the same sizes) are not taken for the new one's
    other = {"vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl": rng.randbytes(1_500_000)}
    again = campaign.pack_vllm(dev, 1, download=_wheels(other))
    assert again["wheels"] == 1 and again["sha256"] != manifest["sha256"]
    campaign.receive(_carry(dev, tmp_path / "call4", ["piece-00", "piece-01"]), keep, build=False)
    assert [Path(a).read_bytes() for a in installed[1] if a.endswith(".whl")] == list(other.values())


def test_a_bundle_install_that_fails_leaves_no_mark_and_the_next_call_installs_it(tmp_path, monkeypatch):
    campaign = load_script("gpu_campaign")
    calls = []

    def pip(argv, check):
        calls.append(argv)
        if len(calls) == 1:
            raise campaign.subprocess.CalledProcessError(1, argv)

    monkeypatch.setattr(campaign.subprocess, "run", pip)
    dev, keep = tmp_path / "dev", tmp_path / "keep"
    manifest = campaign.pack_vllm(dev, 1, download=_wheels({"a-1.0-py3-none-any.whl": b"a" * 5000}))
    with pytest.raises(campaign.subprocess.CalledProcessError):
        campaign.receive(_carry(dev, tmp_path / "call1", ["piece-00"]), keep, build=False)
    assert not (campaign.kept_under(keep / "bundle", manifest) / "installed").exists()
    campaign.receive(_carry(dev, tmp_path / "call2", []), keep, build=False)  # the kept pieces suffice
    assert len(calls) == 2 and (campaign.kept_under(keep / "bundle", manifest) / "installed").exists()


def test_receive_refuses_a_bundle_whose_joined_tar_is_not_the_packed_one(tmp_path, monkeypatch):
    campaign = load_script("gpu_campaign")
    installed = []
    monkeypatch.setattr(campaign.subprocess, "run", lambda argv, check: installed.append(argv))

    dev = tmp_path / "dev"
    campaign.pack_vllm(dev, 1, download=_wheels({"a-1.0-py3-none-any.whl": b"a" * 5000}))
    manifest = json.loads((dev / "bundle" / "manifest.json").read_text())
    manifest["sha256"] = "0" * 64  # every piece matches, the whole does not
    (dev / "bundle" / "manifest.json").write_text(json.dumps(manifest))
    from inspo.models.sources import ModelIntegrityError

    with pytest.raises(ModelIntegrityError):
        campaign.receive(_carry(dev, tmp_path / "call", ["piece-00"]), tmp_path / "keep", build=False)
    assert installed == [] and not list((tmp_path / "keep").rglob("installed"))


def test_the_device_vllm_requirements_pin_every_wheel_by_hash_and_leave_the_images_torch_alone():
    campaign = load_script("gpu_campaign")
    lines = [x.strip() for x in campaign.VLLM_REQUIREMENTS.read_text().splitlines() if x.strip()]
    pins = [x.rstrip(" \\").split("==") for x in lines if not x.startswith(("#", "--hash"))]
    hashes = [x for x in lines if x.startswith("--hash=sha256:")]
    assert len(pins) == len(hashes) > 50 and all(len(p) == 2 for p in pins)
    names = {name for name, _ in pins}
    assert [v for n, v in pins if n == "vllm"] == ["0.26.0"]
    # the image's CUDA torch stack must stay the one loaded: nothing carried may replace or shadow it
    assert not names & {"torch", "torchvision", "torchaudio", "triton", "tokenspeed-triton", "numpy"}
    assert {"trl", "datasets", "bm25s", "gguf"} <= names  # and inspo's training needs travel with it


@pytest.mark.parametrize(("model", "builder"), [("qwen2.5-coder-0.5b", "build_qwen_coder"),
                                               ("qwen2.5-coder-1.5b", "build_qwen_coder_15b")])
def test_receive_joins_and_checks_the_whole_file_before_building(tmp_path, monkeypatch, model, builder):
    campaign = load_script("gpu_campaign")
    chunks, spec = _chunks(tmp_path)
    directory = tmp_path / "dev"
    campaign.pack(directory, 1, chunk_source=lambda: chunks, spec=spec, wheels=False, model_name=model)
    manifest = json.loads((directory / "model" / "manifest.json").read_text())
    manifest["sha256"] = spec.sha256
    import inspo.models.registry as registry
    from inspo.models.sources import join_verified

    built = {}

    def fake_build(*, chunk_source):  # the real builder joins with join_verified, then converts
        built["file"] = join_verified(chunk_source(), tmp_path / "joined", size=spec.size, sha256=spec.sha256)
        return built["file"]

    def wrong_build(*, chunk_source):
        raise AssertionError("receive built another model than the manifest names")

    for name in ("build_qwen_coder", "build_qwen_coder_15b"):
        monkeypatch.setattr(registry, name, fake_build if name == builder else wrong_build)
    assert json.loads((directory / "model" / "manifest.json").read_text())["model"] == model
    assert campaign.receive(directory, tmp_path / "keep") == []
    assert hashlib.sha256(built["file"].read_bytes()).hexdigest() == spec.sha256


def test_launch_runs_jobs_in_parallel_skips_done_ones_and_stops_at_the_deadline(tmp_path, capsys):
    campaign = load_script("gpu_campaign")
    bench = load_script("multihop_coevolution")
    out = tmp_path / "mh"
    done = bench.result_path(out, "static-weak", 0)
    done.parent.mkdir(parents=True)
    done.write_text("{}")

    def command(job, out_dir, extra):
        seconds = 60 if job.arm == "inspo-weak" else 0
        code = 3 if job.seed == 1 and job.arm == "static-weak" else 0
        return [sys.executable, "-c", f"import time; time.sleep({seconds}); raise SystemExit({code})"]

    jobs = campaign.jobs_for([0, 1], ["static-weak", "inspo-weak"])
    state = campaign.launch(jobs, out, parallel=2, deadline_s=4, command=command, poll_s=0.1)
    assert state == {"static-weak-s0": "skipped", "inspo-weak-s0": "stopped (deadline)",
                     "static-weak-s1": "failed (rc 3)", "inspo-weak-s1": "stopped (deadline)"}
    assert (out / "logs" / "inspo-weak-s1.log").is_file()
    assert campaign.parse_seeds("0-3") == [0, 1, 2, 3] and campaign.parse_seeds("1,5") == [1, 5]


def test_job_env_warns_when_the_files_are_not_git_heads_and_no_commit_is_told(tmp_path, monkeypatch, capsys):
    import subprocess

    campaign = load_script("gpu_campaign")
    repo = tmp_path / "copy"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "code.py").write_text("x = 1\n")
    subprocess.run(["git", "add", "code.py"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    monkeypatch.setattr(campaign, "REPO", repo)
    monkeypatch.delenv("INSPO_COMMIT", raising=False)

    env = campaign.job_env()  # clean: HEAD is the code, nothing to say
    assert env["INSPO_COMMIT"] == head and env["PYTHONPATH"].split(":")[0] == str(repo / "src")
    assert capsys.readouterr().err == ""

    (repo / "code.py").write_text("x = 2\n")  # the device's copy: files of now, .git of the start
    assert campaign.job_env()["INSPO_COMMIT"] == head
    err = capsys.readouterr().err
    assert f"differ from git's HEAD {head[:12]}" in err and "export INSPO_COMMIT" in err

    monkeypatch.setenv("INSPO_COMMIT", "f" * 40)  # told: results name it, nothing to warn about
    assert campaign.job_env()["INSPO_COMMIT"] == "f" * 40
    assert capsys.readouterr().err == ""


def test_pilot_jobs_run_the_real_pilot_on_each_world_and_are_skipped_once_done(tmp_path, capsys):
    campaign = load_script("gpu_campaign")
    out = tmp_path / "mh"
    jobs = [campaign.PilotJob(world, 0, "tiny-qwen2", questions=2, batch=8) for world in ("world-multihop", "world-chain")]
    argv = jobs[1].argv(out, ["--quick"])
    assert argv[argv.index("--instructions") + 1] == f"weak,file:{campaign.WORKED_EXAMPLE}"
    assert {"data.train=world-chain", "data.eval=world-chain", "env.corpus=world-chain"} <= set(argv)
    assert campaign.WORKED_EXAMPLE.is_file()

    state = campaign.launch(jobs, out, parallel=2, deadline_s=600, extra=["--quick", "--threads", "1"], poll_s=0.2)
    assert state == {"pilot-world-multihop-s0": "done", "pilot-world-chain-s0": "done"}, \
        [(out / "logs" / f"{j.name}.log").read_text()[-2000:] for j in jobs]
    for job in jobs:
        result = json.loads(job.result(out).read_text())
        assert f"env.corpus={job.world}" in result["set"] and result["errors"] == 0
        assert set(result["instructions"]) == {"weak", f"file:{campaign.WORKED_EXAMPLE}"}
        episodes = job.result(out).with_suffix(".episodes.jsonl").read_text().splitlines()
        assert len(episodes) == 2 * 2 * 2 * 2  # instructions x hop counts x questions x G
    again = campaign.launch(jobs, out, parallel=2, deadline_s=60, poll_s=0.1)
    assert set(again.values()) == {"skipped"}


def test_rematch_jobs_are_one_per_seed_and_tag_setting_with_arm_bs_settings(tmp_path):
    campaign = load_script("gpu_campaign")
    gepa = load_script("evolve_vs_gepa")
    on, off = campaign.RematchJob(3, True), campaign.RematchJob(3, False)
    assert (on.name, off.name) == ("rematch-tags-s3", "rematch-no-tags-s3")
    argv_on, argv_off = on.argv(tmp_path, ["--quick"]), off.argv(tmp_path, [])
    assert "--no-tag-check" in argv_off and "--no-tag-check" not in argv_on
    args = gepa.parse_args(argv_on[2:])  # what evolve_vs_gepa makes of it
    assert args.seed == 3 and args.gepa_prompt == "gepa" and args.json == str(on.result(tmp_path))
    assert {"optimizer.kind=local", "optimizer.local_model_path=qwen2.5-coder-0.5b",
            "coevolution.optimizer_max_tokens=400", "coevolution.optimizer_temperature=0.7"} <= set(args.set)
    assert gepa.parse_args(argv_off[2:]).no_tag_check and on.result(tmp_path) != off.result(tmp_path)
    # a job stopped at the deadline resumes at the next launch, once INSPO's arm has saved a state
    assert not args.resume
    state = tmp_path / "rematch" / on.name / "inspo" / "inspo_state.json"
    state.parent.mkdir(parents=True)
    state.write_text("{}")
    assert gepa.parse_args(on.argv(tmp_path, [])[2:]).resume and not gepa.parse_args(off.argv(tmp_path, [])[2:]).resume


def test_collect_bundles_results_logs_and_run_files_in_parts(tmp_path):
    import tarfile

    campaign = load_script("gpu_campaign")
    out = tmp_path / "mh"
    for rel, text in (("results/a-s0.json", "{}"), ("logs/a-s0.log", "ok"),
                      ("runs/a-s0/metrics.jsonl", "{}\n"), ("runs/a-s0/model.safetensors", "big")):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    (out / "logs" / "big.log").write_bytes(b"\0" * (3 << 20))
    (one,) = campaign.collect(out, tmp_path / "to")
    with tarfile.open(one) as tar:
        names = set(tar.getnames())
    assert {"results/a-s0.json", "logs/a-s0.log", "runs/a-s0/metrics.jsonl"} <= names
    assert "runs/a-s0/model.safetensors" not in names  # weights stay on the device
    parts = campaign.collect(out, tmp_path / "to2", part_mib=1)
    assert len(parts) == 4 and all(p.stat().st_size <= 1 << 20 for p in parts)


def test_pilot_show_reprints_a_stored_result_with_its_counts(capsys):
    pilot = load_script("multihop_pilot")
    stored = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "multihop" / "pilot-frozen-q16-s0.json"
    result = pilot.main(["--show", str(stored)])
    out = capsys.readouterr().out
    assert result["instructions"]["weak"]["hops"]["2"]["mean"] == 0.0
    assert "24/128" in out and "0/128" in out  # the counts BENCHMARKS.md quotes


def test_pilot_show_against_pairs_two_stored_models_question_by_question(tmp_path, capsys):
    pilot = load_script("multihop_pilot")
    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "multihop"
    big, small = results / "pilot-greedy-2hop-q8-1.5b-s0.json", results / "pilot-greedy-2hop-q8-0.5b-s0.json"
    result = pilot.main(["--show", str(big), "--against", str(small)])
    out = capsys.readouterr().out
    assert "4/8" in out  # the 1.5B's greedy two-hop wins under @weak, as BENCHMARKS.md quotes
    weak = result["against"]["weak (2-hop)"]
    assert weak["n"] == 8 and abs(weak["mean"] - 0.5) < 1e-9 and weak["low"] > 0
    other = json.loads(small.read_text())
    other["question_ids"] = {"2": list(reversed(other["question_ids"]["2"]))}
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps(other))
    with pytest.raises(SystemExit, match="different questions"):
        pilot.main(["--show", str(big), "--against", str(moved)])


# ------------------------------------------------------------------------------ world reach


def test_world_reach_counts_what_one_search_returns_and_writes_its_provenance(tmp_path, capsys):
    reach = load_script("world_reach")
    out = tmp_path / "reach.json"
    assert reach.main(["--questions", "60", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["provenance"]["command"].startswith("python benchmarks/learning/world_reach.py --questions 60")
    for name in ("world-multihop", "world-chain"):
        by_hops = record["worlds"][name]
        assert set(by_hops) == {"1", "2", "3"}
        assert all(r["questions"] == 60 and r["last_by_name"] >= 55 for r in by_hops.values())
        assert by_hops["1"]["last"] == by_hops["1"]["first"]  # one passage: first is last
    # a two-hop question's second passage is reached by its own text less often without the
    # reverse mentions
    assert record["worlds"]["world-chain"]["2"]["last"] < record["worlds"]["world-multihop"]["2"]["last"]
    # what still reaches it in world-chain is never a reverse mention (founder, leader)
    assert not {"founder", "leader"} & set(record["worlds"]["world-chain"]["2"]["last_by_first_relation"])
    assert sum(record["worlds"]["world-chain"]["2"]["last_by_first_relation"].values()) == \
        record["worlds"]["world-chain"]["2"]["last"]
    assert "world-chain" in capsys.readouterr().out
