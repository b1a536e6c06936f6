from inspo.core.verifier import Verifier, top_n
from inspo.records import Candidate, Question, Rollout

QS = [Question(f"q{i}", "?", ("a",)) for i in range(4)]


def evaluate(instruction, questions):
    if "boom" in instruction.text:
        raise RuntimeError("policy crashed")
    score = float(instruction.text.count("+")) / 4
    return [Rollout(q, instruction.id, "", reward=min(1.0, score)) for q in questions]


def test_verifier_scores_and_keeps_top_n():
    cands = [Candidate(f"c{i}", "x" + "+" * k, "p", "reflection") for i, k in enumerate([1, 3, 2, 3])]
    results = Verifier(evaluate).score(cands, QS, step=1)
    assert [c.score for c in cands] == [0.25, 0.75, 0.5, 0.75]
    assert all(len(r.rollouts) == 4 for r in results)
    assert [c.id for c in top_n(cands, 2)] == ["c1", "c3"]  # ties: earlier first
    assert [c.id for c in top_n(cands, 10)] == ["c1", "c3", "c2", "c0"]


def test_verifier_rejects_a_candidate_whose_evaluation_raises():
    cands = [Candidate("c0", "boom", "p", "reflection"), Candidate("c1", "+", "p", "reflection")]
    Verifier(evaluate).score(cands, QS, step=1)
    assert "policy crashed" in cands[0].rejected and cands[0].score is None
    assert [c.id for c in top_n(cands, 2)] == ["c1"]


class Many:
    """An evaluate function with ``many`` (as inspo.envs.evaluate.Evaluate has); records calls."""

    def __init__(self, broken_many=False):
        self.calls, self.broken_many = [], broken_many

    def __call__(self, instruction, questions):
        self.calls.append(("one", instruction.id))
        return evaluate(instruction, questions)

    def many(self, instructions, questions):
        self.calls.append(("many", tuple(i.id for i in instructions)))
        if self.broken_many:
            raise RuntimeError("shared batch failed")
        return [evaluate(i, questions) for i in instructions]


def test_verifier_plays_all_candidates_in_one_call_when_it_can():
    cands = [Candidate(f"c{i}", "x" + "+" * k, "p", "reflection") for i, k in enumerate([1, 3, 2])]
    fn = Many()
    results = Verifier(fn).score(cands, QS, step=1)
    assert fn.calls == [("many", ("c0", "c1", "c2"))]
    assert [c.score for c in cands] == [0.25, 0.75, 0.5]
    assert [r.candidate.id for r in results] == ["c0", "c1", "c2"] and all(len(r.rollouts) == 4 for r in results)


def test_verifier_falls_back_to_one_call_per_candidate_when_the_shared_call_raises():
    cands = [Candidate("c0", "boom", "p", "reflection"), Candidate("c1", "+", "p", "reflection")]
    fn = Many(broken_many=True)
    Verifier(fn).score(cands, QS, step=1)
    assert fn.calls == [("many", ("c0", "c1")), ("one", "c0"), ("one", "c1")]
    assert "policy crashed" in cands[0].rejected and cands[1].score == 0.25  # the error stays with c0
