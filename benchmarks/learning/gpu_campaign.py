"""Run the multihop benchmark's arms and seeds on one lent GPU, in pieces (issue 23, item 4).

The device machine has no network, takes at most 64 MiB of files per call, runs one command for
at most 10 minutes and keeps its disk only while it is held. So every step is a subcommand here,
and a campaign is a few commands:

1. ``pack`` (here): the policy's verified GGUF (``--model``: the 0.5B, 491 MB, 9 pieces; or the
   opt-in 1.5B, 1,117 MB, 20 pieces: ``requirements/models-1.5b.txt``; joined from its installed
   chunk packages) re-split into pieces of at most ``--piece-mib`` MiB, with a manifest of each
   piece's size and SHA-256 and the whole file's; and the wheels the device lacks (trl,
   datasets, bm25s, gguf and their missing needs). It prints which pieces go in which call.
   ``--vllm`` adds vLLM 0.26.0 (the newest release pinned to the image's torch 2.11.0) and the 91
   wheels the image lacks for it (``requirements/device-vllm.txt``, hash-checked), 373 MiB in one
   tar cut into 7 pieces under ``bundle/``; carry them first, each with ``bundle/manifest.json``.
   ``receive`` installs them once all 7 are kept (measured on an H200: 4 s of device time a call,
   14 s to install; then ``rl.use_vllm=auto`` resolves to vLLM there).
2. ``receive`` (there, once per call that carries pieces): installs the carried wheels, checks
   each carried piece against the manifest and keeps it outside the work tree; when every piece
   is there, joins them, checks
   the whole file's size and SHA-256 (``inspo.models.sources.join_verified``) and converts it into
   inspo's model cache, so the model (``qwen2.5-coder-0.5b`` or ``-1.5b``) loads there as it does here.
3. ``launch`` (there): the arm x seed jobs as parallel processes on the one GPU, each
   ``multihop_coevolution.py --seed S --arms A``; jobs whose result exists are skipped, a job
   still running at ``--deadline-s`` is stopped and resumes from its last checkpoint at the next
   ``launch``. Prints a table of done / running / failed jobs.
   Before the arms, ``pilot`` (there) runs issue 23's first check the same way, as parallel jobs
   under the deadline: the carried policy sampled G 8 on single- and two-hop training questions
   of each world (``world-multihop``, where one search often returns both passages of a chain, and
   ``world-chain``, where each hop needs its own search) under ``@weak`` and the worked two-search
   example, with every episode kept. Its pass@8 says whether two-hop questions give GRPO a signal
   before any seed is spent. A pilot job has no checkpoint: one stopped at the deadline starts
   over at the next ``pilot``.
   ``rematch`` (there) runs issue 23's GEPA rematch (``evolve_vs_gepa.py``, instruction-only, the
   0.5B policy frozen and the 0.5B as both optimizers' reflector, so carry the default model) for
   each seed with the tag check on and off, as the same kind of parallel jobs; on this CPU one such
   run takes about 3 hours. A job stopped at the deadline goes on at the next ``rematch`` from
   INSPO's saved state and GEPA's last iteration (``evolve_vs_gepa.py --resume``). Pool them with
   ``evolve_vs_gepa.py --combine`` per tag setting.
4. ``collect`` (there): the result JSONs and each job's log, plus each run's metrics and events,
   into one tar under ``$OUT`` (split into 15 MiB parts if larger) to bring back and commit.

Once the 0.5B is converted there, the test suite's tiny model builds from its tokenizer, so the CUDA
tests run there too (``python3 -m pytest -n 4 tests/test_train_grpo.py ...``; before the last piece,
carry ``_tokenizers/qwen2.5-coder`` from the model cache and point ``INSPO_CACHE`` at it). Measured on
an H200 (2026-11-26): a piece call costs about 8 s of device time; the 9 pieces, the join, the check
and the conversion took under 3 minutes of the session's device time, the machine's start (about 30 s) included.

Usage (the device tool's ``run`` calls, in order; ``.device`` is ignored by git and carried)::

    python benchmarks/learning/gpu_campaign.py pack --dir .device            # here
    # run: carry [.device/whl, .device/model/manifest.json, .device/model/piece-00 ...]:
    python benchmarks/learning/gpu_campaign.py receive --dir .device
    # with pack --vllm, first: carry [.device/bundle/manifest.json, .device/bundle/piece-00], then -01 ...
    python benchmarks/learning/gpu_campaign.py pilot --model qwen2.5-coder-1.5b --out /root/mh
    python benchmarks/learning/gpu_campaign.py rematch --seeds 0-4 --out /root/mh   # with the 0.5B carried
    python benchmarks/learning/gpu_campaign.py launch --seeds 0-4 --parallel 10 --deadline-s 540 --out /root/mh
    python benchmarks/learning/gpu_campaign.py collect --out /root/mh --to "$OUT"

Prefix ``pilot``, ``rematch`` and ``launch`` there with ``INSPO_COMMIT=<git rev-parse HEAD here>``:
the copy there holds the files of now under the ``.git`` of the session's start, so without it
the results would name that older commit (they warn on stderr when the files differ from it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
# What the device image lacks for `inspo train` (its torch, transformers, accelerate, peft, numpy,
# pyarrow, xxhash, tqdm ... are there: /work/.library/device/KINDS.md): carried as wheels.
DEVICE_WHEELS = ("trl==1.16.0", "datasets==5.2.0", "bm25s==0.3.16", "gguf==0.19.0", "dill==0.4.1",
                 "multiprocess==0.70.19", "gepa==0.1.4")  # gepa: the rematch only
# vLLM on CUDA (``pack --vllm``): vLLM 0.26.0, the newest release pinned to the image's torch 2.11.0,
# and the wheels the image lacks for it, hash-pinned (what was left out and why: the file's header).
VLLM_REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements" / "device-vllm.txt"
# pip matches --platform tags exactly: every tag a wheel in that file carries
WHEEL_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64", "manylinux_2_24_x86_64",
                   "manylinux_2_31_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_5_x86_64",
                   "manylinux1_x86_64")
KEEP = Path("/root/inspo-device")  # outside the work tree: kept while the machine is held
HERE = Path(__file__).resolve().parent  # benchmarks/learning: the scripts it runs
REPO = HERE.parents[1]
MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")


def model_parts(model: str):
    """(the SplitGGUF spec, its installed-chunk source, its cache builder) of a packable model."""
    from inspo.models import registry, sources

    if model == "qwen2.5-coder-0.5b":
        return sources.QWEN_CODER_05B_GGUF, sources.qwen_coder_chunks, registry.build_qwen_coder
    if model == "qwen2.5-coder-1.5b":
        return sources.QWEN_CODER_15B_GGUF, sources.qwen_coder_15b_chunks, registry.build_qwen_coder_15b
    raise SystemExit(f"--model: one of {', '.join(MODELS)}; got {model!r}")


def sha256_of(path: Path, block: int = 8 * MIB) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(block):
            h.update(chunk)
    return h.hexdigest()


# ------------------------------------------------------------------------------------ pack
def split_file(chunks: Sequence[Path], out: Path, piece_bytes: int) -> list[dict]:
    """The concatenation of ``chunks`` re-cut into ``out/piece-NN`` of at most ``piece_bytes``;
    returns each piece's name, bytes and SHA-256, in order."""
    out.mkdir(parents=True, exist_ok=True)
    pieces: list[dict] = []
    current, h, size = None, None, 0

    def close() -> None:
        if current is not None:
            current.close()
            pieces.append({"name": f"piece-{len(pieces):02d}", "bytes": size, "sha256": h.hexdigest()})

    for chunk in chunks:
        with Path(chunk).open("rb") as f:
            while True:
                if current is None or size == piece_bytes:
                    close()
                    current, h, size = (out / f"piece-{len(pieces):02d}").open("wb"), hashlib.sha256(), 0
                data = f.read(min(8 * MIB, piece_bytes - size))
                if not data:
                    break
                current.write(data)
                h.update(data)
                size += len(data)
    if size or not pieces:
        close()
    else:  # the last piece opened holds nothing
        current.close()
        (out / f"piece-{len(pieces):02d}").unlink()
    return pieces


