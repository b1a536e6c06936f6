"""Where one INSPO training step spends its time (issue 9: "profile one cpu-tiny step").

Runs ``inspo.training.run.run_training`` on a preset and times, without changing the library, the
parts of every step by wrapping them (exclusive time: a part nested in another is subtracted
from its parent):

- ``generation (training rollouts)``: :func:`inspo.envs.loop.run_rollouts` called by the
  rollout function (the multi-turn search episodes of the step's groups);
- ``trl scoring``: the rest of TRL's ``_generate_and_score_completions`` (rewards, advantages,
  padding, the old/reference log-probs below);
- ``log-probs (forward)``: every ``_get_per_token_logps_and_entropies`` call, inside scoring or
  inside the loss;
- ``loss + backward + optimizer``: the rest of ``Trainer.training_step`` and the optimizer step;
- ``co-evolution update``: :meth:`CoEvolution.update` minus its rollouts (attribution, pruning,
  the optimizer LLM's calls, bookkeeping);
- ``generation (verification)``: rollouts played inside the update (D_B, the parent);
- ``vllm sync``: with ``rl.use_vllm``, handing the new weights (or LoRA adapter) to vLLM before
  it generates with them (:mod:`inspo.training.vllm_sync`; once per optimizer step);
- ``other``: the rest of the training loop (callbacks, logging, checkpoints, data loading).

Also counted per step: the token positions the log-prob passes run (each micro-batch as wide as
its last attended column, or its packed row's length under ``rl.pack_prompts``) and how many of
them are padding (``pass_tokens_by_step``; what ``rl.group_by_length`` cuts); packed, fewer run than
the rows attend, and the line says how many fewer (:func:`pass_line`).

Printed: seconds per step for each part and its share, over the steps after the first (which
pays one-off costs). The initial population and the final choice run outside the steps and are
reported separately. Beside each part, on Linux, the peak resident memory while it ran (its own,
not a nested part's: the kernel's high-water mark ``VmHWM``, read and reset through
``/proc/self/clear_refs`` as a part starts and ends), over every step: where a step's transient
memory lives. The reset also resets ``ru_maxrss``, so the run summary's "peak memory" printed
below covers only the last stretch after the final reset.

``--split`` measures instead how one ``generate`` turn divides between reading the context
(prefill) and writing tokens (decoding steps), at the preset's batch and turn length, for
contexts as long as a first and a final turn's.

Usage::

    python benchmarks/speed/step_profile.py --threads 2                  # cpu-tiny, its 8 steps
    python benchmarks/speed/step_profile.py --threads 2 --split          # prefill vs decode, cpu-tiny shapes
    python benchmarks/speed/step_profile.py --quick                      # tiny random model, 2 steps
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager

from inspo.lab.harness import add_common, start, write_result

QUICK = [
    "model.name_or_path=tiny-qwen2", "rl.steps=2", "rl.max_response_tokens=8", "rl.questions_per_step=2",
    "rl.group_size=2", "data.warmup_questions=2", "coevolution.evolve_every=2", "coevolution.prune_every=1",
    "coevolution.validation_size=2", "coevolution.candidates_per_call=2", "data.max_eval_questions=2",
    "data.max_test_questions=2",
]


def take_peak_gib() -> float | None:
    """The resident high-water mark since the last call (``VmHWM``, GiB), reset to the resident
    set now; None where ``/proc`` cannot say or refuses the reset (not Linux, an old kernel)."""
    try:
        with open("/proc/self/status") as f:
            kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except (OSError, StopIteration, ValueError):
        return None
    return kib / 1024**2


class Profiler:
    """Exclusive wall time and peak resident memory per part, per phase (``init``, step number,
    ``final``). ``peak`` is a ``take_peak_gib``-like reader, injected so tests can drive it."""

    def __init__(self, peak=take_peak_gib):
        self.phase: str | int = "init"
        self.seconds: dict[str | int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.peak_gib: dict[str | int, dict[str, float]] = defaultdict(dict)
        self.step_start: dict[int, float] = {}
        self.step_end: dict[int, float] = {}
        self._stack: list[list] = []  # [name, start, child seconds]
        self._peak = peak
        self.pass_tokens: dict[str | int, dict[str, int]] = defaultdict(lambda: defaultdict(int))

    def count_pass(self, attention_mask, logits_to_keep: int, batch_size: int | None, packed=None) -> None:
        """Charge a log-prob pass to the phase: the token positions it runs (each chunk of
        ``batch_size`` rows as wide as its last attended column, as ``cpu_logps`` cuts it, or, where
        the pass packs rows, ``packed(chunk_rows, chunk_mask)``'s packed length) and the attended
        ones among them."""
        from inspo.training.cpu_logps import attended_end

        rows = batch_size or attention_mask.size(0)
        for first in range(0, attention_mask.size(0), rows):
            chunk = attention_mask[first : first + rows]
            length = packed(first, first + rows) if packed else None
            run = length if length is not None else chunk.size(0) * attended_end(chunk, logits_to_keep)
            self.pass_tokens[self.phase]["run"] += run
            self.pass_tokens[self.phase]["attended"] += int(chunk.sum())

    def _note_peak(self) -> None:
        """Charge the high-water mark since the last reading to the innermost part (``other``
        outside every part) of the current phase."""
        gib = self._peak()
        if gib is not None:
            name = self._stack[-1][0] if self._stack else "other"
            mine = self.peak_gib[self.phase]
            mine[name] = max(mine.get(name, 0.0), gib)

    @contextmanager
    def part(self, name: str):
        self._note_peak()
        self._stack.append([name, time.perf_counter(), 0.0])
        try:
            yield
        finally:
            self._note_peak()
            name, start, children = self._stack.pop()
            spent = time.perf_counter() - start
            self.seconds[self.phase][name] += spent - children
            if self._stack:
                self._stack[-1][2] += spent

    def begin_step(self) -> None:
        """A new step's phase. Its window opens where the outermost open part began (TRL's
        ``training_step``, entered before it asks for the step's rollouts), since that part's time
        is charged to the phase it ends in: the parts then sum to the step's wall time."""
        self.phase = len(self.step_start) + 1
        self.step_start[self.phase] = self._stack[0][1] if self._stack else time.perf_counter()

    def inside(self, name: str) -> bool:
        return any(frame[0] == name for frame in self._stack)


def install(prof: Profiler):
    """Wrap the library's parts (module attributes and the trainer class); returns an undo."""
    import inspo.envs.evaluate as evaluate_mod
    import inspo.training.grpo_stage as run_mod
    import inspo.training.grpo_trainer as grpo
    import inspo.training.step as step_mod
    from inspo.core.coevolution import CoEvolution
    from inspo.training import vllm_sync

    saved = (step_mod.run_rollouts, evaluate_mod.run_rollouts, grpo.trainer_class, CoEvolution.update)
    syncs = {cls: cls.sync for cls in (vllm_sync.WeightSync, vllm_sync.AdapterSync)}

    def timed_sync(original):
        def sync(self, *args, **kwargs):
            with prof.part("vllm sync"):
                return original(self, *args, **kwargs)
        return sync

    for cls, original in syncs.items():
        cls.sync = timed_sync(original)
    final_choice = run_mod.final_choice
    on_step_end = grpo.InspoHooks.on_step_end

    def timed_step_end(self, *args, **kwargs):
        out = on_step_end(self, *args, **kwargs)
        if isinstance(prof.phase, int):
            prof.step_end[prof.phase] = time.perf_counter()  # the last optimizer update of the step
        return out

    grpo.InspoHooks.on_step_end = timed_step_end

    def timed_final_choice(*args, **kwargs):
        prof.phase = "final"
        return final_choice(*args, **kwargs)

    run_mod.final_choice = timed_final_choice

    def timed_rollouts(original):
        def run(*args, **kwargs):
            name = "generation (verification)" if prof.inside("co-evolution update") else (
                "generation (training rollouts)" if prof.inside("trl scoring") else "generation (other)")
            with prof.part(name):
                return original(*args, **kwargs)
        return run

    step_mod.run_rollouts = timed_rollouts(saved[0])
    evaluate_mod.run_rollouts = timed_rollouts(saved[1])

    def update(self, step, rollouts, evaluate):
        with prof.part("co-evolution update"):
            return saved[3](self, step, rollouts, evaluate)

    CoEvolution.update = update

    def trainer_class():
        base = saved[2]()

        class Timed(base):
            def _generate_and_score_completions(self, inputs):
                prof.begin_step()  # one generation batch per INSPO step
                with prof.part("trl scoring"):
                    return super()._generate_and_score_completions(inputs)

            def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                                   *args, **kwargs):
                from inspo.training.packed_rows import is_packing, pack_rows

                def packed(first, last):  # what cpu_logps packs, where it packs (rl.pack_prompts)
                    rows = pack_rows(input_ids[first:last], attention_mask[first:last], logits_to_keep)
                    return None if rows is None else rows.length

                prof.count_pass(attention_mask, logits_to_keep, kwargs.get("batch_size", args[0] if args else None),
                                packed if is_packing(model) else None)
                with prof.part("log-probs (forward)"):
                    return super()._get_per_token_logps_and_entropies(
                        model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)

            def training_step(self, *args, **kwargs):
                with prof.part("loss + backward + optimizer"):
                    return super().training_step(*args, **kwargs)

        return Timed

    grpo.trainer_class = trainer_class

    def undo():
        step_mod.run_rollouts, evaluate_mod.run_rollouts, grpo.trainer_class, CoEvolution.update = saved
        run_mod.final_choice = final_choice
        grpo.InspoHooks.on_step_end = on_step_end
        for cls, original in syncs.items():
            cls.sync = original

    return undo


