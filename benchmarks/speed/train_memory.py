"""Memory and time of the training pass of one micro-batch on CPU (the loss's forward, its backward),
with and without the chunked LM head and gradient checkpointing (issue 64: the memory cut).

A ``calculator`` step's peak is its training pass (15.3 GiB of the campaign's 23.5; BENCHMARKS.md
§2). This plays that pass alone on a fixed micro-batch shaped like the preset's (``--rows``
episodes of ``--prompt`` prompt tokens and up to ``--completion`` completion tokens, the rows'
completions spread evenly from ``--shortest`` to the longest, right-padded as TRL pads them):
the LoRA policy of ``model.lora=true`` (r 16 on q/k/v/o, its B set to small seeded values so every
adapter gets a gradient), bf16 autocast as the trainer runs it, the log-probs and entropies of
:func:`inspo.training.cpu_logps.cpu_logps_and_entropies` (``compute_entropy`` as TRL's loss asks),
an on-policy GRPO loss, its backward. Variants:

- ``logits``: the model's own logits, TRL's ``selective_log_softmax`` (the path before the cut);
- ``chunked``: the head's input through :func:`inspo.models.head_logps.head_logps`;
- ``logits+ckpt``, ``chunked+ckpt``: the same with gradient checkpointing (non-reentrant);
- ``chunked+ckpt/2``: checkpointing on the first half of the decoder layers only
  (``model.gradient_checkpointing_layers=0.5``, :mod:`inspo.training.checkpointing`);
- ``...+pack``: the micro-batch packed into one row, each distinct prompt once
  (:mod:`inspo.training.packed_rows`, ``rl.pack_prompts``); with ``--shared-prompt`` every row
  continues the same prompt, as a group's rows do in the trainer's prompt-ordered micro-batches;
- ``...+compile``: the same with the decoder layers' training passes through ``torch.compile``
  (:func:`compile_layers`; an experiment of issue 64, not in the library: on the 0.5B in bf16 it
  did not pay, BENCHMARKS.md §2); its first pass compiles, so time it after ``--warmup 1`` (every
  variant then plays one untimed pass first, ``warmup_s``).

Each variant and repetition runs in a fresh process (the allocator keeps what a previous variant
freed), in rotating order. Printed per variant: the resident high-water mark above the resident
set before the pass (``VmHWM``, reset through ``/proc/self/clear_refs``; Linux), after the forward
and after the backward, the seconds of each, and how far its loss, log-probs and LoRA gradients are
from the first variant's (relative L2). Time figures are worth a ratio only when nothing else runs.

Usage::

    python benchmarks/speed/train_memory.py --threads 2             # the 0.5B, 8 x (200 + 352), bf16
    python benchmarks/speed/train_memory.py --quick                 # tiny-qwen2, a smoke test
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_profile import take_peak_gib  # noqa: E402  (a sibling script)

from inspo.lab.harness import add_common, start, write_result  # noqa: E402

VARIANTS = ("logits", "chunked", "logits+ckpt", "chunked+ckpt", "chunked+ckpt/2", "chunked+ckpt/2+compile",
            "chunked+ckpt+compile", "chunked+ckpt/2+pack")


def policy(name: str, dtype: str, checkpointing: bool, dropout: float = 0.05) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model

    from inspo.models import load_model

    model = load_model(name, dtype=getattr(torch, dtype)).model
    torch.manual_seed(0)  # LoRA's A is drawn from the global generator: the same in every process
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=dropout, task_type="CAUSAL_LM",
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=g) * 1e-3)
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    return model.train()


def compile_layers(model: Any) -> None:
    """Route each decoder layer's forward, where gradients are recorded, through one compiled copy
    of its class's own forward (the function transformers' checkpointing wraps): checkpointing stays
    eager, outside it, and LoRA dropout draws its masks through eager's generator
    (``fallback_random``). Passes without gradients run the eager layer."""
    import functools
    import types

    import torch

    from inspo.training.checkpointing import checkpointing_layers

    layers = checkpointing_layers(model)
    cls = type(layers[0])
    compiled = torch.compile(getattr(cls.forward, "__wrapped__", cls.forward), dynamic=True,
                             options={"fallback_random": True})

    def forward(layer: Any, *args: Any, **kwargs: Any) -> Any:
        if not (layer.training and torch.is_grad_enabled()) or kwargs.get("past_key_values") is not None:
            return type(layer).forward(layer, *args, **kwargs)
        if layer.gradient_checkpointing:
            return layer._gradient_checkpointing_func(functools.partial(compiled, layer, **kwargs), *args)
        return compiled(layer, *args, **kwargs)

    for layer in layers:
        layer.forward = types.MethodType(forward, layer)


def variant_policy(name: str, dtype: str, variant: str, dropout: float = 0.05) -> Any:
    """The policy as ``variant`` plays it: checkpointing (``+ckpt``), on half the layers (``/2``),
    the layers compiled (``+compile``)."""
    from inspo.training.checkpointing import limit_checkpointing

    model = policy(name, dtype, "+ckpt" in variant, dropout)
    if "/2" in variant:
        limit_checkpointing(model, 0.5)
    if variant.endswith("+compile"):
        compile_layers(model)
    return model


def completion_lengths(args: argparse.Namespace) -> list[int]:
    """Each row's completion tokens: evenly from ``--shortest`` to ``--completion``."""
    if args.rows == 1:
        return [args.completion]
    step = (args.completion - args.shortest) / (args.rows - 1)
    return [round(args.shortest + i * step) for i in range(args.rows)]


