"""The environment seam: everything that is specific to one agent, as text.

An :class:`Environment` says what a tool-using agent is: its seed instruction, how a prompt is
built from an instruction and a question, the turn protocol (what ends a turn, how a turn's text
becomes a tool call or a final answer, what an invalid turn gets), its tools, its verifiable
reward, its questions, how a trajectory is shown to an optimizer, the tags an evolved instruction
must keep, and the numbers a table shows for an episode. One part is optional: ``protocol``, its
:class:`~inspo.tool_protocol.ToolProtocol` (its tags and the block of text that says how to use
them), which ``coevolution.protocol_block`` appends to every evolved strategy.
Everything else is generic:
:mod:`inspo.envs.loop` owns token ids and ``env_mask`` (observation tokens masked) on every engine,
and the INSPO core (:mod:`inspo.core`) knows only instructions, questions and rewards.

Which convention this mirrors, and why (docs/your-own-agent.md says the same):

- **tinker-cookbook's text-level env** (``MessageEnv`` with one adapter that owns the tokens): the
  environment works on text only, and one loop turns it into token ids and masks. inspo keeps
  exactly one such loop (it already kept ids end to end on transformers and vLLM), so an
  environment never sees a token.
- **TRL's tools** (``GRPOTrainer(tools=[fn])``): a tool is a plain typed Python function with a
  docstring (:mod:`inspo.envs.tools`). TRL's ``environment_factory`` makes each public method of
  a class a tool; here the tools are a mapping, so helper methods are never exposed by accident.
- **GEPA's adapter**: the rules live in this docstring, and :meth:`Environment.feedback` is GEPA's
  reflective "Feedback", serving both GEPA and inspo's reflection.
- **verifiers' ``load_environment(**kwargs)``**: a user's environment is named ``module:attr`` and
  built with the ``env:`` config section's settings as keywords (:mod:`inspo.envs.registry`).

Most environments are :class:`~inspo.envs.tagged.TaggedToolEnv`: ``<tool> args </tool>`` turns,
results inside a tag, the answer in ``<answer> ... </answer>`` (Search-R1's protocol is one).

Rules of an environment (:func:`check_environment` checks the parts are there):

- ``reward(response, question)`` reads the RESPONSE (what the policy and the environment wrote after
  the prompt), never the prompt: an instruction that shows an answer can never score;
- the same inputs give the same outputs (no hidden randomness: verification compares instructions
  on common random numbers);
- a tool that raises, or runs past its ``timeout_s``, makes that episode an error rollout (counted
  apart, never scored, as for outages); a tool that wants to tell the policy that its input is
  wrong returns that as text (:class:`~inspo.envs.tools.ToolInputError` does it for argument
  errors). An :class:`~inspo.records.EndpointDown` from a tool (a server down) fails the batch;
- observations are capped by the loop (``rl.max_obs_tokens``) and always end with
  ``closing(call)``, so a cut observation stays closed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from inspo.records import Question, Rollout, ToolCall
from inspo.tool_protocol import ToolProtocol

__all__ = [
    "OPTIONAL_PARTS",
    "PARTS",
    "Action",
    "EnvError",
    "Environment",
    "FinalAnswer",
    "ToolCall",
    "ToolProtocol",
    "check_environment",
    "settings_from",
]


@dataclass(frozen=True)
class FinalAnswer:
    """A turn that gives the final answer ``text``."""

    text: str


#: What :meth:`Environment.parse` makes of one policy turn; None is an invalid turn.
Action = ToolCall | FinalAnswer | None


@runtime_checkable
class Environment(Protocol):
    """What an agent is (rules in the module docstring). ``tools`` map a name to a
    :class:`~inspo.envs.tools.Tool`.

    Optional (:data:`OPTIONAL_PARTS`, not a member here, so an environment without it is still
    one): ``protocol``, a :class:`~inspo.tool_protocol.ToolProtocol` whose block holds its
    required tags; ``coevolution.protocol_block`` needs it (TaggedToolEnv builds one)."""

    name: str
    """Short name, for logs and tables."""
    seed_instruction: str
    """The instruction the population starts from (``seed_instruction: ''`` in a config)."""
    instructions: Mapping[str, str]
    """Seed instructions a config may name as ``@NAME`` (the default one among them)."""
    stop: tuple[str, ...]
    """A turn ends at the first of these (so real tool output, not an invented one, follows)."""
    required_tags: tuple[str, ...]
    """Tags an evolved instruction must keep, opening and closing, when its parent has them (the
    guard)."""
    tools: Mapping[str, Any]
    metric: str
    """What the reward measures, for tables and the final choice (``em``, ``f1``, ``correct``)."""

    def messages(self, instruction: str, question: Question) -> list[dict[str, str]]:
        """The chat messages of an episode's prompt."""
        ...

    def parse(self, turn: str) -> Action:
        """One policy turn's text (with any forced prefix) as a tool call, a final answer or
        None."""
        ...

    def observe(self, call: ToolCall, result: str) -> str:
        """The environment text that follows a tool call, holding the tool's ``result``."""
        ...

    def closing(self, call: ToolCall) -> str:
        """What every observation of ``call`` ends with (a cut one too: the loop keeps it)."""
        ...

    def invalid(self) -> str:
        """The environment text after a turn that is neither a tool call nor an answer."""
        ...

    def nudge(self) -> str:
        """Appended before the final turn when ``rl.last_turn_nudge`` is on: answer now."""
        ...

    def answer(self, response: str) -> str | None:
        """The final answer in a whole response (None: none given)."""
        ...

    def reward(self, response: str, question: Question) -> float:
        """The verifiable reward of a response (never of the prompt)."""
        ...

    def questions(self, split: str) -> list[Question]:
        """The environment's own questions of ``split`` (``train``, ``dev``, ``test``)."""
        ...

    def feedback(self, rollout: Rollout) -> str:
        """One line on how an episode went, for an optimizer (GEPA's Feedback)."""
        ...

    def metrics(self, rollout: Rollout) -> dict[str, float]:
        """Per-episode numbers for tables (their means over a cell), e.g. ``{"em": 1.0}``."""
        ...

    def leak_terms(self, question: Question) -> Sequence[str]:
        """Texts an evolved instruction must not contain once it has seen ``question``."""
        ...

    def split_turns(self, response: str) -> list[tuple[str, str]]:
        """A response as (policy turn, environment text after it) pairs, in order: the pieces
        the policy wrote and what the environment wrote after each ('' after the last)."""
        ...

    def show(self, call: ToolCall, observation: str, *, detail: int = 0) -> list[str]:
        """A tool result as lines for people (``inspo ask``, the report); ``detail`` > 0 asks for
        that many characters of each item beyond its summary."""
        ...


