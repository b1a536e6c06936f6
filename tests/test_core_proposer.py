import pytest

from core_helpers import GUARD, SEED, FunctionLLM, failing_llm, scripted_reflection
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.proposer import Proposer, guard
from inspo.core.templates import (
    ScoredInstruction,
    critique_of,
    parse_candidates,
    render_history,
    render_paraphrase,
    render_reflection,
)
from inspo.records import Instruction, Question, Rollout

PARENT = Instruction(id="ins-0001", text=SEED)


def ids():
    counter = iter(range(100))
    return lambda: f"c{next(counter)}"


def test_guard_rejects_missing_answer_tag():
    text = SEED.replace("<answer>", "").replace("</answer>", "")
    assert "drops protocol tag(s) <answer>" in guard(text, SEED, [], 6000, tags=GUARD)
    # only the closing tag dropped counts too
    assert "answer" in guard(SEED.replace("</answer>", ""), SEED, [], 6000, tags=GUARD)
    # the core knows no tag of its own: without the environment's tags there is no tag check
    assert guard(text, SEED, [], 6000) is None


def test_guard_empty_duplicate_and_length():
    assert guard("   ", SEED, [], 6000) == "empty"
    assert guard(SEED.upper().lower(), SEED, [], 6000) == "duplicate of its parent"
    other = SEED + " Be brief."
    assert "duplicate" in guard("  " + other.replace(" ", "  "), SEED, [other], 6000)
    assert "too long" in guard(SEED + "x" * 100, SEED, [], len(SEED) + 10)
    assert guard(other, SEED, [], 6000) is None


def test_guard_does_not_require_tags_the_parent_lacks():
    parent = "Answer inside <answer> and </answer>."
    assert guard("Reply within <answer> and </answer>, briefly.", parent, [], 6000) is None


def test_guard_checks_only_the_configured_tags():
    no_think = SEED + " Search first."  # SEED teaches search, information and answer, no think
    parent = SEED + " Reason inside <think> and </think>."
    assert "<think>" in guard(no_think, parent, [], 6000, tags=("search", "information", "answer", "think"))
    assert guard(no_think, parent, [], 6000, tags=("search", "answer")) is None
    no_answer = parent.replace("<answer>", "")
    assert "<answer>" in guard(no_answer, parent, [], 6000, tags=("search", "answer"))
    assert guard(no_answer, parent, [], 6000, tags=()) is None  # the paper's setting: no tag check


def test_proposer_from_config_carries_the_guard_tags():
    llm = FunctionLLM(lambda p: f"<ins_1>\n{SEED.replace('<answer>', '')}\n</ins_1>")
    failure = Rollout(Question("q1", "Q?", ("A",)), "ins-0001", "<answer>B</answer>")
    strict = Proposer.from_config(llm, CoEvolutionConfig(), required_tags=GUARD)  # guard_tags null: the env's
    assert strict.guard_tags == GUARD
    strict = strict.propose(PARENT, [failure], new_id=ids())
    assert strict.candidates == [] and len(strict.rejected) == 1
    named = Proposer.from_config(llm, CoEvolutionConfig(guard_tags=["answer"]), required_tags=GUARD)
    assert named.guard_tags == ("answer",)  # a run's own list wins over the environment's
    loose = Proposer.from_config(llm, CoEvolutionConfig(guard_tags=[], candidates_per_call=1, template="paraphrase"))
    assert (loose.n_candidates, loose.template, loose.guard_tags) == (1, "paraphrase", ())
    assert len(loose.propose(PARENT, [failure], new_id=ids()).candidates) == 1
    with pytest.raises(ConfigError, match="guard_tags must be a list of tag names"):
        CoEvolutionConfig(guard_tags=["answer", "not a tag"])
    with pytest.raises(ConfigError, match="guard_tags"):
        CoEvolutionConfig(guard_tags="answer")


def test_parse_candidates_and_critique():
    text = "Analysis here.\n<ins_2>second</ins_2><ins_1> first </ins_1><ins_0>echo</ins_0><ins_3>unclosed"
    # block order; <ins_0> skipped with no parent to compare it to; an answer taken as complete
    # keeps the block left open at its end, one cut off at max_tokens does not
    assert parse_candidates(text) == ["first", "second", "unclosed"]
    assert parse_candidates(text, cut_off=True) == ["first", "second"]
    assert critique_of(text) == "Analysis here."


