"""The offline rule-based reflector: failure-mode detection, prompt parsing, candidate writing.

The reflector is generic; what it detects and the advice it writes are an environment's rules.
Search-R1's (``inspo.envs.search_r1.reflector_rules``, ``sr`` here) are the ones these tests drive
it with, as the search agent's runs do; ``rb`` is the reflector itself, ``inspo.core.reflector``."""

from __future__ import annotations

import logging
import random

import pytest

from inspo.core import reflector as rb
from inspo.core.optimizer_llm import LLMClient, LLMError
from inspo.core.reflector import (
    FailureExample,
    RuleBasedReflector,
    parse_prompt,
)
from inspo.core.templates import (
    ScoredInstruction,
    critique_of,
    parse_candidates,
    render_history,
    render_paraphrase,
    render_reflection,
)
from inspo.envs.search_r1 import reflector_rules as sr
from inspo.envs.search_r1.reflector_rules import RULES, detect_failure_modes
from inspo.records import Question, Rollout

SR1 = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every "
    "time you get new information. After reasoning, if you find you lack some knowledge, you can "
    "call a search engine by <search> query </search> and it will return the top searched results "
    "between <information> and </information>. You can search as many times as your want. If you "
    "find no further external knowledge needed, you can directly provide the answer inside <answer> "
    "and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>."
)
NO_THINK_PARENT = (
    "Answer the question. Search with <search> query </search>; results come back in "
    "<information> and </information>. Give the final answer in <answer> and </answer>."
)
ALL_TAGS = ("<think>", "</think>", "<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>")
AUS = "What is the capital city of Australia?"


def modes_of(response: str, question: str = AUS, answers=("Canberra",), **kw) -> dict[str, str]:
    found = detect_failure_modes(FailureExample(question, response, tuple(answers)), **kw)
    return {m.name: m.evidence for m in found}


# ------------------------------------------------------------------ detection, one mode at a time


def test_never_searched():
    found = modes_of("<think>I know this.</think> <answer> Sydney </answer>")
    assert set(found) == {sr.NEVER_SEARCHED}
    assert "'Sydney'" in found[sr.NEVER_SEARCHED]


def test_malformed_tags_stray_close_and_double_answer():
    # Appendix F's baseline failure: an answer, a stray </think>, then a second answer.
    response = (
        "<think>plan</think><search> Australia capital </search><information>Doc 1 Canberra</information>"
        "<answer> Sydney </answer>\n</think>\n<answer>Canberra</answer>"
    )
    found = modes_of(response)
    assert set(found) == {sr.MALFORMED_TAGS}
    assert "</think> without an opening <think> (1x)" in found[sr.MALFORMED_TAGS]
    assert "2 <answer> blocks" in found[sr.MALFORMED_TAGS]


def test_malformed_tags_unclosed_search_and_answer():
    found = modes_of("<think>x</think><search> Australia capital <answer> Canberra")
    assert sr.MALFORMED_TAGS in found and sr.NO_ANSWER in found
    assert "<search> never closed (1x)" in found[sr.MALFORMED_TAGS]
    assert "<answer> never closed (1x)" in found[sr.MALFORMED_TAGS]


def test_no_answer():
    found = modes_of("<think>a</think><search> Australia capital </search><information>Doc 1 Perth</information><think>hmm</think>")
    assert set(found) == {sr.NO_ANSWER}


def test_ran_out_of_turns_replaces_no_answer():
    response = "".join(
        f"<think>t</think><search> {q} </search><information>Doc 1 nothing useful</information>"
        for q in ("Australia capital", "Australian parliament city", "seat of government Australia")
    )
    found = modes_of(response)
    assert set(found) == {sr.RAN_OUT_OF_TURNS}
    assert found[sr.RAN_OUT_OF_TURNS].startswith("3 searches")
    assert set(modes_of(response, many_searches=4)) == {sr.NO_ANSWER}


def test_answer_too_long():
    response = (
        "<think>t</think><search> Australia capital </search><information>Doc 1 about cities</information>"
        "<answer> The capital city of Australia is Canberra, not Sydney as many believe </answer>"
    )
    found = modes_of(response)
    assert set(found) == {sr.ANSWER_TOO_LONG}
    assert "12 words (gold has 1)" in found[sr.ANSWER_TOO_LONG]
    # relative to the gold: 6 words against a 1-word gold is too long even under the 8-word cap
    assert sr.ANSWER_TOO_LONG in modes_of(response.replace("The capital city of Australia is Canberra, not Sydney as many believe", "it is the city of Canberra"))


