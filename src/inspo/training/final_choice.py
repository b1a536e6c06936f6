"""The end of a run: which instruction inspo returns, and how it does on questions the choice
never saw.

Algorithm 1 returns I* = argmax_j w_j (``final_choice: weight``). At small batch sizes a weight
rests on a handful of rollouts, so ``final_choice: dev`` chooses instead by a paired evaluation
on the dev questions: every member of the final population and the seed, scored by the trained
policy on the same questions (greedy decoding, so the comparison is paired); the highest mean
wins, and the seed wins ties, so an evolved instruction is returned only when it beats the seed.

``final_choice: admitted`` scores every instruction the run ever admitted, pruned or not, the
same way: a prune decided on a handful of rollouts can drop the best instruction of the run (the
calculator's arm 5 lost its best admission, +0.197 over its parent on the test, after 2 question
groups), and the dev choice over all of them is paired where the weights were not.

Whatever the rule, the returned instruction and the seed are then scored on test questions the
choice never saw, with the paired per-question difference and its 95% interval: that, not the dev
score the choice was made on, says whether the returned instruction is better than the seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.config.train import DEV_CHOICES, FINAL_CHOICES
from inspo.core.verifier import play_all
from inspo.eval.stats import PairedDifference, paired_difference
from inspo.records import EvaluateFn, Instruction, Question


@dataclass
class FinalChoice:
    """What :func:`choose_instruction` decided and measured (``summary.json``'s
    ``final_choice``)."""

    rule: str
    metric: str
    returned_id: str
    returned_text: str
    seed_id: str
    by_weight_id: str
    dev_split: str = ""
    dev_questions: int = 0
    dev_scores: dict[str, float] = field(default_factory=dict)
    test_split: str = ""
    test_questions: int = 0
    test_returned: float | None = None
    test_seed: float | None = None
    test_vs_seed: PairedDifference | None = None
    test_question_ids: list[str] = field(default_factory=list)
    test_rewards: dict[str, list[float]] = field(default_factory=dict)
    """Per-question test rewards, ``{"returned": [...], "seed": [...]}`` in the order of
    ``test_question_ids``: what pairs this run's test scores with another run's on the same
    questions."""
    note: str = ""

    @property
    def seed_returned(self) -> bool:
        return self.returned_id == self.seed_id

    @property
    def dev_rollouts(self) -> int:
        """The rollouts the choice itself played (every pool member on every dev question)."""
        return self.dev_questions * len(self.dev_scores)

    def lines(self) -> list[str]:
        how = {
            "weight": "I* = argmax of the importance weights (Algorithm 1)",
            "dev": f"best {self.metric} on {self.dev_questions} {self.dev_split} questions among "
            "the final population and the seed (ties: the seed)",
            "admitted": f"best {self.metric} on {self.dev_questions} {self.dev_split} questions "
            "among every instruction admitted in the run and the seed (ties: the seed)",
        }[self.rule]
        out = [f"choice of I*:         {how}"]
        if self.dev_scores:
            ranked = sorted(self.dev_scores.items(), key=lambda kv: -kv[1])
            out.append(
                f"  {self.dev_split} {self.metric}:          "
                + ", ".join(
                    f"{i}{' (seed)' if i == self.seed_id else ''} {s:.3f}" for i, s in ranked
                )
            )
        if self.seed_returned and self.by_weight_id != self.seed_id:
            out.append(
                f"  returned:           the seed ({self.seed_id}): no evolved instruction beat it "
                f"(the weights' choice was {self.by_weight_id})"
            )
        else:
            out.append(
                f"  returned:           {self.returned_id}"
                + (" (the seed)" if self.seed_returned else "")
            )
        if self.test_vs_seed is not None:
            out.append(
                f"  held-out test:      {self.metric} on {self.test_questions} {self.test_split} "
                f"questions the choice never saw: returned {self.test_returned:.3f}, seed "
                f"{self.test_seed:.3f}, difference {self.test_vs_seed.text()}"
            )
        if self.note:
            out.append(f"  note:               {self.note}")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "metric": self.metric,
            "returned_id": self.returned_id,
            "returned_text": self.returned_text,
            "seed_id": self.seed_id,
            "by_weight_id": self.by_weight_id,
            "seed_returned": self.seed_returned,
            "dev_split": self.dev_split,
            "dev_questions": self.dev_questions,
            "dev_scores": dict(self.dev_scores),
            "test_split": self.test_split,
            "test_questions": self.test_questions,
            "test_returned": self.test_returned,
            "test_seed": self.test_seed,
            "test_vs_seed": self.test_vs_seed.to_dict() if self.test_vs_seed else None,
            "test_question_ids": list(self.test_question_ids),
            "test_rewards": {k: list(v) for k, v in self.test_rewards.items()},
            "note": self.note,
        }


def final_choice_lines(data: dict[str, Any]) -> list[str]:
    """The printed lines of a :meth:`FinalChoice.to_dict` read back (e.g. from summary.json)."""
    if "rule" not in data:  # written before the final choice existed
        return [
            f"evaluation:           {data.get('metric')} on {data.get('questions')} "
            f"{data.get('split')} questions: seed {data.get('seed', 0):.3f}, best "
            f"{data.get('best', 0):.3f}"
        ]
    fields_ = {k: v for k, v in data.items() if k not in ("seed_returned", "test_vs_seed")}
    choice = FinalChoice(**fields_)
    if data.get("test_vs_seed"):
        choice.test_vs_seed = PairedDifference(**data["test_vs_seed"])
    return choice.lines()


def _rewards(
    evaluate: EvaluateFn, instructions: Sequence[Instruction], questions: Sequence[Question]
) -> tuple[list[list[float]], list[Question]]:
    """Each instruction's per-question rewards, in shared batches when ``evaluate`` has ``many``,
    and the questions they are for: a question on which any instruction's rollout failed on an
    error (an outage, never scored) is left out for all of them, so the scores stay paired."""
    groups = play_all(evaluate, instructions, questions)
    for rollouts in groups:
        if len(rollouts) != len(questions):
            raise ValueError(
                f"evaluate returned {len(rollouts)} rollouts for {len(questions)} questions; "
                "the final choice needs one rollout per question (group_size=1)"
            )
    keep = [i for i in range(len(questions)) if all(g[i].error is None for g in groups)]
    return [[g[i].reward for i in keep] for g in groups], [questions[i] for i in keep]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def choose_instruction(
    evaluate: EvaluateFn,
    *,
    rule: str,
    population: Sequence[Instruction],
    seed: Instruction,
    admitted: Sequence[Instruction] = (),
    by_weight: Instruction,
    dev_questions: Sequence[Question],
    test_questions: Sequence[Question] = (),
    metric: str = "em",
    dev_split: str = "dev",
    test_split: str = "test",
    tell: Callable[[str], None] | None = None,
) -> FinalChoice:
    """Choose the returned instruction by ``rule`` (module docstring), then score it and the seed
    on ``test_questions``. ``admitted``: every instruction the run admitted (the pool of ``rule``
    admitted, beside the final ``population``). ``evaluate`` must give one rollout per question, in
    order. ``tell`` receives a line before each phase that plays the policy (the choice on dev, the
    test) and one with each phase's result."""
    tell = tell or (lambda line: None)
    if rule not in FINAL_CHOICES:
        raise ValueError(
            f"final choice rule must be one of {', '.join(FINAL_CHOICES)}; got {rule!r}"
        )
    note = ""
    if rule in DEV_CHOICES and not dev_questions:
        rule, note = (
            "weight",
            "no dev questions (data.eval is empty): fell back to the importance weights",
        )
    if rule in DEV_CHOICES:
        members = [*population, *admitted] if rule == "admitted" else population
        pool = [seed] + [i for i in dict((i.id, i) for i in members).values() if i.id != seed.id]
    else:
        pool = [by_weight] + ([seed] if seed.id != by_weight.id else [])
    dev: dict[str, float] = {}
    if dev_questions:
        tell(
            f"final choice: scoring {len(pool)} instruction(s) on {len(dev_questions)} {dev_split} "
            f"questions ({len(pool) * len(dev_questions)} greedy episodes)"
        )
        rewards, kept = _rewards(evaluate, pool, dev_questions)
        dev = {ins.id: _mean(r) for ins, r in zip(pool, rewards, strict=True)}
        note = _dropped(note, "dev", len(dev_questions) - len(kept))
    returned = by_weight
    if rule in DEV_CHOICES:
        returned = max(pool, key=lambda ins: dev[ins.id])  # max keeps the first of ties: the seed
    tell(
        f"final choice ({rule}): returning {returned.id}"
        + (" (the seed)" if returned.id == seed.id else "")
        + (f", {metric} {dev[returned.id]:.3f} on {dev_split}" if returned.id in dev else "")
    )
    choice = FinalChoice(
        rule=rule,
        metric=metric,
        returned_id=returned.id,
        returned_text=returned.text,
        seed_id=seed.id,
        by_weight_id=by_weight.id,
        dev_split=dev_split,
        dev_questions=len(dev_questions),
        dev_scores=dev,
        note=note,
    )
    if test_questions:
        _score_on_test(choice, evaluate, seed, returned, test_questions, test_split, tell)
    return choice


