"""How often a small optimizer writes a usable calculator instruction, and whether the way the
failures are shown to it changes that (issues 33 and 63): the same reflection prompts, offline,
no RL.

1. The frozen policy (default the 0.5B) plays the seed ``--parent``, sampled, on ``--pool``
   training problems; its failures (reward 0, no error) are the replay buffer.
2. ``--prompts`` draws of ``--shown`` failures each (the same draws for every presentation).
3. Each presentation renders its optimizer prompt with the library's
   :class:`~inspo.core.proposer.Proposer` (N = ``--candidates``), the optimizer (default the
   1.5B) answers every prompt once (T ``--temperature``, ``--max-tokens``): one optimizer call per
   prompt. Each answer goes through the proposer's own parser and guard, then the loop's leak
   check under both of ``coevolution.leak_scope``'s scopes:

   - ``shown`` (demonstrations refused): the environment's ``leak_terms`` of the shown failures
     and of the scoring problems (as the loop checks D_B) refuse a candidate;
   - ``held-out`` (demonstrations allowed): a candidate is refused only when it names
     (``env.names_problem``) one of the ``--score`` dev problems, which play the held-out role;
     a worked example of a shown training problem is allowed.

4. The gate (``coevolution.gate``): every candidate usable under either scope plays its prompt's
   shown failures greedily beside the parent (the parent once per problem); it passes with more
   wins than losses (under ``held-out``, a shown problem that it or its parent names is left
   out of the comparison, as the loop leaves it out).
5. Every usable candidate is scored greedily by the same frozen policy on ``--score`` dev
   problems, beside the parent. ``admitted`` counts the candidates that score strictly above the
   parent there (an improvement; under ``held-out`` on the dev problems neither names); the
   loop's ``beat-parent`` admits a tie too, and the table counts ties apart (``ties``: from a
   parent that scores 0, a tie at 0 is admitted and helps nothing). ``admitted`` is counted
   among all usable candidates and among the gated ones.

Presentations (all are knobs a run already has):

- ``reflection``: App. E's reflection template, as the paper shows failures (question,
  response, correct answer);
- ``feedback``: the same with each failure's feedback line (``coevolution.feedback``: what the
  agent did with the tool, a refused call and its error, the verdict);
- ``feedback-protocol``: ``feedback`` under ``coevolution.protocol_block``: the optimizer sees
  and writes strategies, and each candidate is strategy + the environment's protocol block;
- ``paraphrase``: App. E's paraphrase template: the parent alone, no failure to copy.

Counted per presentation: prompts, candidates parsed, answers with none, each guard's refusals
(tag guard apart), leak refusals (``shown`` scope), candidates that copy a shown problem or its
"Correct answer" line, usable candidates, their scores, admitted, and the best; then per
presentation and scope: usable, gated, admitted (of all usable and of the gated), each also per
optimizer call. Per prompt the counts are paired across presentations (the same failures shown:
every presentation against the first, and ``feedback-protocol`` against ``feedback``) and across
scopes (``held-out`` against ``shown``): mean difference with a 95% interval over prompts.

Issue 63 (a), ``benchmarks/results/calculator/evidence/optimizer-yield-evidence.{json,txt}``
(parent ``calculator``, 0.400 greedy on 40 dev problems; 20 calls of the 1.5B each):

- the protocol block raises usable candidates per call from 0.50 to 2.80 (paired +2.30, 95% CI
  [+1.14, +3.46]): the tag guard refused 65 of 100 candidates without it, none with it;
- allowing demonstrations (``held-out``) adds 7 usable feedback-protocol candidates (worked
  examples, some copied failures), and doubles those scoring above the parent on dev (3 -> 6,
  0.15 -> 0.30 per call; paired +0.15 [-0.08, +0.38]); the three it adds score 0.65-0.85;
- the gate (3 shown problems, greedy) keeps 6 of 63 usable held-out candidates and only 1 of the
  6 that beat the parent on dev (0.425; the other 5, 0.65-0.85, went 1-1-1 twice, 0-1-2, and
  0-0-2 twice once their own worked problem was left out); the other 5 it keeps score below the
  parent on dev (0.15-0.375): on three problems the gate is noise here.

Usage::

    VLLM_CPU_NUM_OF_RESERVED_CPU=0 .venv-vllm/bin/python benchmarks/learning/optimizer_yield.py \\
        --engine vllm --threads 2 --json benchmarks/results/calculator/optimizer-yield-1.5b.json
    python benchmarks/learning/optimizer_yield.py --quick     # tiny random models: the machinery
    python benchmarks/learning/optimizer_yield.py \\
        --table benchmarks/results/calculator/optimizer-yield-1.5b-*.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from inspo.lab.harness import add_common, start, write_result

SCRIPT = "benchmarks/learning/optimizer_yield.py"
#: name -> (template, feedback lines shown, the environment's protocol block composed in)
PRESENTATIONS = {"reflection": ("reflection", False, False),
                 "feedback": ("reflection", True, False),
                 "paraphrase": ("paraphrase", False, False),
                 "feedback-protocol": ("reflection", True, True)}
DEFAULT_PRESENTATIONS = "reflection,feedback,paraphrase"
#: ``coevolution.leak_scope``: ``shown`` refuses demonstrations, ``held-out`` allows them.
SCOPES = ("shown", "held-out")
#: What the scope table counts of each candidate, per scope.
FATES = ("usable", "gated", "admitted", "admitted_gated")
#: The calculator preset's agent (rl.max_turns, rl.max_response_tokens, rl.max_obs_tokens).
AGENT = {"max_turns": 3, "max_response_tokens": 64, "max_obs_tokens": 32}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--policy", default="qwen2.5-coder-0.5b",
                   help="the frozen policy (plays and scores)")
    p.add_argument("--optimizer", default="qwen2.5-coder-1.5b", help="the optimizer model")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm"], help="engine of both models")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--presentations", default=DEFAULT_PRESENTATIONS,
                   help=f"comma-separated, of: {', '.join(PRESENTATIONS)}")
    p.add_argument("--parent", default="weak", help="the calculator seed the prompts revise")
    p.add_argument("--pool", type=int, default=120,
                   help="training problems the policy plays for failures")
    p.add_argument("--prompts", type=int, default=20)
    p.add_argument("--shown", type=int, default=3, help="failures shown per reflection prompt")
    p.add_argument("--candidates", type=int, default=4, help="N, candidates asked per prompt")
    p.add_argument("--answers", type=int, default=1,
                   help="answers sampled per prompt, read as one call "
                        "(coevolution.answers_per_call)")
    p.add_argument("--temperature", type=float, default=0.7, help="the optimizer's")
    p.add_argument("--max-tokens", type=int, default=700, help="the optimizer's completion limit")
    p.add_argument("--score", type=int, default=40,
                   help="dev problems each usable candidate is scored on (the held-out problems)")
    p.add_argument("--vllm-kv-cache-gib", type=float, default=2.0)
    p.add_argument("--quick", action="store_true",
                   help="tiny random models, few prompts: the machinery only")
    p.add_argument("--table", nargs="+", metavar="JSON",
                   help="print the yield table of stored results, run nothing")
    add_common(p, threads=0, json_help="where the result JSON goes")
    args = p.parse_args(argv)
    if args.quick:
        args.policy = args.optimizer = "tiny-qwen2"
        args.pool, args.prompts, args.score, args.max_tokens = 6, 2, 4, 24
    unknown = sorted(set(args.presentations.split(",")) - set(PRESENTATIONS))
    if unknown:
        p.error(f"--presentations: unknown {unknown}; choose from {', '.join(PRESENTATIONS)}")
    return args


def paired(b: Sequence[float], a: Sequence[float]) -> dict:
    """``b - a`` per prompt (:func:`inspo.eval.stats.paired_difference`: mean, se and Student's t
    95% interval), with ``low``/``high`` None where one prompt gives no interval (JSON has no
    NaN)."""
    from inspo.eval.stats import paired_difference

    out = paired_difference(b, a).to_dict()
    if out["n"] < 2:
        out.update(se=None, low=None, high=None)
    return out


def copies_shown(text: str, shown: Sequence[str]) -> bool:
    """Whether a candidate copies a shown failure: its "Correct answer:" line or a problem's
    text."""
    flat = " ".join(text.split()).lower()
    return "correct answer:" in flat or any(" ".join(q.split()).lower() in flat for q in shown)


def classify(reason: str) -> str:
    """A refusal's stage as the yield table counts it."""
    if reason.startswith("drops protocol tag"):
        return "tag_guard"
    if reason.startswith("leaks an answer"):
        return "leak_guard"
    if reason.startswith("truncated"):
        return "truncated"
    return "other_guard"


