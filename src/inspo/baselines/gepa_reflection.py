"""The reflection step of GEPA on an inspo agent (:mod:`inspo.baselines.gepa_adapter`): GEPA's
reflective records of rollouts, and the two ways a GEPA iteration reflects on them: INSPO's own
App. E prompt and guard (:func:`inspo_reflection_proposer`), or GEPA's prompt with an inspo
``LLMClient`` as its ``reflection_lm`` (:func:`gepa_reflection_lm`)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from inspo.core.optimizer_llm import LLMClient
from inspo.core.proposer import Proposer
from inspo.records import Instruction, Question, Rollout

log = logging.getLogger("inspo.gepa")


def reflective_record(rollout: Rollout, env: Any) -> dict[str, Any]:
    """GEPA's reflective record of one rollout (JSON-serialisable); the feedback is ``env``'s."""
    return {
        "Inputs": rollout.question.question,
        "Generated Outputs": rollout.response,
        "Feedback": env.feedback(rollout),
        "Correct answers": list(rollout.question.answers),
        "Reward": float(rollout.reward),
    }


def rollout_of(record: Mapping[str, Any], index: int) -> Rollout:
    """The Rollout a reflective record describes (enough of it to render App. E's examples)."""
    question = Question(
        id=f"gepa-{index}",
        question=str(record["Inputs"]),
        answers=tuple(str(a) for a in record["Correct answers"]),
    )
    return Rollout(
        question=question,
        instruction_id="gepa-parent",
        response=str(record["Generated Outputs"]),
        reward=float(record["Reward"]),
    )


@dataclass
class ProposerStats:
    """What :func:`inspo_reflection_proposer` did, call by call."""

    calls: int = 0  # optimizer calls made
    accepted: int = 0  # calls that returned a candidate to GEPA
    no_failures: int = 0  # components skipped because no record failed (no call made)
    rejected: list[str] = field(
        default_factory=list
    )  # the guard's reason for every rejected candidate
    errors: list[str] = field(
        default_factory=list
    )  # failed calls and answers with no <ins_i> candidate


def inspo_reflection_proposer(
    llm: LLMClient,
    *,
    n_candidates: int = 3,
    max_failures: int = 4,
    max_chars: int = 6000,
    temperature: float = 1.0,
    max_tokens: int = 2048,
    guard_tags: Sequence[str] = (),
    stats: ProposerStats | None = None,
) -> Callable[
    [dict[str, str], Mapping[str, Sequence[Mapping[str, Any]]], list[str]], dict[str, str]
]:
    """A GEPA ``custom_candidate_proposer`` that reflects through INSPO's own :class:`Proposer`.

    Per component to update: the failing records (reward < 1, at most ``max_failures``) become
    App. E's reflection prompt over the current text; one ``llm`` call asks for
    ``n_candidates``, which go through :func:`inspo.core.proposer.guard` (with ``guard_tags``, the
    environment's required tags in :func:`optimize_instruction`);
    the first that passes is returned. When no record failed, the call fails, or every
    candidate is rejected, the component is left out of the result, and GEPA then skips the
    iteration without spending rollouts on a copy.
    """
    stats = stats if stats is not None else ProposerStats()
    proposer = Proposer(
        llm,
        template="reflection",
        n_candidates=n_candidates,
        max_chars=max_chars,
        temperature=temperature,
        max_tokens=max_tokens,
        guard_tags=guard_tags,
    )
    ids = itertools.count(1)

    def propose(
        candidate: dict[str, str], reflective_dataset, components_to_update: list[str]
    ) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in components_to_update:
            records = list(reflective_dataset.get(name, ()))
            failures = [
                rollout_of(r, i) for i, r in enumerate(records) if float(r["Reward"]) < 1.0
            ][:max_failures]
            if not failures:
                stats.no_failures += 1
                continue
            stats.calls += 1
            parent = Instruction(id="gepa-parent", text=candidate[name], origin="gepa")
            proposal = proposer.propose(parent, failures, new_id=lambda: f"gepa-cand-{next(ids)}")
            stats.rejected.extend(c.rejected for c in proposal.rejected)
            if proposal.error:
                stats.errors.append(proposal.error)
                log.warning("GEPA proposer: %s", proposal.error)
            elif proposal.candidates:
                out[name] = proposal.candidates[0].text
                stats.accepted += 1
            else:
                log.info(
                    "GEPA proposer: all %d candidates rejected by the guard", len(proposal.rejected)
                )
        return out

    return propose


def gepa_reflection_lm(
    llm: LLMClient, *, temperature: float = 1.0, max_tokens: int = 2048
) -> Callable[[Any], str]:
    """GEPA's ``reflection_lm`` (prompt -> text) backed by an inspo ``LLMClient``."""

    def reflect(prompt: str | list[dict[str, Any]]) -> str:
        messages = (
            [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        )
        return llm.generate(messages, n=1, temperature=temperature, max_tokens=max_tokens)[0]

    return reflect
