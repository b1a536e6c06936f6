import json

import pytest

from inspo.cli import main
from inspo.eval import (
    Dataset,
    EvalReport,
    NamedInstruction,
    parse_dataset,
    parse_instruction,
    run_eval,
    summarize,
)
from inspo.records import Instruction, Question, Rollout

Q = [Question("a", "Who?", ("Ann Lee",)), Question("b", "When?", ("1901",))]


def ro(q, response, answer, searches=(), turns=1):
    return Rollout(q, "i", response, answer=answer, searches=list(searches), turns=turns)


def test_summarize_hand_computed():
    rollouts = [
        ro(Q[0], "<search>x</search>\n\n<information>d</information>\n\n<answer>ann lee</answer>", "ann lee", ["x"], 2),
        ro(Q[1], "I think 1901", None, [], 1),
    ]
    cell = summarize("p", "seed", "d", rollouts)
    assert (cell.n, cell.em, cell.searches, cell.turns, cell.no_answer, cell.format_failures) == (2, 0.5, 0.5, 1.5, 0.5, 0.5)
    assert cell.f1 == pytest.approx(0.5)


def test_run_eval_grid_and_outputs(tmp_path):
    def make_eval(bonus):
        def evaluate(instruction, questions):
            right = "good" in instruction.text or bonus
            return [ro(q, f"<answer>{q.answers[0] if right else 'x'}</answer>", q.answers[0] if right else "x") for q in questions]
        return lambda: evaluate

    report = run_eval(
        [("base", make_eval(False)), ("trained", make_eval(True))],
        [NamedInstruction("seed", Instruction("s", "plain")), NamedInstruction("best", Instruction("b", "good"))],
        [Dataset("d1", tuple(Q)), Dataset("d2", tuple(Q[:1]))],
    )
    em = {(c.policy, c.instruction, c.dataset): c.em for c in report.cells}
    assert em[("base", "seed", "d1")] == 0.0 and em[("base", "best", "d1")] == 1.0 and em[("trained", "seed", "d2")] == 1.0
    assert len(report.cells) == 8 and len(report.averages()) == 4
    j, m = report.write(tmp_path)
    assert json.loads(j.read_text())["average"][0]["dataset"] == "average"
    assert "| base | seed | d1 | 2 | 0.000 |" in m.read_text()


def test_specs(tmp_path):
    assert parse_dataset("world@dev", limit=5).label == "world@dev" and len(parse_dataset("world@dev", limit=5).questions) == 5
    assert "Search" in parse_instruction("seed").instruction.text or "search" in parse_instruction("seed").instruction.text
    (tmp_path / "best_instruction.txt").write_text("Use <search> and <answer>.\n")
    assert parse_instruction(str(tmp_path)).instruction.text == "Use <search> and <answer>."
    with pytest.raises(FileNotFoundError, match="expected 'seed'"):
        parse_instruction(str(tmp_path / "nope.txt"))
    assert isinstance(EvalReport().markdown(), str)


@pytest.mark.slow
def test_eval_command_with_a_real_model(tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(["eval", "--policy", "tiny-qwen2", "--instruction", "seed", "--dataset", "world@test",
                 "--limit", "3", "--max-turns", "2", "--max-response-tokens", "8", "--out", str(out), "--no-progress"])
    assert code == 0
    data = json.loads((out / "eval.json").read_text())
    assert data["cells"][0]["n"] == 3 and data["cells"][0]["policy"] == "tiny-qwen2"
    assert "| tiny-qwen2 | seed | world@test | 3 |" in capsys.readouterr().out


def test_grid_needs_a_finished_run(tmp_path, capsys):
    assert main(["eval", "--grid", str(tmp_path), "--no-progress"]) == 2
    assert "config.yaml" in capsys.readouterr().err
