"""Reading App. E's answer the way a small optimizer writes it (issue 23): tag forms, missing
close tags, revisions in <ins_0>, blocks left open at the end, and truncation only when the
completion really stopped at max_tokens. Every fallback is counted and reaches the events."""

from __future__ import annotations

import logging

import pytest

from core_helpers import SEED, FunctionLLM, parent_of
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.events import Proposed, event_from_dict
from inspo.core.proposer import Proposer
from inspo.core.templates import PARSE_FALLBACKS, critique_of, parse_answer
from inspo.llm.scripted import ScriptedLLM
from inspo.records import Instruction
from inspo.synthetic import make_questions

PARENT = Instruction(id="ins-0001", text=SEED)
BETTER = SEED + " Search for one entity at a time."


def ids():
    counter = iter(range(100))
    return lambda: f"c{next(counter)}"


# ------------------------------------------------------------------ the parser (pure)


def test_well_formed_blocks_need_no_fallback():
    parsed = parse_answer("Why.\n<ins_1>\na\n</ins_1>\n<ins_2>b</ins_2>", parent=SEED)
    assert parsed.candidates == ["a", "b"] and parsed.notes == [] and parsed.truncated is None


@pytest.mark.parametrize("open_tag, close_tag", [
    ("<INS_1>", "</INS_1>"),
    ("< ins_1 >", "</ ins_1 >"),
    ("<ins1>", "</ins1>"),
    ("<Ins 1>", "</Ins 1>"),
    ("<ins-1>", "</ins-1>"),
    ("<ins_1>", "</INS_1>"),  # only the closing tag off
])
def test_tags_in_any_case_and_spacing_are_read_and_counted(open_tag, close_tag):
    parsed = parse_answer(f"Analysis.\n{open_tag}\n{BETTER}\n{close_tag}", parent=SEED)
    assert parsed.candidates == [BETTER]
    assert parsed.fallbacks == {"tag_form": 1}  # one per block, even with both tags off


def test_a_block_ends_at_the_next_opening_tag_when_its_close_tag_is_missing():
    parsed = parse_answer("<ins_1>\nfirst\n<ins_2>\nsecond\n</ins_2>\n<ins_3>third</ins_3>")
    assert parsed.candidates == ["first", "second", "third"]
    assert parsed.notes == [("missing_close", 1)]


def test_a_block_closed_by_another_blocks_tag_keeps_that_tag_out_of_its_text():
    parsed = parse_answer("<ins_1>first</ins_2>\n<ins_2>second</ins_2>")
    assert parsed.candidates == ["first", "second"]
    assert parsed.fallbacks == {"mismatched_close": 1}


def test_a_block_left_open_at_the_end_counts_only_when_the_answer_was_not_cut_off():
    text = "<ins_1>first</ins_1>\n<ins_2>\nsecond, unclosed"
    complete = parse_answer(text, cut_off=False)
    assert complete.candidates == ["first", "second, unclosed"] and complete.truncated is None
    assert complete.fallbacks == {"end_of_text": 1}
    cut = parse_answer(text, cut_off=True)
    assert cut.candidates == ["first"] and cut.truncated == (2, "second, unclosed") and cut.notes == []
    # every block closed: a limit reached after them truncates nothing
    assert parse_answer("<ins_1>first</ins_1> and then some commen", cut_off=True).truncated is None


def test_a_revision_in_ins_0_is_a_candidate_and_an_echo_is_not():
    revision = parse_answer(f"The prompt is vague.\n<ins_0>\n{BETTER}\n</ins_0>", parent=SEED)
    assert revision.candidates == [BETTER] and revision.fallbacks == {"ins_0_revision": 1}
    # the parent echoed back (case and whitespace aside): skipped, no fallback counted
    echo = parse_answer(f"<ins_0>\n{SEED.upper()}\n</ins_0>\n<ins_1>{BETTER}</ins_1>", parent="  " + SEED)
    assert echo.candidates == [BETTER] and echo.notes == []
    # without a parent to compare with, <ins_0> is always taken for an echo
    assert parse_answer(f"<ins_0>{BETTER}</ins_0>").candidates == []
    # an <ins_0> revision sorts first, and takes its other fallbacks with it
    both = parse_answer(f"<ins_1>b</ins_1><INS_0>{BETTER}", parent=SEED)
    assert both.candidates == [BETTER, "b"]
    assert both.fallbacks == {"tag_form": 1, "end_of_text": 1, "ins_0_revision": 1}