def propose_all(optimizer, prompts: list[str], *, temperature: float, max_tokens: int, seed: int,
                answers: int = 1) -> list[list[tuple[str, str]]]:
    """``answers`` (answer, finish) of the optimizer engine for every prompt, all in one batch;
    each row has its own seed (answer 0 of prompt i the same whatever ``answers``)."""
    from inspo.engines.base import GenerationInput

    inputs = []
    for i, prompt in enumerate(prompts):
        text = optimizer.prompt_text([{"role": "user", "content": prompt}])
        ids = optimizer.encode(text) or []
        inputs += [GenerationInput(prompt_ids=ids, completion_ids=[], text=text,
                                   seed=seed * 100_003 + i + 1000 * j) for j in range(answers)]
    out = optimizer.generate(inputs, max_new_tokens=max_tokens, temperature=temperature,
                             top_p=1.0, stop=[])
    rows = [(g.text, "length" if g.finish == "length" else "stop") for g in out]
    return [rows[i * answers:(i + 1) * answers] for i in range(len(prompts))]


def read_answer(outputs: Sequence[tuple[str, str]], proposer_args: dict, parent, failures,
                ids) -> object:
    """The proposer's own parse and guard of one call's stored (answer, finish) pairs, read as one
    call with ``answers_per_call`` = their number (a scripted client that hands them back)."""
    from inspo.core.proposer import Proposer
    from inspo.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(lambda messages, n: [answer for answer, _ in outputs],
                      finish_reason=[finish for _, finish in outputs])
    proposer = Proposer(llm, **proposer_args, answers=len(outputs))
    return proposer.propose(parent, failures, new_id=lambda: f"c{next(ids):04d}")


