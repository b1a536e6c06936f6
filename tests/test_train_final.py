"""The final choice of the returned instruction (issue 9: held-out evidence, never worse than
the seed on dev), with a scripted evaluate whose per-question rewards are known."""

import pytest

from inspo.records import Instruction, Question, Rollout
from inspo.training.final_choice import choose_instruction

SEED = Instruction(id="ins-0001", text="seed", origin="seed")
LUCKY = Instruction(id="ins-0002", text="lucky", origin="reflection")  # the weights' I*
GOOD = Instruction(id="ins-0003", text="good", origin="reflection")
DEV = [Question(id=f"d{i}", question=f"dev {i}", answers=("x",)) for i in range(4)]
TEST = [Question(id=f"t{i}", question=f"test {i}", answers=("x",)) for i in range(5)]


def scripted(table):
    calls = []

    def evaluate(ins, questions):
        calls.append((ins.id, questions[0].id[0]))
        rewards = table[ins.text][questions[0].id[0]]
        return [Rollout(question=q, instruction_id=ins.id, response="", reward=r) for q, r in zip(questions, rewards, strict=True)]

    evaluate.calls = calls
    return evaluate


def test_dev_choice_returns_the_seed_when_the_seed_is_best_on_dev():
    table = {"seed": {"d": [1, 1, 0, 1], "t": [1, 0, 1, 1, 0]},
             "lucky": {"d": [0, 1, 0, 0], "t": [0, 0, 1, 0, 0]},
             "good": {"d": [1, 1, 0, 1], "t": [1, 1, 1, 1, 0]}}  # ties the seed on dev: the seed wins
    ev = scripted(table)
    choice = choose_instruction(ev, rule="dev", population=[LUCKY, GOOD], seed=SEED, by_weight=LUCKY,
                                dev_questions=DEV, test_questions=TEST, metric="f1")
    assert choice.returned_id == SEED.id and choice.seed_returned
    assert choice.dev_scores == {SEED.id: 0.75, LUCKY.id: 0.25, GOOD.id: 0.75}
    assert choice.test_returned == choice.test_seed == 0.6 and choice.test_vs_seed.mean == 0.0
    assert ("ins-0001", "t") in ev.calls and ("ins-0003", "t") not in ev.calls  # test only for returned + seed
    text = "\n".join(choice.lines())
    assert "the seed (ins-0001): no evolved instruction beat it" in text and "ins-0002" in text


def test_dev_choice_returns_an_evolved_instruction_that_beats_the_seed_and_tests_it():
    table = {"seed": {"d": [0, 1, 0, 0], "t": [0, 0, 1, 0, 0]},
             "lucky": {"d": [0, 0, 0, 0], "t": [0, 0, 0, 0, 0]},
             "good": {"d": [1, 1, 0, 1], "t": [1, 1, 1, 1, 0]}}
    choice = choose_instruction(scripted(table), rule="dev", population=[LUCKY, GOOD], seed=SEED, by_weight=LUCKY,
                                dev_questions=DEV, test_questions=TEST)
    assert choice.returned_id == GOOD.id
    assert choice.test_vs_seed.mean == pytest.approx(0.6) and choice.test_vs_seed.n == 5
    assert choice.to_dict()["test_vs_seed"]["low"] < 0.6 < choice.to_dict()["test_vs_seed"]["high"]
    # per question, in order, so another run scored on the same questions can be paired with this one
    assert choice.test_question_ids == [q.id for q in TEST]
    assert choice.to_dict()["test_rewards"] == {"returned": [1, 1, 1, 1, 0], "seed": [0, 0, 1, 0, 0]}


