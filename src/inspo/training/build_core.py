"""Step 0 of a run: the co-evolution core a mode drives (:func:`build_coevolution`), the
optimizer answers it keeps (:func:`keep_paid_answers`) and the warm-up questions of P_0
(:func:`warmup_questions`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspo import artifacts
from inspo.config.schedule import core_config
from inspo.core.answer_cache import AnswerCache
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import EventLog
from inspo.core.optimizer_llm import LLMClient, LLMUsage, Message
from inspo.core.proposer import LengthCheck, Proposer
from inspo.records import Question
from inspo.rng import derived_rng


class NoOptimizer:
    """The optimizer of a static run, which evolves nothing: it answers no call (a call is a bug)
    and logs nothing, so a static run's log names no optimizer it does not have."""

    name = "none"

    def __init__(self) -> None:
        self.usage = LLMUsage()

    def generate(
        self,
        messages: list[Message],
        *,
        n: int = 1,
        temperature: float = 1.0,
        max_tokens: int = 2048,
    ) -> list[str]:
        raise RuntimeError("a static run has no optimizer LLM: it evolves no instruction")


def build_coevolution(
    co: CoEvolutionConfig,
    seed_text: str,
    llm: LLMClient | None,
    events: EventLog,
    *,
    static: bool,
    fits: LengthCheck | None = None,
    env: Any = None,
    questions: Sequence[Question] = (),
    held_out: Sequence[Question] = (),
) -> CoEvolution:
    """The core for a mode: ``static`` is a population of one (the seed) that never changes.
    ``llm`` is the optimizer; only a ``static`` core may go without one (it then holds a
    :class:`NoOptimizer`, which refuses every call). ``fits`` refuses evolved instructions whose
    prompt would exceed ``rl.max_prompt_tokens``.
    ``env`` (the agent's environment) gives what the core must know of the agent, and nothing
    else: the tags an evolved instruction must keep (``required_tags``, unless
    ``coevolution.guard_tags`` names them), the texts it must not leak (``leak_terms``) and the
    one-line account of a failure shown to the optimizer (``feedback``). ``questions`` (the
    training questions) are what D_B is drawn from under ``coevolution.validation_from: train``;
    ``held_out`` (the dev and test questions) what an instruction must never name under
    ``coevolution.leak_scope: held-out`` (the environment's ``names_problem`` says what naming
    is)."""
    co = core_config(co, static=static)
    if llm is None:
        if not static:
            raise ValueError(
                "build_coevolution: a mode that evolves instructions needs an optimizer LLM "
                "(llm=None)"
            )
        llm = NoOptimizer()
    proposer = Proposer.from_config(
        llm,
        co,
        fits=fits,
        required_tags=tuple(getattr(env, "required_tags", ())),
        feedback=getattr(env, "feedback", None),
        protocol=getattr(env, "protocol", None),
    )
    return CoEvolution(
        co,
        seed_text,
        proposer,
        events=events,
        leak_terms=getattr(env, "leak_terms", None),
        validation_pool=questions,
        held_out=held_out,
        names=getattr(env, "names_problem", None),
    )


def keep_paid_answers(coevo: CoEvolution, run_dir: Path) -> None:
    """The optimizer answers ``coevo`` pays for go to ``run_dir``'s answer file as they arrive, and
    a resumed run replays the ones it finds there (:mod:`inspo.core.answer_cache`). A new run starts
    without the file (:func:`inspo.artifacts.clear_run_files` removes an earlier run's)."""
    coevo.proposer.cache = AnswerCache(run_dir / artifacts.OPTIMIZER_ANSWERS_FILE)


def warmup_questions(questions: list[Question], n: int, seed: int) -> list[Question]:
    """``n`` training questions for the warm-up rollouts of the seed (a seeded sample)."""
    return derived_rng(seed, "warmup").sample(questions, min(n, len(questions)))
