"""An outage is never "the model scored 0" (issue 21, item 1), on the core with fake evaluate
functions: error rollouts (``error`` set) stay out of the replay buffer, the importance weights,
the verification scores on D_B, EM/F1 and the step metrics, and are counted apart; a spent error
budget stops a verification instead of rejecting a candidate. The real-server side is in
``test_outage_endpoints.py``."""

from __future__ import annotations

import pytest

from core_helpers import GUARD, SEED, FunctionLLM, scripted_reflection
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.events import EventLog
from inspo.core.proposer import Proposer
from inspo.core.replay import ReplayBuffer
from inspo.core.verifier import Verifier
from inspo.envs.search_r1 import SearchR1Env
from inspo.eval import EvalReport, summarize
from inspo.records import (
    Candidate,
    Question,
    Rollout,
    ToolCall,
    TooManyErrors,
    check_error_rate,
    scored,
)
from inspo.training.step import finish_step, rescore

DOWN = "RetrievalUnavailable: cannot reach retrieval server at http://127.0.0.1:9 (POST /retrieve failed after 4 tries)"


def good(qid: str, iid: str, reward: float = 1.0) -> Rollout:
    q = Question(qid, f"question {qid}?", ("gold",))
    return Rollout(q, iid, "<answer>gold</answer>", reward=reward, answer="gold", finish_reason="answer", turns=2,
                   tool_calls=[ToolCall("search", "s")])


#: Search-R1's environment, for its metrics (EM, F1, format failures); no search is run here.
ENV = SearchR1Env(retriever=None)


def failed(qid: str, iid: str) -> Rollout:
    return Rollout(Question(qid, f"question {qid}?", ("gold",)), iid, "", reward=0.0, finish_reason="error", error=DOWN)


def make(events: EventLog | None = None, **cfg) -> CoEvolution:
    config = CoEvolutionConfig(**{"population_size": 3, "validation_size": 4, "init_population": False, **cfg})
    return CoEvolution(config, SEED, Proposer(FunctionLLM(scripted_reflection), n_candidates=3, guard_tags=GUARD),
                       events=events)


def test_the_replay_buffer_keeps_no_error_rollout():
    buffer = ReplayBuffer(10)
    buffer.add(1, [good("a", "i"), failed("b", "i"), good("c", "i", 0.0)])
    assert [e.rollout.question.id for e in buffer] == ["a", "c"]


def test_error_rollouts_credit_no_weight_and_stay_out_of_the_buffer():
    log = EventLog()
    coevo = make(log)
    seed = coevo.population.instructions[0].id
    rollouts = [good("a", seed), good("b", seed), failed("c", seed), failed("d", seed)]
    end = finish_step(coevo, 1, rollouts, None, tools=["search"])
    attributed = log.of_kind("attributed")[-1]
    assert attributed.mean_reward == 1.0 and attributed.n_rollouts == 2  # 0.5 if the outage counted as 0
    assert coevo.population.weights == [1.0]
    assert [e.rollout.error for e in coevo.buffer] == [None, None]
    weights = log.of_kind("weights")[-1]
    assert weights.n_rollouts == 4 and weights.n_errors == 2
    assert end.metrics["reward/mean"] == 1.0
    assert end.metrics["rollout/errors"] == 2 and end.metrics["inspo/error_rate"] == 0.5
    assert end.metrics["rollout/count"] == 4 and end.metrics["rollout/finish/error"] == 0.5
    assert end.metrics["rollout/search_calls"] == end.metrics["rollout/tool_calls"] == 1.0  # means leave errors out


def test_an_instruction_whose_rollouts_all_failed_observes_nothing():
    coevo = make()
    seed = coevo.population.instructions[0].id
    finish_step(coevo, 1, [failed("a", seed), failed("b", seed)], None)
    assert coevo.population.evidence == [0] and len(coevo.buffer) == 0


def test_warm_up_errors_are_counted_not_scored():
    log = EventLog()
    coevo = make(log, min_evidence=1, prior_rollouts=2)
    seed = coevo.population.instructions[0]
    coevo.initialize(lambda ins, qs: [good(q.id, ins.id) if i % 2 else failed(q.id, ins.id) for i, q in enumerate(qs)],
                     [Question(str(i), "q?", ("gold",)) for i in range(4)])
    warmed = log.of_kind("warmed_up")[0]
    assert (warmed.n_rollouts, warmed.n_errors, warmed.mean_reward) == (4, 2, 1.0)
    assert len(coevo.buffer) == 2 and all(e.rollout.error is None for e in coevo.buffer)
    assert coevo.population.score_of(seed.id) == 1.0  # the prior is the mean of the scored rollouts


def _candidates() -> list[Candidate]:
    return [Candidate(f"c{i}", f"text {i}", "ins-0", "reflection") for i in range(3)]


