"""Batched multi-turn episodes of any environment, token ids kept end to end.

:func:`run_rollouts` plays many episodes (question + instruction) at once, turn by turn, the
way Search-R1's ``LLMGenerationManager.run_llm_loop`` does: ``max_turns`` tool turns, then ONE
final turn whose tool call is not run. The environment (:mod:`inspo.envs.base`) says everything
agent-specific, as text; this loop owns the token ids and ``env_mask``. Each turn:

1. the engine continues every still-active trajectory in ONE ``generate`` call, each turn
   capped at ``max_response_tokens`` and stopped at the environment's ``stop`` strings or EOS;
2. each turn's text (the prefill, on turn 1, plus what the policy wrote) is parsed by
   ``env.parse`` into a tool call, a final answer, or nothing (an invalid turn);
3. on turns 1 … ``max_turns``, the turn's calls run (:func:`inspo.envs.tools.run_calls`): ONE
   call per batched tool (a retriever gets every query of the turn at once), each other call in
   its own thread under the tool's timeout; each calling trajectory gets ``env.observe(call,
   result)``, capped at ``max_obs_tokens`` (truncated ids, always closed by ``env.closing(call)``);
4. on those turns, a turn that is neither (no tag, an EOS without an answer, or the
   ``max_response_tokens`` cap) gets ``env.invalid()`` and the episode goes on;
5. with ``last_turn_nudge`` (off by default; Search-R1 has no such text), the observation or
   corrective message written after turn ``max_turns`` ends with ``env.nudge()``, telling the
   policy to answer now.

So an episode has at most ``max_turns + 1`` policy turns and at most ``max_turns`` tool calls.
It ends (``Rollout.finish_reason``, one of :data:`FINISH_REASONS`) with:

- ``"answer"``: a turn holds a final answer;
- ``"turn_limit"``: the final turn (``max_turns + 1``) stopped at a stop string without an
  answer: a tool call (not run) or a stray closing tag;
- ``"eos"``: the final turn ended the policy's message (EOS) without an answer;
- ``"length"``: the final turn hit ``max_response_tokens`` without an answer;
- ``"error"``: a tool call of the episode failed (it raised, or ran past its timeout: ``error``
  says which), or, set by :mod:`inspo.envs.evaluate`, the example raised. An error rollout is
  never scored (:func:`inspo.records.scored`); it keeps the ids played up to the failure.

``"turn_limit"``, ``"eos"`` and ``"length"`` all mean "no answer after every turn was used";
they differ in how the final turn ended.

Token ids: ``prompt_ids`` is the encoded prompt (``engine.prompt_text(env.messages(...))``);
``completion_ids`` grows by the engine's returned ids (never re-tokenised) and by encoded
environment text; ``env_mask`` is 1 exactly on the ids the policy sampled and 0 on everything the
environment wrote: observations, corrective messages, the nudge, and the ``prefill`` (forced
text, not sampled, so not trained on; it opens the first turn only, so a prefilled ``<search>``
starts the first action). One exception keeps a sampled id out: an EOS that ends a turn before the
final one is dropped from the trajectory, because the episode goes on after it (Search-R1 drops it
too, when it decodes without special tokens and re-tokenises); an EOS on the final turn is kept.
The model sees exactly ``prompt_ids + completion_ids`` each turn. ``response`` is the decode of
``completion_ids`` (special tokens skipped). Engines without token ids (OpenAIEngine) give
text-only rollouts: empty id lists and the response is the concatenated text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from inspo.engines.base import Generation, GenerationInput, PolicyEngine
from inspo.engines.row_seeds import turn_seed
from inspo.envs.base import Environment, FinalAnswer
from inspo.envs.tools import Refusal, ToolFailed, run_calls
from inspo.records import Instruction, Question, Rollout, ToolCall

log = logging.getLogger("inspo.envs")

#: Characters per token assumed when an engine has no tokenizer to count observation tokens.
CHARS_PER_TOKEN = 4
#: Fewer tokens than this left for a tool's result (after the closing tag and the nudge) is warned
#: about.
MIN_RESULT_TOKENS = 16

#: Every ``Rollout.finish_reason`` the agent writes (meanings in the module docstring).
FINISH_REASONS: tuple[str, ...] = ("answer", "eos", "length", "turn_limit", "error")

#: How the final turn's engine finish names an episode that ended there without an answer.
_FINAL_FINISH = {"stop": "turn_limit", "eos": "eos", "length": "length"}


@dataclass
class AgentConfig:
    """How the agent plays an episode, whatever the environment: turns, tokens, decoding."""

    max_turns: int = 4  # tool turns per episode; one final answer turn follows (Search-R1)
    max_response_tokens: int = 500  # new tokens per policy turn
    max_obs_tokens: int = 500  # tokens per observation (truncated, closed by env.closing)
    temperature: float = 1.0  # sampling temperature; 0 = greedy
    top_p: float = 1.0  # nucleus sampling mass
    prefill: str = ""  # text forced at the start of the first turn (env_mask 0), e.g. "<search>"
    last_turn_nudge: bool = False  # end the text before the final turn with env.nudge()

    def __post_init__(self) -> None:
        checks = [
            (self.max_turns >= 1, "max_turns must be >= 1"),
            (self.max_response_tokens >= 1, "max_response_tokens must be >= 1"),
            (self.max_obs_tokens >= 16, "max_obs_tokens must be >= 16 (room for the tags)"),
            (self.temperature >= 0, "temperature must be >= 0 (0 = greedy)"),
            (0 < self.top_p <= 1, "top_p must be in (0, 1]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"AgentConfig: {message}; got {self}")


@dataclass(frozen=True)
class Episode:
    """One rollout to play: a question under an instruction. ``seed``: the episode's own sampling
    seed (each turn samples from :func:`~inspo.engines.row_seeds.turn_seed` of it, whatever else
    shares the batch); None: the engine's own randomness."""

    question: Question
    instruction: Instruction
    seed: int | None = None


