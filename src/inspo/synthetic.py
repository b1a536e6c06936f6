"""A synthetic search-QA environment in which an instruction's true quality is knowable.

No model, no retrieval: an instruction's success probability is a known function of which
pieces of guidance it contains (each :class:`Feature` adds a fixed amount when its pattern
matches and the protocol tags are intact). A failed trajectory shows the failure mode of a
piece of guidance the instruction lacks — never searching, searching for the whole question, a
long-winded answer, ignoring the retrieved answer, running out of turns — written in the
Search-R1 tag protocol, so a reflector that reads trajectories can find out what is missing.

It drives the offline demo (``inspo demo``) and the core's end-to-end tests. Being written in
Search-R1's tags, it borrows that environment's seed (:data:`SEED_INSTRUCTION`), guard tags
(:data:`GUARD_TAGS`), protocol block (:data:`PROTOCOL`) and rules for the offline reflector
(:func:`reflector_rules`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from inspo.envs.search_r1.protocol import SEARCH_R1_INSTRUCTION, SEARCH_R1_PROTOCOL
from inspo.records import Instruction, Question, Rollout, ToolCall
from inspo.rng import derived_rng

REQUIRED_TAGS = ("<search>", "</search>", "<answer>", "</answer>")
#: The tags an evolved instruction must keep (the guard), as in Search-R1's environment.
GUARD_TAGS = ("search", "answer")
#: The population's seed: Search-R1's instruction (App. F).
SEED_INSTRUCTION = SEARCH_R1_INSTRUCTION
#: The protocol block an evolved strategy is composed with (``coevolution.protocol_block``):
#: Search-R1's, which holds the tags and none of the guidance :data:`FEATURES` rewards.
PROTOCOL = SEARCH_R1_PROTOCOL


def reflector_rules():
    """The rule-based reflector's rules for this environment: Search-R1's (its failures are
    written in Search-R1's tags)."""
    from inspo.envs.search_r1.reflector_rules import RULES

    return RULES


@dataclass(frozen=True)
class Feature:
    """A piece of guidance: present when ``pattern`` matches the instruction (case-insensitive);
    worth ``gain`` success probability; a failure while it is missing looks like ``failure``."""

    name: str
    pattern: str
    gain: float
    failure: str

    def present(self, text: str) -> bool:
        return re.search(self.pattern, text, re.IGNORECASE | re.DOTALL) is not None


# Failure texts use {q} (question), {gold} (gold answer) and {wrong} (a wrong answer).
FEATURES: tuple[Feature, ...] = (
    Feature(
        "search_first",
        r"(always|must|first)\b[^.]{0,40}\bsearch|search\b[^.]{0,40}\bbefore (you "
        r")?answer|never answer from memory",
        0.20,
        "<think>I already know this.</think>\n<answer>{wrong}</answer>",
    ),
    Feature(
        "focused_queries",
        r"(never|do not|don't|avoid)\b[^.]{0,40}\b(whole|entire|full) question|one "
        r"(entity|fact|hop)\b[^.]{0,20}\b(per|at a time)|short,? (specific|focused) quer",
        0.15,
        "<think>Let me search.</think>\n<search>{q}</search>\n<information>Doc 1(Title: Unrelated) "
        "nothing useful here.</information>\n<search>{q}</search>\n<information>Doc 1(Title: "
        "Unrelated) nothing useful here.</information>\n<answer>{wrong}</answer>",
    ),
    Feature(
        "short_answer",
        r"(only|just) the (answer|entity|name)|(short|concise|few "
        r"words|minimal)\b[^.]{0,30}\banswer|answer\b[^.]{0,40}\b(few words|no "
        r"explanation|without (explanation|illustration))",
        0.10,
        "<think>Searching.</think>\n<search>key entity</search>\n<information>Doc 1(Title: Key) "
        "the answer is {gold}.</information>\n<answer>After careful consideration of all the "
        "retrieved documents, I believe that the final answer is most likely {wrong} based on the "
        "evidence</answer>",
    ),
    Feature(
        "use_evidence",
        r"(copy|use|take|quote|base)\b[^.]{0,40}\b"
        r"(retrieved|information|documents?|evidence|search results)"
        r"|answer (appears|is present|is stated) in",
        0.15,
        "<think>Searching.</think>\n<search>key entity</search>\n<information>Doc 1(Title: Key) "
        "records show {gold}.</information>\n<answer>{wrong}</answer>",
    ),
)

_WRONG = ("Paris", "1905", "Oslo", "blue", "Mercury", "Lagos")


def true_quality(text: str, *, base: float = 0.15, features: Sequence[Feature] = FEATURES) -> float:
    """Success probability of an instruction: 0 without the protocol tags, else ``base`` plus
    the gain of every present feature (capped at 0.95)."""
    if not all(tag in text for tag in REQUIRED_TAGS):
        return 0.0
    return min(0.95, base + sum(f.gain for f in features if f.present(text)))


def make_questions(n: int, *, prefix: str = "q") -> list[Question]:
    return [
        Question(
            id=f"{prefix}{i:04d}",
            question=f"Which value belongs to item number {i}?",
            answers=(f"value {i}",),
        )
        for i in range(n)
    ]


class SyntheticEnv:
    """Rolls out instructions on questions; rewards are Bernoulli(true_quality).

    Deterministic: every draw comes from an RNG derived from (seed, instruction text, question
    id, sample index, ``salt``), so the same call gives the same rollouts in any process.
    ``calls`` counts trajectories generated.
    """

    def __init__(self, seed: int = 0, features: Sequence[Feature] = FEATURES, base: float = 0.15):
        self.seed = seed
        self.features = tuple(features)
        self.base = base
        self.calls = 0

    def quality(self, text: str) -> float:
        return true_quality(text, base=self.base, features=self.features)

    def rollout(
        self, instruction: Instruction, question: Question, index: int = 0, salt: object = ""
    ) -> Rollout:
        self.calls += 1
        rng = derived_rng(self.seed, instruction.text, question.id, index, salt)
        gold = question.answers[0]
        if rng.random() < self.quality(instruction.text):
            response = (
                f"<think>I need to look this up.</think>\n<search>{question.question[:30]}"
                f"</search>\n<information>Doc 1(Title: Item) {gold}.</information>\n<answer>{gold}"
                "</answer>"
            )
            return Rollout(
                question,
                instruction.id,
                response,
                reward=1.0,
                answer=gold,
                turns=2,
                finish_reason="answer",
            )
        missing = [f for f in self.features if not f.present(instruction.text)]
        wrong = rng.choice(_WRONG)
        template = (
            rng.choice(missing).failure
            if missing
            else "<search>item</search>\n<information>Doc 1(Title: Item) "
            "unclear.</information>\n<answer>{wrong}</answer>"
        )
        response = template.format(q=question.question, gold=gold, wrong=wrong)
        answer = re.findall(r"<answer>(.*?)</answer>", response, re.DOTALL)
        return Rollout(
            question,
            instruction.id,
            response,
            reward=0.0,
            answer=answer[-1] if answer else None,
            tool_calls=[
                ToolCall("search", q) for q in re.findall(r"<search>(.*?)</search>", response)
            ],
            finish_reason="answer",
        )

    def group(
        self, instruction: Instruction, question: Question, size: int, step: int
    ) -> list[Rollout]:
        return [self.rollout(instruction, question, i, salt=("train", step)) for i in range(size)]

    def evaluate(self, instruction: Instruction, questions: Sequence[Question]) -> list[Rollout]:
        """The verifier's evaluate seam: one rollout per question."""
        return [self.rollout(instruction, q, 0, salt="eval") for q in questions]


def run_synthetic(
    coevo,
    env: SyntheticEnv,
    questions: Sequence[Question],
    *,
    steps: int,
    batch_size: int = 8,
    group_size: int = 5,
    warmup: int = 16,
    start: int = 1,
    on_step=None,
    update=None,
):
    """Algorithm 1 on the synthetic environment, with no policy to update (a frozen policy).

    Batches are drawn from an RNG derived from (env seed, step), so a run resumed at step
    ``start`` sees exactly the batches an uninterrupted run would. ``update(step, rollouts,
    evaluate) -> StepReport`` ends each step: ``coevo.update`` unless given (the demo passes the
    training loop's end of a step, :func:`inspo.training.step.finish_step`). Returns the step
    reports.
    """
    update = update if update is not None else coevo.update
    if start == 1:
        coevo.initialize(env.evaluate, list(questions[:warmup]))
    reports = []
    for t in range(start, steps + 1):
        batch = derived_rng(env.seed, "batch", t).sample(
            list(questions), min(batch_size, len(questions))
        )
        rollouts: list[Rollout] = []
        for q in batch:
            instruction = coevo.choose(t, q.id)
            rollouts += env.group(instruction, q, group_size, t)
        reports.append(update(t, rollouts, env.evaluate))
        if on_step is not None:
            on_step(t, reports[-1])
    return reports
