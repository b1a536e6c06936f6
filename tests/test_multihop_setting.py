"""The multihop setting (issue 23): a world with enough held-out two-hop questions, a weak seed a
config can name, and a preset whose settings let the instruction change how the tool is used."""

from __future__ import annotations

from collections import Counter

import pytest

from inspo.config.train import preset, resolve
from inspo.core.config import ConfigError
from inspo.data.sources import is_named_source, load_corpus_source, load_qa_source, within_hops
from inspo.envs.registry import named_instructions, resolve_seed
from inspo.envs.search_r1 import SearchR1Env
from inspo.envs.search_r1.protocol import (
    NAMED_INSTRUCTIONS,
    SEARCH_R1_INSTRUCTION,
    WEAK_INSTRUCTION,
)
from inspo.eval import parse_instruction


def test_world_multihop_has_the_worlds_corpus_and_over_200_held_out_two_hop_questions():
    assert load_corpus_source("world-multihop:3") == load_corpus_source("world:3")  # same world, more questions
    test = within_hops(load_qa_source("world-multihop", split="test"), 2)
    hops = Counter(q.meta["hops"] for q in test)
    assert hops[2] >= 200 and hops[1] >= 50 and set(hops) == {1, 2}
    assert all(q.id.startswith("world-multihop0-test-") for q in test)
    # its ids cannot be mistaken for the plain world's, whose questions differ
    assert not {q.id for q in test} & {q.id for q in load_qa_source("world", split="test")}
    assert is_named_source("world-multihop:7") and not is_named_source("world-multihop.jsonl")


def test_a_bad_world_seed_is_refused_with_the_name():
    with pytest.raises(ValueError, match="after 'world-multihop:' must be an integer"):
        load_qa_source("world-multihop:x")


def test_named_seed_instructions():
    env = SearchR1Env(retriever=None)
    assert resolve_seed(env, "") == SEARCH_R1_INSTRUCTION
    assert resolve_seed(env, "@search-r1") == SEARCH_R1_INSTRUCTION
    assert resolve_seed(env, "@weak") == WEAK_INSTRUCTION
    assert resolve_seed(env, "Answer briefly. <search> </search> <answer> </answer>").startswith("Answer briefly")
    with pytest.raises(ValueError, match="@weak"):
        resolve_seed(env, "@nope")
    with pytest.raises(ConfigError, match="seed_instruction"):
        resolve("cpu-tiny", None, ["seed_instruction=@nope"])
    assert parse_instruction("@weak").instruction.text == WEAK_INSTRUCTION
    assert parse_instruction("seed", seed_text="@weak").instruction.text == WEAK_INSTRUCTION
    # the same with the environment given
    assert parse_instruction("@weak", env=env).instruction.text == WEAK_INSTRUCTION
    assert parse_instruction("seed", seed_text="@weak", env=env).instruction.text == WEAK_INSTRUCTION
    assert parse_instruction("seed", env=env).instruction.text == SEARCH_R1_INSTRUCTION


def test_the_weak_seed_keeps_the_protocol_but_not_the_advice():
    for tag in ("<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>"):
        assert tag in WEAK_INSTRUCTION
    assert "as many times" not in WEAK_INSTRUCTION and "several" not in WEAK_INSTRUCTION
    assert "<think>" not in WEAK_INSTRUCTION
    assert set(NAMED_INSTRUCTIONS) == {"search-r1", "weak"}
    assert named_instructions("search-r1") == NAMED_INSTRUCTIONS  # the names a config may use
    assert dict(SearchR1Env(retriever=None).instructions) == NAMED_INSTRUCTIONS


def test_multihop_preset_lets_the_instruction_change_tool_use():
    c = preset("multihop")
    assert c.seed_instruction == "@weak" and c.mode == "inspo"
    assert c.rl.max_turns >= 3 and c.env.name == "search-r1" and c.env.options["reward"] == "em"
    assert c.rl.prefill == "<search>"  # forced on the first turn only (the agent's rule)
    assert c.data.train == c.data.eval == c.env.options["corpus"] == "world-multihop" and c.data.max_hops == 2
    assert c.data.max_test_questions >= 316  # every 1- and 2-hop test question
    # evolution goes on for most of training, with a D_B big enough to tell candidates apart
    assert c.coevolution.evolve_until >= 0.75 * c.rl.steps and c.coevolution.validation_size >= 16
    for mode in ("static", "pre-policy", "inspo"):
        resolve("multihop", None, [f"mode={mode}"])  # every arm of the benchmark is a valid config


def test_world_chain_has_world_multihops_questions_and_each_hop_needs_its_own_search():
    from inspo.data.world import WORLDS, build_world
    from inspo.retrieval.bm25 import BM25Retriever

    chain, multihop = build_world(0, WORLDS["world-chain"]), build_world(0, WORLDS["world-multihop"])
    same = [(a.question, a.answers, a.meta["passage_ids"]) for a in multihop.splits["test"]]
    assert [(q.question, q.answers, q.meta["passage_ids"]) for q in chain.splits["test"]] == same
    assert all(q.id.startswith("world-chain0-test-") for q in chain.splits["test"])
    # the passages no longer name what points at them ...
    texts = " ".join(p.contents for p in chain.corpus)
    assert " founded the " not in texts.replace("was founded", "") and "It is the capital of" not in texts
    assert "It is the capital of" in " ".join(p.contents for p in multihop.corpus)
    # ... yet every hop still names the next one, and the last states the gold answer
    passages = chain.passages_by_id
    for q in chain.splits["train"][:600]:
        for here, nxt in zip(q.meta["passage_ids"], q.meta["entity_ids"][1:], strict=False):
            assert chain.entities[nxt].name.lower() in passages[here].contents.lower()
        assert any(a.lower() in passages[q.meta["passage_ids"][-1]].contents.lower() for a in q.answers)

    def reached_in_one_search(world):
        two_hop = [q for q in world.splits["train"] if q.meta["hops"] == 2][:400]
        found = BM25Retriever(world.corpus).search([q.question for q in two_hop], k=3)
        return sum(q.meta["passage_ids"][-1] in {p.id for p in r} for q, r in zip(two_hop, found, strict=True))

    # measured (seed 0, top 3): 147 of 400 two-hop questions in world-multihop, 74 in world-chain
    assert reached_in_one_search(chain) < 0.6 * reached_in_one_search(multihop)
