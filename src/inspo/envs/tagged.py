"""The tag protocol most tool-using agents here speak: :class:`TaggedToolEnv`.

The policy writes ``<think> ... </think>`` (optional), then either a tool call ``<TOOL> args
</TOOL>`` or its final answer ``<answer> ... </answer>``. The environment answers a call with the
tool's result inside the tool's result tag, in Search-R1's exact layout::

    \\n\\n<RESULT>text</RESULT>\\n\\n

and answers anything else (no complete tool or answer tag in the turn) with a short corrective
message, as Search-R1 does. Search-R1 is this protocol with one tool, ``search``, whose results
come in ``<information>`` (:mod:`inspo.envs.search_r1`); the calculator is ``calc`` with
``<result>``. A user's environment is one call::

    env = TaggedToolEnv(name="adder", tools=[add], seed_instruction="... <add> ... </add> ...",
                        questions={"train": [...], "dev": [...], "test": [...]})

Rules (pure string functions, no heavy imports):

- :meth:`TaggedToolEnv.parse` reads ONE policy turn (the text the policy produced since the last
  observation). Like Search-R1 it takes the FIRST complete ``<TOOL>…</TOOL>`` or
  ``<answer>…</answer>`` in that text; the content is stripped. No complete tag -> None (invalid);
- :meth:`TaggedToolEnv.answer` reads a whole RESPONSE (never the prompt, so an ``<answer>``
  example in the instruction can never score). It returns the content of the LAST complete,
  innermost ``<answer>…</answer>`` pair, stripped; ``None`` when there is none. Environment text
  is ignored (result blocks, and the corrective message and the nudge, which both mention
  ``<answer> and </answer>``); several answers -> the last complete one; a trailing unclosed tag
  is ignored; ``<answer></answer>`` -> ``""``; tags are case-sensitive;
- the prompt is one user message: the instruction, then ``\\n\\nQuestion: ...``, or the question
  where the instruction has ``{question}`` (:func:`build_prompt`);
- :attr:`TaggedToolEnv.protocol` (the block ``coevolution.protocol_block`` appends to evolved
  strategies) is :func:`default_protocol` unless the environment gives its own: one line per
  tool (its tag, its description, its result tag), then the answer tag;
- the default reward is exact match (SQuAD-normalised) of the answer against the golds; pass
  ``reward=fn(answer, question) -> float`` for another (it is called only when there is an
  answer; no answer scores 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inspo.answers import exact_match
from inspo.core.reflector.failures import FailureExample, FailureMode, answer_failures, tags_of
from inspo.core.reflector.rules import ANSWER_RULES, ReflectorRules
from inspo.envs.base import Action, FinalAnswer
from inspo.envs.rubric import Rubric, episode_of
from inspo.envs.state import EpisodeState, StateFactory
from inspo.envs.tools import Tool, as_tool
from inspo.records import Question, Rollout, ToolCall
from inspo.tool_protocol import ToolProtocol

#: Where a question goes in an instruction that wants to place it itself.
QUESTION_PLACEHOLDER = "{question}"
#: Characters of a tool result :meth:`TaggedToolEnv.show` prints.
SHOW_CHARS = 300

NEVER_USED_TOOL = "never_used_tool"


def build_prompt(instruction: str, question: str) -> str:
    """The user message: the instruction, then the question.

    An instruction that contains ``{question}`` gets the question there (plain replacement, so
    other braces in an evolved instruction are harmless). Otherwise the question follows the
    instruction as ``"\\n\\nQuestion: ..."`` (Search-R1 appends ``Question: ...`` after the
    instruction; the paragraph break keeps multi-paragraph evolved instructions readable).
    """
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError("build_prompt: the instruction is empty; pass the instruction text")
    question = question.strip()
    if QUESTION_PLACEHOLDER in instruction:
        return instruction.replace(QUESTION_PLACEHOLDER, question)
    return f"{instruction.rstrip()}\n\nQuestion: {question}"


def default_invalid_message(tools: Sequence[str], answer_tag: str) -> str:
    calls = " ".join(f"If I want to use {t}, I should write <{t}> ... </{t}>." for t in tools)
    return (
        f"\nMy previous action is invalid. {calls} If I want to give the final answer, I should "
        f"put the answer between <{answer_tag}> and </{answer_tag}>. Let me try again.\n"
    )


def default_nudge_message(answer_tag: str) -> str:
    return (
        f"\nI have used all my tool calls. I must now give my final answer between <{answer_tag}> "
        f"and </{answer_tag}>.\n"
    )


def default_protocol(
    tools: Mapping[str, Tool], result_tags: Mapping[str, str], answer_tag: str = "answer"
) -> ToolProtocol:
    """The protocol block of a tagged environment that writes none: each tool's tag with the first
    line of its description and its result tag, then the answer tag. Its tags: the tools', their
    result tags, the answer's."""
    lines = ["Tools:"]
    for tag, t in tools.items():
        about = t.description.strip().splitlines()[0] + " " if t.description.strip() else ""
        result = result_tags[tag]
        lines.append(
            f"- <{tag}> ... </{tag}>: {about}Its result comes back between <{result}> and "
            f"</{result}>."
        )
    lines.append(f"Give the final answer between <{answer_tag}> and </{answer_tag}>.")
    tags = (*tools, *dict.fromkeys(result_tags[t] for t in tools), answer_tag)
    return ToolProtocol(tags=tuple(dict.fromkeys(tags)), block="\n".join(lines))


