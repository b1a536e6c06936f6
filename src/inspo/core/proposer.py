"""The proposer: asks the optimizer LLM for new instructions and guards what comes back.

One :meth:`Proposer.propose` call renders one App. E template (reflection, paraphrase or
history), makes one optimizer call for N candidates (``answers`` samples of it: N from each),
parses ``<ins_1>…<ins_N>`` (with the
fallbacks of :func:`inspo.core.templates.parse_answer`, each logged and counted in
``Proposal.parse_fallbacks``) and runs every candidate through :func:`guard`. It never raises
for an optimizer failure: the :class:`Proposal` then carries ``error`` and no candidates.

With a protocol (``coevolution.protocol_block``: the environment's
:class:`~inspo.tool_protocol.ToolProtocol`) the prompt shows the parent's strategy (the
instruction without its protocol block), the optimizer writes strategies, and each candidate is
``protocol.compose(strategy)``: no candidate can drop a tag. :func:`strategy_refusal` refuses an
empty strategy or the parent's own; the guard still runs on the composed text.

:func:`leaked_answer` is the answer-leak check the co-evolution loop runs on the candidates
before verification (it alone knows the failures shown and D_B); it is pure and lives here,
beside the guard.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.answers import normalize_answer
from inspo.core.answer_cache import AnswerCache, PaidAnswer, answer_key
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.leak_scope import leak_form
from inspo.core.optimizer_llm import FINISH_LENGTH, LLMClient, LLMError
from inspo.core.templates import (
    PARSE_FALLBACKS,
    ScoredInstruction,
    critique_of,
    parse_answer,
    render_history,
    render_paraphrase,
    render_reflection,
)
from inspo.records import Candidate, Instruction, Rollout
from inspo.rng import rng_from_json, rng_to_json
from inspo.tool_protocol import ToolProtocol

logger = logging.getLogger("inspo.core")


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def tags_in(text: str, tags: Sequence[str]) -> set[str]:
    """Those of ``tags`` of which ``text`` has both the opening and the closing form."""
    return {t for t in tags if f"<{t}>" in text and f"</{t}>" in text}


def guard(
    text: str, parent: str, existing: Sequence[str], max_chars: int, tags: Sequence[str] = ()
) -> str | None:
    """Why a candidate must be rejected, or None when it may go on to verification.

    Rejected: empty (no letter or digit, such as App. E's ``<ins_1>...</ins_1>`` echoed back);
    longer than ``max_chars``; missing (opening or closing) one of ``tags`` (the environment's
    required tags, unless the run names others) that the parent has;
    a duplicate of the parent, of a population member or of an earlier candidate (compared case-
    and whitespace-insensitively).
    """
    if not any(ch.isalnum() for ch in text):
        return "empty"
    if len(text) > max_chars:
        return f"too long: {len(text)} characters > {max_chars}"
    missing = sorted(tags_in(parent, tags) - tags_in(text, tags))
    if missing:
        return "drops protocol tag(s) " + ", ".join(f"<{t}>…</{t}>" for t in missing)
    norm = _normalise(text)
    if norm == _normalise(parent):
        return "duplicate of its parent"
    if any(norm == _normalise(e) for e in existing):
        return "duplicate of an existing instruction or candidate"
    return None


def strategy_refusal(strategy: str, parent_strategy: str) -> str | None:
    """Why a candidate STRATEGY must be rejected before it is composed with the protocol block,
    or None: empty (no letter or digit: the block alone is no new instruction), or the parent's
    own strategy (compared as :func:`guard` compares)."""
    if not any(ch.isalnum() for ch in strategy):
        return "empty strategy"
    if _normalise(strategy) == _normalise(parent_strategy):
        return "duplicate of its parent"
    return None


#: The leak check skips answers shorter than this many characters once normalised ("1", "us"):
#: tokens that short turn up in ordinary instructions ("tell us", "at most 2") too often to mean a
#: leak.
MIN_LEAK_CHARS = 3
#: Answers the leak check skips wherever they occur: words ordinary instructions use ("answer yes
#: or no", "one entity per query"), so finding one says nothing about a question's answer.
COMMON_ANSWERS = frozenset(
    {
        "yes",
        "no",
        "true",
        "false",
        "none",
        "unknown",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
    }
)


def leaked_answer(text: str, answers: Iterable[str], parent: str = "") -> str | None:
    """The first of ``answers`` that ``text`` contains (as given, for the reason), or None.

    Compared after exact match's normalisation (:func:`~inspo.answers.normalize_answer`: case,
    punctuation, articles, whitespace) on whole tokens: ``"The Velmor"`` is found in
    ``"<answer>velmor</answer>"``, but ``"1,204"`` (``1204``) is not found in ``"11,2045"``
    (``112045``) nor ``"Velmor"`` in ``"Velmorian"``. Never a leak: an answer that normalises to
    fewer than :data:`MIN_LEAK_CHARS` characters, one of :data:`COMMON_ANSWERS`, or one that
    ``parent`` already contains (the parent was admitted with it: Search-R1's seed shows
    ``<answer> Beijing </answer>``).
    """
    found_in, known = leak_form(text), leak_form(parent)
    for answer in answers:
        norm = normalize_answer(answer)
        if len(norm) < MIN_LEAK_CHARS or norm in COMMON_ANSWERS:
            continue
        if f" {norm} " in found_in and f" {norm} " not in known:
            return answer
    return None


@dataclass
class Proposal:
    """What one optimizer call produced."""

    parent_id: str
    template: str
    critique: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[Candidate] = field(default_factory=list)
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parse_fallbacks: dict[str, int] = field(default_factory=dict)
    """How often each parser fallback was needed to read the answer (keys of
    :data:`~inspo.core.templates.PARSE_FALLBACKS`; kinds never needed are left out)."""
    cut_off: bool = False
    """The optimizer's completion stopped at ``max_tokens`` (see :meth:`Proposer.hit_limit`)."""


