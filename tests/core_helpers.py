"""Deterministic helpers for the core's tests: a reflection LLM scripted as a function of its
prompt (so it is stateless and a resumed run sees the same answers), and seed instructions."""

from __future__ import annotations

import re

from inspo.core.optimizer_llm import LLMError, LLMUsage
from inspo.rng import derived_rng
from inspo.synthetic import FEATURES, GUARD_TAGS

#: The tags the synthetic (Search-R1-tagged) agent's instructions must keep: the guard the core's
#: tests run with (the core itself guards what its environment requires; it knows no tag).
GUARD = GUARD_TAGS

SEED = (
    "Answer the given question. Call a search engine by <search> query </search> and it will "
    "return results between <information> and </information>. Give the answer inside "
    "<answer> and </answer>."
)

# One sentence per synthetic feature, each matching that feature's pattern.
GUIDANCE = {
    "search_first": "You must search before you answer, never answer from memory.",
    "focused_queries": "Never search for the whole question; use one entity per query.",
    "short_answer": "Give only the answer entity, in a few words.",
    "use_evidence": "Copy the answer from the retrieved documents when it is there.",
}


# Sentences that change no synthetic feature (the neutral variants a real optimizer also writes).
NEUTRAL = [
    "Think step by step.", "Stay calm and precise.", "Read the question twice.",
    "Be systematic.", "Plan your work.", "Keep your reasoning tidy.", "Work carefully.",
    "Take your time.", "Be thorough.", "Stay on topic.", "Write clearly.", "Be methodical.",
]


class FunctionLLM:
    """An LLMClient whose answer is ``fn(prompt)``; counts calls and pseudo-tokens."""

    name = "function"

    def __init__(self, fn):
        self.fn = fn
        self.usage = LLMUsage()
        self.prompts: list[str] = []

    def generate(self, messages, *, n=1, temperature=1.0, max_tokens=2048):
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        out = [self.fn(prompt) for _ in range(n)]
        self.usage.add(len(prompt) // 4, sum(len(o) for o in out) // 4)
        return out


def parent_of(prompt: str) -> str:
    m = re.search(r"<ins_0>\n(.*?)\n</ins_0>", prompt, re.DOTALL)
    return m.group(1) if m else ""


def scripted_reflection(prompt: str, n_good: int = 3) -> str:
    """Reads the parent and writes ``n_good`` candidates that each add one or two missing
    pieces of guidance, one that drops <answer> (the guard must reject it) and a no-op
    paraphrase. Deterministic in the prompt."""
    parent = parent_of(prompt)
    rng = derived_rng("scripted", prompt)
    missing = [f.name for f in FEATURES if not f.present(parent)]
    additions = [[m] for m in missing] + [[a, b] for i, a in enumerate(missing) for b in missing[i + 1 :]]
    rng.shuffle(additions)
    cands = [" ".join([parent] + [GUIDANCE[m] for m in add]) for add in additions[:n_good]]
    cands.append(parent.replace("<answer>", "").replace("</answer>", "") + " Be careful.")
    cands += [parent + " " + phrase for phrase in rng.sample(NEUTRAL, 2)]
    body = "".join(f"<ins_{i}>\n{c}\n</ins_{i}>\n" for i, c in enumerate(cands, 1))
    return "The prompt lets the model skip steps.\n" + body


def failing_llm(prompt: str) -> str:
    raise LLMError("endpoint timed out after 3 retries")
