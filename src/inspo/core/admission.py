"""Line 21's verdicts: which verified candidates join the population (``coevolution.admission``).

- ``top-n`` (Algorithm 1): every candidate scored on all of D_B; the ``n`` best are admitted.
- ``beat-parent``: the parent is scored beside them on the same questions and sampling seeds; only
  candidates scoring at least the parent's mean are eligible for the top ``n``.
- ``gate`` (before any of them, ``coevolution.gate``): a candidate must first win more of the
  failure problems it was written from than it loses against its parent (:func:`gate`).
- ``paired``: the parent plays D_B once an evolution (the core keeps its results); each candidate
  races it question by question in chunks and stops once it is clearly behind
  (:mod:`inspo.core.race`); only candidates that end with more wins than losses are eligible,
  ranked by paired difference.

Each function returns the chosen candidates (best first) and, for every other candidate that was
not chosen, ``(stage, reason)`` for its ``rejected`` event; it emits the ``verified`` and
``parent_verified`` events itself, through ``emit`` (the core's, which feeds the cost ledger).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from inspo.core.events import Event, Gated, ParentVerified, Verified
from inspo.core.race import RaceRule, Tally, admits, checkpoints, stops
from inspo.core.verifier import (
    Allowance,
    EvaluateFn,
    Verification,
    Verifier,
    failure_reason,
    per_question,
    top_n,
)
from inspo.records import Candidate, Instruction, Question, Rollout, error_summary, scored

Refused = dict[str, tuple[str, str]]
"""candidate id -> (stage, reason) of a candidate verification did not admit."""
Emit = Callable[[Event], None]


def probe_of(parent: Instruction) -> Candidate:
    """The parent as a candidate, to be scored beside its children."""
    return Candidate(id=parent.id, text=parent.text, parent_id=parent.id, origin=parent.origin)


def parent_verified(step: int, result: Verification, n_questions: int, emit: Emit) -> float | None:
    """The parent's mean reward on D_B (emitted as ``parent_verified``), or None when it could not
    be scored (its evaluation raised or every rollout failed)."""
    probe = result.candidate
    if probe.score is None:
        return None
    emit(
        ParentVerified(
            step,
            parent_id=probe.id,
            score=probe.score,
            n_questions=n_questions,
            n_rollouts=len(result.rollouts),
        )
    )
    return probe.score


def score_and_rank(
    step: int,
    parent: Instruction | None,
    candidates: list[Candidate],
    questions: list[Question],
    evaluate: EvaluateFn | None,
    n: int,
    emit: Emit,
    allowance: Allowance | None = None,
) -> tuple[list[Candidate], Refused]:
    """``top-n``, or ``beat-parent`` when ``parent`` is given: every candidate scored on all of
    D_B (the parent in the same batch). No evaluator or no D_B: the first ``n``, unverified (the
    paper's no-verify ablation). A parent that cannot be scored falls back to plain top-n.
    ``allowance``: the candidates it cannot pay for (the last proposed first) are refused
    unplayed."""
    bar: float | None = None
    refused: Refused = {}
    if evaluate is None or not questions:
        chosen = candidates[:n]
    else:
        probe = probe_of(parent) if parent is not None else None
        verifier = Verifier(evaluate, allowance)
        candidates, refused = _affordable(
            verifier.allowance, candidates, len(questions), probe is not None
        )
        if not candidates:
            return [], refused
        results = verifier.score(([probe] if probe else []) + candidates, questions, step)
        if probe is not None:
            bar = parent_verified(step, results.pop(0), len(questions), emit)
        for v in results:
            if v.candidate.rejected:  # the evaluation raised or returned nothing: no rollouts
                refused[v.candidate.id] = ("verify", v.candidate.rejected)
            else:
                emit(
                    Verified(
                        step,
                        candidate_id=v.candidate.id,
                        score=v.candidate.score,
                        n_questions=len(questions),
                        n_rollouts=len(v.rollouts),
                    )
                )
        eligible = candidates
        if bar is not None:
            eligible = [c for c in candidates if c.score is not None and c.score >= bar]
        chosen = top_n(eligible, n)
    chosen_ids = {c.id for c in chosen}
    for cand in candidates:
        if cand.id in chosen_ids or cand.id in refused:
            continue
        if bar is not None and cand.score is not None and cand.score < bar:
            refused[cand.id] = (
                "parent",
                f"scored {cand.score:.3f} on D_B, below its parent's {bar:.3f} "
                "on the same questions",
            )
        else:
            refused[cand.id] = ("top_n", f"not in the top {n} on D_B (score {cand.score})")
    return chosen, refused


def gate(
    step: int,
    parent: Instruction | None,
    candidates: list[Candidate],
    failures: list[Question],
    evaluate: EvaluateFn,
    emit: Emit,
    skip: Skip | None = None,
    allowance: Allowance | None = None,
) -> tuple[list[Candidate], Refused]:
    """``coevolution.gate``: GEPA's cheap first check. The parent and the candidates play the
    failure problems the optimizer call was shown, in one batch (greedily under ``verify_greedy``:
    the step's sampled outcomes there are biased, those problems were picked because they failed);
    a candidate goes on to D_B only when it wins more of them than it loses against the parent.
    A parent that cannot be played (or no failure) lets every candidate through unjudged. ``skip``:
    the question ids each instruction names (:mod:`inspo.core.leak_scope`), left out of its
    comparison, and those its parent names. ``allowance``: as in :func:`score_and_rank`."""
    if parent is None or not failures:
        return list(candidates), {}
    verifier = Verifier(evaluate, allowance)
    candidates, refused = _affordable(verifier.allowance, candidates, len(failures), True)
    if not candidates:
        return [], refused
    played = verifier.play([probe_of(parent), *candidates], failures, step)
    bar = [] if isinstance(played[0], Exception) else per_question(played[0], len(failures))
    if all(r is None for r in bar):
        return list(candidates), refused
    emit(
        Gated(
            step,
            candidate_id=parent.id,
            parent=True,
            n_questions=len(failures),
            n_rollouts=len(played[0]),
            passed=True,
        )
    )
    passed: list[Candidate] = []
    for cand, result in zip(candidates, played[1:], strict=True):
        if isinstance(result, Exception):
            refused[cand.id] = ("verify", failure_reason(result))
            continue
        tally = paired_tally(
            Tally(),
            per_question(result, len(failures)),
            bar,
            failures,
            _skipped(skip, cand.id, parent.id),
        )
        emit(
            Gated(
                step,
                candidate_id=cand.id,
                wins=tally.wins,
                losses=tally.losses,
                n_questions=tally.played,
                n_rollouts=len(result),
                passed=admits(tally),
            )
        )
        if admits(tally):
            passed.append(cand)
        else:
            refused[cand.id] = (
                "gate",
                f"fixed {tally.wins} and broke {tally.losses} of the {tally.played} failure "
                f"problem(s) it was written from, against its parent {parent.id}",
            )
    return passed, refused


def race(
    step: int,
    parent: Instruction | None,
    candidates: list[Candidate],
    questions: list[Question],
    evaluate: EvaluateFn,
    n: int,
    rule: RaceRule,
    emit: Emit,
    skip: Skip | None = None,
    bar: dict[str, float | None] | None = None,
    allowance: Allowance | None = None,
) -> tuple[list[Candidate], Refused]:
    """``paired``: the parent plays D_B once; each candidate then plays it chunk by chunk (every
    live candidate in one batch) and is compared with the parent question by question; it stops
    once :func:`~inspo.core.race.stops` says so. Those that end with more wins than losses are
    ranked by paired difference (ties: earlier proposal) and the top ``n`` admitted. A question
    on which either side's rollouts all failed on an error is not counted, nor one that the
    candidate or its parent names (``skip``, as in :func:`gate`). ``bar``: the parent's
    per-question scores already played with the same policy (question id -> score), which it
    does not play again; the questions it plays here are added to it. ``allowance``: before each
    chunk, the live candidates it cannot pay for (the last proposed first) stop there, refused
    (stage ``budget``) with a ``verified`` event for what they played."""
    if parent is None or not questions:
        why = (
            "no D_B question to race on"
            if parent is not None
            else "its parent is not in the archive"
        )
        return [], {c.id: ("verify", f"not verified: {why}") for c in candidates}
    verifier = Verifier(evaluate, allowance)
    scores, why = _parent_on_db(step, verifier, parent, questions, bar, emit)
    if why is not None:
        return [], {c.id: why for c in candidates}
    skipped = {c.id: _skipped(skip, c.id, parent.id) for c in candidates}
    tallies, played, refused, stopped, cut = _play_race(
        step, verifier, candidates, questions, scores, rule, skipped
    )
    for cand in candidates:
        if cand.id not in refused and played[cand.id]:
            _record(
                step,
                cand,
                played[cand.id],
                tallies[cand.id],
                cand.id in stopped or cand.id in cut,
                refused,
                emit,
            )
    chosen = _ranked(candidates, tallies, set(refused) | stopped | set(cut), n)
    chosen_ids = {c.id for c in chosen}
    for cand in candidates:
        if cand.id in cut and cand.id not in refused:
            refused[cand.id] = verifier.allowance.refusal(cut[cand.id], len(questions))
        elif cand.id not in refused and cand.id not in chosen_ids:
            refused[cand.id] = _why_not(
                tallies[cand.id], cand.id in stopped, parent.id, len(questions), n
            )
    return chosen, refused


def _parent_on_db(
    step: int,
    verifier: Verifier,
    parent: Instruction,
    questions: list[Question],
    bar: dict[str, float | None] | None,
    emit: Emit,
) -> tuple[list[float | None], tuple[str, str] | None]:
    """The parent's score on each D_B question (those in ``bar`` kept, the rest played now and
    added to it) and its ``parent_verified`` event; or the refusal every candidate gets when the
    parent cannot be played (the allowance cannot pay for it, or every rollout raised)."""
    known = bar if bar is not None else {}
    missing = [q for q in questions if q.id not in known]
    rollouts = 0
    if missing and not verifier.allowance.afford(1, len(missing)):
        return [], verifier.allowance.refusal(0, len(questions))
    if missing:
        [played_parent] = verifier.score([probe_of(parent)], missing, step)
        if played_parent.candidate.rejected:
            why = (
                f"its parent {parent.id} could not be played on D_B: "
                f"{played_parent.candidate.rejected}"
            )
            return [], ("verify", why)
        rollouts = len(played_parent.rollouts)
        known.update(
            zip(
                (q.id for q in missing),
                per_question(played_parent.rollouts, len(missing)),
                strict=True,
            )
        )
    scores = [known[q.id] for q in questions]
    ok = [x for x in scores if x is not None]
    if not ok:
        return [], (
            "verify",
            f"its parent {parent.id} could not be played on D_B: every rollout raised",
        )
    # one per round: D_B's size and the parent's mean there; n_rollouts 0 when its results were kept
    emit(
        ParentVerified(
            step,
            parent_id=parent.id,
            score=sum(ok) / len(ok),
            n_questions=len(questions),
            n_rollouts=rollouts,
        )
    )
    return scores, None


def _ranked(
    candidates: list[Candidate], tallies: dict[str, Tally], out: set[str], n: int
) -> list[Candidate]:
    """The top ``n`` of the candidates not in ``out`` that end with more wins than losses, by
    paired difference (ties: earlier proposal)."""
    eligible = [c for c in candidates if c.id not in out and admits(tallies[c.id])]
    order = sorted(range(len(eligible)), key=lambda i: (-tallies[eligible[i].id].difference, i))
    return [eligible[i] for i in order[:n]]


Skip = Mapping[str, set[str]]
"""instruction id -> ids of the questions it names (left out of the comparisons that judge it)."""


def _affordable(
    allowance: Allowance, candidates: list[Candidate], n_questions: int, with_parent: bool
) -> tuple[list[Candidate], Refused]:
    """The candidates ``allowance`` can pay to play ``n_questions`` (beside their parent, which
    comes first, when ``with_parent``), in proposal order, and a ``budget`` refusal for the rest."""
    k = max(0, allowance.afford(len(candidates) + with_parent, n_questions) - with_parent)
    return candidates[:k], {c.id: allowance.refusal(0, n_questions) for c in candidates[k:]}


def _skipped(skip: Skip | None, *ids: str) -> set[str]:
    return set().union(*(skip.get(i, set()) for i in ids)) if skip else set()


def paired_tally(
    tally: Tally,
    mine: list[float | None],
    theirs: list[float | None],
    questions: Sequence[Question],
    skip: set[str],
) -> Tally:
    """``tally`` with the paired outcomes of ``questions`` added, except where either side has no
    score (every rollout an error) or the question is in ``skip``."""
    pairs = [
        (c, p)
        for c, p, q in zip(mine, theirs, questions, strict=True)
        if c is not None and p is not None and q.id not in skip
    ]
    return tally.add([c for c, _ in pairs], [p for _, p in pairs])


def _play_race(
    step: int,
    verifier: Verifier,
    candidates: list[Candidate],
    questions: list[Question],
    bar: list[float | None],
    rule: RaceRule,
    skipped: dict[str, set[str]],
) -> tuple[dict[str, Tally], dict[str, list[Rollout]], Refused, set[str], dict[str, int]]:
    """The race itself: each candidate's tally and rollouts, those whose evaluation raised, those
    the rule stopped, and those the verifier's allowance could not pay for (id -> questions
    done)."""
    tallies = {c.id: Tally() for c in candidates}
    played: dict[str, list[Rollout]] = {c.id: [] for c in candidates}
    refused: Refused = {}
    stopped: set[str] = set()
    cut: dict[str, int] = {}
    alive, done = list(candidates), 0
    for end in checkpoints(len(questions), rule.chunk):
        k = verifier.allowance.afford(len(alive), end - done)
        cut |= {c.id: done for c in alive[k:]}
        alive = alive[:k]
        if not alive:
            break
        for cand, result in zip(
            alive, verifier.play(alive, questions[done:end], step), strict=True
        ):
            if isinstance(result, Exception):
                refused[cand.id] = ("verify", failure_reason(result))
                continue
            tallies[cand.id] = paired_tally(
                tallies[cand.id],
                per_question(result, end - done),
                bar[done:end],
                questions[done:end],
                skipped[cand.id],
            )
            played[cand.id] += result
        done = end
        stopped |= {
            c.id
            for c in alive
            if c.id not in refused and stops(tallies[c.id], len(questions) - done, rule)
        }
        alive = [c for c in alive if c.id not in refused and c.id not in stopped]
        if not alive:
            break
    return tallies, played, refused, stopped, cut


def _record(
    step: int,
    cand: Candidate,
    rollouts: list[Rollout],
    tally: Tally,
    stopped: bool,
    refused: Refused,
    emit: Emit,
) -> None:
    """A raced candidate's score (its mean over the rollouts it played) and ``verified`` event;
    one whose every rollout failed on an error goes to ``refused`` instead."""
    ok = scored(rollouts)
    if not ok:
        detail = f" ({error_summary(rollouts)})" if rollouts else ""
        refused[cand.id] = ("verify", f"verification failed: every rollout raised{detail}")
        return
    cand.score = sum(r.reward for r in ok) / len(ok)
    emit(
        Verified(
            step,
            candidate_id=cand.id,
            score=cand.score,
            n_questions=tally.played,
            n_rollouts=len(rollouts),
            wins=tally.wins,
            losses=tally.losses,
            stopped=stopped,
        )
    )


def _why_not(
    tally: Tally, stopped: bool, parent_id: str, n_questions: int, n: int
) -> tuple[str, str]:
    """(stage, reason) of a raced candidate that was not admitted."""
    record = (
        f"{tally.wins} wins, {tally.losses} losses, {tally.ties} ties against its parent "
        f"{parent_id}"
    )
    if stopped:
        return "race", f"stopped after {tally.played} of {n_questions} D_B questions: {record}"
    if not admits(tally):
        return "parent", f"no more wins than losses on {tally.played} D_B questions: {record}"
    return "top_n", f"not in the top {n} by paired difference ({tally.difference:+.3f}; {record})"


__all__ = [
    "Refused",
    "Skip",
    "gate",
    "paired_tally",
    "parent_verified",
    "probe_of",
    "race",
    "score_and_rank",
]