def pack(directory: Path, piece_mib: int, *, chunk_source: Callable[[], Sequence[Path]] | None = None,
         spec=None, wheels: bool = True, model_name: str = MODELS[0]) -> dict:
    default_spec, installed, _ = model_parts(model_name)
    spec = spec or default_spec
    chunks = list((chunk_source or installed)())
    model = directory / "model"
    pieces = split_file(chunks, model, piece_mib * MIB)
    manifest = {"model": model_name, "filename": spec.filename, "bytes": spec.size, "sha256": spec.sha256,
                "pieces": pieces}
    if sum(p["bytes"] for p in pieces) != spec.size:
        raise SystemExit(f"the chunks hold {sum(p['bytes'] for p in pieces)} bytes, not {spec.size}: "
                         f"reinstall {spec.requirements_file}")
    (model / "manifest.json").write_text(json.dumps(manifest, indent=2))
    if wheels:
        download_wheels(directory / "whl", DEVICE_WHEELS)
    return manifest


def download_wheels(into: Path, requirements: Sequence[str]) -> None:
    """``pip download`` CPython 3.12 x86-64 wheels, without their needs, for the device."""
    platforms = [x for tag in WHEEL_PLATFORMS for x in ("--platform", tag)]
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
                    "3.12", "--implementation", "cp", *platforms, "-d", str(into), *requirements], check=True)


