"""Which operators one micro-batch's training pass spends its time in (issue 64: where the training
forward and backward lose against their roofline, ``roofline.py``).

Plays the training pass of ``train_memory.py`` (the LoRA policy, bf16 autocast, the CPU log-prob
pass and a GRPO loss, its backward) once to warm up, then once under ``torch.profiler``, and prints
the operators by self time, and for the listed ones (``--shapes``) their input shapes, so a cost
can be traced to what makes it (LoRA's dropout masks, RMSNorm's float32 copies, attention, the
head). ``--json`` keeps the table. The times are worth a ratio only when nothing else runs.

Usage::

    python benchmarks/speed/train_profile.py --threads 2 --variant chunked+ckpt
    python benchmarks/speed/train_profile.py --quick                   # tiny-qwen2, a smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_memory  # noqa: E402  (a sibling script: the policy and the micro-batch)

from inspo.lab.harness import add_common, start, write_result  # noqa: E402


def training_pass(args: argparse.Namespace, model: Any, data: dict[str, Any]) -> tuple[float, float]:
    """One forward (log-probs and entropies) and backward of a GRPO loss; their seconds."""
    from inspo.training.cpu_logps import cpu_logps_and_entropies

    trainer = train_memory.trainer_stub(args.dtype)
    started = time.perf_counter()
    logps, _, _ = cpu_logps_and_entropies(
        trainer, model, data["ids"], data["mask"], args.completion, batch_size=args.rows, compute_entropy=True,
        chunked_head=args.variant.startswith("chunked"))
    forward = time.perf_counter() - started
    loss = train_memory.grpo_loss(logps, data)
    started = time.perf_counter()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return forward, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    train_memory.add_micro_batch_args(p)
    p.add_argument("--variant", default="chunked+ckpt", choices=train_memory.VARIANTS, help="the pass profiled")
    p.add_argument("--top", type=int, default=25, help="operators listed")
    p.add_argument("--shapes", default="aten::mul,aten::copy_,aten::bernoulli_",
                   help="comma-separated operators whose input shapes are listed")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2, 2 rows of 8 + 12 tokens, float32")
    add_common(p, threads=0, seed=False)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    if args.quick:
        args.model, args.rows, args.prompt, args.completion, args.shortest, args.dtype, args.top = \
            "tiny-qwen2", 2, 8, 12, 6, "float32", 10
    info = start("benchmarks/speed/train_profile.py", raw, threads=args.threads, device="cpu", dtype=args.dtype)
    args.dtype = info["dtype"]  # "auto" resolved: bf16 only where it is fast
    from torch.profiler import ProfilerActivity, profile

    from inspo.training.memory import freed_blocks_kept
    from inspo.training.packed_rows import packing_attention

    model = train_memory.variant_policy(args.model, args.dtype, args.variant, args.lora_dropout)
    data = train_memory.batch(args, model.config.vocab_size)
    packed = packing_attention(model) if "+pack" in args.variant else contextlib.nullcontext(True)
    # freed tensors' pages reused, as a training step runs; packing held over the backward (checkpointing)
    with freed_blocks_kept(), packed as attends:
        assert attends, "the model does not attend through SDPA"
        training_pass(args, model, data)  # warm-up
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            forward, backward = training_pass(args, model, data)
    total = sum(e.self_cpu_time_total for e in prof.key_averages()) / 1e6
    ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[: args.top]
    table = [{"op": e.key, "calls": e.count, "self_s": e.self_cpu_time_total / 1e6,
              "share": e.self_cpu_time_total / 1e6 / total} for e in ops]
    shapes = []
    for name in [s for s in args.shapes.split(",") if s]:
        rows = [e for e in prof.key_averages(group_by_input_shape=True) if e.key == name]
        for e in sorted(rows, key=lambda e: -e.self_cpu_time_total)[:4]:
            shapes.append({"op": name, "calls": e.count, "self_s": e.self_cpu_time_total / 1e6,
                           "input_shapes": [list(s) if s else [] for s in e.input_shapes]})
    print(f"\n{args.model} {args.dtype} {args.variant}, {args.rows} rows x ({args.prompt} + up to {args.completion}); "
          f"forward {forward:.2f} s, backward {backward:.2f} s (profiled); operators' self time {total:.2f} s")
    for row in table:
        print(f"{row['op'][:50]:50s} {row['calls']:6d} {row['self_s']:8.2f} s {100 * row['share']:5.1f} %")
    for row in shapes:
        print(f"{row['op']:18s} {row['calls']:5d} {row['self_s']:7.2f} s  {row['input_shapes']}")
    result = {"provenance": info, "model": args.model, "dtype": args.dtype, "variant": args.variant,
              "forward_s": forward, "backward_s": backward, "self_total_s": total, "operators": table,
              "shapes": shapes}
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
