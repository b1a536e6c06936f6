"""Pre-flight: build and check everything a run needs before any training time is spent.

:func:`prepare` fails with :class:`SetupError` — a message that names the config field, what is
wrong and how to fix it — for:

- a config with ``require_paper_parts`` (the paper presets) that lacks one of the paper's parts
  (:mod:`inspo.train.paper`): checked first, one message for all of them, before anything loads;
- training questions that cannot be read (missing file, unknown source, duplicate ids, fewer
  questions than ``rl.questions_per_step``);
- a retriever that cannot be built or reached (``data.retriever=http``: ``GET /healthz``);
- an optimizer LLM that cannot be built or reached (``client.check()``), when the mode evolves
  instructions;
- a policy model that cannot be found or built (``inspo.models.model_path``);
- a prompt (seed instruction + question, chat template applied) longer than
  ``rl.max_prompt_tokens``.

Nothing here imports torch; the tokenizer comes from transformers, loaded by path.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo.agent.protocol import build_chat, resolve_instruction
from inspo.agent.rollout import AgentConfig
from inspo.llm.base import LLMClient
from inspo.records import Question
from inspo.retrieval.base import Retriever
from inspo.train.config import RLConfig, TrainConfig
from inspo.train.paper import missing_message, paper_parts

log = logging.getLogger("inspo.train")


class SetupError(RuntimeError):
    """A run cannot start; the message says which setting is wrong and how to fix it."""


@dataclass
class RunInputs:
    """What :func:`prepare` built: data, retriever, optimizer, model location, tokenizer."""

    questions: list[Question]
    retriever: Retriever
    seed_instruction: str
    agent: AgentConfig
    optimizer: LLMClient | None = None
    optimizer_note: str = ""
    model_dir: Path | None = None
    tokenizer: Any = None
    eval_questions: list[Question] = field(default_factory=list)
    test_questions: list[Question] = field(default_factory=list)
    """Held-out questions (data.test_split) scored at the end, never used to choose."""
    fits: Callable[[str], str | None] | None = None
    """The proposer's check of an evolved instruction against ``rl.max_prompt_tokens``."""


def agent_config(rl: RLConfig) -> AgentConfig:
    """The agent's settings from the RL section (one place, so training and verification agree)."""
    return AgentConfig(
        max_turns=rl.max_turns,
        max_response_tokens=rl.max_response_tokens,
        max_obs_tokens=rl.max_obs_tokens,
        topk=rl.topk,
        temperature=rl.temperature,
        top_p=rl.top_p,
        reward=rl.reward,
        format_weight=rl.format_weight,
        prefill=rl.prefill,
        last_turn_nudge=rl.last_turn_nudge,
    )


def seed_instruction(config: TrainConfig) -> str:
    return resolve_instruction(config.seed_instruction)


def load_questions(source: str, split: str, limit: int, *, field_name: str, max_hops: int = 0) -> list[Question]:
    """Questions of ``split`` from ``source`` with errors that name ``field_name``.

    ``max_hops > 0`` keeps the questions whose ``meta["hops"]`` is at most that (questions
    without it are kept); ``limit`` applies after that filter.
    """
    from inspo.data.sources import load_qa_source, within_hops

    try:
        questions = load_qa_source(source, split=split, limit=None if max_hops else (limit or None))
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise SetupError(f"{field_name}={source!r} (split {split!r}) cannot be read: {exc}") from exc
    if max_hops:
        questions = within_hops(questions, max_hops)[: limit or None]
    if not questions:
        extra = f" with at most {max_hops} hop(s)" if max_hops else ""
        raise SetupError(f"{field_name}={source!r} (split {split!r}) has no questions{extra}")
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise SetupError(
                f"{field_name}={source!r}: question id {q.id!r} appears twice; ids must be unique "
                "(they key each group's instruction choice)"
            )
        seen.add(q.id)
    return questions


def build_retriever(config: TrainConfig) -> Retriever:
    from inspo.retrieval.factory import load_retriever

    data = config.data
    try:
        return load_retriever(
            data.retriever,
            corpus=data.corpus or None,
            index_dir=data.index_dir or None,
            url=data.retriever_url or None,
            model=data.retriever_model or None,
            index_path=data.index_path or None,
            index=data.index_options(),
            timeout=data.retriever_timeout,
            retries=data.retriever_retries,
        )
    except Exception as exc:  # noqa: BLE001 - any failure here must stop the run with its reason
        where = f"data.retriever_url={data.retriever_url!r}" if data.retriever == "http" else (
            f"data.corpus={data.corpus!r}" + (f", data.index_dir={data.index_dir!r}" if data.index_dir else "")
            + (f", data.index_path={data.index_path!r}" if data.index_path else "")
        )
        raise SetupError(f"retriever {data.retriever!r} ({where}) is not usable: {exc}") from exc


def build_optimizer(config: TrainConfig) -> tuple[LLMClient, str]:
    """The optimizer LLM, checked (an endpoint must answer), and a sentence saying which it is."""
    from inspo.llm.base import LLMError
    from inspo.llm.factory import choose_kind, make_optimizer_llm

    kind, why = choose_kind(config.optimizer, os.environ)
    try:
        client = make_optimizer_llm(config.optimizer, random.Random(config.coevolution.seed))
        check = getattr(client, "check", None)
        if check is not None:
            check()
    except (LLMError, ValueError, OSError) as exc:
        raise SetupError(f"optimizer LLM ({kind}; because {why}) is not usable: {exc}") from exc
    if kind == "rule-based":
        note = f"rule-based offline reflector (the default: {why})"
    else:
        note = f"{getattr(client, 'name', kind)} ({kind}; because {why})"
    return client, note


