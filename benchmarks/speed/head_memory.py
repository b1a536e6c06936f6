"""Memory and time of one prefill when the LM head is frozen (a LoRA policy) on CPU, with and
without :func:`inspo.models.head.contiguous_head_input`.

transformers slices the hidden states to the last position before the head (``logits_to_keep``);
torch's bf16 ``matmul`` of that non-contiguous slice by a weight that requires no gradient copies
the weight once per row (the module docstring of :mod:`inspo.models.head`). This plays one
prefill of ``--rows x --tokens`` random ids, in inference mode as generation does, through:

- ``trainable head``: the model as loaded (its head requires a gradient: torch folds the rows);
- ``frozen head``: the same model with LoRA adapters on the attention projections (PEFT freezes
  every base weight, the head included), as ``inspo train``'s policy with ``model.lora=true``;
- ``frozen head, contiguous``: the LoRA model inside ``contiguous_head_input``, as inspo's
  engines, the local optimizer and the CPU log-prob pass play it.

Printed for each, per repetition (the order rotates each repetition): the resident high-water mark
above the resident memory before the call (``VmHWM``, reset through ``/proc/self/clear_refs``;
Linux only), the seconds of the call, and whether its logits equal the trainable head's (LoRA's B
starts at zero, so they must). ``--json`` writes the result with its provenance.

Usage::

    python benchmarks/speed/head_memory.py --threads 2                   # Qwen2.5-Coder-0.5B, 32 x 150, bf16
    python benchmarks/speed/head_memory.py --quick                       # tiny-qwen2, 4 x 8 (a smoke test)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_profile import take_peak_gib  # noqa: E402  (a sibling script)

from inspo.lab.harness import add_common, start, write_result  # noqa: E402

VARIANTS = ("trainable head", "frozen head", "frozen head, contiguous")


def models(name: str, dtype: str) -> dict[str, Any]:
    """The plain model and a LoRA copy of it (adapters on q/k/v/o, as ``model.lora=true``)."""
    import copy

    import torch
    from peft import LoraConfig, get_peft_model

    from inspo.models import load_model

    plain = load_model(name, dtype=getattr(torch, dtype)).model.eval()
    lora = get_peft_model(copy.deepcopy(plain), LoraConfig(
        r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")).eval()
    return {"trainable head": plain, "frozen head": lora, "frozen head, contiguous": lora}


def prefill(model: Any, ids: Any, contiguous: bool) -> tuple[Any, float]:
    """The last position's logits of one forward (as generation's prefill), and its seconds."""
    import contextlib

    import torch

    from inspo.models.head import contiguous_head_input

    hook = contiguous_head_input(model) if contiguous else contextlib.nullcontext()
    started = time.perf_counter()
    with torch.inference_mode(), hook:
        logits = model(input_ids=ids, use_cache=True, logits_to_keep=1).logits
    return logits, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="a registered model, folder or hub name")
    p.add_argument("--rows", type=int, default=32, help="rows of the prefill (a calculator step's 4 x 8 episodes)")
    p.add_argument("--tokens", type=int, default=150, help="prompt tokens per row")
    p.add_argument("--reps", type=int, default=2, help="repetitions of each variant")
    p.add_argument("--dtype", default="bfloat16", help="the weights' and compute dtype")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2, 4 rows x 8 tokens, 1 repetition")
    add_common(p, threads=0, seed=False)
    args = p.parse_args(argv)
    if args.quick:
        args.model, args.rows, args.tokens, args.reps = "tiny-qwen2", 4, 8, 1
    info = start("benchmarks/speed/head_memory.py", argv, threads=args.threads, device="cpu", dtype=args.dtype)
    import torch

    built = models(args.model, args.dtype)
    vocab = built["trainable head"].config.vocab_size
    ids = torch.randint(0, vocab, (args.rows, args.tokens), generator=torch.Generator().manual_seed(0))
    reference, _ = prefill(built["trainable head"], ids, contiguous=False)
    rows = []
    for rep in range(args.reps):
        for i in range(len(VARIANTS)):
            variant = VARIANTS[(i + rep) % len(VARIANTS)]
            take_peak_gib()  # reset the high-water mark to what is resident now
            before = take_peak_gib()
            logits, seconds = prefill(built[variant], ids, contiguous=variant.endswith("contiguous"))
            peak = take_peak_gib()
            rows.append({"variant": variant, "rep": rep, "seconds": seconds,
                         "extra_gib": None if peak is None or before is None else peak - before,
                         "logits_equal": bool(torch.equal(logits, reference))})
    print(f"{args.model} {args.dtype}, prefill of {args.rows} rows x {args.tokens} tokens, "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'variant':26s} {'extra GiB (median)':>19s} {'seconds (median)':>17s} {'logits equal':>13s}")
    summary = {}
    for variant in VARIANTS:
        mine = [r for r in rows if r["variant"] == variant]
        extra = [r["extra_gib"] for r in mine if r["extra_gib"] is not None]
        summary[variant] = {"extra_gib": statistics.median(extra) if extra else None,
                            "seconds": statistics.median(r["seconds"] for r in mine),
                            "logits_equal": all(r["logits_equal"] for r in mine)}
        s = summary[variant]
        shown = "n/a" if s["extra_gib"] is None else f"{s['extra_gib']:.2f}"
        print(f"{variant:26s} {shown:>19s} {s['seconds']:17.2f} {str(s['logits_equal']):>13s}")
    ratio = summary["frozen head"]["seconds"] / summary["frozen head, contiguous"]["seconds"]
    print(f"frozen head: seconds without / with contiguous_head_input = {ratio:.2f}x")
    result = {"provenance": info, "model": args.model, "rows": args.rows, "tokens": args.tokens,
              "runs": rows, "summary": summary, "seconds_ratio_frozen": ratio}
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