def test_weight_rule_is_algorithm_1_and_still_reports_the_seed():
    table = {"seed": {"d": [1, 1, 1, 1], "t": [1, 1, 1, 1, 1]},
             "lucky": {"d": [0, 0, 0, 0], "t": [0, 0, 0, 0, 0]}}
    choice = choose_instruction(scripted(table), rule="weight", population=[LUCKY], seed=SEED, by_weight=LUCKY,
                                dev_questions=DEV, test_questions=TEST)
    assert choice.returned_id == LUCKY.id and choice.dev_scores == {LUCKY.id: 0.0, SEED.id: 1.0}
    assert choice.test_vs_seed.mean == -1.0  # a loss, reported as one
    fallback = choose_instruction(scripted(table), rule="dev", population=[LUCKY], seed=SEED, by_weight=LUCKY,
                                  dev_questions=[], test_questions=[])
    assert fallback.rule == "weight" and "fell back" in fallback.note and fallback.test_vs_seed is None


def test_lines_survive_a_round_trip_through_json():
    import json

    from inspo.training.final_choice import final_choice_lines

    table = {"seed": {"d": [1, 1, 0, 1], "t": [1, 0, 1, 1, 0]}, "lucky": {"d": [0, 1, 0, 0], "t": [0, 0, 1, 0, 0]}}
    choice = choose_instruction(scripted(table), rule="dev", population=[LUCKY], seed=SEED, by_weight=LUCKY,
                                dev_questions=DEV, test_questions=TEST)
    again = final_choice_lines(json.loads(json.dumps(choice.to_dict())))
    assert again == choice.lines()


def test_the_run_seed_is_the_configs_even_when_a_stage_was_handed_another():
    from types import SimpleNamespace

    from inspo.training.final_choice import RUN_SEED_ID, run_seed

    handed = Instruction(id="ins-0001", text="evolved offline", origin="seed")  # a pre-policy stage's handover
    coevo = SimpleNamespace(population=SimpleNamespace(archive={handed.id: handed, LUCKY.id: LUCKY}))
    assert run_seed(coevo, "evolved offline") is handed  # a plain run: the stage's seed is the run's
    assert run_seed(coevo, "") is handed
    own = run_seed(coevo, "seed")
    assert (own.id, own.text, own.origin) == (RUN_SEED_ID, "seed", "seed")
    table = {"seed": {"d": [0, 0, 0, 0], "t": [0, 0, 0, 0, 0]},
             "evolved offline": {"d": [1, 1, 0, 0], "t": [1, 1, 1, 0, 0]}, "lucky": {"d": [0, 0, 0, 0]}}
    choice = choose_instruction(scripted(table), rule="dev", population=[handed], seed=own, by_weight=handed,
                                dev_questions=DEV, test_questions=TEST)
    assert choice.returned_id == handed.id and not choice.seed_returned
    assert choice.test_rewards == {"returned": [1, 1, 1, 0, 0], "seed": [0, 0, 0, 0, 0]}


def test_admitted_rule_weighs_every_admitted_instruction_a_prune_dropped_too():
    pruned = Instruction(id="ins-0004", text="pruned", origin="reflection")  # the run's best, pruned early
    table = {"seed": {"d": [0, 1, 0, 0], "t": [0, 0, 1, 0, 0]},
             "lucky": {"d": [0, 1, 0, 1], "t": [0, 0, 0, 0, 0]},
             "pruned": {"d": [1, 1, 1, 1], "t": [1, 1, 1, 1, 1]}}
    kwargs = dict(population=[LUCKY], seed=SEED, by_weight=LUCKY, dev_questions=DEV, test_questions=TEST,
                  admitted=[LUCKY, pruned])
    dev = choose_instruction(scripted(table), rule="dev", **kwargs)
    assert dev.returned_id == LUCKY.id and pruned.id not in dev.dev_scores  # the survivors only
    ev = scripted(table)
    every = choose_instruction(ev, rule="admitted", **kwargs)
    assert every.returned_id == pruned.id and every.dev_scores == {SEED.id: 0.25, LUCKY.id: 0.5, pruned.id: 1.0}
    assert sum(1 for ins, split in ev.calls if ins == LUCKY.id and split == "d") == 1  # each played once
    assert every.test_vs_seed.mean == pytest.approx(0.8)
    assert "every instruction admitted in the run" in "\n".join(every.lines())