def resolve_model_dir(name_or_path: str) -> Path:
    from inspo.models import ModelError, model_path

    try:
        return Path(model_path(name_or_path))
    except (ModelError, FileNotFoundError, OSError, ValueError) as exc:
        raise SetupError(f"model.name_or_path={name_or_path!r} is not usable: {exc}") from exc


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def instruction_fits(tokenizer: Any, question: Question, limit: int) -> Callable[[str], str | None]:
    """The proposer's length check (:data:`inspo.core.proposer.LengthCheck`): an evolved
    instruction is refused when its prompt with ``question`` (the longest training question)
    exceeds ``limit`` tokens, as the seed's would be before training."""

    def check(text: str) -> str | None:
        n = len(tokenizer(build_chat(tokenizer, text, question.question), add_special_tokens=False)["input_ids"])
        if n > limit:
            return f"prompt too long: {n} tokens with question {question.id!r} > rl.max_prompt_tokens={limit}"
        return None

    return check


def check_prompt_lengths(
    tokenizer: Any, instruction: str, questions: Sequence[Question], limit: int, *, what: str = "seed instruction"
) -> int:
    """The longest prompt in tokens; :class:`SetupError` when one exceeds ``limit``."""
    longest, worst = 0, None
    for q in questions:
        n = len(tokenizer(build_chat(tokenizer, instruction, q.question), add_special_tokens=False)["input_ids"])
        if n > longest:
            longest, worst = n, q
    if longest > limit:
        raise SetupError(
            f"the prompt of question {worst.id!r} with the {what} is {longest} tokens, longer than "
            f"rl.max_prompt_tokens={limit}; raise rl.max_prompt_tokens or shorten the instruction/question"
        )
    return longest


def check_paper_parts(config: TrainConfig, *, need_model: bool = True, need_optimizer: bool | None = None,
                      env: Mapping[str, str] | None = None) -> None:
    """Raise :class:`SetupError` listing every missing part of the paper's setup (no-op when
    ``config.require_paper_parts`` is off; see :mod:`inspo.train.paper`)."""
    if not config.require_paper_parts:
        return
    message = missing_message(paper_parts(config, need_model=need_model, need_optimizer=need_optimizer, env=env))
    if message:
        raise SetupError(message)


def prepare(
    config: TrainConfig,
    *,
    need_optimizer: bool,
    need_model: bool = True,
    need_eval: bool = False,
) -> RunInputs:
    """Build and check the inputs of a run (see the module docstring for what fails).

    Order: the paper's parts (cheap), questions, the optimizer LLM (a network check), then the
    retriever (may build an index) and the model, so the cheap failures come first.
    """
    # pre-/post-policy runs build their optimizer in the offline stage, but need it all the same
    check_paper_parts(config, need_model=need_model, need_optimizer=need_optimizer or config.mode != "static")
    data, rl = config.data, config.rl
    questions = load_questions(data.train, data.train_split, data.max_train_questions, field_name="data.train",
                               max_hops=data.max_hops)
    if len(questions) < rl.questions_per_step:
        raise SetupError(
            f"data.train={data.train!r} has {len(questions)} questions, fewer than "
            f"rl.questions_per_step={rl.questions_per_step}; lower rl.questions_per_step or add questions"
        )
    eval_questions: list[Question] = []
    test_questions: list[Question] = []
    if need_eval and data.eval:
        eval_questions = load_questions(data.eval, data.eval_split, data.max_eval_questions, field_name="data.eval",
                                        max_hops=data.max_hops)
        if data.test_split and data.max_test_questions:
            try:
                test_questions = load_questions(data.eval, data.test_split, data.max_test_questions,
                                                field_name="data.eval", max_hops=data.max_hops)
            except SetupError as exc:
                raise SetupError(f"{exc}. The end-of-run held-out test reads data.test_split={data.test_split!r}; "
                                 "name another split or set data.max_test_questions=0 to skip it") from exc
    instruction = seed_instruction(config)
    if not instruction.strip():
        raise SetupError("seed_instruction is blank; leave it '' for Search-R1's instruction, name one (@weak) or write one")
    optimizer, note = (None, "none (no instruction evolution in this mode)")
    if need_optimizer:
        optimizer, note = build_optimizer(config)
    retriever = build_retriever(config)
    inputs = RunInputs(
        questions=questions,
        retriever=retriever,
        seed_instruction=instruction,
        agent=agent_config(rl),
        optimizer=optimizer,
        optimizer_note=note,
        eval_questions=eval_questions,
        test_questions=test_questions,
    )
    if need_model:
        inputs.model_dir = resolve_model_dir(config.model.name_or_path)
        inputs.tokenizer = load_tokenizer(inputs.model_dir)
        longest = check_prompt_lengths(inputs.tokenizer, instruction, questions, rl.max_prompt_tokens)
        log.info("longest training prompt: %d tokens (limit %d)", longest, rl.max_prompt_tokens)
        worst = max(questions, key=lambda q: len(inputs.tokenizer(q.question, add_special_tokens=False)["input_ids"]))
        inputs.fits = instruction_fits(inputs.tokenizer, worst, rl.max_prompt_tokens)
    return inputs