def leak_verdicts(text: str, terms: Sequence[str], parent: str, held_out, names) -> dict:
    """A guard-passing candidate's leak refusal under each scope (None: usable there): ``shown``,
    any of ``terms`` not in the parent (:func:`~inspo.core.proposer.leaked_answer`); ``held-out``
    (only when ``held_out`` is given), a held-out problem it names (``names``)."""
    from inspo.core.leak_scope import named_held_out
    from inspo.core.proposer import leaked_answer

    leaked = leaked_answer(text, terms, parent)
    out = {"shown": None if leaked is None else f"leaks an answer: {leaked!r}"}
    if held_out is not None:
        named = named_held_out(text, held_out, names)
        out["held-out"] = None if named is None else f"names held-out problem {named.id}"
    return out


def tally(answers: Sequence[Sequence[tuple[str, str]]], shown_sets: Sequence[Sequence], parent, env,
          proposer_args: dict, scoring_terms: Sequence[str], ids,
          held_out: Sequence | None = None) -> tuple[Counter, list[dict], list[tuple[int, object]]]:
    """Read every prompt's (answer, finish) pairs as a run would read one call: the proposer's
    parse and guard, then the loop's leak check. ``shown`` scope: the shown failures' and the
    scoring problems' ``leak_terms`` (``leak_guard``, ``usable``; a refused candidate's
    ``rejected`` says why); with ``held_out`` (the scoring problems) also ``held-out`` scope: a
    candidate naming one of them (``leak_held_out``, ``usable_held_out``). Returns the counts, one
    row per prompt (each guard-passing candidate's ``leak`` verdicts), and the candidates usable
    under some judged scope as (prompt index, candidate)."""
    counts: Counter = Counter()
    rows, usable = [], []
    for k, (outputs, shown) in enumerate(zip(answers, shown_sets, strict=True)):
        proposal = read_answer(outputs, proposer_args, parent, shown, ids)
        counts["prompts"] += 1
        counts["cut_off"] += sum(finish == "length" for _, finish in outputs)
        counts["no_candidate"] += bool(proposal.error)
        texts = [c.text for c in proposal.candidates + proposal.rejected]
        counts["candidates"] += len(texts)
        counts["copies_shown"] += sum(copies_shown(t, [f.question.question for f in shown])
                                      for t in texts)
        for cand in proposal.rejected:
            counts[classify(cand.rejected)] += 1
        terms = [t for f in shown for t in env.leak_terms(f.question)] + list(scoring_terms)
        leaks = {}
        for cand in proposal.candidates:
            leaks[cand.id] = leak_verdicts(cand.text, terms, parent.text, held_out,
                                           env.names_problem)
            cand.rejected = leaks[cand.id]["shown"]
            counts["leak_guard" if cand.rejected else "usable"] += 1
            if held_out is not None:
                counts["leak_held_out" if leaks[cand.id]["held-out"] else "usable_held_out"] += 1
            if None in leaks[cand.id].values():
                usable.append((k, cand))
        rows.append({"prompt": k, "answers": [a for a, _ in outputs],
                     "finishes": [f for _, f in outputs], "error": proposal.error,
                     "candidates": [{"id": c.id, "text": c.text, "refused": c.rejected,
                                     **({"leak": leaks[c.id]} if c.id in leaks else {})}
                                    for c in proposal.candidates + proposal.rejected]})
    return counts, rows, usable


