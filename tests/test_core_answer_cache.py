"""The optimizer answers a run paid for are replayed on a resume, not paid again, and the resumed
run ends where the uninterrupted one does."""

from core_helpers import GUARD, SEED
from inspo.core.answer_cache import AnswerCache, PaidAnswer, answer_key
from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.proposer import Proposer
from inspo.core.state import load_state, save_state
from inspo.synthetic import SyntheticEnv, make_questions, run_synthetic
from test_core_state import CFG, SamplingLLM


def build(cache):
    coevo = CoEvolution(CoEvolutionConfig(**CFG), SEED, Proposer(SamplingLLM(), guard_tags=GUARD))
    coevo.proposer.cache = AnswerCache(cache)
    return coevo


def play(coevo, first, last):
    run_synthetic(coevo, SyntheticEnv(seed=3), make_questions(40), steps=last, batch_size=6, group_size=3,
                  start=first)


def test_a_step_killed_after_its_optimizer_calls_replays_them_on_resume(tmp_path):
    full = build(tmp_path / "full.jsonl")
    play(full, 1, 16)  # evolves at step 15 (K_e 15)

    first = build(tmp_path / "run.jsonl")
    play(first, 1, 14)
    save_state(first, tmp_path / "state.json")
    paid_before = first.proposer.calls
    play(first, 15, 15)  # step 15 pays its optimizer calls, then the run dies before its save
    paid_at_15 = first.proposer.calls - paid_before
    assert paid_at_15 > 0 and len(AnswerCache(tmp_path / "run.jsonl")) == first.proposer.calls
    del first

    resumed = load_state(build(tmp_path / "run.jsonl"), tmp_path / "state.json")
    play(resumed, 15, 16)
    assert resumed.proposer.cache.hits == paid_at_15
    assert resumed.proposer.llm.prompts == []  # nothing asked twice: step 16 does not evolve
    assert resumed.state_dict() == full.state_dict()  # the ledger counts each paid call once


def test_a_changed_prompt_misses_and_a_torn_line_is_skipped(tmp_path):
    cache = AnswerCache(tmp_path / "a.jsonl")
    key = answer_key(0, "prompt", n=1, temperature=1.0, max_tokens=10)
    cache.put(key, PaidAnswer(["<ins_1>x</ins_1>"], 5, 7, ["stop"]))
    with (tmp_path / "a.jsonl").open("a") as fh:
        fh.write('{"key": "1:ab", "answers": [')  # killed while writing
    again = AnswerCache(tmp_path / "a.jsonl")
    assert again.get(key) == PaidAnswer(["<ins_1>x</ins_1>"], 5, 7, ["stop"]) and len(again) == 1
    assert again.get(answer_key(0, "another prompt", n=1, temperature=1.0, max_tokens=10)) is None
    assert again.get(answer_key(1, "prompt", n=1, temperature=1.0, max_tokens=10)) is None  # another call