@pytest.mark.parametrize("together", [True, False])
def test_verification_scores_leave_errors_out_and_reject_a_candidate_with_none_left(together):
    plays = {"text 0": [True, False, True, False], "text 1": [False] * 4, "text 2": [True] * 4}

    def play(ins, questions):
        return [good(q.id, ins.id, 0.5) if ok else failed(q.id, ins.id) for q, ok in zip(questions, plays[ins.text], strict=True)]

    def evaluate(ins, questions):
        return play(ins, questions)

    if together:
        evaluate.many = lambda instructions, questions: [play(i, questions) for i in instructions]
    cands = _candidates()
    Verifier(evaluate).score(cands, [Question(str(i), "q?", ("gold",)) for i in range(4)], step=1)
    assert cands[0].score == 0.5 and cands[0].rejected is None  # 0.25 if the errors counted as 0
    assert cands[1].score is None and "every rollout raised" in cands[1].rejected and "RetrievalUnavailable" in cands[1].rejected
    assert cands[2].score == 0.5


@pytest.mark.parametrize("together", [True, False])
def test_a_spent_error_budget_stops_verification(together):
    def evaluate(ins, questions):
        raise TooManyErrors("4 of 4 rollouts failed")

    if together:
        evaluate.many = lambda instructions, questions: evaluate(None, questions)
    with pytest.raises(TooManyErrors, match="4 of 4"):
        Verifier(evaluate).score(_candidates(), [Question("q", "q?", ("gold",))], step=1)


def test_em_is_over_the_rollouts_that_did_not_fail_and_errors_are_a_column():
    rollouts = [good("a", "i"), good("b", "i"), failed("c", "i"), failed("d", "i")]
    cell = summarize("p", "seed", "d", rollouts, env=ENV)
    assert (cell.n, cell.errors, cell.em, cell.f1, cell.format_failures, cell.turns) == (4, 2, 1.0, 1.0, 0.0, 2.0)
    assert cell.reward == 1.0 and cell.tool_calls == {"search": 1.0}
    report = EvalReport(cells=[cell])
    table = report.markdown()
    assert "| errors |" in table.splitlines()[0]
    assert "| p | seed | d | 4 | 2 | 1.000 | 1.000 |" in table
    assert "2 rollout(s) failed on an error" in table
    assert report.to_dict()["errors"] == 2


def test_a_cell_of_errors_only_says_no_data_and_the_report_lists_what_errored():
    from inspo.eval import Dataset, NamedInstruction, run_eval
    from inspo.records import Instruction, Question

    cell = summarize("p", "seed", "d", [failed("a", "i")], env=ENV)
    assert (cell.n, cell.errors, cell.reward, cell.turns, cell.metrics) == (1, 1, None, None, {})

    def evaluate(instruction, questions):  # dataset "down" errors on every question, "up" on one
        return [good(q.id, instruction.id) if q.id == "u1" else failed(q.id, instruction.id) for q in questions]

    data = [Dataset("down", (Question("d1", "?", ("x",)),)), Dataset("up", (Question("u1", "?", ("x",)),
                                                                             Question("u2", "?", ("x",))))]
    report = run_eval([("p", lambda: evaluate)], [NamedInstruction("seed", Instruction("i", "text"))], data, ENV)
    down, up = report.cells
    assert down.reward is None and up.reward == 1.0 and up.errors == 1
    [average] = report.averages()
    assert average.reward == 1.0 and average.n == 3 and average.errors == 2  # no data is not a 0 in the mean
    assert "| p | seed | down | 1 | 1 | no data |" in report.markdown()
    assert [(e["dataset"], e["question_id"]) for e in report.to_dict()["errored"]] == [("down", "d1"), ("up", "u2")]
    assert all(e["error"] for e in report.errored)


def test_the_error_budget_trips_only_when_sure_and_names_the_cause():
    rollouts = [good("a", "i"), failed("b", "i"), failed("c", "i")]
    check_error_rate(rollouts, max_error_rate=0.1, planned=20, setting="rl.max_error_rate")  # 2 of 20 planned: 0.1
    check_error_rate(rollouts, max_error_rate=None, planned=3, setting="x")  # no budget: never
    with pytest.raises(TooManyErrors) as info:
        check_error_rate(rollouts, max_error_rate=0.1, planned=12, setting="rl.max_error_rate")
    message = str(info.value)
    assert message.startswith("2 of 3 played of 12 rollouts failed (RetrievalUnavailable: cannot reach retrieval "
                              "server at http://127.0.0.1:9")
    assert message.endswith("stopping; fix the endpoint or raise rl.max_error_rate")
    assert info.value.rollouts == rollouts  # what was played is handed back


def test_a_custom_reward_leaves_error_rollouts_at_zero():
    out = rescore([good("a", "i"), failed("b", "i")], lambda r: 7.0)
    assert [r.reward for r in out] == [7.0, 0.0] and scored(out) == [out[0]]


def test_the_agent_cards_grid_shows_a_cell_of_errors_as_no_data():
    from inspo.trained.card import _grid

    cell = summarize("p", "seed", "d", [failed("a", "i")], env=ENV)
    ok = summarize("p", "inspo", "d", [good("a", "i")], env=ENV)
    rows = _grid(EvalReport(cells=[cell, ok]).to_dict())
    assert any(r.startswith("| p | seed | d | 1 | no data |") for r in rows)
    assert any(r.startswith("| p | inspo | d | 1 | 1.000 |") for r in rows)