def play_pairs(engine, env, config, pairs: Sequence[tuple], batch_size: int = 32) -> list:
    """The rollout of each (instruction, question) pair, in shared batches of ``batch_size``
    (:func:`~inspo.envs.evaluate.play_isolated`: an episode that raises is an error rollout)."""
    from tqdm.auto import tqdm

    from inspo.envs.evaluate import play_isolated
    from inspo.envs.loop import Episode

    episodes = [Episode(question, instruction) for instruction, question in pairs]
    out: list = []
    with tqdm(total=len(episodes), desc="gate", unit="ex") as bar:
        for begin in range(0, len(episodes), batch_size):
            batch = episodes[begin:begin + batch_size]
            out += play_isolated(engine, env, config, batch)
            bar.update(len(batch))
    return out


def gate_all(engine, env, config, parent, usable: Sequence[tuple], shown_sets: Sequence) -> dict:
    """``coevolution.gate`` for every (presentation, prompt index, candidate) of ``usable``: it
    plays its prompt's shown failures (greedy ``config``) beside the parent (the parent once per
    problem, all in one batch) and passes with more wins than losses. Per candidate id and scope:
    wins, losses, ties, passed; under ``held-out`` a shown problem the candidate or the parent
    names is left out (:func:`inspo.core.admission.paired_tally`, as the loop's gate)."""
    from inspo.core.admission import paired_tally
    from inspo.core.leak_scope import named_ids
    from inspo.core.race import Tally, admits
    from inspo.records import Instruction

    problems = {f.question.id: f.question for shown in shown_sets for f in shown}
    pairs = [(parent, q) for q in problems.values()]
    for _, k, cand in usable:
        ins = Instruction(id=cand.id, text=cand.text)
        pairs += [(ins, f.question) for f in shown_sets[k]]
    rollouts = play_pairs(engine, env, config, pairs)
    reward = {(ins.id, q.id): None if r.error else r.reward
              for (ins, q), r in zip(pairs, rollouts, strict=True)}
    out: dict = {}
    for _, k, cand in usable:
        shown = [f.question for f in shown_sets[k]]
        named = named_ids({cand.id: cand.text, parent.id: parent.text}, shown, env.names_problem)
        both = named.get(cand.id, set()) | named.get(parent.id, set())
        skips = {"shown": set(), "held-out": both}
        mine = [reward[cand.id, q.id] for q in shown]
        bar = [reward[parent.id, q.id] for q in shown]
        out[cand.id] = {}
        for scope, skip in skips.items():
            t = paired_tally(Tally(), mine, bar, shown, skip)
            out[cand.id][scope] = {"wins": t.wins, "losses": t.losses, "ties": t.ties,
                                   "skipped": sorted(skip), "passed": admits(t)}
    return out


