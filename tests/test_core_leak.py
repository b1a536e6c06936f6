"""The answer-leak guard (issue 23): a candidate that writes down a gold answer of a question its
optimizer call was shown, or of the D_B questions it would be verified on, is refused (stage
``leak``) before verification."""

from __future__ import annotations

import pytest

from core_helpers import SEED, FunctionLLM, parent_of
from inspo.answers import exact_match, normalize_answer
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.proposer import Proposer, leaked_answer
from inspo.records import Question, Rollout

# ------------------------------------------------------------------ the pure check


@pytest.mark.parametrize("text, answers, found", [
    ("If unsure, answer <answer>Velmor</answer>.", ["Velmor"], "Velmor"),
    ("The capital is velmor, remember it.", ["The Velmor"], "The Velmor"),  # case and articles
    ("Remember: O'Brien wrote it.", ["OBrien"], "OBrien"),  # punctuation
    ("The total was 1,204 people.", ["1,204"], "1,204"),
    ("Born in Lake   Tessa, of course.", ["lake tessa"], "lake tessa"),  # multi-word, whitespace
    ("Say Kest or Velmor.", ["Arno", "Velmor", "Kest"], "Velmor"),  # the first in the answers' order
])
def test_a_gold_answer_in_the_text_is_found(text, answers, found):
    assert leaked_answer(text, answers, parent=SEED) == found


@pytest.mark.parametrize("text, answers", [
    ("The total was 11,2045 people.", ["1,204"]),  # token boundaries: 1204 is not inside 112045
    ("The total was 1,204,000 people.", ["1,204"]),
    ("Velmorian history matters.", ["Velmor"]),
    ("Give the answer without detours.", ["tour"]),
    ("Answer yes or no, in one word, as true or false.", ["yes", "one", "True"]),  # common answers
    ("Use at most 2 searches; tell us why.", ["2", "us", "a"]),  # shorter than 3 characters
    ("", ["Velmor"]),
    ("Anything at all.", []),
])
def test_non_leaks(text, answers):
    assert leaked_answer(text, answers, parent=SEED) is None


def test_an_answer_the_parent_already_holds_is_not_a_leak():
    parent = SEED + " For example, <answer> Beijing </answer>."
    child = parent + " Search for Beijing first if asked about China."
    assert leaked_answer(child, ["Beijing"], parent=parent) is None
    assert leaked_answer(child, ["Beijing"], parent=SEED) == "Beijing"
    assert leaked_answer(child + " Or Velmor.", ["Beijing", "Velmor"], parent=parent) == "Velmor"


def test_the_leak_check_normalises_answers_as_exact_match_does():
    # the same function, shared (inspo.answers), not a copy: the Search-R1 reward's and the guard's
    from inspo.core import proposer
    from inspo.envs.search_r1 import rewards

    assert rewards.normalize_answer is normalize_answer
    assert rewards.exact_match is exact_match
    assert proposer.normalize_answer is normalize_answer
    for gold in ("The Velmor", "O'Brien", "1,204"):
        assert exact_match(gold.upper(), [gold]) == 1.0 and leaked_answer(f"<answer>{gold.upper()}</answer>", [gold])


# ------------------------------------------------------------------ through the co-evolution loop


QUESTIONS = [Question(f"q{i}", f"Where was person {i} born?", (answer,))
             for i, answer in enumerate(["Velmor", "Kest Harbour", "Arnolde", "Tessaly"])]


def wrong(instruction, questions):
    return [Rollout(question=q, instruction_id=instruction.id, response="<answer>Nowhere</answer>", reward=0.0)
            for q in questions]


def writes_answers(prompt):
    """Candidate 1 leaks a shown failure's answer; 2 is clean; 3 leaks an answer only D_B holds."""
    parent = parent_of(prompt)
    shown = [a for a in ("Velmor", "Kest Harbour", "Arnolde", "Tessaly") if f"Correct answer: {a}" in prompt]
    hidden = [a for a in ("Velmor", "Kest Harbour", "Arnolde", "Tessaly") if a not in shown]
    cands = [f"{parent} When unsure, answer {shown[0].upper()}.", f"{parent} Search for one entity at a time.",
             f"{parent} Towns like {hidden[0]} are common answers."]
    return "Reasons.\n" + "".join(f"<ins_{i}>\n{c}\n</ins_{i}>\n" for i, c in enumerate(cands, 1))


def run(**cfg):
    config = CoEvolutionConfig(population_size=2, n_failures=2, validation_size=4, candidates_per_call=3,
                               max_rounds=1, admit_per_round=1, **cfg)
    coevo = CoEvolution(config, SEED, Proposer.from_config(FunctionLLM(writes_answers), config))
    coevo.initialize(wrong, QUESTIONS)
    return coevo


def test_a_candidate_holding_a_gold_answer_is_refused_before_verification():
    coevo = run()
    prompt = coevo.proposer.llm.prompts[0]
    shown = [q.answers[0] for q in QUESTIONS if f"Correct answer: {q.answers[0]}" in prompt]
    hidden = [q.answers[0] for q in QUESTIONS if q.answers[0] not in shown]
    assert len(shown) == 2  # n_failures; D_B (all 4 questions) holds the others
    leaks = [e for e in coevo.events.of_kind("rejected") if e.stage == "leak"]
    assert [e.reason for e in leaks] == [f"leaks an answer: {shown[0]!r}", f"leaks an answer: {hidden[0]!r}"]
    verified = {e.candidate_id for e in coevo.events.of_kind("verified")}
    assert verified and not verified & {e.candidate_id for e in leaks}  # never played on D_B
    [admitted] = coevo.events.of_kind("admitted")
    assert admitted.instruction["text"].endswith("Search for one entity at a time.")


def test_the_leak_guard_is_a_switch():
    coevo = run(leak_guard=False)
    assert not [e for e in coevo.events.of_kind("rejected") if e.stage == "leak"]
    assert len(coevo.events.of_kind("verified")) == 3
    with pytest.raises(ConfigError, match="leak_guard must be true or false"):
        CoEvolutionConfig(leak_guard="yes")
