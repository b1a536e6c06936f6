"""Pre-flight: build and check everything a run needs before any training time is spent.

:func:`prepare` fails with :class:`SetupError` — a message that names the config field, what is
wrong and how to fix it — for:

- a config with ``require_paper_parts`` (the paper presets) that lacks one of the paper's parts
  (:mod:`inspo.config.paper`): checked first, one message for all of them, before anything loads;
- an environment that cannot be built (``env.name`` unknown or not importable, a part missing; for
  ``search-r1`` a retriever that cannot be built or reached, ``env.retriever=http``:
  ``GET /healthz``): :func:`inspo.envs.build.build_env`;
- training questions that cannot be read (missing file, unknown source, duplicate ids, fewer
  questions than ``rl.questions_per_step``);
- an optimizer LLM that cannot be built or reached (``client.check()``), when the mode evolves
  instructions; a local optimizer model that cannot be loaded without a download
  (:func:`check_local_optimizer`), also when a later offline stage builds it (``pre-policy``,
  ``post-policy``): before the GRPO stage loads the policy, not after;
- a policy model that cannot be found or built (``inspo.models.model_path``);
- a prompt (the environment's messages of seed instruction + question, chat template applied)
  longer than ``rl.max_prompt_tokens``.

How the agent is built from a config (its environment, questions, seed and settings) lives in the
environment layer, :mod:`inspo.envs.build`, which evaluation and the trained agent share.

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

from inspo.config.paper import missing_message, paper_parts
from inspo.config.train import TrainConfig
from inspo.core.optimizer_llm import LLMClient
from inspo.engines.base import render_messages
from inspo.envs.build import (
    agent_config,
    build_env,
    check_prefill,
    load_questions,
    resolve_model_dir,
    seed_of,
)
from inspo.envs.loop import AgentConfig
from inspo.records import Question, SetupError

log = logging.getLogger("inspo.training")


__all__ = [
    "RunInputs",
    "SetupError",
    "agent_config",
    "load_questions",
    "prepare",
    "resolve_model_dir",
]


@dataclass
class RunInputs:
    """What :func:`prepare` built: the environment, data, optimizer, model location, tokenizer."""

    questions: list[Question]
    env: Any
    """The agent's environment (:class:`~inspo.envs.base.Environment`)."""
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


def check_local_optimizer(config: TrainConfig) -> None:
    """:class:`SetupError` when the optimizer is a local model (``optimizer.kind`` resolves to
    ``local``) that cannot be loaded without a download: its packages not installed, no such
    folder (:func:`inspo.models.model_problem`; cheap, nothing loads). A pre-policy run builds its
    optimizer only in its offline stage, after loading the policy: this says so first."""
    from inspo.llm.factory import choose_kind
    from inspo.models import model_problem

    kind, _ = choose_kind(config.optimizer, os.environ)
    path = config.optimizer.local_model_path
    if kind != "local" or not path:  # no path: make_optimizer_llm says so
        return
    problem = model_problem(path)
    if problem:
        raise SetupError(f"optimizer.local_model_path={path!r} cannot be loaded: {problem}")


def build_optimizer(config: TrainConfig, env: Any = None) -> tuple[LLMClient, str]:
    """The optimizer LLM, checked (an endpoint must answer), and a sentence saying which it is.
    The rule-based reflector gets ``env``'s rules (``env.reflector_rules``; none: answer-level
    rules only)."""
    from inspo.core.optimizer_llm import LLMError
    from inspo.llm.factory import choose_kind, make_optimizer_llm

    kind, why = choose_kind(config.optimizer, os.environ)
    try:
        client = make_optimizer_llm(
            config.optimizer,
            random.Random(config.coevolution.seed),
            rules=getattr(env, "reflector_rules", None),
        )
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


def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def prompt_tokens(tokenizer: Any, env: Any, instruction: str, question: Question) -> int:
    """Tokens of the prompt ``env`` builds for ``instruction`` and ``question`` (chat template
    applied)."""
    text = render_messages(
        tokenizer, env.messages(instruction, question), getattr(env, "tool_schemas", None)
    )
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def instruction_fits(
    tokenizer: Any, env: Any, question: Question, limit: int
) -> Callable[[str], str | None]:
    """The proposer's length check (:data:`inspo.core.proposer.LengthCheck`): an evolved
    instruction is refused when its prompt with ``question`` (the longest training question)
    exceeds ``limit`` tokens, as the seed's would be before training."""

    def check(text: str) -> str | None:
        n = prompt_tokens(tokenizer, env, text, question)
        if n > limit:
            return (
                f"prompt too long: {n} tokens with question {question.id!r} > "
                f"rl.max_prompt_tokens={limit}"
            )
        return None

    return check


def check_prompt_lengths(
    tokenizer: Any,
    env: Any,
    instruction: str,
    questions: Sequence[Question],
    limit: int,
    *,
    what: str = "seed instruction",
) -> int:
    """The longest prompt in tokens; :class:`SetupError` when one exceeds ``limit``."""
    longest, worst = 0, None
    for q in questions:
        n = prompt_tokens(tokenizer, env, instruction, q)
        if n > longest:
            longest, worst = n, q
    if longest > limit:
        raise SetupError(
            f"the prompt of question {worst.id!r} with the {what} is {longest} tokens, longer than "
            f"rl.max_prompt_tokens={limit}; raise rl.max_prompt_tokens or shorten the "
            "instruction/question"
        )
    return longest