@dataclass
class _Trajectory:
    episode: Episode
    prompt_text: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    turn_text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    turns: int = 0
    finish: str | None = None
    error: str | None = None
    n_invalid: int = 0
    n_obs_truncated: int = 0
    n_tool_errors: int = 0
    state: Any = None
    """A stateful environment's :class:`~inspo.envs.state.EpisodeState` for this episode."""

    def generation_input(self) -> GenerationInput:
        seed = self.episode.seed
        return GenerationInput(
            self.prompt_ids,
            list(self.completion_ids),
            self.prompt_text + "".join(self.texts),
            seed=None if seed is None else turn_seed(seed, self.turns + 1),
        )

    def add(self, text: str, ids: list[int], mask: int) -> None:
        self.texts.append(text)
        self.completion_ids.extend(ids)
        self.env_mask.extend([mask] * len(ids))


def run_rollouts(
    engine: PolicyEngine,
    env: Environment,
    config: AgentConfig,
    episodes: Sequence[Episode],
) -> list[Rollout]:
    """Play every episode to the end (see the module docstring); one Rollout per episode, in order.

    Raises what the engine raises, and an :class:`~inspo.records.EndpointDown` of a tool (callers
    that must not fail, like :func:`inspo.envs.evaluate.make_evaluate`, isolate examples
    themselves); a tool that fails otherwise makes its episode an error rollout.
    """
    tokens = _Tokens(engine, config)
    trajectories: list[_Trajectory] = []
    opener = getattr(env, "open_episode", None)  # a stateful environment (inspo.envs.state)
    schemas = _bind(env, engine)
    try:
        for ep in episodes:
            messages = env.messages(ep.instruction.text, ep.question)
            text = (
                engine.prompt_text(messages, tools=schemas)
                if schemas
                else engine.prompt_text(messages)
            )
            traj = _Trajectory(
                ep, text, tokens.ids(text), state=opener(ep.question) if opener else None
            )
            if config.prefill:
                traj.add(config.prefill, tokens.ids(config.prefill), 0)
                traj.turn_text = config.prefill
            trajectories.append(traj)
        cache = getattr(engine, "episode_cache", None)  # HFEngine: a turn prefills what it adds
        with cache() if cache is not None else nullcontext():
            return _play(engine, env, config, tokens, trajectories)
    finally:  # each episode's instance is closed, whatever happened
        for traj in trajectories:
            if traj.state is not None:
                env.close_episode(traj.state)