#: The parts :func:`check_environment` asks for, with what each is.
PARTS: dict[str, str] = {
    "name": "a short name (str)",
    "seed_instruction": "the instruction the population starts from (str)",
    "instructions": "named seed instructions ({name: text})",
    "stop": "the strings that end a turn (tuple of str)",
    "required_tags": "the tags an evolved instruction must keep (tuple of str)",
    "tools": "the tools ({name: Tool})",
    "metric": "what the reward measures (str)",
    "messages": "messages(instruction, question) -> list of chat messages",
    "parse": "parse(turn) -> ToolCall | FinalAnswer | None",
    "observe": "observe(call, result) -> str",
    "closing": "closing(call) -> the text every observation of the call ends with",
    "invalid": "invalid() -> str",
    "nudge": "nudge() -> str",
    "answer": "answer(response) -> str | None",
    "reward": "reward(response, question) -> float",
    "questions": "questions(split) -> list of Question",
    "feedback": "feedback(rollout) -> str",
    "metrics": "metrics(rollout) -> {name: float}",
    "leak_terms": "leak_terms(question) -> texts",
    "split_turns": "split_turns(response) -> [(policy text, environment text after it)]",
    "show": "show(call, observation, *, detail=0) -> list of str",
}
#: Parts an environment may have; :func:`check_environment` checks them when they are there.
OPTIONAL_PARTS: dict[str, str] = {
    "protocol": "its tags and how to use them (inspo.envs.ToolProtocol or None), needed by "
    "coevolution.protocol_block",
    "names_problem": "names_problem(text, question) -> bool: whether an instruction spells the "
    "problem out (coevolution.leak_scope held-out; default: its text and its answer, "
    "inspo.core.leak_scope)",
    "open_episode": "open_episode(question) -> inspo.envs.state.EpisodeState or None, with "
    "close_episode(state) and score_episode(response, question, instance) -> (reward, {name: "
    "value}): an instance per episode whose tools serve that episode alone, scored before it "
    "closes (TaggedToolEnv(state=...))",
}