def pack_bundle(directory: Path, piece_mib: int, wheels: Sequence[Path]) -> dict:
    """``wheels`` in one uncompressed tar, cut into ``directory/bundle/piece-NN`` with a manifest
    (each piece's and the whole tar's size and SHA-256), for wheels larger than a call carries."""
    bundle = directory / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    tar_path = directory / "bundle.tar"
    with tarfile.open(tar_path, "w") as tar:
        for wheel in sorted(wheels):
            tar.add(wheel, arcname=Path(wheel).name)
    pieces = split_file([tar_path], bundle, piece_mib * MIB)
    manifest = {"bytes": tar_path.stat().st_size, "sha256": sha256_of(tar_path), "wheels": len(wheels),
                "pieces": pieces}
    tar_path.unlink()
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def pack_vllm(directory: Path, piece_mib: int, *, download: Callable[[Path], None] | None = None) -> dict:
    """vLLM 0.26.0 and the wheels the device image lacks for it (``requirements/device-vllm.txt``,
    hash-checked by pip) as a bundle of pieces; ``receive`` installs them once all are there."""
    into = directory / "vllm-wheels"
    shutil.rmtree(into, ignore_errors=True)  # an earlier pack's wheels would travel beside these
    (download or (lambda d: download_wheels(d, ["--require-hashes", "-r", str(VLLM_REQUIREMENTS)])))(into)
    return pack_bundle(directory, piece_mib, sorted(into.glob("*.whl")))


# --------------------------------------------------------------------------------- receive
def kept_under(keep: Path, manifest: dict) -> Path:
    """The folder under ``keep`` for one packing's pieces, named by their SHA-256s: pieces of
    another model, bundle or cut carried earlier on the same held machine are never taken for them."""
    digest = hashlib.sha256("".join(p["sha256"] for p in manifest["pieces"]).encode()).hexdigest()
    return keep / digest[:16]


def keep_pieces(carried: Path, manifest: dict, keep: Path, label: str = "") -> list[str]:
    """Keep the pieces carried in ``carried`` that match ``manifest`` under ``keep``; refuse one that
    does not. Says and returns the names of the pieces still missing (``label`` names the set)."""
    keep.mkdir(parents=True, exist_ok=True)
    for piece in manifest["pieces"]:
        here, kept = carried / piece["name"], keep / piece["name"]
        if kept.is_file() and kept.stat().st_size == piece["bytes"]:
            continue
        if not here.is_file():
            continue
        digest = sha256_of(here)
        if here.stat().st_size != piece["bytes"] or digest != piece["sha256"]:
            raise SystemExit(f"{here}: {here.stat().st_size} bytes, SHA-256 {digest}; the manifest says "
                             f"{piece['bytes']} bytes, {piece['sha256']}: carry it again")
        kept.write_bytes(here.read_bytes())
    missing = [p["name"] for p in manifest["pieces"] if not (keep / p["name"]).is_file()]
    if missing:
        print(f"{label}kept {len(manifest['pieces']) - len(missing)} of {len(manifest['pieces'])} pieces; "
              f"still to carry: {', '.join(missing)}")
    return missing