def score_all(engine, env, config, parent, usable: Sequence[tuple], scoring: Sequence) -> dict:
    """Each instruction's (the parent's and every usable candidate's) greedy reward per scoring
    problem (None: the episode failed on an error), played in shared batches; too many errors
    stop the run (no yield is reported)."""
    from inspo.core.verifier import per_question, play_all
    from inspo.envs.evaluate import make_evaluate
    from inspo.records import Instruction

    scorer = make_evaluate(engine, env, config, progress=True)
    instructions = [parent] + [Instruction(id=c.id, text=c.text) for _, _, c in usable]
    scored = play_all(scorer, instructions, scoring)
    errors = sum(r.error is not None for rs in scored for r in rs)
    if errors > sum(map(len, scored)) // 10:
        raise SystemExit(f"{errors} scoring episodes failed on an error: no yield is reported")
    return {ins.id: per_question(rs, len(scoring))
            for ins, rs in zip(instructions, scored, strict=True)}


def mean_over(rewards: Sequence[float | None], questions: Sequence, skip: set[str]) -> float:
    """The mean of the scored ``rewards`` on the questions not in ``skip`` (0.0 when none)."""
    kept = [r for r, q in zip(rewards, questions, strict=True)
            if r is not None and q.id not in skip]
    return statistics.fmean(kept) if kept else 0.0


def fates(cand, leak: dict, gate: dict, rewards: dict, parent, scoring: Sequence,
          names) -> dict:
    """One usable candidate's fate under each scope: usable, gated, its score and its parent's
    on the dev problems (under ``held-out`` those either names are left out: ``skipped``),
    admitted (strictly above the parent there) and admitted among the gated."""
    from inspo.core.leak_scope import named_ids

    named = named_ids({cand.id: cand.text, parent.id: parent.text}, scoring, names)
    both = named.get(cand.id, set()) | named.get(parent.id, set())
    out = {}
    for scope in SCOPES:
        skip = set() if scope == "shown" else both
        score = mean_over(rewards[cand.id], scoring, skip)
        bar = mean_over(rewards[parent.id], scoring, skip)
        usable = leak.get(scope, "not judged") is None
        admitted = usable and score > bar
        out[scope] = {"usable": usable, "gated": usable and gate[scope]["passed"],
                      "admitted": admitted, "admitted_gated": admitted and gate[scope]["passed"],
                      "score": score, "parent_score": bar, "skipped": sorted(skip),
                      "gate": gate[scope]}
    return out