def _score_on_test(
    choice: FinalChoice,
    evaluate: EvaluateFn,
    seed: Instruction,
    returned: Instruction,
    test_questions: Sequence[Question],
    test_split: str,
    tell: Callable[[str], None],
) -> None:
    """Fill ``choice``'s test fields: the returned instruction and the seed played greedily on
    the held-out test questions (once when they are the same), paired over the questions whose
    rollouts had no error."""
    played = [seed] if returned.id == seed.id else [seed, returned]
    tell(
        f"held-out test: scoring {len(played)} instruction(s) on {len(test_questions)} "
        f"{test_split} questions the choice never saw ({len(played) * len(test_questions)} "
        "greedy episodes)"
    )
    scores, kept = _rewards(evaluate, played, test_questions)
    seed_test, returned_test = scores[0], scores[-1]
    choice.note = _dropped(choice.note, "test", len(test_questions) - len(kept))
    choice.test_split, choice.test_questions = test_split, len(kept)
    choice.test_returned, choice.test_seed = _mean(returned_test), _mean(seed_test)
    choice.test_vs_seed = paired_difference(returned_test, seed_test) if kept else None
    choice.test_question_ids = [q.id for q in kept]
    choice.test_rewards = {"returned": returned_test, "seed": seed_test}
    tell(
        f"held-out test: returned {choice.test_returned:.3f}, seed {choice.test_seed:.3f}, "
        + (
            f"difference {choice.test_vs_seed.text()}"
            if choice.test_vs_seed is not None
            else "no question left to compare (every one had an error rollout)"
        )
    )