def install_wheels(wheels: Sequence[Path]) -> None:
    """Install carried wheels into this interpreter (no network there: --no-index; their needs are
    the image's or carried beside them: --no-deps)."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-compile",
                    *map(str, wheels)], check=True)


def receive_bundle(directory: Path, keep: Path) -> list[str]:
    """The ``pack --vllm`` bundle: keep its pieces under ``kept_under(keep)`` (a bundle packed
    again is another folder, so no piece of an older one is taken for it); once all are kept, join
    them, check the whole tar's size and SHA-256, unpack and install its wheels, once per bundle.
    Returns the pieces still missing."""
    manifest = json.loads((directory / "bundle" / "manifest.json").read_text())
    keep = kept_under(keep, manifest)
    missing = keep_pieces(directory / "bundle", manifest, keep, "bundle: ")
    done = keep / "installed"
    if not missing and not done.exists():
        from inspo.models.sources import join_verified

        tar_path = join_verified([keep / p["name"] for p in manifest["pieces"]], keep / "bundle.tar",
                                 size=manifest["bytes"], sha256=manifest["sha256"])
        shutil.rmtree(keep / "wheels", ignore_errors=True)  # what a stopped call unpacked
        with tarfile.open(tar_path) as tar:
            tar.extractall(keep / "wheels", filter="data")
        tar_path.unlink()
        wheels = sorted((keep / "wheels").glob("*.whl"))
        if len(wheels) != manifest["wheels"]:
            raise SystemExit(f"the bundle holds {len(wheels)} wheels, its manifest {manifest['wheels']}: pack it again")
        install_wheels(wheels)  # raises on a failed install: no marker, the next call tries again
        done.write_text(f"{len(wheels)} wheels\n")
        print(f"bundle: every piece kept, SHA-256 {manifest['sha256']} checked, {len(wheels)} wheels installed")
    return missing


def receive(directory: Path, keep: Path = KEEP, *, build: bool = True) -> list[str]:
    """Install the wheels carried in ``whl/`` (in every call that carries them) and the
    ``pack --vllm`` bundle once all its pieces are kept; keep the carried model pieces that match
    the manifest; join and convert once all are kept. Returns the names of the pieces still missing,
    the bundle's as ``bundle/piece-NN``."""
    wheels = sorted((directory / "whl").glob("*.whl"))
    if wheels:
        install_wheels(wheels)
    missing = []
    if (directory / "bundle" / "manifest.json").is_file():
        missing += [f"bundle/{name}" for name in receive_bundle(directory, keep / "bundle")]
    if not (directory / "model" / "manifest.json").is_file():
        print(f"no model manifest carried ({directory / 'model' / 'manifest.json'}): no model pieces kept")
        return missing
    manifest = json.loads((directory / "model" / "manifest.json").read_text())
    keep = kept_under(keep / "model", manifest)
    model_missing = keep_pieces(directory / "model", manifest, keep)
    if not model_missing and build:
        _, _, build_model = model_parts(manifest.get("model", MODELS[0]))
        path = build_model(chunk_source=lambda: [keep / p["name"] for p in manifest["pieces"]])
        print(f"every piece kept, joined, SHA-256 {manifest['sha256']} checked, converted: {path}")
    return missing + model_missing


# ---------------------------------------------------------------------------------- launch
@dataclass
class Job:
    """One arm of one seed: ``multihop_coevolution.py --seed S --arms A``."""

    seed: int
    arm: str

    @property
    def name(self) -> str:
        return f"{self.arm}-s{self.seed}"

    def result(self, out: Path) -> Path:
        return _arms_benchmark().result_path(out, self.arm, self.seed)

    def argv(self, out: Path, extra: Sequence[str]) -> list[str]:
        return [sys.executable, str(HERE / "multihop_coevolution.py"), "--seed", str(self.seed), "--arms", self.arm,
                "--out", str(out), *extra]


