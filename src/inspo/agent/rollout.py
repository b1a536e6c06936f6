"""Batched multi-turn search rollouts, token ids kept end to end.

:func:`run_rollouts` plays many episodes (question + instruction) at once, turn by turn:

1. the engine continues every still-active trajectory in ONE ``generate`` call, each turn
   capped at ``max_response_tokens`` and stopped at ``</search>``, ``</answer>`` or EOS;
2. each turn's text (the prefill, on turn 1, plus what the policy wrote) is parsed with
   :func:`~inspo.agent.protocol.parse_action`;
3. every search of the turn goes to the retriever in ONE ``retriever.search(queries, k)``
   call; each searching trajectory gets Search-R1's ``<information>`` observation, capped at
   ``max_obs_tokens`` (truncated ids, always closed by ``</information>``);
4. an invalid turn (no complete tag) gets Search-R1's corrective message and goes on.

A trajectory ends (``Rollout.finish_reason``) with:

- ``"answer"``: its turn holds a complete ``<answer>…</answer>``;
- ``"eos"``: the policy ended its message without an answer (we do not write after an EOS
  token, unlike Search-R1, which drops the EOS when it re-tokenises);
- ``"length"``: the turn hit ``max_response_tokens`` without a stop;
- ``"max_turns"``: the last allowed turn (``max_turns``) ended with a search or an invalid
  action. The observation before that last turn ends with :data:`LAST_TURN_NUDGE` (environment
  text) telling the policy to answer now; a search on the last turn is not executed.
- ``"error"``: set by :mod:`inspo.agent.evaluate` for an example that raised.

Token ids: ``prompt_ids`` is the encoded prompt; ``completion_ids`` grows by the engine's
returned ids (never re-tokenised) and by encoded environment text; ``env_mask`` is 1 exactly on
the ids the policy sampled and 0 on everything the environment wrote: observations, corrective
messages, the nudge, and the ``prefill`` (forced text, not sampled, so not trained on; it still
belongs to the response, so a prefilled ``<search>`` opens the first action). The model sees
exactly ``prompt_ids + completion_ids`` each turn. ``response`` is the decode of
``completion_ids`` (special tokens skipped). Engines without token ids (OpenAIEngine) give
text-only rollouts: empty id lists and the response is the concatenated text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from inspo.agent.engines import Generation, GenerationInput, PolicyEngine
from inspo.agent.protocol import (
    INVALID_ACTION_MESSAGE,
    LAST_TURN_NUDGE,
    OBSERVATION_TAIL,
    STOP_STRINGS,
    extract_answer,
    format_observation,
    parse_action,
)
from inspo.agent.rewards import RewardSpec
from inspo.records import Instruction, Question, Rollout
from inspo.retrieval.base import Retriever

#: Characters per token assumed when an engine has no tokenizer to count observation tokens.
CHARS_PER_TOKEN = 4


@dataclass
class AgentConfig:
    """How the agent plays an episode."""

    max_turns: int = 4  # policy turns per episode; the last one must answer
    max_response_tokens: int = 500  # new tokens per policy turn
    max_obs_tokens: int = 500  # tokens per observation (truncated, closed by </information>)
    topk: int = 3  # passages per search (the paper keeps the top 3)
    temperature: float = 1.0  # sampling temperature; 0 = greedy
    top_p: float = 1.0  # nucleus sampling mass
    reward: str = "em"  # "em" (the paper) or "f1"
    format_weight: float = 0.0  # bonus * format_ok(response) added to the reward
    prefill: str = ""  # text forced at the start of the response (env_mask 0), e.g. "<search>"

    def __post_init__(self) -> None:
        checks = [
            (self.max_turns >= 1, "max_turns must be >= 1"),
            (self.max_response_tokens >= 1, "max_response_tokens must be >= 1"),
            (self.max_obs_tokens >= 16, "max_obs_tokens must be >= 16 (room for the tags)"),
            (self.topk >= 1, "topk must be >= 1"),
            (self.temperature >= 0, "temperature must be >= 0 (0 = greedy)"),
            (0 < self.top_p <= 1, "top_p must be in (0, 1]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"AgentConfig: {message}; got {self}")
        self.reward_spec  # noqa: B018 -- validates reward and format_weight

    @property
    def reward_spec(self) -> RewardSpec:
        return RewardSpec(metric=self.reward, format_weight=self.format_weight)


@dataclass(frozen=True)
class Episode:
    """One rollout to play: a question under an instruction."""

    question: Question
    instruction: Instruction


@dataclass
class _Trajectory:
    episode: Episode
    prompt_text: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    turn_text: str = ""
    searches: list[str] = field(default_factory=list)
    turns: int = 0
    finish: str | None = None
    n_invalid: int = 0
    n_obs_truncated: int = 0

    def generation_input(self) -> GenerationInput:
        return GenerationInput(
            self.prompt_ids, list(self.completion_ids), self.prompt_text + "".join(self.texts)
        )

    def add(self, text: str, ids: list[int], mask: int) -> None:
        self.texts.append(text)
        self.completion_ids.extend(ids)
        self.env_mask.extend([mask] * len(ids))


def run_rollouts(
    engine: PolicyEngine,
    retriever: Retriever,
    config: AgentConfig,
    episodes: Sequence[Episode],
) -> list[Rollout]:
    """Play every episode to the end (see the module docstring); one Rollout per episode, in order.

    Raises what the engine or the retriever raises (callers that must not fail, like
    :func:`inspo.agent.evaluate.make_evaluate`, isolate examples themselves).
    """
    env = _Env(engine, config)
    trajectories = []
    for ep in episodes:
        text = engine.prompt_text(ep.instruction.text, ep.question.question)
        traj = _Trajectory(ep, text, env.ids(text))
        if config.prefill:
            traj.add(config.prefill, env.ids(config.prefill), 0)
            traj.turn_text = config.prefill
        trajectories.append(traj)

    for turn in range(1, config.max_turns + 1):
        active = [t for t in trajectories if t.finish is None]
        if not active:
            break
        generations = engine.generate(
            [t.generation_input() for t in active],
            max_new_tokens=config.max_response_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            stop=STOP_STRINGS,
        )
        if len(generations) != len(active):
            raise RuntimeError(
                f"engine returned {len(generations)} generations for {len(active)} inputs"
            )
        nudge = turn == config.max_turns - 1
        searching = _apply_turn(
            env, active, generations, last=turn == config.max_turns, nudge=nudge
        )
        if searching:
            _search(env, retriever, searching, nudge=nudge)
    return [_finish(env, t) for t in trajectories]


def _apply_turn(
    env: _Env,
    active: list[_Trajectory],
    generations: list[Generation],
    *,
    last: bool,
    nudge: bool,
) -> list[tuple[_Trajectory, str]]:
    """Record one turn's generations, decide each trajectory's fate, return the searches."""
    searching = []
    for traj, gen in zip(active, generations, strict=True):
        traj.add(gen.text, list(gen.token_ids) if env.keep_ids else [], 1)
        traj.turns += 1
        action = parse_action(traj.turn_text + gen.text)
        traj.turn_text = ""
        if action.kind == "answer":
            traj.finish = "answer"
        elif gen.finish in ("eos", "length"):
            traj.finish = gen.finish
        elif last:
            traj.finish = "max_turns"
        elif action.kind == "search":
            searching.append((traj, action.content))
        else:
            traj.n_invalid += 1
            text = INVALID_ACTION_MESSAGE + (LAST_TURN_NUDGE if nudge else "")
            traj.add(text, env.ids(text), 0)
    return searching


def _search(
    env: _Env, retriever: Retriever, searching: list[tuple[_Trajectory, str]], *, nudge: bool
) -> None:
    """All searches of one turn in ONE retriever call; each gets its (capped) observation."""
    queries = [query for _, query in searching]
    results = retriever.search(queries, env.config.topk)
    if len(results) != len(queries):
        raise RuntimeError(f"retriever returned {len(results)} results for {len(queries)} queries")
    suffix = LAST_TURN_NUDGE if nudge else ""
    for (traj, query), passages in zip(searching, results, strict=True):
        traj.searches.append(query)
        observation = format_observation(list(passages)[: env.config.topk])
        text, ids, truncated = env.observation(observation, reserve=env.count(suffix))
        traj.n_obs_truncated += truncated
        traj.add(text, ids, 0)
        if suffix:
            traj.add(suffix, env.ids(suffix), 0)


class _Env:
    """Tokenises environment text for one rollout batch (ids only for id-keeping engines)."""

    def __init__(self, engine: PolicyEngine, config: AgentConfig) -> None:
        self.engine = engine
        self.config = config
        self.keep_ids = bool(engine.keeps_token_ids)

    def ids(self, text: str) -> list[int]:
        return list(self.engine.encode(text) or []) if self.keep_ids else []

    def count(self, text: str) -> int:
        """Tokens of ``text`` (approximated from characters when the engine has no tokenizer)."""
        if not text:
            return 0
        ids = self.engine.encode(text)
        return len(ids) if ids is not None else -(-len(text) // CHARS_PER_TOKEN)

    def observation(self, text: str, *, reserve: int) -> tuple[str, list[int], bool]:
        """Cap an observation at ``max_obs_tokens - reserve`` tokens; returns (text, ids, cut).

        A cut observation keeps its head ids and ends with ``</information>\\n\\n``; its text
        is the decode of the kept ids, so mask-0 spans always decode to the recorded text.
        """
        budget = self.config.max_obs_tokens - reserve
        body = text[: -len(OBSERVATION_TAIL)]
        ids = self.engine.encode(text)
        if ids is None:  # no tokenizer: cap by characters
            limit = budget * CHARS_PER_TOKEN
            if len(text) <= limit:
                return text, [], False
            return body[: max(limit - len(OBSERVATION_TAIL), 0)] + OBSERVATION_TAIL, [], True
        if len(ids) <= budget:
            return text, list(ids) if self.keep_ids else [], False
        tail = list(self.engine.encode(OBSERVATION_TAIL) or [])
        head = list(self.engine.encode(body) or [])[: max(budget - len(tail), 0)]
        cut_text = self.engine.decode(head) + OBSERVATION_TAIL
        return cut_text, head + tail if self.keep_ids else [], True


def _finish(env: _Env, traj: _Trajectory) -> Rollout:
    """Turn a finished trajectory into its Rollout: response, answer, reward, metrics."""
    response = env.engine.decode(traj.completion_ids) if env.keep_ids else "".join(traj.texts)
    answer = extract_answer(response)
    question = traj.episode.question
    n_policy = sum(traj.env_mask)
    return Rollout(
        question=question,
        instruction_id=traj.episode.instruction.id,
        response=response,
        reward=env.config.reward_spec(response, question.answers),
        answer=answer,
        searches=list(traj.searches),
        turns=traj.turns,
        finish_reason=traj.finish or "max_turns",
        prompt_ids=list(traj.prompt_ids),
        completion_ids=list(traj.completion_ids),
        env_mask=list(traj.env_mask),
        metrics={
            "n_tokens": float(len(traj.completion_ids)),
            "n_policy_tokens": float(n_policy),
            "n_env_tokens": float(len(traj.env_mask) - n_policy),
            "n_prompt_tokens": float(len(traj.prompt_ids)),
            "n_searches": float(len(traj.searches)),
            "n_invalid": float(traj.n_invalid),
            "n_obs_truncated": float(traj.n_obs_truncated),
            "response_chars": float(len(response)),
        },
    )