def batch(args: argparse.Namespace, vocab: int) -> dict[str, Any]:
    """Right-padded rows of ``prompt + completion`` ids, their masks and advantages."""
    import torch

    g = torch.Generator().manual_seed(1)
    width = args.prompt + args.completion
    ids = torch.randint(100, vocab, (args.rows, width), generator=g)
    if args.shared_prompt:
        ids[:, :args.prompt] = ids[0, :args.prompt]
    mask = torch.ones(args.rows, width, dtype=torch.long)
    for r, n in enumerate(completion_lengths(args)):
        mask[r, args.prompt + n:] = 0
    advantages = torch.randn(args.rows, generator=g)
    return {"ids": ids, "mask": mask, "completion_mask": mask[:, args.prompt:].float(), "advantages": advantages}


def trainer_stub(dtype: str) -> Any:
    """What the CPU log-prob pass reads of TRL's trainer: bf16 autocast for bf16 weights (as the
    trainer runs them), none for float32; temperature 1."""
    import contextlib
    from types import SimpleNamespace

    import torch

    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if dtype == "bfloat16" \
        else contextlib.nullcontext
    return SimpleNamespace(accelerator=SimpleNamespace(autocast=autocast), temperature=1.0)


def grpo_loss(logps: Any, data: dict[str, Any]) -> Any:
    """The on-policy GRPO loss of the micro-batch: the ratio (1, with its gradient) times each row's
    advantage, averaged over the completion tokens."""
    import torch

    cm = data["completion_mask"]
    return -(torch.exp(logps - logps.detach()) * data["advantages"][:, None] * cm).sum() / cm.sum()


def child_argv(args: argparse.Namespace, warmup: int = 0) -> list[str]:
    """What a variant's own process needs to play the same micro-batch (``--quick`` resolved), after
    ``warmup`` untimed passes."""
    return ["--model", args.model, "--rows", str(args.rows), "--prompt", str(args.prompt),
            "--completion", str(args.completion), "--shortest", str(args.shortest), "--dtype", args.dtype,
            "--threads", str(args.threads), "--warmup", str(warmup), "--lora-dropout", str(args.lora_dropout)] + ["--shared-prompt"] * args.shared_prompt


def one(args: argparse.Namespace, variant: str, grads_out: Path) -> dict[str, Any]:
    """The training pass in this process: peaks, seconds, loss, and the gradients written out."""
    import contextlib

    import torch

    from inspo.training.cpu_logps import cpu_logps_and_entropies
    from inspo.training.packed_rows import packing_attention

    model = variant_policy(args.model, args.dtype, variant, args.lora_dropout)
    if "+pack" in variant:  # held over the backward too: checkpointing's recompute attends packed
        stack = contextlib.ExitStack()
        assert stack.enter_context(packing_attention(model)), "the model does not attend through SDPA"
    data = batch(args, model.config.vocab_size)
    trainer = trainer_stub(args.dtype)
    cm = data["completion_mask"]

    def forward() -> tuple[Any, Any]:
        torch.manual_seed(2)  # the same dropout masks in every variant and pass
        logps, entropies, _ = cpu_logps_and_entropies(
            trainer, model, data["ids"], data["mask"], args.completion, batch_size=args.rows,
            compute_entropy=True, chunked_head=variant.startswith("chunked"))
        return logps, entropies

    started = time.perf_counter()
    for _ in range(args.warmup):
        grpo_loss(forward()[0], data).backward()
        model.zero_grad(set_to_none=True)
    warmup_s = time.perf_counter() - started
    take_peak_gib()
    before = take_peak_gib()
    started = time.perf_counter()
    logps, entropies = forward()
    forward_s = time.perf_counter() - started
    forward_peak = take_peak_gib()
    loss = grpo_loss(logps, data)
    started = time.perf_counter()
    loss.backward()
    backward_s = time.perf_counter() - started
    backward_peak = take_peak_gib()
    grads = torch.cat([p.grad.flatten().float() for n, p in model.named_parameters() if p.grad is not None])
    torch.save({"grads": grads, "logps": (logps.detach() * cm).float()}, grads_out)
    return {"variant": variant, "forward_s": forward_s, "backward_s": backward_s, "warmup_s": warmup_s,
            "forward_extra_gib": _above(forward_peak, before), "backward_extra_gib": _above(backward_peak, before),
            "base_gib": before, "loss": float(loss), "mean_entropy": float((entropies * cm).sum() / cm.sum()),
            "tokens": int(data["mask"].sum()), "completion_tokens": int(cm.sum())}