def settings_from(cls: type, settings: Mapping[str, Any], env_name: str) -> Any:
    """``cls(**settings)`` for an environment's settings dataclass, a ValueError naming each
    unknown key (as ``env.KEY``) and listing the keys ``env.name=env_name`` takes."""
    from dataclasses import fields

    known = {f.name for f in fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(
            f"unknown setting(s) {', '.join('env.' + k for k in unknown)} for env.name={env_name}; "
            f"it takes: {', '.join(sorted(known))}"
        )
    return cls(**settings)


class EnvError(TypeError):
    """An environment lacks a part, or a part is of the wrong kind; the message names it."""


def check_environment(env: Any, *, where: str = "") -> Any:
    """``env`` when it has every part of :class:`Environment`, else :class:`EnvError` naming
    each missing or wrong part (``where``: how the user named it, for the message)."""
    from inspo.envs.tools import Tool

    what = where or type(env).__name__
    missing = [f"{name} ({PARTS[name]})" for name in PARTS if not hasattr(env, name)]
    if missing:
        raise EnvError(
            f"environment {what} is missing: {'; '.join(missing)}. Subclass "
            "inspo.envs.TaggedToolEnv, which has them all, or add them"
        )
    wrong = []
    for name in (
        "messages",
        "parse",
        "observe",
        "closing",
        "invalid",
        "nudge",
        "answer",
        "reward",
        "questions",
        "feedback",
        "metrics",
        "leak_terms",
        "split_turns",
        "show",
    ):
        if not callable(getattr(env, name)):
            wrong.append(f"{name} must be a method ({PARTS[name]})")
    if not isinstance(env.name, str) or not env.name:
        wrong.append("name must be a non-empty str")
    if not isinstance(env.seed_instruction, str) or not env.seed_instruction.strip():
        wrong.append("seed_instruction must be a non-empty str")
    if (
        not isinstance(env.stop, (tuple, list))
        or not env.stop
        or not all(isinstance(s, str) and s for s in env.stop)
    ):
        wrong.append("stop must be a non-empty tuple of non-empty str")
    if not isinstance(env.required_tags, (tuple, list)) or not all(
        isinstance(t, str) for t in env.required_tags
    ):
        wrong.append("required_tags must be a tuple of str")
    protocol = getattr(env, "protocol", None)
    if protocol is not None and not isinstance(protocol, ToolProtocol):
        wrong.append(
            f"protocol must be {OPTIONAL_PARTS['protocol']}; got {type(protocol).__name__}"
        )
    if hasattr(env, "names_problem") and not callable(env.names_problem):
        wrong.append(f"names_problem must be a method ({OPTIONAL_PARTS['names_problem']})")
    if hasattr(env, "open_episode") and not all(
        callable(getattr(env, part, None))
        for part in ("open_episode", "close_episode", "score_episode")
    ):
        wrong.append(
            f"open_episode, close_episode and score_episode must all be methods "
            f"({OPTIONAL_PARTS['open_episode']})"
        )
    if not isinstance(env.tools, Mapping):
        wrong.append("tools must be a mapping {name: Tool}")
    else:
        bad = [n for n, t in env.tools.items() if not isinstance(t, Tool)]
        if bad:
            wrong.append(
                f"tools {bad} are not inspo.envs.Tool (wrap a function with inspo.envs.tool(fn))"
            )
    if wrong:
        raise EnvError(f"environment {what}: " + "; ".join(wrong))
    return env
