"""Each phase of a CPU training step against this machine's roofline (issue 64, item 1).

Measures, in one run:

- **the machine**: the matmul rate (TFLOP/s) in bf16 and fp32 at the model's own shapes
  (``tokens x hidden @ hidden x intermediate``, its transpose, and ``tokens x hidden @ hidden x
  vocabulary``), best of ``--reps``; and the memory bandwidth (GB/s: a copy of a ``--bandwidth-mib``
  tensor, read plus write, best of ``--reps``);
- **the phases**, on a micro-batch shaped like the preset's (``--rows`` episodes, ``--prompt``
  prompt tokens, completions spread up to ``--completion``; the LoRA policy of
  ``benchmarks/speed/train_memory.py``): a generation turn's **prefill** (``rows x prompt``, the last
  position's logits, as ``model.generate`` runs it), its **decoding** (``--decode`` greedy tokens after
  the prefill, per step), and the training pass's **forward** and **backward** (the log-probs of
  :func:`inspo.training.cpu_logps.cpu_logps_and_entropies` and a GRPO loss, ``--variant`` of
  ``train_memory.py``).

For each phase it reports the work (FLOPs of the base model's linear layers, attention and the LM
head; bytes for a decoding step: every weight read once, plus the KV cache), the roofline time
(work at the measured rate or bandwidth; a decoding step takes the larger of its FLOP and byte
times), the measured time and their ratio (``fraction``: 1 is the machine's limit). The work
counted is the minimum a phase needs, not what inspo does: LoRA's extra products, padding, the
recomputation of checkpointing or of the chunked head are overhead against it. The backward's
minimum is the activation gradients alone (a LoRA policy's base weights get none): about one
forward. Times are only worth reading when nothing else runs on the machine.

Usage::

    python benchmarks/speed/roofline.py --threads 2 --json benchmarks/results/speed/cpu-step-roofline.json
    python benchmarks/speed/roofline.py --quick                   # tiny-qwen2, tiny shapes, float32
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_memory  # noqa: E402  (a sibling script: the policy and the micro-batch)

from inspo.lab.harness import add_common, start, write_result  # noqa: E402


def best_seconds(fn: Callable[[], Any], reps: int) -> float:
    """The fastest of ``reps`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def matmul_rates(shapes: dict[str, tuple[int, int, int]], dtype: Any, reps: int) -> dict[str, float]:
    """TFLOP/s of ``(m x k) @ (k x n)`` for each named shape in ``dtype``."""
    import torch

    g = torch.Generator().manual_seed(0)
    rates = {}
    for name, (m, k, n) in shapes.items():
        a, b = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, n, generator=g).to(dtype)
        with torch.inference_mode():
            seconds = best_seconds(lambda a=a, b=b: a @ b, reps)
        rates[name] = 2 * m * k * n / seconds / 1e12
    return rates


def bandwidth_gbs(mib: int, reps: int) -> float:
    """GB/s of a copy between two ``mib`` MiB tensors (bytes read plus bytes written)."""
    import torch

    src = torch.ones(mib * 2**20 // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    seconds = best_seconds(lambda: dst.copy_(src), reps)
    return 2 * src.numel() * 4 / seconds / 1e9


def model_work(config: Any) -> dict[str, float]:
    """Per-token FLOPs of the decoder's linear layers and of the head, attention's FLOPs per
    token pair, and the bytes a weight element takes, from a transformers config."""
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q = config.num_attention_heads * head_dim
    kv = config.num_key_value_heads * head_dim
    linear = layers * (h * q + 2 * h * kv + q * h + 3 * h * inter)  # q, k, v, o; gate, up, down
    return {"linear_params": linear, "head_params": h * config.vocab_size, "flops_per_token": 2 * linear,
            "head_flops": 2 * h * config.vocab_size, "attention_flops_per_pair": 4 * layers * q,
            "kv_bytes_per_token": 2 * layers * kv}


def attention_flops(work: dict[str, float], lengths: Sequence[int]) -> float:
    """Causal attention of rows of these lengths: QK^T and AV over the pairs below the diagonal."""
    return sum(work["attention_flops_per_pair"] * n * (n + 1) / 2 for n in lengths)


def phase(name: str, measured_s: float, flops: float, rate: float, nbytes: float = 0.0,
          bandwidth: float = 0.0) -> dict[str, Any]:
    """A phase's record: work, roofline seconds (the larger of FLOP and byte time), fraction."""
    flop_s = flops / (rate * 1e12)
    byte_s = nbytes / (bandwidth * 1e9) if nbytes else 0.0
    roof = max(flop_s, byte_s)
    return {"phase": name, "flops": flops, "bytes": nbytes, "roofline_s": roof, "measured_s": measured_s,
            "fraction": roof / measured_s if measured_s > 0 else None,
            "bound": "memory" if byte_s > flop_s else "compute"}


def generation_phases(args, model, work, rate, bandwidth, weight_bytes) -> list[dict[str, Any]]:
    """A turn's prefill and its decoding steps, timed on the LoRA policy as inspo's engine plays it
    (weights packed for oneDNN, :mod:`inspo.models.packed`), and the decoding step again with
    torch's own ``linear``: the two decodings alternate, so their ratio is measured side by side."""
    import torch

    from inspo.models.head import contiguous_head_input
    from inspo.models.packed import PackedLinears

    ids = torch.randint(100, model.config.vocab_size, (args.rows, args.prompt),
                        generator=torch.Generator().manual_seed(3))
    model.eval()
    packed, unpacked = PackedLinears(), PackedLinears(enabled=False)

    def prefill(packing=packed):
        with torch.inference_mode(), contiguous_head_input(model), packing.active(model):
            model(input_ids=ids, use_cache=True, logits_to_keep=1)

    def decode(packing):
        with torch.inference_mode(), contiguous_head_input(model), packing.active(model):
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                           max_new_tokens=args.decode, min_new_tokens=args.decode, pad_token_id=0)

    pre = best_seconds(prefill, args.reps)
    decoded = {"packed": [], "unpacked": []}
    for packing in (packed, unpacked):
        decode(packing)  # warm-up (and the one-off packing)
    for rep in range(args.reps):
        for name in ("packed", "unpacked") if rep % 2 == 0 else ("unpacked", "packed"):
            started = time.perf_counter()
            decode(packed if name == "packed" else unpacked)
            decoded[name].append((time.perf_counter() - started - pre) / max(args.decode - 1, 1))
    prefill_flops = args.rows * args.prompt * work["flops_per_token"] + args.rows * work["head_flops"] \
        + attention_flops(work, [args.prompt] * args.rows)
    context = args.prompt + args.decode / 2  # the mean context a decoding step reads
    step_flops = args.rows * (work["flops_per_token"] + work["head_flops"]) \
        + args.rows * work["attention_flops_per_pair"] * context
    step_bytes = weight_bytes + args.rows * context * work["kv_bytes_per_token"] * args.itemsize
    step = phase("decoding step", min(decoded["packed"]), step_flops, rate, step_bytes, bandwidth)
    step["unpacked_s"] = min(decoded["unpacked"])
    step["packed_speedup"] = sorted(u / p for u, p in zip(decoded["unpacked"], decoded["packed"], strict=True))
    return [phase("prefill", pre, prefill_flops, rate), step]


def training_phases(args, work, rate) -> list[dict[str, Any]]:
    """The training pass's forward and backward, in their own process (``train_memory.py``)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        row = train_memory.spawn(train_memory.child_argv(args), args.variant, Path(tmp) / "grads.pt")
    completions = train_memory.completion_lengths(args)
    completion = sum(completions)
    if args.shared_prompt:  # one prompt the rows continue: its tokens need running once
        pairs = args.prompt * (args.prompt + 1) / 2 + sum(n * args.prompt + n * (n + 1) / 2 for n in completions)
        forward = (args.prompt + completion) * work["flops_per_token"] + work["attention_flops_per_pair"] * pairs
    else:
        lengths = [args.prompt + n for n in completions]
        forward = sum(lengths) * work["flops_per_token"] + attention_flops(work, lengths)
    forward += completion * work["head_flops"]
    return [phase(f"training forward ({args.variant})", row["forward_s"], forward, rate),
            phase(f"training backward ({args.variant})", row["backward_s"], forward, rate)]


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    train_memory.add_micro_batch_args(p)
    p.add_argument("--decode", type=int, default=64, help="tokens decoded after the prefill (the preset's turn)")
    p.add_argument("--tokens", type=int, default=2048, help="rows of the rate's matrix products")
    p.add_argument("--bandwidth-mib", type=int, default=1024, help="size of the bandwidth copy")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions of each measurement (the best kept)")
    p.add_argument("--variant", default="chunked+ckpt", choices=train_memory.VARIANTS,
                   help="the training pass measured")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2, tiny shapes, float32, one repetition")
    add_common(p, threads=0, seed=False)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    if args.quick:
        args.model, args.rows, args.prompt, args.completion, args.shortest, args.decode = "tiny-qwen2", 2, 8, 12, 6, 4
        args.tokens, args.bandwidth_mib, args.reps, args.dtype = 64, 16, 1, "float32"
    info = start("benchmarks/speed/roofline.py", raw, threads=args.threads, device="cpu", dtype=args.dtype)
    args.dtype = info["dtype"]  # "auto" resolved: bf16 only where it is fast (an AVX2 CPU crawls in it)
    return measure(args, info)


def measure(args: argparse.Namespace, info: dict) -> dict:
    import torch

    model = train_memory.policy(args.model, args.dtype, checkpointing=False)
    c = model.config
    work = model_work(c)
    dtype = getattr(torch, args.dtype)
    args.itemsize = torch.tensor([], dtype=dtype).element_size()
    shapes = {"hidden x intermediate": (args.tokens, c.hidden_size, c.intermediate_size),
              "intermediate x hidden": (args.tokens, c.intermediate_size, c.hidden_size),
              "hidden x vocabulary": (args.tokens, c.hidden_size, c.vocab_size)}
    rates = {"bfloat16": matmul_rates(shapes, torch.bfloat16, args.reps),
             "float32": matmul_rates(shapes, torch.float32, args.reps)}
    rate = max(rates[args.dtype].values())
    bandwidth = bandwidth_gbs(args.bandwidth_mib, args.reps)
    weight_bytes = (work["linear_params"] + work["head_params"]) * args.itemsize
    phases = generation_phases(args, model, work, rate, bandwidth, weight_bytes)
    del model
    phases += training_phases(args, work, rate)
    print(f"\n{args.model} {args.dtype}, torch threads {torch.get_num_threads()}: matmul TFLOP/s "
          + "; ".join(f"{d} " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()) for d, r in rates.items())
          + f"; copy bandwidth {bandwidth:.1f} GB/s")
    print(f"{'phase':36s} {'GFLOP':>9s} {'MB':>8s} {'roofline s':>11s} {'measured s':>11s} {'fraction':>9s}")
    for ph in phases:
        print(f"{ph['phase']:36s} {ph['flops'] / 1e9:9.1f} {ph['bytes'] / 1e6:8.1f} {ph['roofline_s']:11.4f} "
              f"{ph['measured_s']:11.4f} {ph['fraction']:9.3f}  ({ph['bound']})")
        if "packed_speedup" in ph:
            print(f"{'':36s} unpacked (torch's linear) {ph['unpacked_s']:.4f} s; packed / unpacked per pair: "
                  + ", ".join(f"{r:.2f}x" for r in ph["packed_speedup"]))
    result = {"provenance": info, "model": args.model, "dtype": args.dtype,
              "shape": {k: getattr(args, k) for k in ("rows", "prompt", "completion", "shortest", "decode")},
              "matmul_tflops": rates, "roof_tflops": rate, "copy_bandwidth_gbs": bandwidth, "work": work,
              "phases": phases}
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