def test_an_ins_0_cut_off_is_truncated_only_when_it_was_becoming_a_revision():
    assert parse_answer(f"<ins_0>\n{SEED[:40]}", parent=SEED, cut_off=True).truncated is None  # an echo
    assert parse_answer("<ins_0>\nYou must search", parent=SEED, cut_off=True).truncated == (0, "You must search")


def test_refused_forms_give_no_candidate():
    assert parse_answer("I cannot help with that.", parent=SEED).candidates == []
    assert parse_answer("<ins>no number</ins> <ins_N>...</ins_N>", parent=SEED).candidates == []
    assert parse_answer("</ins_1> a stray close tag", parent=SEED).candidates == []


def test_critique_leaves_ins_0_blocks_out():
    text = f"<ins_0>\n{SEED}\n</ins_0>\nThe prompt never says to search first.\n<ins_1>{BETTER}</ins_1>"
    assert critique_of(text) == "The prompt never says to search first."
    assert critique_of(f"Vague.\n<ins_0>{BETTER}") == "Vague."
    assert critique_of("Only words.") == "Only words."


def test_every_fallback_kind_is_documented():
    seen = set()
    for text, cut in [("<INS_1>a<ins_2>b</ins_1><ins_3>c", False), (f"<ins_0>{BETTER}</ins_0>", False)]:
        seen |= set(parse_answer(text, parent=SEED, cut_off=cut).fallbacks)
    assert seen == set(PARSE_FALLBACKS)


# ------------------------------------------------------------------ the proposer


def scripted(answer: str, finish_reason: str | None = "stop") -> ScriptedLLM:
    return ScriptedLLM(lambda messages, n: answer, finish_reason=finish_reason)


def test_proposer_reads_an_ins_0_revision_counts_and_logs_the_fallback(caplog):
    with caplog.at_level(logging.INFO, logger="inspo.core"):
        prop = Proposer(scripted(f"Here is a better prompt:\n<ins_0>\n{BETTER}")).propose(PARENT, [], new_id=ids())
    assert [c.text for c in prop.candidates] == [BETTER] and prop.error is None
    assert prop.parse_fallbacks == {"end_of_text": 1, "ins_0_revision": 1} and not prop.cut_off
    assert prop.critique == "Here is a better prompt:"
    logged = [r.getMessage() for r in caplog.records if r.name == "inspo.core"]
    assert any("<ins_0> read by the ins_0_revision fallback" in line for line in logged)
    assert any("end_of_text" in line for line in logged)


def test_proposer_refuses_the_parent_copied_and_answers_without_a_block():
    echo_only = Proposer(scripted(f"<ins_0>\n{SEED}\n</ins_0>")).propose(PARENT, [], new_id=ids())
    assert echo_only.candidates == [] and "no <ins_i> candidate" in echo_only.error
    copied = Proposer(scripted(f"<ins_1>\n{SEED}\n</ins_1>")).propose(PARENT, [], new_id=ids())
    assert copied.candidates == [] and [c.rejected for c in copied.rejected] == ["duplicate of its parent"]
    untagged = Proposer(scripted(BETTER)).propose(PARENT, [], new_id=ids())
    assert untagged.candidates == [] and "no <ins_i> candidate" in untagged.error
    # App. E's format line echoed back is no instruction
    echoed = Proposer(scripted("<ins_1>...</ins_1>"), guard_tags=()).propose(PARENT, [], new_id=ids())
    assert echoed.candidates == [] and [c.rejected for c in echoed.rejected] == ["empty"]


def test_truncated_only_when_the_completion_hit_max_tokens():
    answer = f"<ins_1>\n{BETTER}\n</ins_1>\n<ins_2>\n{SEED} Be"
    ended = Proposer(scripted(answer, "stop")).propose(PARENT, [], new_id=ids())
    assert [c.text for c in ended.candidates] == [BETTER, f"{SEED} Be"] and ended.rejected == []
    assert ended.parse_fallbacks == {"end_of_text": 1}
    cut = Proposer(scripted(answer, "length"), max_tokens=400).propose(PARENT, [], new_id=ids())
    assert [c.text for c in cut.candidates] == [BETTER] and cut.cut_off and cut.parse_fallbacks == {}
    assert [c.rejected for c in cut.rejected] == [
        f"truncated: the optimizer's answer stopped at its completion limit inside <ins_2> after {len(SEED) + 3} "
        "characters (raise coevolution.optimizer_max_tokens, now 400)"]