def test_repeated_queries():
    response = (
        "<think>t</think><search> Australia capital </search><information>Doc 1 x</information>"
        "<search>australia capital?</search><information>Doc 1 x</information><answer> Perth </answer>"
    )
    found = modes_of(response)
    assert sr.REPEATED_QUERIES in found
    assert "'australia capital' x2" in found[sr.REPEATED_QUERIES]


def test_question_as_query():
    q = "Who was president of the United States in the year that Citibank was founded?"
    response = f"<think>t</think><search> {q} </search><information>Doc 1 about banks</information><answer> Lincoln </answer>"
    found = modes_of(response, question=q, answers=("James Madison",))
    assert sr.QUESTION_AS_QUERY in found
    assert "100% of the question" in found[sr.QUESTION_AS_QUERY]
    focused = response.replace(q, "Citibank founding year")
    assert sr.QUESTION_AS_QUERY not in modes_of(focused, question=q, answers=("James Madison",))


def test_answer_in_information_ignored():
    response = (
        "<think>t</think><search> Australia capital </search>"
        "<information>Doc 1(Title: Canberra) Canberra is the capital city of Australia.</information>"
        "<answer> Sydney </answer>"
    )
    found = modes_of(response)
    assert set(found) == {sr.IGNORED_EVIDENCE}
    assert "'Canberra' was in the retrieved <information>" in found[sr.IGNORED_EVIDENCE]


def test_no_reasoning_only_when_expected():
    response = "<search> Australia capital </search><information>Doc 1 x</information><answer> Perth </answer>"
    assert sr.NO_REASONING in modes_of(response)
    assert sr.NO_REASONING not in modes_of(response, expect_think=False)


def test_wrong_answer_is_the_fallback():
    response = "<think>t</think><search> Australia capital </search><information>Doc 1 cities</information><answer> Perth </answer>"
    assert set(modes_of(response)) == {sr.WRONG_ANSWER}


def test_correct_clean_trajectory_has_no_mode():
    response = "<think>t</think><search> Australia capital </search><information>Doc 1 Canberra</information><answer> Canberra </answer>"
    assert modes_of(response) == {}


def test_truncated_response_is_not_judged_on_its_missing_end():
    example = FailureExample(AUS, "<think>t</think><search> Australia capital </search><information>Doc 1 blah", ("Canberra",), truncated=True)
    assert detect_failure_modes(example) == []


# ------------------------------------------------------------------ prompt parsing


def rollout(qid, question, response, answers):
    return Rollout(question=Question(qid, question, tuple(answers)), instruction_id="i0", response=response)


FAILURES = [
    rollout("1", AUS, "<think>I know.</think>\n<answer> Sydney </answer>", ["Canberra"]),
    rollout("2", "Who wrote Dracula?", "<think>t</think>\n<search> Dracula author </search>\n<information>Doc 1 Bram Stoker wrote it.</information>\n<answer> Mary Shelley </answer>", ["Bram Stoker", "Abraham Stoker"]),
    rollout("3", "Who painted the Mona Lisa?", "<search>Mona Lisa painter</search><information>x</information><search>mona lisa painter</search><information>x</information>", ["Leonardo da Vinci"]),
]


def test_parse_reflection_prompt():
    long = rollout("4", "Q?", "<think>" + "x" * 4000, ["a"])
    parsed = parse_prompt(render_reflection(SR1, [*FAILURES, long], 5))
    assert parsed.kind == "reflection" and parsed.n == 5 and parsed.parent == SR1
    assert [e.question for e in parsed.examples] == [AUS, "Who wrote Dracula?", "Who painted the Mona Lisa?", "Q?"]
    assert parsed.examples[1].response == FAILURES[1].response  # multi-line responses survive
    assert parsed.examples[1].answers == ("Bram Stoker", "Abraham Stoker")
    assert parsed.examples[3].truncated and not parsed.examples[0].truncated
    assert parsed.examples[3].response == "<think>" + "x" * 2993


def test_parse_paraphrase_and_history_prompts():
    assert parse_prompt(render_paraphrase(SR1, 3)) == rb.ParsedPrompt(kind="paraphrase", parent=SR1, n=3)
    history = [ScoredInstruction(SR1, 31.0), ScoredInstruction(SR1 + " Search first.", 45.5), ScoredInstruction("bad <answer></answer>", 3)]
    parsed = parse_prompt(render_history(history, 4))
    assert parsed.kind == "history" and parsed.n == 4
    assert parsed.parent == SR1 + " Search first."
    assert [s for _, s in parsed.history] == [31.0, 45.5, 3.0]


