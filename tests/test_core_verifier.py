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