LengthCheck = Callable[[str], "str | None"]
"""``check(instruction_text) -> reason or None``: the trainer's own limit on an instruction
(for example the prompt it makes, in tokens, against ``rl.max_prompt_tokens``)."""


class Proposer:
    """Renders a template, calls the optimizer once, parses and guards the candidates.

    ``new_id`` hands out candidate ids (the core's counter) so admitted candidates keep them.
    ``fits`` is the trainer's length check, run after :func:`guard` on every candidate.
    ``guard_tags`` are the tags a candidate must keep (the environment's required ones, or the
    run's ``coevolution.guard_tags``); ``feedback`` (``coevolution.feedback``) adds each failure's
    feedback line to the reflection prompt. A
    candidate cut off by the optimizer's completion limit (an ``<ins_i>`` still open when the
    completion stopped at ``max_tokens``, see :meth:`hit_limit`) is recorded as rejected
    ("truncated"), never silently dropped; a block left open in an answer that ended by itself
    is read as a candidate (a fallback, logged and counted).

    ``protocol`` (the environment's, under ``coevolution.protocol_block``): prompts show
    strategies and ask for strategies, and each candidate becomes ``protocol.compose(strategy)``
    (one that already ends with the block is taken without it); its block must hold every guard
    tag, or every candidate would be refused (ValueError).
    """

    def __init__(
        self,
        llm: LLMClient,
        *,
        template: str = "reflection",
        n_candidates: int = 6,
        max_chars: int = 6000,
        temperature: float = 1.0,
        max_tokens: int = 4096,
        guard_tags: Sequence[str] = (),
        fits: LengthCheck | None = None,
        feedback: Callable[[Rollout], str] | None = None,
        answers: int = 1,
        protocol: ToolProtocol | None = None,
    ):
        if answers < 1:
            raise ValueError(f"answers must be >= 1, got {answers}")
        lacking = sorted(set(guard_tags) - tags_in(protocol.block, guard_tags)) if protocol else []
        if lacking:
            shown = ", ".join(f"<{t}>…</{t}>" for t in lacking)
            raise ValueError(
                f"the protocol block lacks {shown}, a tag the guard requires "
                "(required_tags or coevolution.guard_tags): add it to the block, or "
                "leave it out of the guard"
            )
        self.protocol = protocol
        self.answers = answers
        self.calls = 0
        """Optimizer calls made (saved in the state: it keys :attr:`cache`)."""
        self.cache: AnswerCache | None = None
        """Where the run keeps the answers it paid for (set by the driver; None: none kept)."""
        self.llm = llm
        self.fits = fits
        self.feedback = feedback
        self.template = template
        self.n_candidates = n_candidates
        self.max_chars = max_chars
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.guard_tags = tuple(guard_tags)

    def state_dict(self) -> dict[str, Any]:
        """The calls made so far (what keys the :class:`~inspo.core.answer_cache.AnswerCache`), and
        the optimizer client's sampling stream, for a client that draws its sampling seeds from a
        plain ``random.Random`` it exposes as ``sampling_rng`` (the local model; ``SystemRandom``
        has no state to save)."""
        rng = getattr(self.llm, "sampling_rng", None)
        state: dict[str, Any] = {"calls": self.calls}
        if type(rng) is random.Random:
            state["sampling_rng"] = rng_to_json(rng.getstate())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue a saved sampling stream (one saved for a client without one is not used) and
        call count."""
        self.calls = int(state.get("calls", 0))
        rng = getattr(self.llm, "sampling_rng", None)
        if type(rng) is random.Random and state.get("sampling_rng"):
            rng.setstate(rng_from_json(state["sampling_rng"]))

    @classmethod
    def from_config(
        cls,
        llm: LLMClient,
        config: CoEvolutionConfig,
        fits: LengthCheck | None = None,
        *,
        required_tags: Sequence[str] = (),
        feedback: Callable[[Rollout], str] | None = None,
        protocol: ToolProtocol | None = None,
    ) -> Proposer:
        """The proposer a co-evolution config describes (template, N, guard, sampling);
        ``required_tags`` (the environment's) are guarded unless ``config.guard_tags`` names others,
        ``feedback`` (the environment's) is shown only under ``config.feedback``, and ``protocol``
        (the environment's) is used only under ``config.protocol_block``, which needs one when the
        run proposes at all (ConfigError naming the fix)."""
        proposes = config.evolve or config.init_population
        if config.protocol_block and protocol is None and proposes:
            raise ConfigError(
                "coevolution.protocol_block is on, but the environment has no protocol block (its "
                "`protocol` attribute): give it one, protocol = "
                "inspo.envs.ToolProtocol(tags=(...), block='how to write each tag'), as "
                "TaggedToolEnv does, or set coevolution.protocol_block: false"
            )
        return cls(
            llm,
            fits=fits,
            template=config.template,
            n_candidates=config.candidates_per_call,
            max_chars=config.max_instruction_chars,
            temperature=config.optimizer_temperature,
            max_tokens=config.optimizer_max_tokens,
            guard_tags=config.guard_tags if config.guard_tags is not None else required_tags,
            feedback=feedback if config.feedback else None,
            answers=config.answers_per_call,
            protocol=protocol if config.protocol_block else None,
        )

    def strategy(self, text: str) -> str:
        """What the optimizer sees of an instruction: its strategy under a protocol, else all."""
        return self.protocol.strategy(text) if self.protocol is not None else text

    def render(
        self, parent: Instruction, failures: Sequence[Rollout], history: Sequence[ScoredInstruction]
    ) -> str:
        tags = self.protocol.tags if self.protocol is not None else None
        shown = self.strategy(parent.text)
        if self.template == "reflection":
            return render_reflection(
                shown, failures, self.n_candidates, self.feedback, protocol_tags=tags
            )
        if self.template == "paraphrase":
            return render_paraphrase(shown, self.n_candidates, protocol_tags=tags)
        entries = [ScoredInstruction(self.strategy(h.text), h.score) for h in history]
        entries = entries or [ScoredInstruction(shown, 0.0)]
        return render_history(entries, self.n_candidates, protocol_tags=tags)

    def hit_limit(
        self, completion_tokens: int, index: int = 0, reasons: Sequence[str | None] | None = None
    ) -> bool:
        """Whether completion ``index`` of the last optimizer call stopped at ``max_tokens``: the
        client's finish reason where it gives one (``reasons``, else the client's
        ``last_finish_reasons``, see :mod:`inspo.core.optimizer_llm`), else whether the call's
        ``completion_tokens`` (from ``usage``; estimated by some clients) over its completions
        reached ``max_tokens`` each."""
        reasons = reasons if reasons else getattr(self.llm, "last_finish_reasons", None)
        if reasons and len(reasons) > index and reasons[index] is not None:
            return reasons[index] == FINISH_LENGTH
        return completion_tokens >= self.max_tokens * self.answers

    def propose(
        self,
        parent: Instruction,
        failures: Sequence[Rollout],
        *,
        history: Sequence[ScoredInstruction] = (),
        existing: Sequence[str] = (),
        new_id: Callable[[], str],
    ) -> Proposal:
        proposal = Proposal(parent_id=parent.id, template=self.template)
        prompt = self.render(parent, failures, history)
        try:
            paid = self._ask(prompt, proposal)
        except LLMError as exc:
            proposal.error = f"optimizer call failed: {exc}"
            return proposal
        outputs = paid.answers
        texts: list[str] = []
        for index, answer in enumerate(outputs or [""]):
            if index == 0:
                proposal.critique = critique_of(answer)
            cut_off = self.hit_limit(proposal.completion_tokens, index, paid.finish_reasons)
            proposal.cut_off = proposal.cut_off or cut_off
            parsed = parse_answer(answer, parent=self.strategy(parent.text), cut_off=cut_off)
            for kind, count in parsed.fallbacks.items():
                proposal.parse_fallbacks[kind] = proposal.parse_fallbacks.get(kind, 0) + count
            for kind, ins in parsed.notes:
                logger.info(
                    "optimizer answer for %s: <ins_%d> read by the %s fallback (%s)",
                    parent.id,
                    ins,
                    kind,
                    PARSE_FALLBACKS[kind],
                )
            texts += parsed.candidates
            if parsed.truncated is not None:
                ins, body = parsed.truncated
                proposal.rejected.append(
                    Candidate(
                        id=new_id(),
                        text=body,
                        parent_id=parent.id,
                        origin=self.template,
                        critique=proposal.critique,
                        rejected="truncated: the optimizer's answer stopped at its completion "
                        f"limit inside <ins_{ins}> after {len(body)} characters (raise "
                        f"coevolution.optimizer_max_tokens, now {self.max_tokens})",
                    )
                )
        if not texts:
            snippet = re.sub(r"\s+", " ", outputs[0] if outputs else "")[:200]
            proposal.error = f"no <ins_i> candidate in the optimizer's answer: {snippet!r}"
            return proposal
        self._screen(proposal, texts, parent, list(existing), new_id)
        return proposal

    def _ask(self, prompt: str, proposal: Proposal) -> PaidAnswer:
        """The optimizer's answers to ``prompt`` (its tokens filled into ``proposal``): from the
        run's :class:`~inspo.core.answer_cache.AnswerCache` when this call was already paid for
        (its sampling stream then restored), else from the client, kept in the cache at once."""
        key = answer_key(
            self.calls,
            prompt,
            n=self.answers,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )
        self.calls += 1
        rng = getattr(self.llm, "sampling_rng", None)
        paid = self.cache.get(key) if self.cache is not None else None
        if paid is not None:
            if type(rng) is random.Random and paid.rng_after is not None:
                rng.setstate(rng_from_json(paid.rng_after))
            logger.info(
                "optimizer call %s replayed from %s (paid for before a resume)",
                key.split(":")[0],
                self.cache.path or "memory",
            )
        else:
            before = (self.llm.usage.prompt_tokens, self.llm.usage.completion_tokens)
            try:
                outputs = self.llm.generate(
                    [{"role": "user", "content": prompt}],
                    n=self.answers,
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                )
            finally:
                proposal.prompt_tokens = self.llm.usage.prompt_tokens - before[0]
                proposal.completion_tokens = self.llm.usage.completion_tokens - before[1]
            paid = PaidAnswer(
                list(outputs or []),
                proposal.prompt_tokens,
                proposal.completion_tokens,
                list(getattr(self.llm, "last_finish_reasons", None) or []),
                rng_to_json(rng.getstate()) if type(rng) is random.Random else None,
            )
            if self.cache is not None:
                self.cache.put(key, paid)
        proposal.prompt_tokens, proposal.completion_tokens = (
            paid.prompt_tokens,
            paid.completion_tokens,
        )
        return paid

    def _screen(
        self,
        proposal: Proposal,
        texts: Sequence[str],
        parent: Instruction,
        seen: list[str],
        new_id: Callable[[], str],
    ) -> None:
        """Each parsed text as a candidate (composed with the protocol block first, when there is
        one), guarded and filed under the proposal's candidates or rejected."""
        origin = getattr(self.llm, "origin", None) or self.template
        for text in texts:
            reason = None
            if self.protocol is not None:
                strategy = self.protocol.strategy(text)
                reason = strategy_refusal(strategy, self.strategy(parent.text))
                text = self.protocol.compose(strategy)
            cand = Candidate(
                id=new_id(),
                text=text,
                parent_id=parent.id,
                origin=origin,
                critique=proposal.critique,
            )
            cand.rejected = reason or guard(
                text, parent.text, seen, self.max_chars, self.guard_tags
            )
            if cand.rejected is None and self.fits is not None:
                cand.rejected = self.fits(text)
            if cand.rejected:
                proposal.rejected.append(cand)
            else:
                proposal.candidates.append(cand)
                seen.append(text)