def _dropped(note: str, split: str, n: int) -> str:
    """``note`` saying that ``n`` questions of ``split`` were left out for error rollouts."""
    if not n:
        return note
    return "; ".join(
        filter(
            None, [note, f"{n} {split} question(s) left out: a rollout on them failed on an error"]
        )
    )


#: The id of the run's seed where it is not a member of the stage's archive (:func:`run_seed`).
RUN_SEED_ID = "run-seed"


def run_seed(coevo: Any, seed_text: str) -> Instruction:
    """The instruction the run started from, ``seed_text`` (the config's ``seed_instruction``,
    resolved): the stage's own seed when it is that text, else a record of its own (id
    :data:`RUN_SEED_ID`). The two differ after a pre-policy stage, which hands the GRPO stage the
    instruction it evolved as that stage's seed: the final choice and the held-out test then
    weigh the returned instruction against what the user started from, not against itself."""
    stage_seed = next(i for i in coevo.population.archive.values() if i.origin == "seed")
    if not seed_text or stage_seed.text == seed_text:
        return stage_seed
    return Instruction(id=RUN_SEED_ID, text=seed_text, origin="seed")


def choose_for_run(
    evaluate: EvaluateFn,
    coevo: Any,
    config: Any,
    inputs: Any,
    *,
    rule: str,
    tell: Callable[[str], None] | None = None,
) -> FinalChoice:
    """:func:`choose_instruction` at the end of a run: the final population, the seed and I* of
    ``coevo`` (a :class:`~inspo.core.coevolution.CoEvolution`), the dev and test questions of
    ``inputs`` (:class:`~inspo.training.preflight.RunInputs`), the metric and split names of
    ``config`` (a :class:`~inspo.config.train.TrainConfig`); ``tell`` as in
    :func:`choose_instruction`. The seed is the run's (:func:`run_seed`): it competes on dev and is
    tested beside the returned one."""
    return choose_instruction(
        evaluate,
        rule=rule,
        population=coevo.population.instructions,
        seed=run_seed(coevo, inputs.seed_instruction),
        admitted=[i for i in coevo.population.archive.values() if i.origin != "seed"],
        by_weight=coevo.best(),
        dev_questions=inputs.eval_questions,
        test_questions=inputs.test_questions,
        metric=getattr(inputs.env, "metric", "reward"),
        dev_split=config.data.eval_split,
        test_split=config.data.test_split,
        tell=tell,
    )