def _bind(env: Environment, engine: PolicyEngine) -> list[dict] | None:
    """A native-tool-call environment (:mod:`inspo.envs.native`) reads its framing from the
    engine's chat template; its tools' schemas go to the template. None for every other one."""
    bind = getattr(env, "bind_engine", None)
    if bind is None:
        return None
    bind(engine)
    return list(env.tool_schemas)


def _play(
    engine: PolicyEngine,
    env: Environment,
    config: AgentConfig,
    tokens: _Tokens,
    trajectories: list[_Trajectory],
) -> list[Rollout]:
    """The turns of :func:`run_rollouts`, then each trajectory's Rollout."""
    final_turn = config.max_turns + 1
    for turn in range(1, final_turn + 1):
        active = [t for t in trajectories if t.finish is None]
        if not active:
            break
        generations = engine.generate(
            [t.generation_input() for t in active],
            max_new_tokens=config.max_response_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            stop=env.stop,
        )
        if len(generations) != len(active):
            raise RuntimeError(
                f"engine returned {len(generations)} generations for {len(active)} inputs"
            )
        nudge = config.last_turn_nudge and turn == config.max_turns
        calling = _apply_turn(
            env, tokens, active, generations, final=turn == final_turn, nudge=nudge
        )
        if calling:
            _call_tools(env, tokens, calling, nudge=nudge)
    return [_finish(env, tokens, t) for t in trajectories]


def _apply_turn(
    env: Environment,
    tokens: _Tokens,
    active: list[_Trajectory],
    generations: list[Generation],
    *,
    final: bool,
    nudge: bool,
) -> list[tuple[_Trajectory, ToolCall]]:
    """Record one turn's generations, decide each trajectory's fate, return the tool calls.

    An answer ends the episode; so does anything on the ``final`` turn (its call is not run).
    Otherwise a call of one of the environment's tools is returned to be run and anything else
    gets the corrective message; an EOS that ends such a turn is dropped (the episode goes on).
    """
    calling = []
    for traj, gen in zip(active, generations, strict=True):
        action = env.parse(traj.turn_text + gen.text)
        traj.turn_text = ""
        traj.turns += 1
        answered = isinstance(action, FinalAnswer)
        ends = answered or final
        ids = list(gen.token_ids) if tokens.keep_ids else []
        if gen.finish == "eos" and ids and not ends:
            ids = ids[:-1]  # the engine keeps the EOS as the last id; the episode goes on
        traj.add(gen.text, ids, 1)
        if answered:
            traj.finish = "answer"
        elif final:
            traj.finish = _FINAL_FINISH[gen.finish]
        elif isinstance(action, ToolCall) and action.tool in env.tools:
            calling.append((traj, action))
        else:
            traj.n_invalid += 1
            text = env.invalid() + (env.nudge() if nudge else "")
            traj.add(text, tokens.ids(text), 0)
    return calling


def _call_tools(
    env: Environment, tokens: _Tokens, calling: list[tuple[_Trajectory, ToolCall]], *, nudge: bool
) -> None:
    """The turn's calls, one :func:`~inspo.envs.tools.run_calls` per tool (a batched tool gets them
    all at once); each trajectory gets its (capped) observation, or fails on its tool's error."""
    by_tool: dict[tuple[str, int], list[tuple[_Trajectory, ToolCall]]] = {}
    for traj, call in calling:  # an episode's own instance's tools are run apart (inspo.envs.state)
        own = traj.state is not None and call.tool in traj.state.tools
        by_tool.setdefault((call.tool, id(traj) if own else 0), []).append((traj, call))
    suffix = env.nudge() if nudge else ""
    for (name, own), calls in by_tool.items():
        tool = calls[0][0].state.tools[name] if own else env.tools[name]
        results = run_calls(tool, [call.args for _, call in calls])
        if len(results) != len(calls):
            raise RuntimeError(
                f"tool {name!r} returned {len(results)} results for {len(calls)} calls"
            )
        for (traj, call), result in zip(calls, results, strict=True):
            traj.calls.append(call)
            if isinstance(result, ToolFailed):
                traj.finish, traj.error = "error", str(result)
                continue
            traj.n_tool_errors += isinstance(result, Refusal)
            text, ids, truncated = tokens.observation(
                env.observe(call, result), env.closing(call), reserve=tokens.count(suffix)
            )
            traj.n_obs_truncated += truncated
            traj.add(text, ids, 0)
            if suffix:
                traj.add(suffix, tokens.ids(suffix), 0)


