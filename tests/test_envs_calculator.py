"""The built-in calculator environment: the safe calculator, the problem generator, the numeric
reward, the environment's parts, and scripted episodes (text only, and with token ids on the tiny
random Qwen2)."""

from __future__ import annotations

import builtins
import random
import re
from fractions import Fraction

import pytest

from inspo.core.reflector.failures import WRONG_ANSWER, FailureExample, tags_of
from inspo.envs.base import check_environment
from inspo.envs.calculator import (
    NAMED_INSTRUCTIONS,
    CalcError,
    CalculatorEnv,
    CalculatorOptions,
    evaluate_expression,
    format_number,
    generate_problems,
    load_environment,
    options_from,
    parse_number,
    same_number,
    write_splits,
)
from inspo.envs.calculator.arith import ERROR_PREFIX, MAX_CHARS, USAGE, calculate
from inspo.envs.calculator.data import NAMES, PHRASINGS, THINGS, ProblemSpec
from inspo.envs.calculator.env import ANSWER_NOT_A_NUMBER, CALC_REFUSED, RULES, WORKED_INSTRUCTION
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.envs.registry import check_seed_name, make_env, resolve_options, resolve_seed
from inspo.envs.tagged import NEVER_USED_TOOL
from inspo.records import Instruction, Question, ToolCall

SMALL = {"train_size": 30, "dev_size": 10, "test_size": 20}

# ---------------------------------------------------------------------------- the calculator


@pytest.mark.parametrize("text, value", [
    ("6 * 23", Fraction(6 * 23)),
    ("(3+4)*2", Fraction((3 + 4) * 2)),
    ("7/2", Fraction(7, 2)),
    ("0.1 + 0.2", Fraction(3, 10)),
    ("-3 + +5", Fraction(2)),
    ("2 * (3 + (4 - 1))", Fraction(12)),
    ("  6 *\n 23 ", Fraction(138)),
    ("1,932 + 1", Fraction(1933)),  # thousands separators in groups of three are read
    ("1e3 / 8", Fraction(125)),
    (".5 * 4", Fraction(2)),
])
def test_evaluates_arithmetic_exactly(text, value):
    assert evaluate_expression(text) == value


def test_results_print_as_integers_or_short_decimals():
    assert format_number(Fraction(138)) == "138"
    assert format_number(Fraction(7, 2)) == "3.5"
    assert format_number(Fraction(1, 10) + Fraction(2, 10)) == "0.3"
    assert format_number(Fraction(1, 3)) == "0." + "3" * 10
    assert format_number(Fraction(-2, 3)) == "-0." + "6" * 9 + "7"
    assert calculate("0.1 + 0.2") == "0.3"


HOSTILE = [
    "__import__('os')",
    "__import__('os').system('true')",
    "9**9**9",
    "2 ** 10",
    "(1e308)*10",
    "1e999",
    "x",
    "a.b",
    "[1,2]",
    "'s'",
    "lambda: 1",
    "[x for x in (1, 2)]",
    "1/0",
    "١٢٣",  # Arabic-Indic digits
    "１２",  # fullwidth digits
    "1 // 2",
    "7 % 2",
    "1 < 2",
    "True",
    "1j",
    "1_000",
    "1,2",
    "e",
    "",
    "6 * 23 = 138",
    "x" * 1_000_000,
    "(" * 10_000 + "1" + ")" * 10_000,
    "(" * 50 + "1" + ")" * 50,
    "-" * 150 + "1e15 * 10",
    "1\x00",
]