def judge(result: dict, per_prompt: dict, usable: Sequence[tuple], gates: dict, rewards: dict,
          parent, scoring: Sequence, names) -> None:
    """Fill each presentation's ``shown``-scope admitted count, scores and best (as before issue
    63), and per scope the fates: ``stats["scopes"]``, each row's ``scopes`` and each usable
    candidate's ``fate``."""
    score = {iid: mean_over(r, scoring, set()) for iid, r in rewards.items()}
    result["parent_score"] = score[parent.id]
    for name, rows in per_prompt.items():
        stats = result["presentations"][name]
        mine = [(k, c) for n, k, c in usable if n == name]
        leak_of = {c["id"]: c.get("leak", {}) for row in rows for c in row["candidates"]}
        fate = {c.id: fates(c, leak_of[c.id], gates[c.id], rewards, parent, scoring, names)
                for _, c in mine}
        shown = [(k, c) for k, c in mine if fate[c.id]["shown"]["usable"]]
        admitted = [(k, c) for k, c in shown if score[c.id] > score[parent.id]]
        stats["counts"]["admitted"] = len(admitted)
        stats["scores"] = sorted((score[c.id] for _, c in shown), reverse=True)
        stats["best"] = max(((score[c.id], c.text) for _, c in shown), default=None)
        for row in rows:
            here = [c for k, c in mine if k == row["prompt"]]
            row["usable"] = sum(1 for k, _ in shown if k == row["prompt"])
            row["admitted"] = sum(1 for k, _ in admitted if k == row["prompt"])
            row["scopes"] = {s: {f: sum(fate[c.id][s][f] for c in here) for f in FATES}
                             for s in SCOPES}
            for cand in row["candidates"]:
                if cand["id"] in fate:
                    cand["fate"] = fate[cand["id"]]
                    if fate[cand["id"]]["shown"]["usable"]:
                        cand["score"] = score[cand["id"]]
        stats["scopes"] = {s: {"calls": len(rows), "candidates": stats["counts"]["candidates"],
                               "leak": sum(1 for c in leak_of.values() if c.get(s)),
                               **{f: sum(row["scopes"][s][f] for row in rows) for f in FATES}}
                           for s in SCOPES}


def pair_shown(per_prompt: dict) -> dict:
    """Usable and admitted (``shown`` scope) per prompt, every presentation against the first."""
    names = list(per_prompt)
    out = {}
    for other in names[1:]:
        for what in ("usable", "admitted"):
            out[f"{other} - {names[0]}: {what} per prompt"] = paired(
                [row[what] for row in per_prompt[other]],
                [row[what] for row in per_prompt[names[0]]])
    return out


def pair_up(per_prompt: dict) -> dict:
    """Per-call (per-prompt) paired differences of the scope counts: per scope, every
    presentation against the first and ``feedback-protocol`` against ``feedback`` (protocol block
    on minus off); and ``held-out`` against ``shown`` (demonstrations allowed minus refused)
    within each presentation."""
    names = list(per_prompt)
    pairs = [(other, names[0]) for other in names[1:]]
    if {"feedback", "feedback-protocol"} <= set(names) and names[0] != "feedback":
        pairs.append(("feedback-protocol", "feedback"))

    def col(name: str, scope: str, what: str) -> list[int]:
        return [row["scopes"][scope][what] for row in per_prompt[name]]

    out = {}
    for b, a in pairs:
        for scope in SCOPES:
            for what in FATES:
                out[f"{b} - {a} [{scope}]: {what} per call"] = paired(col(b, scope, what),
                                                                     col(a, scope, what))
    for name in names:
        for what in FATES:
            out[f"{name}: held-out - shown: {what} per call"] = paired(
                col(name, "held-out", what), col(name, "shown", what))
    return out


def play_pool(args: argparse.Namespace, env, policy, parent) -> tuple[list, list]:
    """The parent's sampled episodes on ``--pool`` training problems and their failures."""
    from inspo.envs.evaluate import make_evaluate
    from inspo.envs.loop import AgentConfig

    pool = env.questions("train")[: args.pool]
    play = make_evaluate(policy, env, AgentConfig(**AGENT, temperature=1.0),
                         paired_seed=("optimizer-yield", args.seed), progress=True)
    played = play(parent, pool)
    errors = sum(r.error is not None for r in played)
    failures = [r for r in played if r.error is None and r.reward <= 0.0]
    if errors > len(played) // 2:
        raise SystemExit(f"{errors} of {len(played)} pool episodes failed on an error: "
                         "nothing to show the optimizer")
    if len(failures) < args.shown:
        raise SystemExit(f"only {len(failures)} failures in {len(played)} episodes: raise --pool")
    return played, failures


