"""The cost ledger is computed from the core's events: the ledger a run kept equals the ledger
rebuilt from its ``events.jsonl`` (so an event that lost a count fails here), also across a
save / load / continue, and each count comes from the event that carries it."""

from __future__ import annotations

from dataclasses import fields

import pytest

from core_helpers import GUARD, SEED, FunctionLLM, failing_llm, scripted_reflection
from inspo.core.accounting import CostLedger
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import (
    Admitted,
    EventLog,
    ParentVerified,
    Proposed,
    Rejected,
    Sampled,
    Verified,
    WarmedUp,
    Weights,
    event_from_dict,
    read_events,
)
from inspo.core.proposer import Proposer
from inspo.core.state import load_state, save_state
from inspo.records import Rollout
from inspo.synthetic import SyntheticEnv, make_questions, run_synthetic


def _build(cfg, path, fn=scripted_reflection):
    return CoEvolution(cfg, SEED, Proposer(FunctionLLM(fn), n_candidates=cfg.candidates_per_call, guard_tags=GUARD),
                       events=EventLog(path))


class Counting:
    """An evaluate that counts the rollouts it returns (the reference the ledger must match)."""

    def __init__(self, evaluate):
        self.inner = evaluate
        self.rollouts: list[int] = []

    def __call__(self, instruction, questions):
        out = self.inner(instruction, questions)
        self.rollouts.append(len(out))
        return out


def _from_file(path) -> CostLedger:
    return CostLedger.from_events(event_from_dict(e) for e in read_events(path))


def _flaky(env):
    """The synthetic policy, except that verifying some candidates raises (they are rejected)."""

    def evaluate(instruction, questions):
        if instruction.origin != "seed" and int(instruction.id.split("-")[1]) % 3 == 0:
            raise RuntimeError("policy server went away")
        return env.evaluate(instruction, questions)

    return evaluate


RUNS = {
    "top-n": (dict(evolve_until=20, validation_size=10), scripted_reflection, False),
    "beat-parent": (dict(evolve_until=20, validation_size=10, admission="beat-parent"), scripted_reflection, False),
    "optimizer-fails": (dict(population_size=3, max_rounds=2, evolve_every=2, evolve_until=10), failing_llm, False),
    "verifier-raises": (dict(evolve_until=20, validation_size=10), scripted_reflection, True),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_the_ledger_a_run_kept_equals_the_ledger_of_its_events(tmp_path, name):
    settings, fn, flaky = RUNS[name]
    path = tmp_path / "events.jsonl"
    coevo = _build(CoEvolutionConfig(**settings), path, fn)
    env = SyntheticEnv(seed=4)
    counted = env.evaluate = Counting(_flaky(SyntheticEnv(seed=4)) if flaky else env.evaluate)
    run_synthetic(coevo, env, make_questions(30), steps=16, batch_size=6, group_size=3)
    # a step whose rollouts include those of an instruction pruned while they were in flight
    gone = [Rollout(question=q, instruction_id="ins-9999", response="", reward=1.0) for q in make_questions(2)]
    coevo.update(17, gone, None)

    assert _from_file(path) == coevo.ledger
    assert CostLedger.from_events(coevo.events.events) == coevo.ledger
    # ... and both equal what was spent, counted where it was spent
    led, llm = coevo.ledger, coevo.proposer.llm
    assert led.training_rollouts == 16 * 6 * 3 + 2
    assert led.warmup_rollouts == counted.rollouts[0] == 16
    assert led.verification_rollouts == sum(counted.rollouts[1:])
    assert led.optimizer_calls == len(llm.prompts) > 0
    assert (led.optimizer_prompt_tokens, led.optimizer_completion_tokens) == (llm.usage.prompt_tokens,
                                                                             llm.usage.completion_tokens)
    assert led.candidates_admitted == len(coevo.population.archive) - 1  # all but the seed
    assert led.candidates_proposed == led.candidates_admitted + led.candidates_rejected  # each one decided
    if name == "optimizer-fails":
        assert led.optimizer_failures == led.optimizer_calls and led.candidates_proposed == 0
    else:
        assert led.verification_rollouts > 0 and led.candidates_admitted > 0 and led.candidates_rejected > 0
    if name == "beat-parent":
        assert coevo.events.of_kind("parent_verified")
    if name == "verifier-raises":
        assert any(e.stage == "verify" and "verification failed" in e.reason
                   for e in coevo.events.of_kind("rejected"))
    assert {e.stage for e in coevo.events.of_kind("rejected")} <= {"guard", "verify", "parent", "top_n"}


def test_a_resumed_run_keeps_the_ledger_its_events_add_up_to(tmp_path):
    cfg = CoEvolutionConfig(evolve_until=30, validation_size=10, seed=3)
    qs = make_questions(30)
    full = _build(cfg, tmp_path / "full.jsonl")
    run_synthetic(full, SyntheticEnv(seed=3), qs, steps=24, batch_size=6, group_size=3)

    path = tmp_path / "resumed.jsonl"
    first = _build(cfg, path)
    run_synthetic(first, SyntheticEnv(seed=3), qs, steps=15, batch_size=6, group_size=3)
    state = save_state(first, tmp_path / "state.json")
    resumed = load_state(_build(cfg, path), state)  # the saved ledger, not a replay of the events
    run_synthetic(resumed, SyntheticEnv(seed=3), qs, steps=24, batch_size=6, group_size=3, start=16)

    assert resumed.ledger == full.ledger == _from_file(path) == _from_file(tmp_path / "full.jsonl")
    assert resumed.state_dict() == full.state_dict()


def test_each_count_comes_from_the_event_that_carries_it():
    events = [
        WarmedUp(0, instruction_id="ins-0001", n_rollouts=8),
        Proposed(0, candidate_ids=("a", "b", "c"), prompt_tokens=100, completion_tokens=40),
        Proposed(0, prompt_tokens=90, error="optimizer call failed: timed out"),
        Rejected(0, candidate_id="a", reason="duplicate of its parent"),
        Verified(0, candidate_id="b", score=0.5, n_questions=4, n_rollouts=8),
        ParentVerified(0, parent_id="ins-0001", score=0.4, n_questions=4, n_rollouts=8),
        Admitted(0, instruction={"id": "b"}, score=0.5),
        Sampled(1, question_id="q1", instruction_id="b"),
        Weights(1, weights={"b": 0.5}, n_rollouts=12),
        None,  # a kind this inspo does not know, read back
    ]
    expected = CostLedger(optimizer_calls=2, optimizer_prompt_tokens=190, optimizer_completion_tokens=40,
                          optimizer_failures=1, training_rollouts=12, verification_rollouts=16, warmup_rollouts=8,
                          candidates_proposed=3, candidates_rejected=1, candidates_admitted=1)
    assert CostLedger.from_events(events) == expected
    assert all(getattr(expected, f.name) for f in fields(CostLedger))  # every count is fed by some event
    assert event_from_dict({**Proposed(2, candidate_ids=("x",)).to_dict(), "later_field": 1}) == Proposed(
        2, candidate_ids=("x",))
    assert event_from_dict({"kind": "from_the_future", "step": 3}) is None