def test_parse_rejects_prompts_it_cannot_read():
    with pytest.raises(LLMError, match="no parent instruction <ins_0>"):
        parse_prompt("Write a poem.")
    assert parse_prompt("<ins_0>\nDo it with <answer></answer>.\n</ins_0>").n == rb.DEFAULT_N


# ------------------------------------------------------------------ the reflector


def chat(text):
    return [{"role": "system", "content": "You are an optimizer."}, {"role": "user", "content": text}]


def keeps_all_tags(parent: str, candidate: str) -> bool:
    return all(candidate.count(t) >= parent.count(t) for t in ALL_TAGS)


def test_reflection_candidates_keep_tags_differ_and_parse():
    out = RuleBasedReflector(seed=3, rules=RULES).generate(chat(render_reflection(SR1, FAILURES, 5)))[0]
    candidates = parse_candidates(out)
    assert len(candidates) == 5
    assert len(set(candidates)) == 5
    assert all(keeps_all_tags(SR1, c) for c in candidates)
    assert all(SR1 in c and c != SR1 for c in candidates)  # the parent is kept whole, plus guidance
    critique = critique_of(out)
    assert "never searched: 1/3" in critique
    assert "answer in information ignored: 1/3" in critique
    assert "repeated queries: 1/3" in critique
    assert "no answer: 1/3" in critique
    # the first candidate addresses every detected mode, with its first wording
    assert sr.GUIDANCE[sr.NEVER_SEARCHED][0] in candidates[0]
    assert sr.GUIDANCE[sr.REPEATED_QUERIES][0] in candidates[0]
    assert sr.GUIDANCE[sr.IGNORED_EVIDENCE][0] in candidates[0]


def test_candidates_never_introduce_tags_the_parent_lacks():
    out = RuleBasedReflector(seed=0, rules=RULES).generate(chat(render_reflection(NO_THINK_PARENT, FAILURES, 8)))[0]
    candidates = parse_candidates(out)
    assert len(set(candidates)) == 8
    for c in candidates:
        assert rb.tags_of(c) == rb.tags_of(NO_THINK_PARENT) == {"search", "information", "answer"}
        assert keeps_all_tags(NO_THINK_PARENT, c)
    assert "no reasoning" not in critique_of(out)


def test_deterministic_with_same_seed_and_different_with_another():
    prompt = chat(render_reflection(SR1, FAILURES, 6))
    a = RuleBasedReflector(rng=random.Random(11), rules=RULES).generate(prompt, n=2)
    b = RuleBasedReflector(rng=random.Random(11), rules=RULES).generate(prompt, n=2)
    c = RuleBasedReflector(rng=random.Random(12), rules=RULES).generate(prompt, n=2)
    assert a == b
    assert a != c
    assert a[0] != a[1]  # n responses are separate draws


def test_many_candidates_for_a_single_mode_stay_distinct():
    single = [rollout("1", AUS, "<think>t</think><answer> Sydney </answer>", ["Canberra"])]
    out = RuleBasedReflector(seed=5, rules=RULES).generate(chat(render_reflection(SR1, single, 12)))[0]
    candidates = parse_candidates(out)
    assert len(candidates) == len(set(candidates)) == 12
    assert all(keeps_all_tags(SR1, c) for c in candidates)


def test_revising_a_revision_does_not_stack_guidance():
    reflector = RuleBasedReflector(seed=2, rules=RULES)
    first = parse_candidates(reflector.generate(chat(render_reflection(SR1, FAILURES, 3)))[0])[0]
    again = parse_candidates(reflector.generate(chat(render_reflection(first, FAILURES, 3)))[0])
    assert sr.GUIDANCE[sr.NEVER_SEARCHED][0] in first
    for c in again:
        assert first in c or c.endswith(first)  # the revision is kept whole
        assert c.count("Rules learned from past mistakes:") <= 1
        for mode, wordings in sr.GUIDANCE.items():
            assert all(c.count(w) <= 1 for w in wordings)
            if rb.covered(mode, first, RULES):  # covered modes get no further wording
                assert [w for w in wordings if w in c] == [w for w in wordings if w in first]


