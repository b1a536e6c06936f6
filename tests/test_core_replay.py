import random

from inspo.core.replay import ReplayBuffer
from inspo.records import Question, Rollout


def ro(qid, reward, ins="i1"):
    return Rollout(Question(qid, f"question {qid}", ("a",)), ins, f"resp {qid}", reward=reward,
                   completion_ids=[1, 2, 3], env_mask=[1, 0, 1])


def test_failures_from_latest_step_first():
    buf = ReplayBuffer(100)
    buf.add(1, [ro("a1", 0.0), ro("a2", 0.0), ro("a3", 1.0)])
    buf.add(2, [ro("b1", 0.0), ro("b2", 1.0), ro("b3", 0.5)])
    got = buf.sample_failures(2, random.Random(0))
    assert {r.question.id for r in got} == {"b1", "b3"}
    got = buf.sample_failures(3, random.Random(0))
    assert {r.question.id for r in got[:2]} == {"b1", "b3"} and got[2].question.id in {"a1", "a2"}
    assert all(r.reward < 1.0 for r in buf.sample_failures(10, random.Random(0)))


def test_no_failures_falls_back_to_lowest_rewards():
    buf = ReplayBuffer(10)
    buf.add(1, [ro("a", 1.0), ro("b", 1.0)])
    assert len(buf.sample_failures(1, random.Random(0))) == 1
    assert ReplayBuffer(5).sample_failures(4, random.Random(0)) == []


def test_bounded_and_drops_token_ids():
    buf = ReplayBuffer(3)
    buf.add(1, [ro(f"q{i}", 0.0) for i in range(5)])
    assert len(buf) == 3
    assert [e.rollout.question.id for e in buf] == ["q2", "q3", "q4"]
    assert all(e.rollout.completion_ids == [] for e in buf)


def test_validation_questions_distinct_and_bounded():
    buf = ReplayBuffer(100)
    buf.add(1, [ro(f"q{i % 7}", 0.0) for i in range(30)])
    qs = buf.validation_questions(5, random.Random(1))
    assert len(qs) == 5 and len({q.id for q in qs}) == 5
    assert len(buf.validation_questions(50, random.Random(1))) == 7


def test_round_trip():
    buf = ReplayBuffer(10)
    buf.add(3, [ro("x", 0.25)])
    again = ReplayBuffer.from_dict(buf.to_dict())
    assert [(e.step, e.rollout.to_dict()) for e in again] == [(e.step, e.rollout.to_dict()) for e in buf]
