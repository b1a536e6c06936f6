"""make_evaluate's paired sampling: the same questions get the same sampling seeds."""


from agent_helpers import CoinPolicy
from inspo.data.sources import load_qa_source
from inspo.envs.evaluate import make_evaluate
from inspo.envs.loop import AgentConfig
from inspo.envs.search_r1 import SearchR1Env
from inspo.records import Instruction
from inspo.retrieval.bm25 import BM25Retriever


def _setup():
    from inspo.data.sources import load_corpus_source

    env = SearchR1Env(BM25Retriever(load_corpus_source("world")))
    questions = load_qa_source("world", split="train")[:24]
    return env, questions


def test_paired_seed_gives_two_instructions_the_same_sampling_noise():
    env, questions = _setup()
    a, b = Instruction(id="a", text="Answer well."), Instruction(id="b", text="Answer better.")
    config = AgentConfig(max_turns=2, max_response_tokens=32)

    paired = make_evaluate(CoinPolicy(), env, config, batch_size=8, paired_seed=("verify", 3))
    ra, rb = paired(a, questions), paired(b, questions)
    assert [r.reward for r in ra] == [r.reward for r in rb]
    assert 0 < sum(r.reward for r in ra) < len(questions)  # the coin did vary

    unpaired = make_evaluate(CoinPolicy(), env, config, batch_size=8)
    ua, ub = unpaired(a, questions), unpaired(b, questions)
    assert [r.reward for r in ua] != [r.reward for r in ub]
    other = make_evaluate(CoinPolicy(), env, config, batch_size=8, paired_seed=("verify", 4))
    assert [r.reward for r in other(a, questions)] != [r.reward for r in ra]