PARTS = ("generation (training rollouts)", "trl scoring", "log-probs (forward)", "loss + backward + optimizer",
         "co-evolution update", "generation (verification)", "vllm sync", "other")


def pass_line(run: float, attended: float) -> str:
    """The log-prob passes' positions a step, in words: the padded share where they ran more than
    the rows attend, the positions saved where packing ran each shared prompt once."""
    if run >= attended:
        return f"{run:9.0f} token positions a step, {100 * (1 - attended / run):.1f} % of them padding"
    return (f"{run:9.0f} token positions a step for {attended:.0f} attended "
            f"({attended / run:.2f}x fewer: packed, each shared prompt run once)")


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-tiny")
    p.add_argument("--set", action="append", default=[], help="config override")
    add_common(p, seed=False)
    p.add_argument("--out", default="runs/step-profile")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--split", action="store_true", help="prefill vs decoding steps of one turn")
    p.add_argument("--contexts", default="300,450", help="--split: context lengths in tokens")
    p.add_argument("--reps", type=int, default=2, help="--split: repetitions per context")
    args = p.parse_args(argv)
    import torch

    from inspo.config.train import resolve
    from inspo.training.run import run_training

    overrides = [*(QUICK if args.quick else []), f"output_dir={args.out}", *args.set]
    config = resolve(args.preset, None, overrides)
    # --split plays the model on the CPU; a run trains where inspo puts it (CUDA where present)
    info = start("benchmarks/speed/step_profile.py", argv, threads=args.threads,
                 device="cpu" if args.split else None, dtype=config.model.dtype)
    if args.split:
        return split(config, [int(n) for n in args.contexts.split(",")], args.reps, info, args.json)
    import shutil

    shutil.rmtree(args.out, ignore_errors=True)
    prof = Profiler()
    undo = install(prof)
    started = time.perf_counter()
    try:
        summary = run_training(config, progress=False)
    finally:
        undo()
    total = time.perf_counter() - started
    steps = sorted(s for s in prof.step_start if s in prof.step_end)
    measured = steps[1:] or steps  # the first step pays one-off costs
    wall = {s: prof.step_end[s] - prof.step_start[s] for s in measured}
    per_step = sum(wall.values()) / len(measured)
    rows = {part: sum(prof.seconds[s].get(part, 0.0) for s in measured) / len(measured) for part in PARTS[:-1]}
    rows["other"] = max(0.0, per_step - sum(rows.values()))
    peaks = {part: max((prof.peak_gib[s][part] for s in steps if part in prof.peak_gib[s]), default=None)
             for part in PARTS}  # every step: a transient of step 1 counts as much as a later one's
    print(f"python {info['python']}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{config.rl.questions_per_step} questions x G {config.rl.group_size} per step; steps measured: "
          f"{measured} (step 1 pays one-off costs); total run {total:.0f} s")
    print(f"{'part':34s} {'s / step':>9s} {'share':>7s} {'peak GiB':>9s}")
    for part, sec in rows.items():
        peak = "-" if peaks[part] is None else f"{peaks[part]:.2f}"
        print(f"{part:34s} {sec:9.2f} {100 * sec / per_step if per_step else 0:6.1f}% {peak:>9s}")
    print(f"{'step wall time':34s} {per_step:9.2f}")
    tokens = {s: dict(prof.pass_tokens[s]) for s in steps}
    run = sum(tokens[s].get("run", 0) for s in measured)
    attended = sum(tokens[s].get("attended", 0) for s in measured)
    if run:
        print(f"{'log-prob passes':34s} {pass_line(run / len(measured), attended / len(measured))}")
    init = dict(prof.seconds["init"])
    final = dict(prof.seconds["final"])
    print(f"outside the steps: initial population {sum(init.values()):.0f} s; final choice {sum(final.values()):.0f} s")
    print("\nthe run's summary:")
    print(summary)
    result = {"provenance": info, "per_step": rows, "step_wall_s": per_step, "steps_measured": measured,
              "total_s": total, "init": init, "peak_gib": peaks,
              "peak_gib_by_step": {s: dict(prof.peak_gib[s]) for s in steps}, "pass_tokens_by_step": tokens}
    write_result(args.json, result)
    return result