WORKED_EXAMPLE = REPO / "benchmarks" / "results" / "multihop" / "worked-example-instruction.txt"


@dataclass
class PilotJob:
    """The frozen-policy pilot on one world: ``multihop_pilot.py`` sampled, both hop counts, the
    weak seed against the worked two-search example, every episode kept beside the result."""

    world: str
    seed: int
    model: str
    questions: int = 32
    batch: int = 256

    @property
    def name(self) -> str:
        return f"pilot-{self.world}-s{self.seed}"

    def result(self, out: Path) -> Path:
        return out / "results" / f"{self.name}.json"

    def argv(self, out: Path, extra: Sequence[str]) -> list[str]:
        world = [x for key in ("data.train", "data.eval", "env.corpus") for x in ("--set", f"{key}={self.world}")]
        return [sys.executable, str(HERE / "multihop_pilot.py"), "--hops", "1,2", "--seed", str(self.seed),
                "--questions", str(self.questions), "--batch", str(self.batch),
                "--instructions", f"weak,file:{WORKED_EXAMPLE}", "--set", f"model.name_or_path={self.model}",
                *world, "--json", str(self.result(out)),
                "--episodes", str(self.result(out).with_suffix(".episodes.jsonl")), *extra]


# The rematch's arms B (BENCHMARKS.md §4): GEPA with its own reflection prompt, both optimizers the
# same local LLM at temperature 0.7 and 400 tokens a call; evolve_vs_gepa's defaults are the rest.
REMATCH_SETTINGS = ("optimizer.kind=local", "coevolution.optimizer_max_tokens=400",
                    "coevolution.optimizer_temperature=0.7")


@dataclass
class RematchJob:
    """One seed of the GEPA rematch, with INSPO's tag check on or off (the evidence rules stay on)."""

    seed: int
    tag_check: bool
    reflector: str = MODELS[0]

    @property
    def name(self) -> str:
        return f"rematch-{'tags' if self.tag_check else 'no-tags'}-s{self.seed}"

    def result(self, out: Path) -> Path:
        return out / "results" / f"{self.name}.json"

    def argv(self, out: Path, extra: Sequence[str]) -> list[str]:
        settings = [x for s in (*REMATCH_SETTINGS, f"optimizer.local_model_path={self.reflector}") for x in ("--set", s)]
        run = out / "rematch" / self.name
        # a job stopped at the deadline goes on from INSPO's saved state and GEPA's last iteration
        resume = ["--resume"] if (run / "inspo" / "inspo_state.json").is_file() else []
        return [sys.executable, str(HERE / "evolve_vs_gepa.py"), "--gepa-prompt", "gepa", "--seed", str(self.seed),
                *([] if self.tag_check else ["--no-tag-check"]), *settings,
                "--out", str(run), "--json", str(self.result(out)), *resume, *extra]


def _arms_benchmark():
    from importlib import util

    spec = util.spec_from_file_location("inspo_benchmark_multihop_coevolution", HERE / "multihop_coevolution.py")
    bench = util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def jobs_for(seeds: Sequence[int], arms: Sequence[str]) -> list[Job]:
    """Seed-major: every arm of seed 0, then seed 1 ..., so finished seeds are complete pairs."""
    return [Job(s, a) for s in seeds for a in arms]


def parse_seeds(text: str) -> list[int]:
    """``0-4`` or ``0,2,5`` -> seeds."""
    if "-" in text and "," not in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",") if s]


def job_env() -> dict[str, str]:
    """The jobs' environment: this checkout's ``src`` first on the path (inspo is not installed on
    the device) and ``INSPO_COMMIT`` as :func:`~inspo.eval.provenance.provenance` names it: the one
    exported to this call where it is, else git's HEAD. On the device export it: the copy there
    holds the files of now under the ``.git`` of the session's start. Where it is not exported and
    the tracked files differ from git's HEAD, says so on stderr before any job starts: the results
    would name that HEAD (with ``dirty: true``), which is not the code that ran."""
    from inspo.eval.provenance import COMMIT_ENV, provenance

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    found = provenance([], repo=REPO)
    if found["commit"]:
        env[COMMIT_ENV] = found["commit"]
    if found["dirty"] and found["commit_from"] == "git":
        print(f"warning: the tracked files in {REPO} differ from git's HEAD {found['commit'][:12]} and "
              f"{COMMIT_ENV} is not set, so every result will name {found['commit'][:12]} (dirty: true). On "
              f"the device machine (a .git of the session's start under the files of now) export "
              f"{COMMIT_ENV}=$(git rev-parse HEAD) from this machine; elsewhere commit first.", file=sys.stderr)
    return env