def run_presentations(args: argparse.Namespace, env, optimizer, parent, shown_sets: list,
                      scoring: Sequence, result: dict) -> tuple[list, dict]:
    """Each presentation's prompts, the optimizer's answers and their tally (both scopes); the
    candidates usable under either scope as (presentation, prompt index, candidate), and each
    presentation's rows."""
    import itertools

    from inspo.core.proposer import Proposer

    ids = itertools.count(1)
    scoring_terms = [t for q in scoring for t in env.leak_terms(q)]
    per_prompt: dict[str, list[dict]] = {}
    usable: list[tuple[str, int, object]] = []
    for name in args.presentations.split(","):
        template, with_feedback, with_protocol = PRESENTATIONS[name]
        proposer_args = {"template": template, "n_candidates": args.candidates,
                         "max_tokens": args.max_tokens, "temperature": args.temperature,
                         "guard_tags": env.required_tags,
                         "feedback": env.feedback if with_feedback else None,
                         "protocol": env.protocol if with_protocol else None}
        renderer = Proposer(None, **proposer_args)
        prompts = [renderer.render(parent, shown, ()) for shown in shown_sets]
        t1 = time.perf_counter()
        answers = propose_all(optimizer, prompts, temperature=args.temperature,
                              max_tokens=args.max_tokens, seed=args.seed, answers=args.answers)
        result["timing"][f"{name}_optimizer_s"] = time.perf_counter() - t1
        counts, rows, mine = tally(answers, shown_sets, parent, env, proposer_args, scoring_terms,
                                   ids, held_out=scoring)
        usable += [(name, k, c) for k, c in mine]
        result["presentations"][name] = {"counts": dict(counts), "example_prompt": prompts[0],
                                         "rows": rows}
        per_prompt[name] = rows
    return usable, per_prompt