class _Tokens:
    """Tokenises environment text for one rollout batch (ids only for id-keeping engines)."""

    def __init__(self, engine: PolicyEngine, config: AgentConfig) -> None:
        self.engine = engine
        self.config = config
        self.keep_ids = bool(engine.keeps_token_ids)
        self.warned = False

    def ids(self, text: str) -> list[int]:
        return list(self.engine.encode(text) or []) if self.keep_ids else []

    def count(self, text: str) -> int:
        """Tokens of ``text`` (approximated from characters when the engine has no tokenizer)."""
        if not text:
            return 0
        ids = self.engine.encode(text)
        return len(ids) if ids is not None else -(-len(text) // CHARS_PER_TOKEN)

    def observation(self, text: str, tail: str, *, reserve: int) -> tuple[str, list[int], bool]:
        """Cap an observation at ``max_obs_tokens - reserve`` tokens; returns (text, ids, cut).

        A cut observation keeps its head ids and ends with ``tail``; its text is the decode of
        the kept ids, so mask-0 spans always decode to the recorded text.
        """
        budget = self.config.max_obs_tokens - reserve
        room = budget - self.count(tail)
        if room < MIN_RESULT_TOKENS and not self.warned:
            self.warned = True
            log.warning(
                "rl.max_obs_tokens=%d leaves %d token(s) for a tool's result once its closing text "
                "and the last-turn nudge (%d tokens) are counted: results will be cut to almost "
                "nothing; raise rl.max_obs_tokens or turn rl.last_turn_nudge off",
                self.config.max_obs_tokens,
                max(room, 0),
                reserve,
            )
        if not text.endswith(tail):
            raise ValueError(
                f"an observation must end with the environment's closing text {tail!r}; got "
                f"...{text[-40:]!r} (env.observe and env.closing disagree)"
            )
        body = text[: len(text) - len(tail)]
        limit = budget * CHARS_PER_TOKEN
        ids = self.engine.encode(text)
        if ids is None:  # no tokenizer: cap by characters
            if len(text) <= limit:
                return text, [], False
            return body[: max(limit - len(tail), 0)] + tail, [], True
        if len(ids) <= budget:
            return text, list(ids) if self.keep_ids else [], False
        tail_ids = list(self.engine.encode(tail) or [])
        head = list(self.engine.encode(body) or [])[: max(budget - len(tail_ids), 0)]
        cut_text = self.engine.decode(head) + tail
        return cut_text, head + tail_ids if self.keep_ids else [], True


def _finish(env: Environment, tokens: _Tokens, traj: _Trajectory) -> Rollout:
    """Turn a finished trajectory into its Rollout: response, answer, reward, metrics."""
    response = tokens.engine.decode(traj.completion_ids) if tokens.keep_ids else "".join(traj.texts)
    question = traj.episode.question
    failed = traj.finish == "error"
    n_policy = sum(traj.env_mask)
    scores: dict[str, float] = {}
    if failed:
        reward = 0.0
    elif traj.state is not None:  # scored while the episode's instance is open: its final state
        reward, values = env.score_episode(response, question, traj.state.instance)
        scores = {f"rubric/{k}": v for k, v in values.items()}
    else:
        reward = env.reward(response, question)
    return Rollout(
        question=question,
        instruction_id=traj.episode.instruction.id,
        response=response,
        reward=reward,
        answer=None if failed else env.answer(response),
        tool_calls=list(traj.calls),
        turns=traj.turns,
        finish_reason=traj.finish or "turn_limit",
        error=traj.error,
        prompt_ids=list(traj.prompt_ids),
        completion_ids=list(traj.completion_ids),
        env_mask=list(traj.env_mask),
        metrics={
            "n_tokens": float(len(traj.completion_ids)),
            "n_policy_tokens": float(n_policy),
            "n_env_tokens": float(len(traj.env_mask) - n_policy),
            "n_prompt_tokens": float(len(traj.prompt_ids)),
            "n_tool_calls": float(len(traj.calls)),
            "n_tool_errors": float(traj.n_tool_errors),
            "n_invalid": float(traj.n_invalid),
            "n_obs_truncated": float(traj.n_obs_truncated),
            "response_chars": float(len(response)),
            **scores,
        },
    )