def split(config, contexts: list[int], reps: int, info: dict, json_path: str | None) -> dict:
    """Seconds of one prefill of ``batch x context`` tokens and of a turn's decoding steps."""
    import torch

    from inspo.models import load_model
    from inspo.models.precision import concrete_dtype

    dtype = concrete_dtype(config.model.dtype, "cpu")  # "auto" is resolved as a run resolves it
    loaded = load_model(config.model.name_or_path)
    model = loaded.model.to(getattr(torch, dtype)).eval()
    batch = config.rl.questions_per_step * config.rl.group_size
    steps = config.rl.max_response_tokens
    gen = torch.Generator().manual_seed(0)
    rows = []
    for context in contexts:
        for rep in range(reps):
            ids = torch.randint(100, 20000, (batch, context), generator=gen)
            with torch.inference_mode():
                start = time.perf_counter()
                out = model(input_ids=ids, use_cache=True)
                prefill = time.perf_counter() - start
                past, token = out.past_key_values, ids[:, -1:]
                start = time.perf_counter()
                for _ in range(steps):
                    past = model(input_ids=token, past_key_values=past, use_cache=True).past_key_values
                decode = time.perf_counter() - start
            rows.append({"context": context, "rep": rep, "prefill_s": prefill, "decode_s": decode})
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()[0]:.2f}; "
          f"{config.model.name_or_path} {dtype}, batch {batch}, {steps} decoding steps per turn")
    print(f"{'context':>8s} {'prefill s':>10s} {'decode s':>9s} {'prefill share':>14s}")
    for context in contexts:
        mine = [r for r in rows if r["context"] == context]
        pre = sorted(r["prefill_s"] for r in mine)[len(mine) // 2]
        dec = sorted(r["decode_s"] for r in mine)[len(mine) // 2]
        print(f"{context:8d} {pre:10.2f} {dec:9.2f} {100 * pre / (pre + dec):13.1f}%")
    result = {"provenance": info, "batch": batch, "decode_steps": steps, "split": rows}
    write_result(json_path, result)
    return result


if __name__ == "__main__":
    main()