def main(argv: Sequence[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.table:
        stored = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.table]
        print(markdown(stored))
        return {"results": stored}
    from inspo.engines.load import load_engine
    from inspo.envs.calculator import load_environment
    from inspo.envs.loop import AgentConfig
    from inspo.models.precision import default_device, resolve_precision
    from inspo.records import Instruction

    device = default_device()
    precision = resolve_precision(args.dtype, device=device, dtype_key="--dtype")
    info = start(SCRIPT, argv, threads=args.threads, device=device, dtype=precision.dtype)
    env = load_environment(test_size=300)  # the calculator preset's problems (dev split scores)
    scoring = env.questions("dev")[: args.score]
    parent = Instruction(id=args.parent, text=env.instructions[args.parent])
    vllm = None
    if args.engine == "vllm":
        from inspo.engines.vllm_engine import VLLMOptions

        vllm = VLLMOptions(kv_cache_gib=args.vllm_kv_cache_gib, enforce_eager=device == "cpu",
                           max_model_len=4096)
    t0 = time.perf_counter()
    load = {"kind": args.engine, "dtype": precision.dtype, "device": device, "vllm": vllm}
    policy = load_engine(args.policy, **load)
    played, failures = play_pool(args, env, policy, parent)
    rng = random.Random(args.seed)
    draws = [rng.sample(range(len(failures)), args.shown) for _ in range(args.prompts)]
    shown_sets = [[failures[i] for i in draw] for draw in draws]
    settings = ("prompts", "shown", "candidates", "answers", "temperature", "max_tokens", "score",
                "seed")
    result: dict = {
        "provenance": info, "precision": precision.describe(), "engine": args.engine,
        "policy": args.policy, "optimizer": args.optimizer, "parent_name": args.parent,
        "parent": parent.text,
        "pool": {"episodes": len(played), "errors": sum(r.error is not None for r in played),
                 "failures": len(failures),
                 "reward": statistics.fmean(r.reward for r in played if r.error is None)},
        "settings": {k: getattr(args, k) for k in settings},
        "presentations": {}, "timing": {"pool_s": time.perf_counter() - t0}}
    optimizer = load_engine(args.optimizer, **load)
    usable, per_prompt = run_presentations(args, env, optimizer, parent, shown_sets, scoring,
                                           result)
    greedy = AgentConfig(**AGENT, temperature=0.0)
    t2 = time.perf_counter()
    gates = gate_all(policy, env, greedy, parent, usable, shown_sets)
    t3 = time.perf_counter()
    rewards = score_all(policy, env, greedy, parent, usable, scoring)
    result["timing"].update(gate_s=t3 - t2, scoring_s=time.perf_counter() - t3)
    # scoring episodes that failed on an error, left out of every score
    result["score_errors"] = sum(r is None for rs in rewards.values() for r in rs)
    judge(result, per_prompt, usable, gates, rewards, parent, scoring, env.names_problem)
    result["paired"] = pair_shown(per_prompt)
    result["paired_scopes"] = pair_up(per_prompt)
    for engine in (policy, optimizer):
        if hasattr(engine, "shutdown"):
            engine.shutdown()
    print_result(result)
    write_result(args.json, result)
    return result


COLUMNS = ("prompts", "candidates", "no_candidate", "cut_off", "tag_guard", "other_guard",
           "truncated", "leak_guard", "copies_shown", "usable", "ties", "admitted")
#: The scope table's columns: each a count and, in parentheses, per optimizer call.
SCOPE_COLUMNS = ("candidates", "leak", "usable", "gated", "admitted", "admitted_gated")
SCOPE_LABELS = {"shown": "shown (demonstrations refused)",
                "held-out": "held-out (demonstrations allowed)"}


def ties(result: dict, stats: dict) -> int:
    """Usable candidates that scored exactly their parent's score (the loop's beat-parent admits
    them)."""
    return sum(1 for row in stats["rows"] for c in row["candidates"]
               if c.get("score") is not None and c["score"] == result["parent_score"])


def markdown(results: Sequence[dict]) -> str:
    """One table row per (parent, presentation) of ``results``, then the paired per-prompt
    differences; then, for results that judged both leak scopes, one row per (parent,
    presentation, scope) and their paired differences."""
    lines = ["| parent (score) | presentation | " + " | ".join(COLUMNS)
             + " | prompts admitting | best |", "|---" * (len(COLUMNS) + 4) + "|"]
    paired = []
    for result in results:
        parent = (f"{result.get('parent_name') or repr(result['parent'][:40])} "
                  f"({result['parent_score']:.3f})")
        for name, stats in result["presentations"].items():
            best = stats["best"]
            shown = f"{best[0]:.3f}: {' '.join(best[1].split())[:50]!r}" if best else "-"
            hits = sum(1 for row in stats["rows"] if row.get("admitted"))
            counts = {**stats["counts"], "ties": ties(result, stats)}
            lines.append(f"| {parent} | {name} | "
                         + " | ".join(str(counts.get(c, 0)) for c in COLUMNS)
                         + f" | {hits} | {shown} |")
        paired += [interval(parent, key, iv) for key, iv in result["paired"].items()]
    scoped = scope_table(results)
    return "\n".join(lines + [""] + paired + ([""] + scoped if scoped else []))


def interval(parent: str, key: str, iv: dict) -> str:
    low = "-" if iv["low"] is None else f"[{iv['low']:+.2f}, {iv['high']:+.2f}]"
    return f"{parent} {key}: {iv['mean']:+.2f} {low} over {iv['n']} prompts"


def scope_table(results: Sequence[dict]) -> list[str]:
    """The scope table's lines (none when no result judged both scopes): count (per call)."""
    lines = ["| parent | presentation | leak scope | calls | " + " | ".join(SCOPE_COLUMNS) + " |",
             "|---" * (len(SCOPE_COLUMNS) + 4) + "|"]
    paired = []
    for result in results:
        parent = result.get("parent_name") or repr(result["parent"][:40])
        for name, stats in result["presentations"].items():
            for scope, row in stats.get("scopes", {}).items():
                cells = [f"{row[c]} ({row[c] / max(row['calls'], 1):.2f})" for c in SCOPE_COLUMNS]
                lines.append(f"| {parent} | {name} | {SCOPE_LABELS[scope]} | {row['calls']} | "
                             + " | ".join(cells) + " |")
        paired += [interval(parent, key, iv) for key, iv in result.get("paired_scopes", {}).items()]
    return lines + [""] + paired if len(lines) > 2 else []


def print_result(result: dict) -> None:
    print(markdown([result]))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