@pytest.mark.parametrize("kind", ["paraphrase", "history"])
def test_paraphrase_and_history_prompts_get_distinct_tag_keeping_candidates(kind):
    if kind == "paraphrase":
        prompt = render_paraphrase(SR1, 4)
        parent = SR1
    else:
        parent = SR1 + " Always search before answering."
        prompt = render_history([ScoredInstruction(SR1, 20), ScoredInstruction(parent, 50), ScoredInstruction(SR1 + " Be brief in every answer you give.", 40)], 4)
    out = RuleBasedReflector(seed=9, rules=RULES).generate(chat(prompt))[0]
    candidates = parse_candidates(out)
    assert len(candidates) == len(set(candidates)) == 4
    assert parent.strip() not in [c.strip() for c in candidates]
    for c in candidates:
        assert all(c.count(t) >= parent.count(t) for t in ALL_TAGS)
        assert rb.tags_of(c) == rb.tags_of(parent)
    assert critique_of(out)
    if kind == "history":  # starts from the best and borrows from the other good instruction
        assert all(parent in c for c in candidates)
        assert any("Be brief in every answer you give." in c for c in candidates)
    else:  # some candidates reword the parent's own text (outside its tags)
        assert any("as many times as you want" in c for c in candidates)


def test_default_n_and_usage_and_protocol(caplog):
    caplog.set_level(logging.INFO, logger="inspo.llm")
    reflector = RuleBasedReflector()  # no rules: the answer-level ones (this test reads none)
    assert isinstance(reflector, LLMClient)
    assert "rule-based offline reflector" in caplog.text
    out = reflector.generate(chat("<ins_0>\nAnswer in <answer></answer>.\n</ins_0>\nImprove it."), n=3)
    assert len(out) == 3 and all(len(parse_candidates(o)) == rb.DEFAULT_N for o in out)
    assert (reflector.usage.calls, reflector.usage.prompt_tokens, reflector.usage.completion_tokens) == (1, 0, 0)
    with pytest.raises(LLMError):
        reflector.generate(chat("no template here"))
    assert reflector.usage.failures == 1


def test_query_that_names_nothing_the_question_names():
    # the 0.5B policy's commonest two-hop failure in the multihop pilot (BENCHMARKS.md §4)
    q = "In which city was the founder of the Kanor Observatory born?"
    for query in ("birthplace", "city", "2010"):
        response = f"<search> {query} </search><information>Doc 1 x</information><answer> Zanlinwick </answer>"
        found = modes_of(response, question=q, answers=("Belfestad",))
        assert sr.QUERY_MISSES_QUESTION in found, query
        assert "kanor, observatory" in found[sr.QUERY_MISSES_QUESTION]
    # one query with the name is enough; a question without a name never triggers it
    named = "<search> birthplace </search><information>x</information><search> Kanor Observatory founder </search>"
    assert sr.QUERY_MISSES_QUESTION not in modes_of(named + "<answer> X </answer>", question=q, answers=("Belfestad",))
    assert sr.QUERY_MISSES_QUESTION not in modes_of(
        "<search> city </search><answer> x </answer>", question="which city is largest?", answers=("y",))


def test_reflector_proposes_query_guidance_for_entityless_queries():
    from inspo.core.templates import parse_candidates, render_reflection
    from inspo.records import Question, Rollout

    q = Question(id="q", question="In which city was the founder of the Kanor Observatory born?", answers=("Belfestad",))
    failures = [Rollout(question=q, instruction_id="s", reward=0.0,
                        response="<search> birthplace </search><information>x</information><answer> Zanlinwick </answer>")]
    parent = "Answer the question. Use <search> query </search> and give <answer> x </answer>."
    prompt = render_reflection(parent, failures, 3)
    answer = RuleBasedReflector(seed=0, rules=RULES).generate([{"role": "user", "content": prompt}], n=1,
                                                    temperature=1.0, max_tokens=4096)[0]
    wordings = sr.GUIDANCE[sr.QUERY_MISSES_QUESTION]
    assert any(w in c for c in parse_candidates(answer, parent=parent) for w in wordings)


def test_the_rules_are_the_environments_and_the_default_reads_the_answer_only():
    from inspo.core.reflector import ANSWER_RULES
    from inspo.envs.search_r1 import SearchR1Env

    assert SearchR1Env(retriever=None).reflector_rules is RULES  # what a search-r1 run hands the reflector
    assert RuleBasedReflector().rules is ANSWER_RULES
    out = RuleBasedReflector(seed=3).generate(chat(render_reflection(SR1, FAILURES, 5)))[0]
    critique = critique_of(out)
    assert "no answer: 1/3" in critique and "wrong answer" in critique
    assert "never searched" not in critique and "repeated queries" not in critique
    searchy = {w for mode in (sr.NEVER_SEARCHED, sr.REPEATED_QUERIES, sr.IGNORED_EVIDENCE) for w in sr.GUIDANCE[mode]}
    assert not any(w in c for c in parse_candidates(out) for w in searchy)
