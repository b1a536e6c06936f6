"""A training step's rollouts with one of the engine's prefill savings on and off, side by side in
one run (issue 64): ``--knob share_prefill``, each repeated prompt prefilled once
(:mod:`inspo.engines.prefill`), or ``--knob keep_turns``, each turn's keys and values kept so the
next turn prefills only what it adds (:mod:`inspo.engines.turn_cache`), or ``--knob
drop_finished``, finished rows left out of the decoding steps (:mod:`inspo.engines.decode_rows`).

GRPO plays ``group_size`` rollouts of each question, so a step's first turn holds each prompt G
times (a static step; INSPO's paired credit splits a group between two instructions, so two
prompts G/2 times). This plays a preset's step of rollouts (``questions_per_step`` training
questions x ``group_size``, its agent settings, its seed instruction, ``--instructions`` distinct
instructions a group) through :func:`inspo.envs.loop.run_rollouts` with ``HFEngine(...,
<knob>=...)`` on and off, in alternating order over ``--pairs`` pairs, from the same seed in
both arms; counts the rows both arms played the same (all of them for ``share_prefill`` and
``drop_finished``, which keep the bits; ``keep_turns`` keeps the logits to rounding: run it near-greedy too, ``--set
rl.temperature=0.0001``); and prints the times and each pair's ratio. Run while nothing else runs
on the machine, as ``inspo train`` would run it.

Usage::

    python benchmarks/speed/prefill.py --preset calculator --threads 2 \\
        --json benchmarks/results/speed/prefill.json
    python benchmarks/speed/prefill.py --knob keep_turns --preset calculator --threads 2 \
        --set seed_instruction=@calculator --json benchmarks/results/speed/turn-cache.json
    python benchmarks/speed/prefill.py --quick     # tiny-qwen2, a smoke test
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from inspo.lab.harness import add_common, start, write_result


def play(engine: Any, env: Any, agent: Any, episodes: list, seed: int) -> tuple[float, list, tuple[int, int]]:
    """One arm: the episodes' rollouts from ``seed``; (seconds, completion ids, (rows prefilled,
    as how many distinct rows))."""
    from inspo.engines.prefill import PrefillCount
    from inspo.envs.loop import run_rollouts

    engine.rng, engine.prefilled = random.Random(seed), PrefillCount()
    begin = time.perf_counter()
    rollouts = run_rollouts(engine, env, agent, episodes)
    seconds = time.perf_counter() - begin
    return seconds, [r.completion_ids for r in rollouts], (engine.prefilled.rows, engine.prefilled.distinct)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="calculator")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides")
    p.add_argument("--instructions", type=int, default=1, choices=(1, 2),
                   help="distinct instructions a group (2: INSPO's paired credit, the group halved)")
    p.add_argument("--pairs", type=int, default=3, help="alternating pairs")
    p.add_argument("--knob", choices=("share_prefill", "keep_turns", "drop_finished"), default="share_prefill",
                   help="the HFEngine saving switched on and off")
    p.add_argument("--quick", action="store_true", help="tiny-qwen2 in float32, 2 questions x 4, 1 pair")
    add_common(p, threads=0)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = p.parse_args(raw)
    overrides = list(args.set)
    if args.quick:
        overrides += ["model.name_or_path=tiny-qwen2", "model.dtype=float32", "rl.questions_per_step=2",
                      "rl.group_size=4", "rl.max_response_tokens=8", "rl.max_turns=1"]
        args.pairs = 1
    from inspo.config.train import resolve
    from inspo.engines.hf import HFEngine
    from inspo.envs.build import agent_config, build_env, load_questions, seed_of
    from inspo.envs.loop import Episode
    from inspo.models import load_model
    from inspo.records import Instruction
    from inspo.training.memory import freed_blocks_kept

    config = resolve(args.preset, None, overrides)
    info = start("benchmarks/speed/prefill.py", raw, threads=args.threads, device="cpu", dtype=config.model.dtype)
    env = build_env(config)
    rl = config.rl
    questions = load_questions(env, config.data.train, config.data.train_split, rl.questions_per_step,
                               field_name="data.train")
    seed = seed_of(env, config.seed_instruction)
    instructions = [Instruction(id="seed", text=seed), Instruction(id="other", text=seed + "\nBe careful.")]
    episodes = [Episode(q, instructions[(g * args.instructions) // rl.group_size])
                for q in questions for g in range(rl.group_size)]
    loaded = load_model(config.model.name_or_path, dtype=config.model.dtype)
    engines = {on: HFEngine(loaded.model, loaded.tokenizer, **{args.knob: on}) for on in (True, False)}
    agent = agent_config(rl)
    arms = {"on": True, "off": False}
    times: dict[str, list[float]] = {name: [] for name in arms}
    ratios, same_rows, shared_rows = [], [], (0, 0)
    with freed_blocks_kept():
        play(engines[True], env, agent, episodes[: rl.group_size], args.seed)  # warm-up: packing, caches
        for i in range(args.pairs):
            order = list(arms) if i % 2 == 0 else list(arms)[::-1]
            got = {name: play(engines[arms[name]], env, agent, episodes, args.seed + i) for name in order}
            for name, (seconds, _, _) in got.items():
                times[name].append(seconds)
            ratios.append(got["off"][0] / got["on"][0])
            same_rows.append(sum(a == b for a, b in zip(got["on"][1], got["off"][1], strict=True)))
            shared_rows = got["on"][2]
            print(f"pair {i + 1}: {args.knob} on {got['on'][0]:.1f} s ({shared_rows[0]} rows prefilled "
                  f"as {shared_rows[1]}), off {got['off'][0]:.1f} s, ratio {ratios[-1]:.2f}, rows "
                  f"played the same: {same_rows[-1]} of {len(episodes)}", flush=True)
    result = {"provenance": info, "preset": args.preset, "overrides": overrides, "knob": args.knob,
              "rows": len(episodes), "instructions_per_group": args.instructions, "seconds": times,
              "prefilled_rows_as_distinct": shared_rows, "ratio_per_pair": ratios,
              "ratio_median": statistics.median(ratios), "same_rows_per_pair": same_rows,
              "same_tokens": all(n == len(episodes) for n in same_rows)}
    print(f"{len(episodes)} rows, {args.instructions} instruction(s) a group: {args.knob} off / on "
          + ", ".join(f"{r:.2f}" for r in ratios) + f"; rows played the same per pair: {same_rows}")
    write_result(args.json, result)
    return result


if __name__ == "__main__":
    main()