def tagged_rules(tools: Sequence[str], answer_tag: str = "answer") -> ReflectorRules:
    """The reflector's rules for a tagged environment that brings none: the answer-level modes,
    and a policy that never called a tool."""
    calls = tuple(tools)

    def detect(example: FailureExample, parent: str) -> list[FailureMode]:
        modes = []
        if calls and not any(f"<{t}>" in example.response for t in calls):
            modes.append(FailureMode(NEVER_USED_TOOL, "no tool call in the response"))
        return modes + answer_failures(example, sorted(tags_of(parent)), answer_tag=answer_tag)

    use = tuple(
        f"Use <{t}> ... </{t}> for every step it can do, before you answer; never guess what it "
        "would return."
        for t in calls
    )
    show = tuple(
        f"Call <{t}> ... </{t}> and read its result before giving the <{answer_tag}>."
        for t in calls
    )
    guidance = (
        {NEVER_USED_TOOL: use + show, **ANSWER_RULES.guidance}
        if calls
        else dict(ANSWER_RULES.guidance)
    )
    return ReflectorRules(detect=detect, guidance=guidance, generic=ANSWER_RULES.generic)


class TagProtocol:
    """The string side of the tag protocol (rules in the module docstring): parsing turns, writing
    observations and messages, reading the answer. ``calls`` are the tags the policy calls tools
    with; ``result_tags`` map each to the tag its results come back in."""

    def __init__(
        self,
        *,
        calls: Sequence[str],
        result_tags: Mapping[str, str],
        answer_tag: str = "answer",
        invalid_message: str | None = None,
        nudge_message: str | None = None,
    ) -> None:
        if answer_tag in calls:
            raise ValueError(f"a tool may not be named like the answer tag {answer_tag!r}")
        missing = [t for t in calls if t not in result_tags]
        if missing:
            raise ValueError(f"no result tag for tool(s) {missing}")
        self.answer_tag = answer_tag
        self.result_tags: dict[str, str] = {t: result_tags[t] for t in calls}
        self.stop: tuple[str, ...] = (*(f"</{t}>" for t in calls), f"</{answer_tag}>")
        self.invalid_message = (
            invalid_message
            if invalid_message is not None
            else default_invalid_message(list(calls), answer_tag)
        )
        self.nudge_message = (
            nudge_message if nudge_message is not None else default_nudge_message(answer_tag)
        )
        alternatives = "|".join(re.escape(t) for t in (*calls, answer_tag))
        self._action = re.compile(rf"<({alternatives})>(.*?)</\1>", re.DOTALL)
        a = re.escape(answer_tag)
        self._answer = re.compile(rf"<{a}>((?:(?!<{a}>|</{a}>).)*)</{a}>", re.DOTALL)
        results = sorted(set(self.result_tags.values()))
        self.read_results("|".join(rf"<{re.escape(t)}>.*?</{re.escape(t)}>" for t in results))

    def read_results(self, pattern: str) -> None:
        """Read results back from responses by ``pattern`` (a regex of one result block, its
        text the first group where it has one), and with them the environment's text."""
        self._results = re.compile(pattern, re.DOTALL)
        messages = "|".join(
            re.escape(m.strip()) for m in (self.invalid_message, self.nudge_message) if m.strip()
        )
        pieces = "|".join(p for p in (pattern, messages) if p)
        self._env_text = re.compile(rf"(?:\s*(?:{pieces})\s*)+", re.DOTALL)

    def parse(self, turn: str) -> Action:
        match = self._action.search(turn)
        if match is None:
            return None
        tag, content = match.group(1), match.group(2).strip()
        return FinalAnswer(content) if tag == self.answer_tag else self.call_of(tag, content)

    def call_of(self, tag: str, content: str) -> Action:
        """The action of a call tag's stripped content: here the call of the tool of that tag."""
        return ToolCall(tag, content)

    def observe(self, call: ToolCall, result: str) -> str:
        tag = self.result_tags[call.tool]
        return f"\n\n<{tag}>{result.strip()}</{tag}>\n\n"

    def closing(self, call: ToolCall) -> str:
        return f"</{self.result_tags[call.tool]}>\n\n"

    def invalid(self) -> str:
        return self.invalid_message

    def nudge(self) -> str:
        return self.nudge_message

    def strip_environment_text(self, response: str, *, results: bool = True) -> str:
        """The response without what the environment wrote into it: its fixed messages and, when
        ``results`` is true, every complete result block (each replaced by one space)."""
        for message in (self.invalid_message, self.nudge_message):
            if message:
                response = response.replace(message, " ")
        return self._results.sub(" ", response) if results else response

    def answer(self, response: str) -> str | None:
        matches = self._answer.findall(self.strip_environment_text(response))
        return matches[-1].strip() if matches else None

    def split_turns(self, response: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        for match in self._env_text.finditer(response):
            if match.start() == match.end():
                continue
            out.append((response[pos : match.start()], match.group(0)))
            pos = match.end()
        if pos < len(response) or not out:
            out.append((response[pos:], ""))
        return out

    def observations(self, response: str) -> list[str]:
        """The result blocks of a response, in order (the observations of the calls that ran)."""
        return [m.group(0) for m in self._results.finditer(response)]

    def result_of(self, call: ToolCall, observation: str) -> str:
        """The text inside the first result block of ``observation`` ('' when it has none)."""
        tag = re.escape(self.result_tags.get(call.tool, ""))
        match = re.search(rf"<{tag}>(.*?)</{tag}>", observation, re.DOTALL)
        return match.group(1).strip() if match else ""


class TaggedToolEnv(TagProtocol):
    """An environment of ``<TOOL> args </TOOL>`` turns (rules in the module docstring).

    Args:
        name: short name (logs, tables).
        tools: typed functions with docstrings, or :class:`~inspo.envs.tools.Tool` s (a list, or a
            mapping from the tag the policy writes to the tool).
        seed_instruction: the instruction the population starts from; it should show the tags.
        questions: ``{split: [Question | {"id", "question", "answers"}]}``, or ``fn(split) ->
            list[Question]``; None: the environment has no built-in data (``data.train`` must
            name a file).
        result_tag: the tag results come back in (``{tool: tag}`` for one per tool).
        answer_tag: the tag of the final answer.
        instructions: more seed instructions a config may name as ``@NAME``.
        reward: ``fn(answer, question) -> float`` (default: exact match against the golds), or a
            :class:`~inspo.envs.rubric.Rubric` of weighted functions that see the whole episode
            (each also a metric, under its name).
        metric: what the reward measures, for tables.
        required_tags: tags an evolved instruction must keep (default: the tools' and the answer's).
        invalid_message / nudge_message: the corrective message and the last-turn nudge.
        reflector_rules: the rule-based reflector's rules (default: :func:`tagged_rules`).
        protocol: the tags and the block that says how to use them, appended to evolved
            strategies under ``coevolution.protocol_block`` (default: :func:`default_protocol`).
        state: a class whose instance lives for one episode, its public methods the episode's
            tools (:mod:`inspo.envs.state`; TRL's ``environment_factory``); ``tools`` may then be
            empty.
    """

    def __init__(
        self,
        *,
        name: str,
        tools: Sequence[Any] | Mapping[str, Any],
        seed_instruction: str,
        questions: Mapping[str, Sequence[Any]] | Callable[[str], list[Question]] | None = None,
        result_tag: str | Mapping[str, str] = "result",
        answer_tag: str = "answer",
        instructions: Mapping[str, str] | None = None,
        reward: Callable[[str, Question], float] | Rubric | None = None,
        metric: str = "exact_match",
        required_tags: Sequence[str] | None = None,
        invalid_message: str | None = None,
        nudge_message: str | None = None,
        reflector_rules: ReflectorRules | None = None,
        protocol: ToolProtocol | None = None,
        state: type | None = None,
    ) -> None:
        if isinstance(tools, Mapping):
            built = {tag: as_tool(t) for tag, t in tools.items()}
        else:
            built = {}
            for t in tools:
                made = as_tool(t)
                built[made.name] = made
        self.state = StateFactory(state) if state is not None else None
        if self.state is not None:
            clash = sorted(set(built) & set(self.state.templates))
            if clash:
                raise ValueError(
                    f"environment {name!r}: {clash} is both a tool and a method of "
                    f"state={state.__name__}"
                )
            built.update(self.state.templates)
        if not built:
            raise ValueError(f"environment {name!r}: give at least one tool")
        tags = result_tag if isinstance(result_tag, Mapping) else dict.fromkeys(built, result_tag)
        try:
            super().__init__(
                calls=list(built),
                result_tags=tags,
                answer_tag=answer_tag,
                invalid_message=invalid_message,
                nudge_message=nudge_message,
            )
        except ValueError as exc:
            raise ValueError(f"environment {name!r}: {exc}") from None
        self.name = name
        self.tools: dict[str, Tool] = built
        self.seed_instruction = seed_instruction
        self.instructions = {name: seed_instruction, **(instructions or {})}
        self.metric = metric
        self.required_tags = (
            tuple(required_tags) if required_tags is not None else (*built, answer_tag)
        )
        self.reflector_rules = (
            reflector_rules
            if reflector_rules is not None
            else tagged_rules(list(built), answer_tag)
        )
        self.protocol = (
            protocol
            if protocol is not None
            else default_protocol(built, self.result_tags, answer_tag)
        )
        self._questions = questions
        self._reward = reward

    # -------------------------------------------------------------------- prompt, reward and data
    def messages(self, instruction: str, question: Question) -> list[dict[str, str]]:
        return [{"role": "user", "content": build_prompt(instruction, question.question)}]

    def reward(self, response: str, question: Question) -> float:
        if isinstance(self._reward, Rubric):  # sees the whole episode, answered or not
            return self._reward.reward(episode_of(self, response, question))
        answer = self.answer(response)
        if answer is None:
            return 0.0
        if self._reward is not None:
            return float(self._reward(answer, question))
        return exact_match(answer, question.answers)

    def open_episode(self, question: Question) -> EpisodeState | None:
        """A fresh instance of ``state`` for one episode, with its bound tools (None: no state)."""
        return self.state.open(question) if self.state is not None else None

    def close_episode(self, episode: EpisodeState) -> None:
        StateFactory.close(episode)

    def questions(self, split: str) -> list[Question]:
        source = self._questions
        if source is None:
            raise ValueError(
                f"environment {self.name!r} has no built-in questions; name a file with data.train "
                "(JSONL rows with id, question, answers)"
            )
        if callable(source):
            return list(source(split))
        if split not in source:
            raise ValueError(
                f"environment {self.name!r} has no {split!r} questions (it has: "
                f"{', '.join(source)})"
            )
        return [
            q if isinstance(q, Question) else Question.from_dict(dict(q)) for q in source[split]
        ]

    # -------------------------------------------------------------------- for people and optimizers
    def feedback(self, rollout: Rollout) -> str:
        gold = " | ".join(rollout.question.answers)
        if rollout.error:
            return (
                f"The episode failed with an error ({rollout.error}). The correct answer is {gold}."
            )
        tools = self.calls_said(rollout)
        if rollout.answer is None:
            return (
                f"No <{self.answer_tag}>...</{self.answer_tag}> was given ({tools}, stopped: "
                f"{rollout.finish_reason}). The correct answer is {gold}."
            )
        verdict = (
            "Correct."
            if rollout.reward >= 1.0
            else f"Wrong or partly wrong (reward {rollout.reward:.2f})."
        )
        return (
            f"{verdict} The agent {tools} and answered {rollout.answer!r}; the correct answer is "
            f"{gold}."
        )

    def calls_said(self, rollout: Rollout) -> str:
        """The episode's tool use in a few words, for :meth:`feedback` ("called calc 2 time(s)")."""
        used = ", ".join(
            f"{t} {len(rollout.calls_of(t))} time(s)" for t in self.tools if rollout.calls_of(t)
        )
        return f"called {used}" if used else "called no tool"

    def metrics(self, rollout: Rollout) -> dict[str, float]:
        """A rubric's functions, each under its name (none for a single reward): as scored when the
        episode ended where a stateful episode kept them (``rubric/<name>`` in the rollout's
        metrics: its instance is closed now), else scored from the response."""
        if not isinstance(self._reward, Rubric) or rollout.error is not None:
            return {}
        kept = {
            k.removeprefix("rubric/"): v
            for k, v in rollout.metrics.items()
            if k.startswith("rubric/")
        }
        return kept or self._reward.scores(episode_of(self, rollout.response, rollout.question))

    def score_episode(
        self, response: str, question: Question, state: Any
    ) -> tuple[float, dict[str, float]]:
        """The reward of an episode that still holds its ``state``, and a rubric's values (each
        function run once; ``{}`` for a single reward): the loop keeps them, the instance closes."""
        if not isinstance(self._reward, Rubric):
            return self.reward(response, question), {}
        scores = self._reward.scores(episode_of(self, response, question, state))
        return self._reward.total(scores), scores

    def leak_terms(self, question: Question) -> Sequence[str]:
        return list(question.answers)

    def show(self, call: ToolCall, observation: str, *, detail: int = 0) -> list[str]:
        """The result as one line, cut to ``detail`` characters (0: :data:`SHOW_CHARS`)."""
        limit = detail or SHOW_CHARS
        text = " ".join(self.result_of(call, observation).split())
        return [text[:limit] + (" ..." if len(text) > limit else "")]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, tools={list(self.tools)})"