def launch(jobs: Sequence[Job | PilotJob], out: Path, *, parallel: int, deadline_s: float, extra: Sequence[str] = (),
           command: Callable[[Job | PilotJob, Path, Sequence[str]], list[str]] | None = None,
           poll_s: float = 1.0) -> dict[str, str]:
    """Run ``jobs`` at most ``parallel`` at a time until done or ``deadline_s``; a job whose result
    file exists is skipped. ``command`` replaces each job's own ``argv`` (tests). Returns each job's
    state: done, skipped, failed (rc N), stopped (deadline) or waiting (never started)."""
    command = command or (lambda job, out_dir, more: job.argv(out_dir, more))
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (out / "results").mkdir(parents=True, exist_ok=True)
    state = {j.name: "waiting" for j in jobs}
    queue = []
    for j in jobs:
        if j.result(out).is_file():
            state[j.name] = "skipped"
        else:
            queue.append(j)
    running: dict[str, subprocess.Popen] = {}
    env = job_env() if queue else {}
    end = time.monotonic() + deadline_s
    while (queue or running) and time.monotonic() < end:
        while queue and len(running) < parallel:
            j = queue.pop(0)
            log = (logs / f"{j.name}.log").open("a")
            running[j.name] = subprocess.Popen(command(j, out, extra), stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True, env=env)
            state[j.name] = "running"
        for name, proc in list(running.items()):
            rc = proc.poll()
            if rc is not None:
                state[name] = "done" if rc == 0 else f"failed (rc {rc})"
                del running[name]
        time.sleep(poll_s)
    for name, proc in running.items():  # past the deadline: stop; the next launch resumes it
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        state[name] = "stopped (deadline)"
    for name, s in state.items():
        print(f"{name:28s} {s}")
    return state


# --------------------------------------------------------------------------------- collect
RUN_FILES = ("metrics.jsonl", "events.jsonl", "summary.json", "config.yaml", "best_instruction.txt")