def check_paper_parts(
    config: TrainConfig,
    *,
    need_model: bool = True,
    need_optimizer: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Raise :class:`SetupError` listing every missing part of the paper's setup (no-op when
    ``config.require_paper_parts`` is off; see :mod:`inspo.config.paper`)."""
    if not config.require_paper_parts:
        return
    message = missing_message(
        paper_parts(config, need_model=need_model, need_optimizer=need_optimizer, env=env)
    )
    if message:
        raise SetupError(message)


def prepare(
    config: TrainConfig,
    *,
    need_optimizer: bool,
    need_model: bool = True,
    need_eval: bool = False,
    env: Any = None,
) -> RunInputs:
    """Build and check the inputs of a run (see the module docstring for what fails).

    ``env``: an environment object given in Python (``inspo.train(config, env=...)``) instead of the
    one ``config.env`` names. Order: the paper's parts (cheap), the environment (its factory checks
    its own settings; Search-R1's builds its retriever, an index or a server check) and the
    questions (they may be the environment's own), the optimizer LLM (a network check), then the
    model.
    """
    # pre-/post-policy runs build their optimizer in the offline stage, but need it all the same
    optimizer_needed = need_optimizer or config.mode != "static"
    check_paper_parts(config, need_model=need_model, need_optimizer=optimizer_needed)
    if optimizer_needed:
        check_local_optimizer(config)
    data, rl = config.data, config.rl
    env = build_env(config, env)
    check_prefill(env, rl.prefill)
    questions = load_questions(
        env,
        data.train,
        data.train_split,
        data.max_train_questions,
        field_name="data.train",
        max_hops=data.max_hops,
    )
    if len(questions) < rl.questions_per_step:
        raise SetupError(
            f"data.train={data.train!r} has {len(questions)} questions, fewer than "
            f"rl.questions_per_step={rl.questions_per_step}; lower rl.questions_per_step or add "
            "questions"
        )
    eval_questions, test_questions = _held_out_questions(env, data) if need_eval else ([], [])
    instruction = seed_of(env, config.seed_instruction)
    optimizer, note = (None, "none (no instruction evolution in this mode)")
    if need_optimizer:
        optimizer, note = build_optimizer(config, env)
    inputs = RunInputs(
        questions=questions,
        env=env,
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
        longest = check_prompt_lengths(
            inputs.tokenizer, env, instruction, questions, rl.max_prompt_tokens
        )
        log.info("longest training prompt: %d tokens (limit %d)", longest, rl.max_prompt_tokens)
        worst = max(
            questions,
            key=lambda q: len(inputs.tokenizer(q.question, add_special_tokens=False)["input_ids"]),
        )
        inputs.fits = instruction_fits(inputs.tokenizer, env, worst, rl.max_prompt_tokens)
    return inputs


def _held_out_questions(env: Any, data: Any) -> tuple[list[Question], list[Question]]:
    """The dev questions (``data.eval``'s ``eval_split``) and the end-of-run test questions
    (its ``test_split``), none when ``data.eval`` is empty; a missing test split says how to skip
    the test."""
    if not data.eval:
        return [], []
    eval_questions = load_questions(
        env,
        data.eval,
        data.eval_split,
        data.max_eval_questions,
        field_name="data.eval",
        max_hops=data.max_hops,
    )
    test_questions: list[Question] = []
    if data.test_split and data.max_test_questions:
        try:
            test_questions = load_questions(
                env,
                data.eval,
                data.test_split,
                data.max_test_questions,
                field_name="data.eval",
                max_hops=data.max_hops,
            )
        except SetupError as exc:
            raise SetupError(
                f"{exc}. The end-of-run held-out test reads "
                f"data.test_split={data.test_split!r}; name another split or set "
                "data.max_test_questions=0 to skip it"
            ) from exc
    return eval_questions, test_questions


def dry_checks(config: TrainConfig) -> list[str]:
    """What ``inspo train --dry-run`` checks beyond the config: :func:`prepare` without the model or
    the optimizer (no weights loaded, no endpoint called): the environment is built (its tools,
    reward and settings checked), the prefill fits its tags, the seed instruction resolves, and the
    training, dev and test questions are read. Returns the lines that say so; raises SetupError
    with the first thing a run would stop on."""
    inputs = prepare(config, need_optimizer=False, need_model=False, need_eval=True)
    data = config.data
    held = [
        f"{len(qs)} {split}"
        for split, qs in (
            (data.eval_split, inputs.eval_questions),
            (data.test_split, inputs.test_questions),
        )
        if qs
    ]
    tools = ", ".join(getattr(inputs.env, "tools", {}) or ()) or "none"
    return [
        f"{'checked:':<24}environment {inputs.env.name!r} built (tools: {tools}); prefill and seed "
        f"instruction fit it; {len(inputs.questions)} training questions read"
        + (f"; held-out: {', '.join(held)}" if held else "")
    ]
