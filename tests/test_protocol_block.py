"""coevolution.protocol_block (issue 63, item 3): an evolved instruction is the optimizer's
strategy followed by the environment's protocol block, so no candidate can drop a tag; off, the
optimizer's prompt is App. E's, byte for byte."""

import json
import random
import re

import pytest

from core_helpers import FunctionLLM
from inspo.core.config import CoEvolutionConfig, ConfigError
from inspo.core.proposer import Proposer, guard, tags_in
from inspo.core.templates import ScoredInstruction, render_reflection
from inspo.envs import TaggedToolEnv, ToolProtocol, check_environment
from inspo.envs.base import EnvError
from inspo.envs.calculator.env import CALCULATOR_INSTRUCTION, CalculatorEnv
from inspo.envs.search_r1.env import SearchR1Env
from inspo.envs.search_r1.protocol import SEARCH_R1_INSTRUCTION, SEARCH_R1_PROTOCOL
from inspo.records import Instruction, Question, Rollout

CALC = CalculatorEnv()
BLOCK = CALC.protocol
PARENT = Instruction(id="ins-0001", text=CALCULATOR_INSTRUCTION)
FAILURE = Rollout(Question("q1", "A baker bakes 4 trays of 15. How many?", ("60",)), "ins-0001",
                  "<answer>50</answer>")
STRATEGIES = (
    "Solve the problem one step at a time.",
    "Check every number of the question is used once.",
    "Never do arithmetic in your head.",
)


def ids():
    counter = iter(range(1000))
    return lambda: f"c{next(counter)}"


def answer_with(texts):
    return "The model skipped steps.\n" + "".join(
        f"<ins_{i}>\n{t}\n</ins_{i}>\n" for i, t in enumerate(texts, 1))


def tagless(prompt: str) -> str:
    """A literal small optimizer: revises the prompt's <ins_0> and drops every tag it has."""
    parent = re.search(r"<ins_0>\n(.*?)\n</ins_0>", prompt, re.DOTALL).group(1)
    return answer_with([re.sub(r"</?\w+>", "", f"{parent} {s}") for s in STRATEGIES])


def proposer(llm, on: bool, **config):
    config = {"candidates_per_call": 3, **config}
    return Proposer.from_config(llm, CoEvolutionConfig(protocol_block=on, **config),
                                required_tags=CALC.required_tags, protocol=CALC.protocol)


# ------------------------------------------------------------------------------ the record


@pytest.mark.parametrize("strategy",
                         ["Be brief.", "  Two\nlines. \n", "", "Use <calc> ... </calc>."])
def test_split_gives_back_what_compose_was_given(strategy):
    composed = BLOCK.compose(strategy)
    assert composed.endswith("\n\n" + BLOCK.block)
    assert BLOCK.split(composed) == (strategy.strip(), BLOCK.block)
    assert BLOCK.split(composed + "\n  ") == (strategy.strip(), BLOCK.block)
    assert BLOCK.compose(BLOCK.strategy(composed)) == composed


def test_a_seed_without_the_block_is_its_own_strategy():
    assert BLOCK.split(CALCULATOR_INSTRUCTION) == (CALCULATOR_INSTRUCTION, None)
    assert BLOCK.split(BLOCK.block + " And more.") == (BLOCK.block + " And more.", None)


def test_a_block_must_show_every_tag_it_names():
    with pytest.raises(ValueError, match="<result>…</result>"):
        ToolProtocol(tags=("calc", "result"), block="Write <calc> x </calc>; read <result>.")
    with pytest.raises(ValueError, match="non-empty"):
        ToolProtocol(tags=(), block="text")
    with pytest.raises(ValueError, match="block"):
        ToolProtocol(tags=("a",), block="  ")


# ------------------------------------------------------------------------------ the environments


def test_the_calculators_and_search_r1s_blocks_carry_their_tags():
    search = SearchR1Env(retriever=None)
    for env, tags in ((CALC, {"calc", "result", "answer"}),
                      (search, {"think", "search", "information", "answer"})):
        assert set(env.protocol.tags) == tags
        assert tags_in(env.protocol.block, tags) == tags
        assert set(env.required_tags) <= tags_in(env.protocol.block, env.required_tags)
        # the seed's strategy composed with the block is a guard-clean instruction
        composed = env.protocol.compose("Think before you answer.")
        assert guard(composed, env.seed_instruction, [], 6000, env.required_tags) is None
    assert search.protocol is SEARCH_R1_PROTOCOL