def test_templates_follow_app_e():
    failure = Rollout(Question("q1", "Who founded X?", ("Ann", "Anna")), "i", "<answer>Bob</answer>")
    ref = render_reflection(SEED, [failure], 6)
    assert f"<ins_0>\n{SEED}\n</ins_0>" in ref
    assert "Question: Who founded X?\nResponse: <answer>Bob</answer>\nCorrect answer: Ann | Anna" in ref
    assert "giving 6 different but better candidates" in ref and "<ins_6>" in ref
    assert "Improve the above prompt." in render_paraphrase(SEED, 4)
    hist = render_history([ScoredInstruction("a <answer></answer>", 12.5)], 3)
    assert "<score_1>12.5</score_1>" in hist and "ranges from 0 to 100" in hist


def test_proposer_parses_guards_and_counts_tokens():
    llm = FunctionLLM(scripted_reflection)
    proposer = Proposer(llm, n_candidates=6, guard_tags=GUARD)
    failure = Rollout(Question("q1", "Q?", ("A",)), "ins-0001", "<answer>B</answer>")
    prop = proposer.propose(PARENT, [failure], new_id=ids())
    assert prop.error is None and prop.critique == "The prompt lets the model skip steps."
    assert [c.rejected for c in prop.rejected] == ["drops protocol tag(s) <answer>…</answer>"]
    assert len(prop.candidates) == 5 and all(c.parent_id == "ins-0001" for c in prop.candidates)
    assert len({c.id for c in prop.candidates + prop.rejected}) == 6
    assert prop.prompt_tokens > 0 and prop.completion_tokens > 0
    assert "Question: Q?" in llm.prompts[0]


def test_proposer_survives_optimizer_failure_and_garbage():
    prop = Proposer(FunctionLLM(failing_llm)).propose(PARENT, [], new_id=ids())
    assert prop.candidates == [] and "timed out" in prop.error
    prop = Proposer(FunctionLLM(lambda p: "I cannot help with that.")).propose(PARENT, [], new_id=ids())
    assert prop.candidates == [] and "no <ins_i> candidate" in prop.error


@pytest.mark.parametrize("template", ["paraphrase", "history"])
def test_other_templates_render(template):
    llm = FunctionLLM(lambda p: f"<ins_1>{SEED} Be brief.</ins_1>")
    prop = Proposer(llm, template=template).propose(PARENT, [], new_id=ids())
    assert len(prop.candidates) == 1 and prop.template == template


def test_several_answers_a_call_are_read_each_for_its_candidates_in_one_request():
    from inspo.core.optimizer_llm import FINISH_LENGTH, FINISH_STOP, LLMError
    from inspo.llm.scripted import ScriptedLLM

    good = SEED + " Check each step."
    answers = [f"Why: steps.\n<ins_1>\n{good}\n</ins_1>\n<ins_2>\n{SEED}\n</ins_2>",   # 2: a copy of its parent
               "nothing here",
               f"<ins_1>\n{good}\n</ins_1>\n<ins_2>\n{SEED} Be brief.\n</ins_2>\n<ins_3>\n{SEED} Then"]  # cut off
    # one request for all three answers; the third stopped at the limit
    llm = ScriptedLLM(lambda messages, n: answers[:n], finish_reason=[FINISH_STOP, FINISH_STOP, FINISH_LENGTH])
    proposer = Proposer.from_config(llm, CoEvolutionConfig(answers_per_call=3, candidates_per_call=3),
                                    required_tags=GUARD)
    proposal = proposer.propose(PARENT, [], new_id=ids())
    assert llm.usage.calls == 1
    assert proposal.critique == "Why: steps."
    assert [c.text for c in proposal.candidates] == [good, SEED + " Be brief."]
    reasons = sorted(c.rejected.split(":")[0] for c in proposal.rejected)
    assert reasons == ["duplicate of an existing instruction or candidate", "duplicate of its parent", "truncated"]
    assert proposal.cut_off and proposal.error is None
    with pytest.raises(LLMError, match="2 finish reasons for 3 completions"):
        ScriptedLLM(lambda messages, n: answers[:n], finish_reason=["stop", "stop"]).generate([], n=3)
    with pytest.raises(ConfigError, match="answers_per_call must be a positive integer"):
        CoEvolutionConfig(answers_per_call=0)
    one = Proposer.from_config(ScriptedLLM(lambda messages, n: [answers[1]] * n), CoEvolutionConfig())
    assert one.answers == 1 and one.propose(PARENT, [], new_id=ids()).error.startswith("no <ins_i> candidate")
