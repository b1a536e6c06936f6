"""Verification with one call per instruction versus one shared call (``Evaluate.many``), side by side.

The verifier scores a round's candidates (and, under beat-parent, their parent) on the same D_B
questions. Played one instruction at a time, each is its own ``generate`` batch of |D_B| rows;
played together, they share one. On a GPU a batch costs about as many sequential decoding steps
whatever its rows, so sharing should cut the time by about the number of instructions; on a CPU
the gain is smaller (more rows cost more compute). Both arms play the same episodes with the
same per-row seeds (``paired_seed``), so sampled rows draw the same noise in both arms; the script
checks how many rollouts came out identical.

Arms, alternating which goes first per repetition: ``separate`` (``evaluate(i, qs)`` for each
instruction) and ``shared`` (``evaluate.many(instructions, qs)``). Printed: seconds per arm
(median), the per-repetition ratio separate / shared, decoding turns and policy tokens.

Usage::

    python benchmarks/overhead/verify_batching.py --threads 2                       # tiny-qwen2, 4 x 8 rows
    python benchmarks/overhead/verify_batching.py --model qwen2.5-coder-0.5b --instructions 4 --questions 4
    python benchmarks/overhead/verify_batching.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

from inspo.lab.harness import add_common, start, write_result


def _instructions(n: int):
    from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
    from inspo.records import Instruction

    variants = ["", " Search before you answer.", " Keep the answer short.", " Use the information given.",
                " Answer with a name only.", " Think about the question first.", " Search with the key words."]
    return [Instruction(id=f"i{k}", text=SEARCH_R1_INSTRUCTION + variants[k % len(variants)] * (1 + k // len(variants)))
            for k in range(n)]


def run(args: argparse.Namespace) -> dict:
    import torch

    from inspo.data.sources import load_corpus_source, load_qa_source
    from inspo.engines.hf import HFEngine
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig
    from inspo.envs.search_r1 import SearchR1Env
    from inspo.models import load_model
    from inspo.retrieval.bm25 import BM25Retriever

    loaded = load_model(args.model, dtype=args.dtype)
    if torch.cuda.is_available() and not args.cpu:
        loaded.model.to("cuda")
    engine = HFEngine.from_loaded(loaded)
    env = SearchR1Env(BM25Retriever(load_corpus_source("world")), topk=3)
    questions = load_qa_source("world", split="train")[: args.questions]
    instructions = _instructions(args.instructions)
    config = AgentConfig(max_turns=args.max_turns, max_response_tokens=args.max_response_tokens,
                         temperature=args.temperature, prefill="<search>")
    evaluate = make_evaluate(engine, env, config, batch_size=256, paired_seed=("bench", 0))

    def separate() -> list[list]:
        return [evaluate(i, questions) for i in instructions]

    def shared() -> list[list]:
        return evaluate.many(instructions, questions)

    arms = {"separate": separate, "shared": shared}
    shared()  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    outputs: dict[str, list] = {}
    for rep in range(args.reps):
        for name in (["separate", "shared"] if rep % 2 == 0 else ["shared", "separate"]):
            if torch.cuda.is_available() and not args.cpu:
                torch.cuda.synchronize()
            start = time.perf_counter()
            outputs[name] = arms[name]()
            if torch.cuda.is_available() and not args.cpu:
                torch.cuda.synchronize()
            seconds[name].append(time.perf_counter() - start)
    flat = {name: [r for rs in out for r in rs] for name, out in outputs.items()}
    same = sum(a.completion_ids == b.completion_ids for a, b in zip(flat["separate"], flat["shared"], strict=True))
    ratios = [s / t for s, t in zip(seconds["separate"], seconds["shared"], strict=True)]
    tokens = {name: sum(sum(r.env_mask) for r in rs) for name, rs in flat.items()}
    return {
        "device": "cuda" if torch.cuda.is_available() and not args.cpu else f"cpu ({torch.get_num_threads()} threads)",
        "model": args.model, "instructions": len(instructions), "questions": len(questions),
        "seconds": {name: statistics.median(v) for name, v in seconds.items()},
        "ratio_separate_over_shared": statistics.median(ratios), "ratios": ratios,
        "policy_tokens": tokens, "identical_rollouts": f"{same} of {len(flat['shared'])}",
    }


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="tiny-qwen2")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--instructions", type=int, default=4, help="candidates (+ parent) of a round")
    p.add_argument("--questions", type=int, default=8, help="|D_B|")
    p.add_argument("--max-turns", type=int, default=2)
    p.add_argument("--max-response-tokens", type=int, default=48)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--reps", type=int, default=3)
    add_common(p, seed=False)
    p.add_argument("--cpu", action="store_true", help="stay on the CPU even where CUDA is available")
    p.add_argument("--quick", action="store_true", help="2 instructions x 2 questions, 1 repetition")
    args = p.parse_args(argv)
    if args.quick:
        args.instructions, args.questions, args.reps, args.max_response_tokens = 2, 2, 1, 8
    info = start("benchmarks/overhead/verify_batching.py", argv, threads=args.threads,
                 device="cpu" if args.cpu else None, dtype=args.dtype)
    result = {**run(args), "provenance": info}
    print(f"python {info['python']}, {result['device']}, model {result['model']}: "
          f"{result['instructions']} instructions x {result['questions']} questions")
    for name, s in result["seconds"].items():
        print(f"  {name:9s} {s:8.2f} s   policy tokens {result['policy_tokens'][name]}")
    print(f"separate / shared (median of per-repetition ratios): {result['ratio_separate_over_shared']:.2f}  "
          f"(each: {', '.join(f'{r:.2f}' for r in result['ratios'])})")
    print(f"identical rollouts in the two arms: {result['identical_rollouts']}")
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
