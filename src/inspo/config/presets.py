"""The presets: named starting points of a :class:`~inspo.config.train.TrainConfig`, as the
nested dicts a config file would hold (:func:`inspo.config.train.resolve` applies a file and the
overrides over one, then validates).

Presets:

- ``paper``: §4 and App. B of the paper for Qwen2.5-3B base (G 5, lr 5e-7, 512 questions per
  step in 2 mini-batches, 500 tokens per turn, 4 turns (Search-R1's count: 4 search turns, then
  a final answer turn), temperature 1.0, KL 0.001, clip 0.2, cosine with 0.1 warm-up, 300 steps; N_P
  7, N_parent 1, tau_s 0.2, K_p 5, K_e 15, T_e 150, window 5, 4 failures, |D_B| 200) with the
  paper's parts: policy ``Qwen/Qwen2.5-3B``, E5 (``intfloat/e5-base-v2``) dense retrieval over
  Search-R1's wiki-18, the NQ+HotpotQA training mix, and an LLM optimizer endpoint (Gemini 2.5 Pro
  in the paper). The data, the corpus (or a retrieval server) and the endpoint must be supplied:
  ``require_paper_parts`` makes a run refuse to start, before any work, while one is missing (see
  :mod:`inspo.config.paper`). Needs GPUs.
- ``paper-7b``: the same for Qwen2.5-7B base (App. B: lr 3e-7, 6 turns).
- ``multihop``: a setting where the instruction can change how the policy uses its tool (issue
  23's benchmark; the reasons are in its comments): two-hop and single-hop ``world-multihop``
  questions, three search turns, ``<search>`` forced only on the first, EM reward, a weak seed
  (``@weak``). Sized for one GPU (``benchmarks/learning/multihop_coevolution.py``); runs on CPU too,
  slowly.
- ``calculator``: the ``calculator`` environment (arithmetic word problems with a calculator tool),
  the setting where the instruction decides how the 0.5B uses its tool (issue 32's pilot), from the
  weak seed; sized for a 2-core CPU.
- ``cpu-tiny``: the embedded default of ``inspo train`` — Qwen2.5-Coder-0.5B-Instruct on the
  built-in ``world`` data with BM25, a shortened schedule, sized to finish in about 15 minutes
  on 2 CPU cores.
"""

from __future__ import annotations

from typing import Any


def _paper(model: str, **rl: Any) -> dict[str, Any]:
    """A paper preset: the dataclass defaults are App. B; this names §4's parts. The training
    data and the corpus are left empty (paths only the user has), so a run asks for them."""
    return {
        "require_paper_parts": True,
        # Weights stay float32 (master weights; compute is bf16 through rl.bf16): at lr 5e-7 most
        # updates are below bf16's resolution and would be lost. rl.bf16=auto turns the bf16
        # compute on where the GPU has bf16 (A100, H100), as Search-R1's runs had, and off on one
        # without it (V100, T4) or on a CPU without fast bf16, where it would be slower.
        "model": {"name_or_path": model, "dtype": "float32"},
        "env": {
            "name": "search-r1",
            "corpus": "",
            "retriever": "dense",
            "retriever_model": "intfloat/e5-base-v2",
        },
        "data": {"train": "", "eval": ""},
        # rollouts from vLLM where it runs best (Search-R1 trains on verl's vLLM rollouts)
        "rl": {"use_vllm": "auto", "bf16": "auto", **rl},
        "optimizer": {"kind": "openai", "model": "gemini-2.5-pro"},
    }