def test_the_search_r1_block_holds_none_of_the_synthetic_tasks_guidance():
    from inspo.synthetic import FEATURES, PROTOCOL, true_quality

    assert PROTOCOL is SEARCH_R1_PROTOCOL
    assert not [f.name for f in FEATURES if f.present(PROTOCOL.block)]
    plain = PROTOCOL.compose("Answer the question.")
    assert true_quality(plain) == true_quality(SEARCH_R1_INSTRUCTION)


def test_a_tagged_env_builds_a_block_from_its_tools_and_a_user_env_may_have_none():
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    env = TaggedToolEnv(name="adder", tools=[add], result_tag="sum",
                        seed_instruction="Use <add> ... </add>; <answer> </answer>.")
    assert env.protocol.tags == ("add", "sum", "answer")
    assert "Add two integers." in env.protocol.block
    assert check_environment(env) is env
    env.protocol = None  # an environment without one is still an environment
    assert check_environment(env) is env
    env.protocol = "Use <add>."
    with pytest.raises(EnvError, match="protocol must be"):
        check_environment(env)


# ------------------------------------------------------------------------------ the proposer


def test_a_tag_dropping_optimizer_still_gives_guard_clean_candidates_that_end_with_the_block():
    off = proposer(FunctionLLM(tagless), on=False).propose(PARENT, [FAILURE], new_id=ids())
    assert not off.candidates and all("drops protocol tag" in c.rejected for c in off.rejected)

    on = proposer(FunctionLLM(tagless), on=True).propose(PARENT, [FAILURE], new_id=ids())
    assert len(on.candidates) == 3 and not on.rejected
    for cand in on.candidates:
        strategy, block = BLOCK.split(cand.text)
        assert block == BLOCK.block and "<" not in strategy
        assert guard(cand.text, PARENT.text, [], 6000, CALC.required_tags) is None


def test_the_prompt_shows_the_strategy_and_asks_for_strategies_only():
    llm = FunctionLLM(lambda p: answer_with(STRATEGIES))
    parent = Instruction(id="ins-0002", text=BLOCK.compose("Go step by step."))
    proposal = proposer(llm, on=True).propose(parent, [FAILURE], new_id=ids())
    prompt = llm.prompts[0]
    assert "<ins_0>\nGo step by step.\n</ins_0>" in prompt and BLOCK.block not in prompt
    tags = "<calc>...</calc>, <result>...</result>, <answer>...</answer>"
    assert f"The tool protocol ({tags}) is fixed" in prompt
    assert "added after every candidate automatically" in prompt
    assert "Write only the strategy" in prompt
    assert "Make sure you include the same XML tags" not in prompt  # App. E's tag rule is moot
    assert "improve the initial prompt by giving 3 different but better candidates." in prompt
    assert [c.text for c in proposal.candidates] == [BLOCK.compose(s) for s in STRATEGIES]


def test_with_protocol_block_off_the_prompt_is_the_papers():
    llm = FunctionLLM(lambda p: answer_with(STRATEGIES))
    proposer(llm, on=False).propose(PARENT, [FAILURE], new_id=ids())
    assert llm.prompts[0] == render_reflection(PARENT.text, [FAILURE], 3)
    assert llm.prompts[0] == (
        "The initial prompt is:\n"
        f"<ins_0>\n{CALCULATOR_INSTRUCTION}\n</ins_0>\n"
        "However, it still gets the following examples wrong:\n"
        "<example>\nQuestion: A baker bakes 4 trays of 15. How many?\n"
        "Response: <answer>50</answer>\nCorrect answer: 60\n</example>\n"
        "Analyze the reasons behind these mistakes and why the prompt could have gotten these "
        "examples wrong.\n"
        "Now take the reasons into account. Revise and improve the initial prompt by giving 3 "
        "different but better candidates.\n"
        "Make sure you include the same XML tags <>...</> as the original prompt in your "
        "improved prompts.\n"
        "For each XML tag, include both the beginning and ending tags, such as "
        "<answer>...</answer>.\n"
        "List the instruction candidates in <ins_1>...</ins_1> to <ins_3>...</ins_3> tags."
    )


@pytest.mark.parametrize("template", ["paraphrase", "history"])
def test_the_other_templates_show_strategies_too(template):
    llm = FunctionLLM(lambda p: answer_with(STRATEGIES))
    parent = Instruction(id="ins-0002", text=BLOCK.compose("Go step by step."))
    history = [ScoredInstruction(parent.text, 40.0),
               ScoredInstruction(BLOCK.compose("Be exact."), 55.0)]
    proposer(llm, on=True, template=template).propose(parent, [], history=history, new_id=ids())
    prompt = llm.prompts[0]
    assert BLOCK.block not in prompt and "Write only the strategy" in prompt
    assert "Go step by step." in prompt
    if template == "history":
        assert "<ins_2>\nBe exact.\n</ins_2>\n<score_2>55.0</score_2>" in prompt
    off = FunctionLLM(lambda p: answer_with(STRATEGIES))
    proposer(off, on=False, template=template).propose(parent, [], history=history, new_id=ids())
    assert BLOCK.block in off.prompts[0] and "Write only the strategy" not in off.prompts[0]