def collect(out: Path, to: Path, part_mib: int = 15) -> list[Path]:
    """Results, logs and each run's small files into ``to/campaign.tar`` (cut into parts of at most
    ``part_mib`` MiB: ``campaign.tar.00`` ...; join with ``cat``)."""
    to.mkdir(parents=True, exist_ok=True)
    tar_path = to / "campaign.tar"
    with tarfile.open(tar_path, "w") as tar:
        for sub in ("results", "logs"):
            if (out / sub).is_dir():
                tar.add(out / sub, arcname=sub)
        for run in sorted((out / "runs").glob("*")) if (out / "runs").is_dir() else []:
            for name in RUN_FILES:
                if (run / name).is_file():
                    tar.add(run / name, arcname=f"runs/{run.name}/{name}")
    if tar_path.stat().st_size <= part_mib * MIB:
        return [tar_path]
    parts: list[Path] = []
    with tar_path.open("rb") as f:
        while data := f.read(part_mib * MIB):
            part = to / f"campaign.tar.{len(parts):02d}"
            part.write_bytes(data)
            parts.append(part)
    tar_path.unlink()
    return parts


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack", help="here: model pieces + manifest, and the wheels the device lacks")
    a.add_argument("--dir", default=".device")
    a.add_argument("--piece-mib", type=int, default=56)
    a.add_argument("--model", default=MODELS[0], choices=MODELS, help="the policy to carry")
    a.add_argument("--no-wheels", action="store_true")
    a.add_argument("--vllm", action="store_true",
                   help="also vLLM 0.26.0 and what the image lacks for it (requirements/device-vllm.txt) as a bundle")
    a = sub.add_parser("receive", help="there: keep carried pieces; join, check and convert once all are there")
    a.add_argument("--dir", default=".device")
    a.add_argument("--keep", default=str(KEEP))
    a = sub.add_parser("launch", help="there: arm x seed jobs in parallel until done or the deadline")
    a.add_argument("--seeds", default="0-4")
    a.add_argument("--arms", default="untrained,static-weak,static-sr1,inspo-weak,pre-policy-weak")
    a.add_argument("--parallel", type=int, default=10)
    a.add_argument("--deadline-s", type=float, default=540)
    a.add_argument("--out", default=str(KEEP / "mh"))
    a.add_argument("--set", action="append", default=[], help="passed to every job")
    a = sub.add_parser("pilot", help="there: the sampled frozen-policy pilot on each world, as parallel jobs")
    a.add_argument("--model", default=MODELS[1], choices=MODELS, help="the carried policy")
    a.add_argument("--worlds", default="world-multihop,world-chain")
    a.add_argument("--seeds", default="0")
    a.add_argument("--questions", type=int, default=32, help="training questions per hop count")
    a.add_argument("--parallel", type=int, default=2)
    a.add_argument("--deadline-s", type=float, default=540)
    a.add_argument("--out", default=str(KEEP / "mh"))
    a.add_argument("--set", action="append", default=[], help="passed to every job")
    a = sub.add_parser("rematch", help="there: the GEPA rematch per seed, tag check on and off, as parallel jobs")
    a.add_argument("--seeds", default="0-4")
    a.add_argument("--tag-check", default="on,off", help="on, off or on,off")
    a.add_argument("--reflector", default=MODELS[0], choices=MODELS)
    a.add_argument("--parallel", type=int, default=10)
    a.add_argument("--deadline-s", type=float, default=540)
    a.add_argument("--out", default=str(KEEP / "mh"))
    a.add_argument("--set", action="append", default=[], help="passed to every job")
    a = sub.add_parser("collect", help="there: results, logs and run files into a tar under --to")
    a.add_argument("--out", default=str(KEEP / "mh"))
    a.add_argument("--to", default=os.environ.get("OUT", "campaign-out"))
    args = p.parse_args(argv)
    if args.cmd == "pack":
        manifest = pack(Path(args.dir), args.piece_mib, wheels=not args.no_wheels, model_name=args.model)
        print(f"{len(manifest['pieces'])} pieces in {args.dir}/model; carry one or two per call with "
              f"{args.dir}/model/manifest.json, then run `receive` in each")
        if args.vllm:
            bundle = pack_vllm(Path(args.dir), args.piece_mib)
            print(f"{len(bundle['pieces'])} pieces of {bundle['wheels']} wheels in {args.dir}/bundle; carry them "
                  f"first, each with {args.dir}/bundle/manifest.json (and the model's manifest)")
    elif args.cmd == "receive":
        receive(Path(args.dir), Path(args.keep))
    elif args.cmd in ("launch", "pilot", "rematch"):
        extra = [x for s in args.set for x in ("--set", s)]
        if args.cmd == "launch":
            jobs = jobs_for(parse_seeds(args.seeds), args.arms.split(","))
        elif args.cmd == "rematch":
            checks = {"on": True, "off": False}
            if not set(args.tag_check.split(",")) <= set(checks):
                raise SystemExit(f"--tag-check: on, off or on,off, not {args.tag_check!r}")
            jobs = [RematchJob(seed, checks[c], args.reflector) for seed in parse_seeds(args.seeds)
                    for c in args.tag_check.split(",")]
        else:
            jobs = [PilotJob(w, seed, args.model, args.questions) for seed in parse_seeds(args.seeds)
                    for w in args.worlds.split(",")]
        launch(jobs, Path(args.out), parallel=args.parallel, deadline_s=args.deadline_s, extra=extra)
    else:
        for path in collect(Path(args.out), Path(args.to)):
            print(path)


if __name__ == "__main__":
    if str(REPO / "src") not in sys.path:  # the device: inspo is not installed, this checkout's src is
        sys.path.insert(0, str(REPO / "src"))
    main()