def _above(peak: float | None, before: float | None) -> float | None:
    return None if peak is None or before is None else peak - before


def _gib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def spawn(argv: list[str], variant: str, grads_out: Path) -> dict[str, Any]:
    cmd = [sys.executable, __file__, *argv, "--one", variant, "--grads-out", str(grads_out)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"variant {variant} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def relative(a: Any, b: Any) -> float:
    return float((a - b).norm() / max(float(b.norm()), 1e-30))


def add_micro_batch_args(p: argparse.ArgumentParser) -> None:
    """The policy and micro-batch options :func:`batch`, :func:`variant_policy` and :func:`child_argv`
    read; ``roofline.py`` and ``train_profile.py`` take them from here too."""
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="a registered model, folder or hub name")
    p.add_argument("--rows", type=int, default=8, help="episodes in the micro-batch (the preset's micro_batch_size)")
    p.add_argument("--prompt", type=int, default=200, help="prompt tokens per row")
    p.add_argument("--completion", type=int, default=352, help="the longest completion (the preset's 4 x 64 + 3 x 32)")
    p.add_argument("--shortest", type=int, default=120, help="the shortest row's completion tokens")
    p.add_argument("--dtype", default="auto",
                   help="the weights' dtype (bfloat16: under bf16 autocast; auto: what a run picks here)")
    p.add_argument("--lora-dropout", type=float, default=0.05,
                   help="LoRA dropout (the preset's 0.05; 0 to compare variants' gradients: masks are drawn per position)")
    p.add_argument("--shared-prompt", action="store_true",
                   help="every row continues the same prompt (a group: the roofline counts it once)")


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_micro_batch_args(p)
    p.add_argument("--reps", type=int, default=1, help="repetitions of each variant")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    p.add_argument("--warmup", type=int, default=0, help="untimed passes before the timed one, in each process")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2, 2 rows of 8 + 12 tokens, float32")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--grads-out", default=None, help=argparse.SUPPRESS)
    add_common(p, threads=0, seed=False)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    if args.quick:
        args.model, args.rows, args.prompt, args.completion, args.shortest, args.dtype = \
            "tiny-qwen2", 2, 8, 12, 6, "float32"
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        p.error(f"unknown variant(s) {unknown}: choose from {', '.join(VARIANTS)}")
    info = start("benchmarks/speed/train_memory.py", raw, threads=args.threads, device="cpu", dtype=args.dtype,
                 quiet=args.one is not None)
    args.dtype = info["dtype"]  # "auto" resolved: bf16 only where it is fast (an AVX2 CPU crawls in it)
    if args.one:
        print(json.dumps(one(args, args.one, Path(args.grads_out))))
        return {}
    return compare(args, info, variants, child_argv(args, args.warmup))


def compare(args: argparse.Namespace, info: dict, variants: list[str], child: list[str]) -> dict:
    import torch

    rows, reference = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for i in range(len(variants)):
                variant = variants[(i + rep) % len(variants)]
                out = Path(tmp) / f"{variant.replace('/', '-half')}-{rep}.pt"
                row = spawn(child, variant, out)
                saved = torch.load(out)
                reference = reference or (variant, saved)
                row.update(rep=rep, grads_rel_diff=relative(saved["grads"], reference[1]["grads"]),
                           logps_rel_diff=relative(saved["logps"], reference[1]["logps"]))
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    print(f"\n{args.model} {args.dtype}, {args.rows} rows x ({args.prompt} + up to {args.completion}) tokens; "
          f"differences against {reference[0]}")
    print(f"{'variant':22s} {'fwd GiB':>8s} {'bwd GiB':>8s} {'fwd s':>7s} {'bwd s':>7s} {'grads rel':>10s}")
    for variant in variants:
        mine = [r for r in rows if r["variant"] == variant]
        med = {k: statistics.median(r[k] for r in mine) if all(r[k] is not None for r in mine) else None
               for k in ("forward_extra_gib", "backward_extra_gib", "forward_s", "backward_s", "grads_rel_diff",
                         "logps_rel_diff")}
        summary[variant] = med
        print(f"{variant:22s} {_gib(med['forward_extra_gib']):>8s} {_gib(med['backward_extra_gib']):>8s} "
              f"{med['forward_s']:7.1f} {med['backward_s']:7.1f} {med['grads_rel_diff']:10.2e}")
    result = {"provenance": info, "model": args.model, "dtype": args.dtype, "rows": args.rows,
              "prompt": args.prompt, "completion": args.completion, "shortest": args.shortest,
              "runs": rows, "summary": summary}
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
