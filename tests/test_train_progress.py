"""No long phase runs silently: the warm-up, each round of the initial population and of an
evolution (proposed, verified, admitted), the final choice and the held-out test announce
themselves, to the ``inspo.training`` log at INFO with progress off and on stdout with it on.

``run_evolve`` with the scripted text-only policy (fast, no model) drives the real loop; the
GRPO run that announces the same phases is in tests/test_train_trackers.py.
"""

from __future__ import annotations

import logging
import re

from agent_helpers import ScriptedPolicy
from inspo.core.events import (
    Admitted,
    EventLog,
    EvolutionFinished,
    EvolutionStarted,
    OptimizerFailed,
    Proposed,
    Rejected,
    Verified,
    WarmedUp,
)
from inspo.training.evolve import run_evolve
from inspo.training.progress import PhaseAnnouncer, announce_events
from test_train_evolve import _config

#: What a run of test_train_evolve's config must say, in this order (regexes).
PHASES = [
    r"warm-up: rolling the seed out on 2 training question",
    r"warm-up: the seed scored 0\.000 on 2 rollout",
    r"initial population: growing the seed into 3 instructions",
    r"initial population: round 1/1: 2 candidate\(s\) proposed; verifying",
    r"initial population: round 1/1: 2 proposed, 2 verified, 1 admitted \(population 2/3\)",
    r"initial population: done: 2 instruction\(s\) after 1 round",
    r"step 2 evolution: 1 parent\(s\) kept, refilling to 3",
    r"step 2 evolution: round 1/1: 2 proposed, 2 verified, 1 admitted",
    r"final choice: scoring 3 instruction\(s\) on 16 dev questions",
    r"final choice \(dev\): returning ins-0002, em 1\.000 on dev",
    r"held-out test: scoring 2 instruction\(s\) on 50 test questions",
    r"held-out test: returned 1\.000, seed 0\.000, difference \+1\.000",
]


def _in_order(text: str, patterns: list[str]) -> None:
    at = 0
    for pattern in patterns:
        found = re.compile(pattern).search(text, at)
        assert found, f"{pattern!r} not announced (after position {at}) in:\n{text}"
        at = found.end()


def test_every_phase_of_an_evolve_run_is_logged_without_progress(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="inspo.training"):
        run_evolve(_config(tmp_path / "evo"), engine=ScriptedPolicy(), progress=False)
    text = "\n".join(r.getMessage() for r in caplog.records if r.name == "inspo.training")
    _in_order(text, PHASES)


def test_every_phase_is_printed_with_progress(tmp_path, capsys):
    run_evolve(_config(tmp_path / "evo"), engine=ScriptedPolicy(), progress=True)
    _in_order(capsys.readouterr().out, PHASES)


def test_announcer_counts_refusals_and_failed_rounds():
    lines: list[str] = []
    events = EventLog()
    events.observers.append(PhaseAnnouncer(lines.append, max_rounds=3))
    for event in [
        WarmedUp(0, instruction_id="ins-0001", n_rollouts=4, mean_reward=0.25),
        EvolutionStarted(5, parents=("ins-0001", "ins-0002"), target_size=4),
        Proposed(5, round=1, candidate_ids=("ins-0003", "ins-0004", "ins-0005")),
        Rejected(5, candidate_id="ins-0005", stage="guard"),
        Verified(5, candidate_id="ins-0003"),
        Verified(5, candidate_id="ins-0004"),
        Admitted(5, instruction={"id": "ins-0003"}),
        Rejected(5, candidate_id="ins-0004", stage="top_n"),
        Proposed(5, round=2, error="timeout"),
        OptimizerFailed(5, round=2, reason="timeout"),
        EvolutionFinished(5, rounds=2, population=("ins-0001", "ins-0002", "ins-0003"), short_by=1, reason="timeout"),
    ]:
        events.emit(event)
    assert lines == [
        "warm-up: the seed scored 0.250 on 4 rollout(s)",
        "step 5 evolution: 2 parent(s) kept, refilling to 4",
        "step 5 evolution: round 1/3: 3 candidate(s) proposed; verifying with the current policy",
        "step 5 evolution: round 1/3: 3 proposed, 1 refused before verification, 2 verified, 1 admitted "
        "(population 3/4)",
        "step 5 evolution: round 2/3: nothing usable (timeout)",
        "step 5 evolution: done: 3 instruction(s) after 2 round(s), 1 short: timeout",
    ]


def test_a_round_is_told_when_its_last_candidate_is_decided_not_at_the_next_call():
    """The closing line of a round goes out with its last outcome, so its time stamp is the end of
    the round's verification: told at the next optimizer call instead, the call's minutes read as
    verification time (a 1.5B call took 6 of a round's 14 minutes in the calculator arm 5)."""
    lines: list[str] = []
    events = EventLog()
    events.observers.append(PhaseAnnouncer(lines.append, max_rounds=3))
    events.emit(EvolutionStarted(5, parents=("ins-0001",), target_size=4))
    events.emit(Proposed(5, round=1, candidate_ids=("ins-0002", "ins-0003")))
    events.emit(Verified(5, candidate_id="ins-0002"))
    events.emit(Admitted(5, instruction={"id": "ins-0002"}))
    assert len(lines) == 2  # ins-0003 is still undecided
    events.emit(Rejected(5, candidate_id="ins-0003", stage="parent"))
    assert lines[-1] == "step 5 evolution: round 1/3: 2 proposed, 1 verified, 1 admitted (population 2/4)"
    # every candidate leaked: settled by the last refusal (the loop emits nothing after it)
    events.emit(Proposed(5, round=2, candidate_ids=("ins-0004",)))
    events.emit(Rejected(5, candidate_id="ins-0004", stage="leak"))
    assert lines[-1] == "step 5 evolution: round 2/3: 1 proposed, 1 refused before verification, " \
        "0 verified, 0 admitted (population 2/4)"
    # every candidate guarded: the round waits for OptimizerFailed, which says why
    events.emit(Proposed(5, round=3, candidate_ids=("ins-0005",)))
    events.emit(Rejected(5, candidate_id="ins-0005", stage="guard"))
    assert lines[-1].endswith("verifying with the current policy")  # round 3 is not closed yet
    events.emit(OptimizerFailed(5, round=3, reason="every candidate was rejected by the guard"))
    assert lines[-1] == "step 5 evolution: round 3/3: nothing usable (every candidate was rejected by the guard)"
    events.emit(EvolutionFinished(5, rounds=3, population=("ins-0001", "ins-0002"), short_by=2, reason="guard"))
    assert lines[-1] == "step 5 evolution: done: 2 instruction(s) after 3 round(s), 2 short: guard"
    closing = [line for line in lines if re.search(r"round \d/3: (\d+ proposed,|nothing usable)", line)]
    assert len(closing) == 3  # each round told once


def test_announce_events_logs_at_info(caplog):
    events = EventLog()
    announce_events(events, progress=False)
    with caplog.at_level(logging.INFO, logger="inspo.training"):
        events.emit(EvolutionStarted(0, parents=("ins-0001",), target_size=2))
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "initial population: growing the seed into 2 instructions" in caplog.records[0].getMessage()
