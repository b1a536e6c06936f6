"""Batched multi-turn search rollouts, token ids kept end to end.

:func:`run_rollouts` plays many episodes (question + instruction) at once, turn by turn, the
way Search-R1's ``LLMGenerationManager.run_llm_loop`` does: ``max_turns`` search turns, then ONE
final turn whose search is not executed. Each turn:

1. the engine continues every still-active trajectory in ONE ``generate`` call, each turn
   capped at ``max_response_tokens`` and stopped at ``</search>``, ``</answer>`` or EOS;
2. each turn's text (the prefill, on turn 1, plus what the policy wrote) is parsed with
   :func:`~inspo.agent.protocol.parse_action`;
3. on turns 1 … ``max_turns``, every search of the turn goes to the retriever in ONE
   ``retriever.search(queries, k)`` call; each searching trajectory gets Search-R1's
   ``<information>`` observation, capped at ``max_obs_tokens`` (truncated ids, always closed by
   ``</information>``);
4. on those turns, a turn without a complete search or answer tag (no tag, an EOS without an
   answer, or the ``max_response_tokens`` cap) gets Search-R1's corrective message
   :data:`~inspo.agent.protocol.INVALID_ACTION_MESSAGE` and the episode goes on;
5. with ``last_turn_nudge`` (off by default; Search-R1 has no such text), the observation or
   corrective message written after turn ``max_turns`` ends with
   :data:`~inspo.agent.protocol.LAST_TURN_NUDGE`, telling the policy to answer now.

So an episode has at most ``max_turns + 1`` policy turns and at most ``max_turns`` executed
searches. It ends (``Rollout.finish_reason``, one of :data:`FINISH_REASONS`) with:

- ``"answer"``: a turn holds a complete ``<answer>…</answer>``;
- ``"turn_limit"``: the final turn (``max_turns + 1``) stopped at a closing tag without an
  answer: a search (not executed) or a stray ``</search>`` / ``</answer>``;
- ``"eos"``: the final turn ended the policy's message (EOS) without an answer;
- ``"length"``: the final turn hit ``max_response_tokens`` without an answer;
- ``"error"``: set by :mod:`inspo.agent.evaluate` for an example that raised.

``"turn_limit"``, ``"eos"`` and ``"length"`` all mean "no answer after every turn was used";
they differ in how the final turn ended.

Token ids: ``prompt_ids`` is the encoded prompt; ``completion_ids`` grows by the engine's
returned ids (never re-tokenised) and by encoded environment text; ``env_mask`` is 1 exactly on
the ids the policy sampled and 0 on everything the environment wrote: observations, corrective
messages, the nudge, and the ``prefill`` (forced text, not sampled, so not trained on; it
opens the first turn only, so a prefilled ``<search>`` starts the first action). One exception
keeps a sampled id out: an EOS that ends a turn before the final one is dropped from the
trajectory, because the episode goes on after it (Search-R1 drops it too, when it decodes
without special tokens and re-tokenises); an EOS on the final turn is kept. The model sees
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
from inspo.agent.row_seeds import turn_seed
from inspo.records import Instruction, Question, Rollout
from inspo.retrieval.base import Retriever

#: Characters per token assumed when an engine has no tokenizer to count observation tokens.
CHARS_PER_TOKEN = 4

#: Every ``Rollout.finish_reason`` the agent writes (meanings in the module docstring).
FINISH_REASONS: tuple[str, ...] = ("answer", "eos", "length", "turn_limit", "error")

#: How the final turn's engine finish names an episode that ended there without an answer.
_FINAL_FINISH = {"stop": "turn_limit", "eos": "eos", "length": "length"}


@dataclass
class AgentConfig:
    """How the agent plays an episode."""

    max_turns: int = 4  # search turns per episode; one final answer turn follows (Search-R1)
    max_response_tokens: int = 500  # new tokens per policy turn
    max_obs_tokens: int = 500  # tokens per observation (truncated, closed by </information>)
    topk: int = 3  # passages per search (the paper keeps the top 3)
    temperature: float = 1.0  # sampling temperature; 0 = greedy
    top_p: float = 1.0  # nucleus sampling mass
    reward: str = "em"  # "em" (the paper) or "f1"
    format_weight: float = 0.0  # bonus * format_ok(response) added to the reward
    prefill: str = ""  # text forced at the start of the first turn (env_mask 0), e.g. "<search>"
    last_turn_nudge: bool = False  # end the text before the final turn with LAST_TURN_NUDGE

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
    """One rollout to play: a question under an instruction. ``seed``: the episode's own sampling
    seed (each turn samples from :func:`~inspo.agent.row_seeds.turn_seed` of it, whatever else
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
    searches: list[str] = field(default_factory=list)
    turns: int = 0
    finish: str | None = None
    n_invalid: int = 0
    n_obs_truncated: int = 0

    def generation_input(self) -> GenerationInput:
        seed = self.episode.seed
        return GenerationInput(
            self.prompt_ids, list(self.completion_ids), self.prompt_text + "".join(self.texts),
            seed=None if seed is None else turn_seed(seed, self.turns + 1),
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
            stop=STOP_STRINGS,
        )
        if len(generations) != len(active):
            raise RuntimeError(
                f"engine returned {len(generations)} generations for {len(active)} inputs"
            )
        nudge = config.last_turn_nudge and turn == config.max_turns
        searching = _apply_turn(env, active, generations, final=turn == final_turn, nudge=nudge)
        if searching:
            _search(env, retriever, searching, nudge=nudge)
    return [_finish(env, t) for t in trajectories]


def _apply_turn(
    env: _Env,
    active: list[_Trajectory],
    generations: list[Generation],
    *,
    final: bool,
    nudge: bool,
) -> list[tuple[_Trajectory, str]]:
    """Record one turn's generations, decide each trajectory's fate, return the searches.

    An answer ends the episode; so does anything on the ``final`` turn (its search is not
    executed). Otherwise a search is returned for execution and anything else gets the
    corrective message; an EOS that ends such a turn is dropped (the episode goes on after it).
    """
    searching = []
    for traj, gen in zip(active, generations, strict=True):
        action = parse_action(traj.turn_text + gen.text)
        traj.turn_text = ""
        traj.turns += 1
        ends = action.kind == "answer" or final
        ids = list(gen.token_ids) if env.keep_ids else []
        if gen.finish == "eos" and ids and not ends:
            ids = ids[:-1]  # the engine keeps the EOS as the last id; the episode goes on
        traj.add(gen.text, ids, 1)
        if action.kind == "answer":
            traj.finish = "answer"
        elif final:
            traj.finish = _FINAL_FINISH[gen.finish]
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
        finish_reason=traj.finish or "turn_limit",
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