@pytest.mark.parametrize("text", HOSTILE, ids=lambda t: repr(t[:20]) + (f"[{len(t)}]" if len(t) > 20 else ""))
def test_refuses_hostile_input_with_a_short_message(text, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the calculator must never eval or exec")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    with pytest.raises(CalcError) as caught:
        evaluate_expression(text)
    message = str(caught.value)
    assert message.startswith(ERROR_PREFIX)
    assert len(message) < 160
    assert calculate(text) == message  # the tool's observation is the same text


@pytest.mark.parametrize("text, says", [
    ("x" * 1_000_000, "too long"),
    ("(" * 10_000 + "1" + ")" * 10_000, "too long"),
    ("(" * 50 + "1" + ")" * 50, "nested"),
    ("(1e308)*10", "too large"),
    ("1e999", "too large"),
    ("10**15 * 10", USAGE),
    ("1/0", "division by zero"),
    ("x", USAGE),
    ("１２", USAGE),
    ("6 * 23 = 138", USAGE),
])
def test_refusals_say_what_went_wrong(text, says):
    with pytest.raises(CalcError, match=re.escape(says)):
        evaluate_expression(text)


def test_grammar_refusals_quote_the_input_and_show_an_example():
    with pytest.raises(CalcError) as caught:
        evaluate_expression("6 * 23 = 138")
    assert str(caught.value) == f"{ERROR_PREFIX}{USAGE}; got '6 * 23 = 138'"
    assert "6 * 23" in USAGE  # an example of what calc takes


def test_bounds_hold_at_the_edges():
    assert evaluate_expression("1" * 15 + " - 1") == Fraction(int("1" * 15) - 1)
    with pytest.raises(CalcError, match="too large"):
        evaluate_expression("1" + "0" * 15 + " + 1")
    with pytest.raises(CalcError, match="too long"):
        evaluate_expression("1+" * (MAX_CHARS // 2) + "1")
    assert evaluate_expression("(" * 10 + "1" + ")" * 10) == 1


def test_hostile_inputs_return_quickly():
    # no clock: it is enough that each of these returns (a power, a huge or deep text would not)
    for text in [*HOSTILE, "9" * 199, "1/3/" * 49 + "3", "-" * 199 + "1", "(" * 10 + "9*" * 90 + "9" + ")" * 10]:
        assert isinstance(calculate(text), str)


def test_accept_equals_is_a_knob():
    with pytest.raises(CalcError, match=re.escape(USAGE)):
        evaluate_expression("6 * 23 = 138")
    assert evaluate_expression("6 * 23 = 138", accept_equals=True) == 138
    assert evaluate_expression("6 * 23 = 1", accept_equals=True) == 138  # the part after "=" is ignored
    with pytest.raises(CalcError):
        evaluate_expression("= 138", accept_equals=True)
    with pytest.raises(CalcError):
        evaluate_expression("x = 138", accept_equals=True)
    on = make_env("calculator", {**SMALL, "accept_equals": True})
    off = make_env("calculator", SMALL)
    assert on.tools["calc"].fn("6 * 23 = 138") == "138"
    with pytest.raises(CalcError):
        off.tools["calc"].fn("6 * 23 = 138")


# ---------------------------------------------------------------------------- numbers in answers


@pytest.mark.parametrize("text", ["1,932", "1932.0", "1932", " 1932 apples", "$1932", "$ 1,932.00", "It is 1932."])
def test_answer_formats_read_the_same_number(text):
    assert parse_number(text) == 1932
    assert same_number(text, "1932")


@pytest.mark.parametrize("text, value", [("-5", -5), ("3.25", Fraction(13, 4)), ("6 * 23 = 138", 6), ("none", None),
                                         ("١٩٣٢", None), (".5", None), ("", None)])
def test_answer_reads_the_first_ascii_number(text, value):
    assert parse_number(text) == value


def test_an_answer_of_thousands_of_digits_is_read_not_raised_on():
    """Fraction(str) raises past Python's 4,300-digit int limit; a policy may write such a number."""
    huge = "9" * 5000
    assert parse_number(huge) == 10**5000 - 1 and parse_number(huge + ".5") == Fraction(2 * 10**5000 - 1, 2)
    assert not same_number(huge, "1932") and same_number(huge, huge)
    env = CalculatorEnv(CalculatorOptions(**SMALL))
    assert env.reward(f"<answer>{huge}</answer>", Question("calc-x-9", "How many?", ("1932",))) == 0.0


def test_reward_reads_the_last_answer_of_the_response_only():
    env = CalculatorEnv(CalculatorOptions(**SMALL))
    q = Question("calc-x-0", "How many?", ("1932",))
    for answer in ["1,932", "1932.0", "1932", " 1932 apples", "$1932"]:
        assert env.reward(f"<calc> 1 + 1 </calc><result>2</result> <answer>{answer}</answer>", q) == 1.0
    assert env.reward("<answer> 1933 </answer>", q) == 0.0
    assert env.reward("<answer> many </answer>", q) == 0.0
    assert env.reward("1932", q) == 0.0  # no answer tag
    assert env.reward("", q) == 0.0
    assert env.reward("<answer> 7 </answer> then <answer> 1932 </answer>", q) == 1.0
    assert env.reward("<answer> 1932 </answer> then <answer> 7 </answer>", q) == 0.0
    assert env.reward("\n\n<result><answer>1932</answer></result>\n\n", q) == 0.0  # environment text
    # an instruction that shows the gold answer never scores: only the response is read
    shown = Question("calc-x-1", "How many rolls?", ("37",))
    prompt = env.messages(WORKED_INSTRUCTION, shown)[0]["content"]
    assert "<answer> 37 </answer>" in prompt
    assert env.reward("I do not know.", shown) == 0.0


# ---------------------------------------------------------------------------- the problems


def _texts(splits):
    return {split: [q.question for q in qs] for split, qs in splits.items()}


def test_problems_are_deterministic_for_a_seed_and_differ_across_seeds():
    a = generate_problems(ProblemSpec(**SMALL, seed=3))
    b = generate_problems(ProblemSpec(**SMALL, seed=3))
    c = generate_problems(ProblemSpec(**SMALL, seed=4))
    assert [q.to_dict() for s in a.values() for q in s] == [q.to_dict() for s in b.values() for q in s]
    for split in ("train", "dev", "test"):
        assert _texts(a)[split] != _texts(c)[split]


def test_splits_are_disjoint_sized_and_named():
    spec = ProblemSpec(train_size=300, dev_size=50, test_size=80)
    splits = generate_problems(spec)
    texts = _texts(splits)
    assert {k: len(v) for k, v in texts.items()} == {"train": 300, "dev": 50, "test": 80}
    for split, qs in texts.items():
        assert len(set(qs)) == len(qs), split
    assert not set(texts["train"]) & set(texts["dev"])
    assert not set(texts["train"]) & set(texts["test"])
    assert not set(texts["dev"]) & set(texts["test"])
    for split, qs in splits.items():
        assert [q.id for q in qs] == [f"calc-{split}-{i}" for i in range(len(qs))]


def test_a_bigger_train_split_leaves_test_and_dev_alone():
    small = generate_problems(ProblemSpec(**SMALL))
    big = generate_problems(ProblemSpec(**{**SMALL, "train_size": 200}))
    assert _texts(small)["test"] == _texts(big)["test"]
    assert _texts(small)["dev"] == _texts(big)["dev"]
    assert _texts(big)["train"][: SMALL["train_size"]] == _texts(small)["train"]  # train only grows
    assert len(big["train"]) == 200


def test_defaults_are_designs_problems():
    spec = ProblemSpec()
    questions = generate_problems(ProblemSpec(**{**SMALL, "test_size": 200}))["test"]
    for q in questions:
        first, second = q.meta["steps"]
        packs = q.meta["packs"]
        assert q.meta["expression"] == f"{packs} * {first['value']} {second['op']} {second['value']}"
        assert spec.min_packs <= packs <= spec.max_packs
        assert first["op"] == "*" and spec.min_pack_size <= first["value"] <= spec.max_pack_size
        assert second["op"] in "+-" and 1 <= second["value"] <= spec.max_change
        assert int(q.answers[0]) >= 1
    assert {q.meta["steps"][1]["op"] for q in questions} == {"+", "-"}


@pytest.mark.parametrize("knobs", [{}, {"steps": 4, "ops": "+-*/"}, {"steps": 6, "ops": "/"}, {"steps": 1},
                                   {"steps": 3, "ops": "*-", "max_factor": 9, "min_change": 1, "max_change": 5}])
def test_answers_are_the_value_of_the_expression(knobs):
    spec = ProblemSpec(**SMALL, **knobs)
    for q in [q for qs in generate_problems(spec).values() for q in qs]:
        value = evaluate_expression(q.meta["expression"])
        assert value.denominator == 1 and value >= 1
        assert q.answers == (str(value.numerator),) == (str(q.meta["answer"]),)
        assert len(q.meta["steps"]) == spec.steps
        # a "/" with no exact divisor becomes "-", and a "-" on a pile of one becomes "+"
        stand_ins = {"/": "/-+", "-": "-+", "+": "+", "*": "*"}
        allowed = "".join(stand_ins[op] for op in spec.ops)
        assert all(s["op"] in allowed for s in q.meta["steps"][1:])
        for step in q.meta["steps"][1:]:
            assert str(step["value"]) in q.question


def test_phrasings_vary():
    questions = generate_problems(ProblemSpec(**{**SMALL, "test_size": 200}))["test"]
    used = {s["phrasing"] for q in questions for s in q.meta["steps"]}
    for key in ("packs", "+", "-"):
        assert {p for p in used if p.startswith(f"{key}.")} == {f"{key}.{i}" for i in range(len(PHRASINGS[key]))}
    openings = {q.question.split(" ")[1] for q in questions}
    assert len(openings) >= 3
    assert len({q.question.rsplit(".", 1)[-1].split(" ")[1] for q in questions}) >= 2  # several question forms


def test_too_few_distinct_problems_is_a_clear_error():
    spec = ProblemSpec(steps=1, min_packs=3, max_packs=3, min_pack_size=12, max_pack_size=12, train_size=0,
                       dev_size=0, test_size=5000)
    with pytest.raises(ValueError, match="distinct test problems"):
        generate_problems(spec)


def test_write_splits_round_trips_through_the_qa_loader(tmp_path):
    from inspo.data.sources import load_qa_source

    options = CalculatorOptions(**SMALL, steps=3, ops="+-*/")
    paths = write_splits(tmp_path / "calc", options)
    assert paths == {s: tmp_path / "calc" / f"{s}.jsonl" for s in ("train", "dev", "test")}
    generated = generate_problems(options)
    for split in ("train", "dev", "test"):
        loaded = load_qa_source(str(tmp_path / "calc"), split=split)
        assert [q.to_dict() for q in loaded] == [q.to_dict() for q in generated[split]]
        assert [q.to_dict() for q in load_qa_source(str(paths[split]))] == [q.to_dict() for q in generated[split]]


# ---------------------------------------------------------------------------- options and the registry


def test_options_are_checked_with_messages_naming_the_setting():
    with pytest.raises(ValueError, match=r"env\.bogus.*it takes: .*accept_equals"):
        options_from({"bogus": 1})
    for bad, name in [({"ops": "+%"}, "env.ops"), ({"ops": ""}, "env.ops"), ({"steps": 0}, "env.steps"),
                      ({"steps": 7}, "env.steps"), ({"min_packs": 9, "max_packs": 3}, "env.min_packs"),
                      ({"min_change": 0}, "env.min_change"), ({"max_factor": 1}, "env.max_factor"),
                      ({"test_size": -1}, "env.test_size"), ({"seed": "0"}, "env.seed"),
                      ({"steps": True}, "env.steps"), ({"accept_equals": "yes"}, "env.accept_equals")]:
        with pytest.raises(ValueError, match=re.escape(name)):
            options_from(bad)
    options = options_from({"steps": 3, "accept_equals": True})
    assert options.to_dict()["steps"] == 3 and options.to_dict()["accept_equals"] is True
    assert options_from(options.to_dict()) == options


def test_registry_builds_the_calculator():
    env = make_env("calculator", {**SMALL, "seed": 5})
    assert isinstance(env, CalculatorEnv)
    assert check_environment(env) is env
    assert env.options == CalculatorOptions(**SMALL, seed=5)
    assert env.metric == "correct"
    assert env.required_tags == ("calc", "answer")
    assert env.stop == ("</calc>", "</answer>")
    assert [q.to_dict() for q in env.questions("test")] == [q.to_dict() for q in load_environment(**SMALL, seed=5)
                                                            .questions("test")]
    assert env.questions("dev") is not env.questions("dev")  # a copy: callers cannot change the cache
    with pytest.raises(ValueError, match="splits are"):
        env.questions("validation")
    assert resolve_options("calculator", {}) == CalculatorOptions().to_dict()


def test_named_instructions_resolve():
    env = make_env("calculator", SMALL)
    assert set(env.instructions) == set(NAMED_INSTRUCTIONS) == {"calculator", "weak", "notool", "worked"}
    assert resolve_seed(env, "") == env.seed_instruction == NAMED_INSTRUCTIONS["calculator"]
    for name, text in NAMED_INSTRUCTIONS.items():
        assert resolve_seed(env, f"@{name}") == text
        check_seed_name("calculator", f"@{name}")
    with pytest.raises(ValueError, match="@worked"):
        resolve_seed(env, "@nope")
    with pytest.raises(ValueError):
        check_seed_name("calculator", "@nope")
    for name in ("calculator", "weak", "worked"):
        assert {"calc", "answer"} <= tags_of(NAMED_INSTRUCTIONS[name])
    assert "calc" not in tags_of(NAMED_INSTRUCTIONS["notool"]) and "answer" in tags_of(NAMED_INSTRUCTIONS["notool"])
    assert "calculator" not in NAMED_INSTRUCTIONS["notool"].lower()
    assert "result" not in tags_of(NAMED_INSTRUCTIONS["weak"])


def test_worked_example_is_not_a_generated_problem():
    worked = NAMED_INSTRUCTIONS["worked"]
    assert worked.startswith(NAMED_INSTRUCTIONS["calculator"])
    example = worked[len(NAMED_INSTRUCTIONS["calculator"]):]
    assert example.count("<calc>") == 2 and example.count("<answer>") == 1
    calls = re.findall(r"<calc>(.*?)</calc>", example)
    results = re.findall(r"<result>(.*?)</result>", example)
    assert [calculate(c) for c in calls] == results  # the example shows what calc really answers
    assert re.search(r"<answer>(.*?)</answer>", example).group(1).strip() == results[-1]
    vocabulary = {w for pair in THINGS for w in pair} | set(NAMES)
    assert not vocabulary & set(re.findall(r"[A-Za-z]+", example))
    texts = {q.question for qs in generate_problems(ProblemSpec()).values() for q in qs}
    assert not any("rolls" in t or "trays" in t for t in texts)


# ---------------------------------------------------------------------------- the reflector's rules


def _example(response, answers=("138",)):
    return FailureExample(question="How many?", response=response, answers=answers)


def test_reflector_detects_the_calculators_failures():
    parent = NAMED_INSTRUCTIONS["calculator"]
    refused = ("<calc> 6 * 23 = 138 </calc>\n\n<result>" + calculate("6 * 23 = 138") + "</result>\n\n"
               "<answer> 138 </answer>")
    names = [m.name for m in RULES.detect(_example(refused, ("138",)), parent)]
    assert names == [CALC_REFUSED]
    evidence = RULES.detect(_example(refused, ("139",)), parent)[0].evidence
    assert "6 * 23 = 138" in evidence and USAGE in evidence
    names = [m.name for m in RULES.detect(_example("<answer> 100 </answer>"), parent)]
    assert names == [NEVER_USED_TOOL]
    names = [m.name for m in RULES.detect(_example("<calc> 6 * 23 </calc><result>138</result><answer> lots "
                                                   "</answer>"), parent)]
    assert names == [ANSWER_NOT_A_NUMBER]
    right = "<calc> 6 * 23 </calc><result>138</result><answer> 138.0 </answer>"
    assert RULES.detect(_example(right), parent) == []  # compared as numbers, not as text
    wrong = "<calc> 6 * 23 </calc><result>138</result><answer> 6 * 23 = 138 </answer>"
    assert [m.name for m in RULES.detect(_example(wrong), parent)] == [WRONG_ANSWER]
    assert "no_answer" in [m.name for m in RULES.detect(_example("<calc> 6 * 23 </calc><result>138</result>"),
                                                        parent)]


def test_reflector_guidance_names_only_protocol_tags_and_nothing_from_the_data():
    vocabulary = {w.lower() for pair in THINGS for w in pair} | {n.lower() for n in NAMES}
    for mode, wordings in RULES.guidance.items():
        assert wordings, mode
        for wording in wordings:
            assert tags_of(wording) <= {"calc", "result", "answer"}, wording
            assert not re.search(r"\d", wording), wording
            assert not vocabulary & set(re.findall(r"[a-z]+", wording.lower())), wording
    for mode in (NEVER_USED_TOOL, CALC_REFUSED, ANSWER_NOT_A_NUMBER, WRONG_ANSWER):
        assert any("result" not in tags_of(w) for w in RULES.guidance[mode]), mode


def test_reflector_revises_the_weak_seed_within_its_tags():
    from inspo.core.reflector.revisions import write_candidates

    weak = NAMED_INSTRUCTIONS["weak"]
    candidates = write_candidates(weak, [(CALC_REFUSED, 2), (NEVER_USED_TOOL, 1)], 4, random.Random(0), rules=RULES)
    assert len(set(candidates)) == 4
    for text in candidates:
        assert text.startswith(weak) or weak in text
        assert tags_of(text) <= tags_of(weak)
    assert any(w in candidates[0] for w in RULES.guidance[CALC_REFUSED])


# ---------------------------------------------------------------------------- scripted episodes


class FakeEngine:
    """Text-only engine: each row writes ``script[turn]`` (turns counted per prompt)."""

    keeps_token_ids = False

    def __init__(self, script):
        self.script = script
        self.turns: dict[str, int] = {}
        self.prompts: list[str] = []
        self.contexts: list[str] = []

    def prompt_text(self, messages):
        text = "\n\n".join(m["content"] for m in messages)
        self.prompts.append(text)
        return text

    def encode(self, text):
        return None

    def decode(self, ids):
        raise ValueError("text only")

    def generate(self, inputs, *, max_new_tokens, temperature, top_p, stop):
        from inspo.engines.base import Generation

        out = []
        for x in inputs:
            prompt = next(p for p in self.prompts if x.text.startswith(p))
            turn = self.turns.get(prompt, 0)
            self.turns[prompt] = turn + 1
            self.contexts.append(x.text)
            out.append(Generation([], self.script[turn], "stop"))
        return out


SCRIPT = ["<calc> 6 * 23 = 138 </calc>", "Only the expression then. <calc> 6 * 23 </calc>", "<answer> 138 </answer>"]
DEMO = Question("calc-demo-0", "Ava buys 6 boxes of 23 pencils. How many pencils does Ava have now?", ("138",))


def _play(env, script=SCRIPT, question=DEMO, instruction=None):
    engine = FakeEngine(script)
    config = AgentConfig(max_turns=3, max_response_tokens=64, max_obs_tokens=64, temperature=0.0)
    ins = Instruction("ins-0001", instruction or env.seed_instruction)
    [rollout] = run_rollouts(engine, env, config, [Episode(question, ins)])
    return rollout, engine


def test_scripted_episode_refused_then_right():
    env = make_env("calculator", SMALL)
    rollout, engine = _play(env)
    refusal = calculate("6 * 23 = 138")
    assert refusal.startswith(ERROR_PREFIX)
    assert rollout.tool_calls == [ToolCall("calc", "6 * 23 = 138"), ToolCall("calc", "6 * 23")]
    assert env.observations(rollout.response) == [f"<result>{refusal}</result>", "<result>138</result>"]
    assert rollout.response == (SCRIPT[0] + env.observe(ToolCall("calc", ""), refusal) + SCRIPT[1]
                                + env.observe(ToolCall("calc", ""), "138") + SCRIPT[2])
    assert engine.contexts[1].endswith(f"<result>{refusal}</result>\n\n")  # what the policy was shown
    assert (rollout.answer, rollout.reward, rollout.finish_reason, rollout.turns) == ("138", 1.0, "answer", 3)
    assert env.metrics(rollout) == {"correct": 1.0, "answered": 1.0, "calc_calls": 2.0, "calc_errors": 1.0}
    assert rollout.metrics["n_tool_errors"] == 1.0  # the loop counts the refusal too, for any environment
    feedback = env.feedback(rollout)
    assert "\n" not in feedback
    for part in ("Correct.", "called <calc> 2 time(s)", "1 refused", "6 * 23 = 138", refusal, "answered '138'",
                 "the correct answer is 138"):
        assert part in feedback, part


def test_scripted_episode_with_accept_equals():
    env = make_env("calculator", {**SMALL, "accept_equals": True})
    rollout, _ = _play(env)
    assert env.observations(rollout.response) == ["<result>138</result>", "<result>138</result>"]
    assert env.metrics(rollout)["calc_errors"] == 0.0
    assert "refused" not in env.feedback(rollout)


def test_scripted_episode_without_an_answer_or_with_a_wrong_one():
    env = make_env("calculator", SMALL)
    rollout, _ = _play(env, ["<calc> 6 * 23 </calc>"] * 4)
    assert rollout.answer is None and rollout.reward == 0.0 and rollout.finish_reason == "turn_limit"
    assert len(rollout.tool_calls) == 3  # the final turn's call is not run
    assert env.metrics(rollout) == {"correct": 0.0, "answered": 0.0, "calc_calls": 3.0, "calc_errors": 0.0}
    assert env.feedback(rollout).startswith("No <answer>...</answer> was given (the agent called <calc> 3 time(s)")
    rollout, _ = _play(env, ["<answer> about a hundred </answer>"], instruction=NAMED_INSTRUCTIONS["worked"])
    assert rollout.reward == 0.0 and env.metrics(rollout)["correct"] == 0.0
    assert env.feedback(rollout).startswith("Wrong: the answer holds no number. The agent never called <calc>")
    rollout, _ = _play(env, ["<answer> 137 </answer>"])
    assert env.feedback(rollout).startswith("Wrong. The agent never called <calc> and answered '137'")


def test_an_invented_result_block_is_not_a_calc_error():
    env = make_env("calculator", SMALL)
    rollout, _ = _play(env, ["<result>error: made up</result> <answer> 138 </answer>"])
    assert rollout.reward == 1.0
    assert env.metrics(rollout)["calc_errors"] == 0.0 and env.metrics(rollout)["calc_calls"] == 0.0


def test_transcript_splits_the_calculator_episode_into_turns():
    from inspo.envs.transcript import turns_of

    env = make_env("calculator", SMALL)
    rollout, _ = _play(env)
    turns = turns_of(env, rollout)
    assert [(t.action, t.content) for t in turns] == [("call", "6 * 23 = 138"), ("call", "6 * 23"),
                                                      ("answer", "138")]
    assert turns[0].result == [calculate("6 * 23 = 138")] and turns[1].result == ["138"]


def _runs(mask, ids):
    """(mask value, ids) of each maximal run of equal mask values."""
    runs: list[tuple[int, list[int]]] = []
    for m, i in zip(mask, ids, strict=True):
        if runs and runs[-1][0] == m:
            runs[-1][1].append(i)
        else:
            runs.append((m, [i]))
    return runs


@pytest.mark.slow
def test_token_ids_and_env_mask_on_the_tiny_model(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agent_helpers import Scripted
    from inspo.engines.hf import HFEngine
    from inspo.models import load_model

    torch.set_num_threads(1)
    tiny = load_model("tiny-qwen2", dtype="float32")
    script = {("q0", i): text for i, text in enumerate(SCRIPT)}
    script[("q1", 0)] = "<calc> (3 + 4) * 2 </calc>"
    script[("q1", 1)] = "<answer> 15 </answer>"
    monkeypatch.setattr(tiny.model, "generate", Scripted(tiny, lambda qid, turn: script.get((qid, turn))))
    engine = HFEngine(tiny.model, tiny.tokenizer)
    env = make_env("calculator", SMALL)
    questions = [Question("q0", "q0: " + DEMO.question, DEMO.answers), Question("q1", "q1: How much?", ("14",))]
    config = AgentConfig(max_turns=3, max_response_tokens=40, max_obs_tokens=64, temperature=0.0)
    ins = Instruction("ins-0001", env.seed_instruction)
    first, second = run_rollouts(engine, env, config, [Episode(q, ins) for q in questions])

    refusal = calculate("6 * 23 = 138")
    observe = [env.observe(ToolCall("calc", ""), r) for r in (refusal, "138")]
    runs = _runs(first.env_mask, first.completion_ids)
    assert [m for m, _ in runs] == [1, 0, 1, 0, 1]
    assert [engine.decode(ids) for m, ids in runs if m == 1] == SCRIPT
    assert [engine.decode(ids) for m, ids in runs if m == 0] == observe
    assert len(first.completion_ids) == len(first.env_mask)
    prompt = engine.prompt_text(env.messages(ins.text, questions[0]))
    assert first.prompt_ids == engine.encode(prompt)
    everything = tiny.tokenizer.decode(first.prompt_ids + first.completion_ids, skip_special_tokens=False,
                                       clean_up_tokenization_spaces=False)
    assert everything == prompt + first.response
    assert first.response == SCRIPT[0] + observe[0] + SCRIPT[1] + observe[1] + SCRIPT[2]
    assert (first.reward, first.answer, env.metrics(first)["calc_errors"]) == (1.0, "138", 1.0)

    runs = _runs(second.env_mask, second.completion_ids)
    assert [m for m, _ in runs] == [1, 0, 1]
    assert engine.decode(runs[1][1]) == env.observe(ToolCall("calc", ""), "14")
    assert (second.reward, second.answer, env.metrics(second)["calc_errors"]) == (0.0, "15", 0.0)


def test_a_shown_problem_copied_into_an_instruction_is_a_leak_even_when_its_answer_is_short():
    from inspo.core.proposer import leaked_answer
    from inspo.envs.calculator import NAMED_INSTRUCTIONS, load_environment
    from inspo.records import Question

    env = load_environment()
    q = Question("calc-train-1", "Chloe has 3 cases, each holding 13 candles. Chloe then loses 10 candles. "
                                 "What is the number of candles Chloe has at the end?", ("29",))
    copied = (f"Question: {q.question}\nResponse: <calc>3 * 13 - 10</calc>\n<answer>29</answer>\n"
              "Correct answer: 29")  # the 1.5B optimizer's candidate, with the tags the guard asks for
    assert leaked_answer(copied, ["29"]) is None  # two characters: the answer check alone lets it pass
    assert leaked_answer(copied, env.leak_terms(q)) == q.question
    shown = env.questions("train")[:50]
    terms = [t for p in shown for t in env.leak_terms(p)]
    assert all(leaked_answer(text, terms) is None for text in NAMED_INSTRUCTIONS.values())