def test_empty_strategies_the_parents_strategy_and_copied_blocks():
    parent = Instruction(id="ins-0002", text=BLOCK.compose("Go step by step."))
    texts = ["...", "go STEP  by step.", BLOCK.compose("Be exact."), BLOCK.block, "Be exact."]
    proposal = proposer(FunctionLLM(lambda p: answer_with(texts)), on=True, candidates_per_call=5) \
        .propose(parent, [FAILURE], new_id=ids())
    reasons = [c.rejected for c in proposal.rejected]
    assert reasons == ["empty strategy", "duplicate of its parent", "empty strategy",
                       "duplicate of an existing instruction or candidate"]
    # the copied block is taken off: one block, not two
    assert [c.text for c in proposal.candidates] == [BLOCK.compose("Be exact.")]


def test_an_echoed_strategy_in_ins_0_is_not_a_candidate():
    parent = Instruction(id="ins-0002", text=BLOCK.compose("Go step by step."))
    answer = "<ins_0>\nGo step by step.\n</ins_0>\n" + answer_with(["Be exact."])
    proposal = proposer(FunctionLLM(lambda p: answer), on=True).propose(parent, [], new_id=ids())
    assert [c.text for c in proposal.candidates] == [BLOCK.compose("Be exact.")]
    assert not proposal.rejected and not proposal.parse_fallbacks


# ------------------------------------------------------------------------------ building a run


def test_an_env_without_a_protocol_fails_clearly_when_protocol_block_is_on():
    llm = FunctionLLM(tagless)
    fix = r"protocol_block is on.*ToolProtocol.*protocol_block: false"
    with pytest.raises(ConfigError, match=fix):
        Proposer.from_config(llm, CoEvolutionConfig(protocol_block=True), required_tags=("calc",))
    # off, or a run that never proposes, needs none
    assert Proposer.from_config(llm, CoEvolutionConfig()).protocol is None
    static = CoEvolutionConfig(protocol_block=True, evolve=False, init_population=False)
    assert Proposer.from_config(llm, static).protocol is None
    # off, the environment's protocol is not used
    assert Proposer.from_config(llm, CoEvolutionConfig(), protocol=BLOCK).protocol is None


def test_build_coevolution_hands_the_environments_protocol_to_the_proposer():
    from inspo.core.events import EventLog
    from inspo.training.build_core import build_coevolution

    class UserEnv:  # the parts build_coevolution reads, and no protocol
        required_tags = ("calc", "answer")

        def feedback(self, rollout):
            return ""

        def leak_terms(self, question):
            return []

    co = CoEvolutionConfig(protocol_block=True)
    coevo = build_coevolution(co, CALCULATOR_INSTRUCTION, FunctionLLM(tagless), EventLog(None),
                              static=False, env=CALC)
    assert coevo.proposer.protocol is BLOCK
    with pytest.raises(ConfigError, match="no protocol block"):
        build_coevolution(co, CALCULATOR_INSTRUCTION, FunctionLLM(tagless), EventLog(None),
                          static=False, env=UserEnv())


def test_guard_tags_the_block_lacks_are_refused_at_build_time():
    with pytest.raises(ValueError, match="lacks <think>…</think>"):
        Proposer(FunctionLLM(tagless), guard_tags=("calc", "think"), protocol=BLOCK)


def test_the_demo_evolves_strategies_under_the_block(tmp_path):
    from inspo.core.reflector import RuleBasedReflector
    from inspo.demo import run_demo
    from inspo.synthetic import PROTOCOL, reflector_rules

    config = CoEvolutionConfig(protocol_block=True, evolve_until=31, validation_size=30, seed=3)
    reflector = RuleBasedReflector(rng=random.Random(3), rules=reflector_rules())
    run_demo(tmp_path, reflector, config=config, steps=30, n_questions=80, progress=False)
    summary = json.loads((tmp_path / "summary.json").read_text())
    state = json.loads((tmp_path / "inspo_state.json").read_text())
    members = [m["instruction"] for m in state["population"]["members"]]
    evolved = [m["text"] for m in members if m["origin"] != "seed"]
    assert evolved and all(PROTOCOL.split(text)[1] == PROTOCOL.block for text in evolved)
    assert all(text.count(PROTOCOL.block) == 1 for text in evolved)
    assert summary["best_quality"] > summary["seed_quality"]