def test_without_a_finish_reason_the_proposer_compares_completion_tokens_with_max_tokens():
    answer = f"<ins_1>\n{BETTER}\n</ins_1>\n<ins_2>\n{SEED} Be"
    tokens = len(answer) // 4  # what FunctionLLM counts (it reports no finish reason)
    for max_tokens, cut in ((tokens, True), (tokens + 1, False)):
        prop = Proposer(FunctionLLM(lambda p: answer), max_tokens=max_tokens).propose(PARENT, [], new_id=ids())
        assert prop.cut_off is cut and prop.completion_tokens == tokens
        assert len(prop.candidates) == (1 if cut else 2)
    # a client that cannot tell (None) falls back the same way
    unknown = Proposer(scripted(answer, None), max_tokens=10).propose(PARENT, [], new_id=ids())
    assert unknown.cut_off and len(unknown.candidates) == 1


def test_local_client_reports_length_when_it_stops_at_max_tokens(smollm2_chat):
    from inspo.llm.local import LocalTransformersClient

    model, tokenizer = smollm2_chat
    client = LocalTransformersClient(model=model, tokenizer=tokenizer)
    client.generate([{"role": "user", "content": "Write a long story about a cat."}], n=2, temperature=0.0, max_tokens=3)
    assert client.last_finish_reasons == ["length", "length"]


def test_openai_client_reads_each_choices_finish_reason():
    from inspo.llm.openai_client import _finish_reasons

    body = {"choices": [{"finish_reason": "length"}, {"finish_reason": "stop"}, {}, "odd"]}
    assert _finish_reasons(body) == ["length", "stop", None, None]


@pytest.mark.integration
def test_openai_client_keeps_the_finish_reasons_of_its_last_call():
    from inspo.llm.openai_client import OpenAICompatibleClient
    from openai_compat_server import OpenAICompatServer

    with OpenAICompatServer(api_key="k") as server:
        client = OpenAICompatibleClient(base_url=server.base_url, model="smollm2", api_key="k", env={})
        client.generate([{"role": "user", "content": "hi"}], n=2, max_tokens=8)
    assert client.last_finish_reasons == ["stop", "stop"]  # what the test server sends


# ------------------------------------------------------------------ events and config


def test_parse_fallbacks_reach_the_proposed_event_and_old_logs_still_read():
    def revise_in_ins_0(prompt):
        return f"Too vague.\n<INS_0>\n{parent_of(prompt)} Search for one entity at a time.\n</INS_0>"

    cfg = CoEvolutionConfig(population_size=2, validation_size=2, candidates_per_call=1, max_rounds=1)
    coevo = CoEvolution(cfg, SEED, Proposer.from_config(FunctionLLM(revise_in_ins_0), cfg))
    coevo.initialize(lambda ins, qs: [], make_questions(2))
    [proposed] = coevo.events.of_kind("proposed")
    assert proposed.parse_fallbacks == {"tag_form": 1, "ins_0_revision": 1}
    assert event_from_dict(proposed.to_dict()) == proposed
    old = {k: v for k, v in proposed.to_dict().items() if k != "parse_fallbacks"}
    assert event_from_dict(old).parse_fallbacks == {} and isinstance(event_from_dict(old), Proposed)


@pytest.mark.parametrize("n", [0, 7, 2.0, True])
def test_candidates_per_call_is_bounded_1_to_6(n):
    with pytest.raises(ConfigError, match="candidates_per_call must be an integer from 1 to 6"):
        CoEvolutionConfig(candidates_per_call=n)


def test_candidates_per_call_1_to_6_are_accepted_and_the_paper_preset_keeps_6():
    from inspo.config.train import resolve

    assert [CoEvolutionConfig(candidates_per_call=n).candidates_per_call for n in range(1, 7)] == list(range(1, 7))
    assert resolve("paper").coevolution.candidates_per_call == 6