PRESETS: dict[str, dict[str, Any]] = {
    "paper": _paper("Qwen/Qwen2.5-3B"),
    "paper-7b": _paper("Qwen/Qwen2.5-7B", learning_rate=3e-7, max_turns=6),  # App. B's 7B settings
    "multihop": {
        # Where the paper's effect lives (DESIGN.md, "Where the paper's effect lives"): its gains
        # are on multi-hop sets and come with more searches (Fig. 2). So: world-multihop, the same
        # world and corpus as `world` with 4k questions; max_hops 2 keeps its 1- and 2-hop ones
        # (train: 983 single-hop + 1,594 two-hop, the mix the paper makes of NQ and HotpotQA; test:
        # 102 + 214, so the held-out two-hop score rests on 214 questions). Three-hop questions
        # are left out: the frozen 0.5B finishes almost no two-hop chain, and a group whose
        # rollouts all score 0 teaches GRPO nothing. Measured (BENCHMARKS.md §4, the pilot): even
        # two-hop questions earned 0 of 384 sampled rollouts under @weak, Search-R1's seed and the
        # reflector's multi-hop advice (1 of 128 under a hand-written query probe), so with the
        # 0.5B the two-hop score can only move through what single-hop training transfers; lr and
        # KL below are not yet chosen from an RL pilot.
        "output_dir": "runs/multihop",
        "seed_instruction": "@weak",  # never says a question may need several searches
        "final_choice": "dev",
        "offline_steps": 20,  # pre-policy: the instruction evolved with the frozen policy first
        # precision: model.dtype and rl.bf16 stay auto (bf16 on a GPU with bf16; float32 on a CPU
        # without fast bf16, where bf16 matmuls ran 67-99x slower: BENCHMARKS.md, "bf16 or float32
        # on this CPU")
        "model": {"lora": True, "lora_r": 16, "lora_alpha": 32},
        "env": {"name": "search-r1", "corpus": "world-multihop", "reward": "em"},
        "data": {
            "train": "world-multihop",
            "eval": "world-multihop",
            "max_hops": 2,
            "max_eval_questions": 48,
            "max_test_questions": 1000,
            "warmup_questions": 32,
        },
        "rl": {
            # 3 search turns then the answer turn; "<search>" forced on the first turn only (the
            # 0.5B rarely opens a tag unprompted), so whether to search again, and with what, is
            # the policy's choice: the thing an instruction can move. EM reward, as the paper.
            "steps": 40,
            "questions_per_step": 16,
            "group_size": 8,
            "mini_batches": 1,
            "micro_batch_size": 32,
            "learning_rate": 5e-5,
            "warmup_ratio": 0.0,
            "beta": 0.01,
            "max_turns": 3,
            "max_response_tokens": 64,
            "max_obs_tokens": 150,
            "max_prompt_tokens": 1024,
            "temperature": 1.0,
            "prefill": "<search>",
            "last_turn_nudge": True,
            "save_steps": 10,
        },
        "coevolution": {
            # evolve until the last quarter, so training is played under evolved instructions
            # for most of the run (cpu-tiny's population collapsed to one member by step 8 of 12)
            "population_size": 4,
            "prune_every": 5,
            "evolve_every": 5,
            "evolve_until": 30,
            "validation_size": 16,
            "candidates_per_call": 3,
            "max_rounds": 2,
            "admission": "beat-parent",
            "min_evidence": 8,
            "prior_rollouts": 8,
        },
    },
    "calculator": {
        # The setting where the instruction decides how the policy uses its tool (issue 32's pilot,
        # BENCHMARKS.md "Calculator"): the frozen 0.5B answers arithmetic word problems in its head
        # and gets them wrong under the weak seed (0 of 200 greedy), and calls the calculator and
        # gets most right when the instruction shows how (a worked example). Training starts from
        # the weak seed, so there is room for an evolved instruction; sized for a 2-core CPU.
        # Nothing is forced: whether to call <calc> is the policy's choice.
        "output_dir": "runs/calculator",
        "seed_instruction": "@weak",
        "final_choice": "dev",
        "offline_steps": 10,
        "env": {"name": "calculator", "test_size": 300},
        # Gradient checkpointing: with the chunked head of inspo.models.head_logps, a static step's
        # peak went from 16.1 to 5.6-5.7 GiB (BENCHMARKS.md §2, issue 64), so an INSPO arm's extra
        # verification fits in 23.5 GiB (the first campaign's INSPO arm peaked at 23.0).
        # Checkpointing 18 of the 24 layers (0.75) spends 1.1-1.3 GiB of that on skipping 6
        # layers' recompute: the step 1.01-1.04x, same gradients. With issue 64's other changes
        # the step takes about 107 s alone on 2 cores (140-143 s before the issue), peak 6.8-7.3
        # (a Xeon with AMX); rl.group_by_length (on by default) then cut the training pass's
        # padding from 31.5 to 11.5 % of its positions: a step from @calculator 237-241 -> 206 s
        # (1.15-1.17x) on a 2-core EPYC without AMX (BENCHMARKS.md §2). rl.keep_turns (on by
        # default) and the engine's dropping of finished rows then cut generation 2.13x: the step
        # 198-204 -> 150-153 s there (1.32-1.33x, two pairs); rl.pack_prompts (on by default) runs
        # each micro-batch as one packed row, a question's prompt once: 161-163 -> 128-129 s
        # (1.25-1.27x, two pairs, another day), peak 6.7-6.9 -> 5.2 GiB.
        "model": {
            "lora": True,
            "lora_r": 16,
            "lora_alpha": 32,
            "gradient_checkpointing": True,
            "gradient_checkpointing_layers": 0.75,
        },
        "data": {
            "train": "env",
            "eval": "env",
            "max_eval_questions": 32,
            "max_test_questions": 300,
            "warmup_questions": 8,
            "max_hops": 0,
        },
        "rl": {
            # 3 calculator turns then the answer turn (a problem needs 2 calls), 64 tokens a turn.
            # 8 steps: 270-345 s a step in the first campaign (its static arm, seed 0, sharing the
            # machine: 40 minutes of steps, 53 with its held-out test; BENCHMARKS.md §4); alone on 2
            # cores a static step now takes about 107 s (the model section above). A checkpoint
            # every 2 steps, so a stopped run resumes close to where it stopped.
            "steps": 8,
            "questions_per_step": 4,
            "group_size": 8,
            "mini_batches": 1,
            "micro_batch_size": 8,
            "learning_rate": 2e-5,
            "warmup_ratio": 0.0,
            "beta": 0.0,
            "max_turns": 3,
            "max_response_tokens": 64,
            "max_obs_tokens": 32,
            "max_prompt_tokens": 1024,
            "temperature": 1.0,
            "prefill": "",
            "last_turn_nudge": False,
            "save_steps": 2,
        },
        "coevolution": {
            # evolve at steps 2 and 4 (evolve_until is exclusive), so the last 4 steps train under
            # what was admitted. Admission stays beat-parent: issue 63's paired, greedy, raced
            # verification changed nothing measurable at GEPA's rollouts (-0.016 [-0.480, +0.449]
            # against this search, seeds 0-2; docs/choosing-on-evidence.md has the recipe to try it)
            "population_size": 4,
            "prune_every": 4,
            "evolve_every": 2,
            "evolve_until": 6,
            "validation_size": 16,
            "candidates_per_call": 4,
            "max_rounds": 2,
            "admission": "beat-parent",
            "min_evidence": 8,
            "prior_rollouts": 8,
            # each failure's feedback line (its calls, a refused call's error, the verdict): the
            # only presentation with which the 1.5B optimizer wrote a candidate that beat the
            # calculator seed (1 call in 20; none in 40 without it; BENCHMARKS.md "can the 1.5B
            # write the instruction?")
            "feedback": True,
        },
    },
    "cpu-tiny": {
        # Measured on 2 CPU cores (fresh clone, 2026-11-23): 1,004 s, 10.7 GiB peak RSS, in bf16
        # (weights and compute, the default then) on another machine. Precision is auto (bf16 where
        # the CPU has fast bf16): on a CPU with AVX2 alone bf16 matmuls ran 67-99x slower than
        # float32 and a bf16 step did not finish in 18 min, so auto picks float32 weights and
        # compute there (BENCHMARKS.md, "bf16 or float32 on this CPU").
        # Qwen2.5-Coder-0.5B with LoRA, 2 single-hop questions x G 4 per step, F1
        # reward, two turns of 32 tokens: one search turn (max_turns 1) and the final answer turn,
        # with the last-turn nudge before it (the shape that was measured; one search is enough
        # for single-hop questions).
        # The 0.5B policy rarely writes the Search-R1 tags on its own, so each response starts
        # with a forced "<search>" (env_mask 0, not trained on) and sampling runs at temperature
        # 0.7: rewards are non-zero from the first step and move with the instruction (query
        # wording, answer format). Exact match on multi-hop questions gave ~0.06 here.
        # At ~3 rollouts per instruction per step, weights are noise (BENCHMARKS.md §4): the
        # evidence rules are on (docs/choosing-on-evidence.md), and the returned instruction is
        # chosen on 16 dev questions against the seed, then tested on 50 test questions the choice
        # never saw.
        "output_dir": "runs/cpu-tiny",
        "final_choice": "dev",
        "offline_steps": 10,  # pre-/post-policy: one compressed evolution round (K_e' 5), as online
        "model": {"lora": True, "lora_r": 16, "lora_alpha": 32, "dtype": "auto"},
        "env": {"name": "search-r1", "corpus": "world", "reward": "f1"},
        "data": {
            "max_eval_questions": 16,
            "max_test_questions": 50,
            "warmup_questions": 4,
            "max_hops": 1,
        },
        "rl": {
            "steps": 8,
            "questions_per_step": 2,
            "group_size": 4,
            "mini_batches": 1,
            "micro_batch_size": 8,
            "learning_rate": 2e-5,
            "warmup_ratio": 0.0,
            "beta": 0.0,
            "max_turns": 1,
            "max_response_tokens": 32,
            "max_obs_tokens": 100,
            "max_prompt_tokens": 1024,
            "temperature": 0.7,
            "prefill": "<search>",
            "last_turn_nudge": True,
            "save_steps": 4,
            "bf16": "auto",
        },
        "coevolution": {
            "population_size": 3,
            "prune_every": 2,
            "evolve_every": 4,
            "evolve_until": 8,
            "validation_size": 4,
            "candidates_per_call": 3,
            "max_rounds": 2,
            "admission": "beat-parent",
            "min_evidence": 4,
            "prior_rollouts": 4,
        },
    },
}
