"""The `gepa` package's optimizer on inspo's search agent (inspo.baselines.gepa_adapter).

End to end with the real ``gepa.optimize`` engine, the real agent loop and BM25 over ``world``,
and the scripted policy of the evolve tests (right only under a non-seed instruction): GEPA must
find such an instruction within its rollout budget, through INSPO's reflection prompt (with the
offline rule-based reflector) and through GEPA's own prompt. The proposer's rules are checked
against hand-built records."""

from __future__ import annotations

import random

import pytest

from agent_helpers import CoinPolicy, ScriptedPolicy
from core_helpers import SEED, FunctionLLM, failing_llm
from inspo.baselines.gepa_adapter import (
    AgentAdapter,
    GEPAProposal,
    ProposalLog,
    ProposerStats,
    inspo_reflection_proposer,
    optimize_instruction,
    proposal_yield,
    reflective_record,
)
from inspo.core.proposer import tags_in
from inspo.core.reflector import RuleBasedReflector
from inspo.data.sources import load_corpus_source, load_qa_source
from inspo.envs.loop import AgentConfig
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION, SearchR1Env
from inspo.envs.search_r1.reflector_rules import PROTOCOL_TAGS, RULES
from inspo.records import Question, Rollout, ToolCall

pytest.importorskip("gepa")


@pytest.fixture(scope="module")
def world():
    from inspo.retrieval.bm25 import BM25Retriever

    questions = load_qa_source("world", split="train")
    return questions[:4], questions[4:16], SearchR1Env(BM25Retriever(load_corpus_source("world")), topk=3, reward="em")


def _adapter(env, policy=None):
    agent = AgentConfig(max_turns=2, max_response_tokens=32, max_obs_tokens=64)
    return AgentAdapter(policy or ScriptedPolicy(), env, agent, batch_size=8, seed=0)


def test_gepa_with_inspo_reflection_finds_an_instruction_the_policy_needs(world, tmp_path):
    valset, trainset, env = world
    adapter = _adapter(env)
    outcome = optimize_instruction(
        adapter, SEARCH_R1_INSTRUCTION, trainset, valset, max_rollouts=24,
        llm=RuleBasedReflector(random.Random(0), rules=RULES), reflection="inspo", minibatch_size=2, run_dir=str(tmp_path),
    )
    assert outcome.best_instruction != SEARCH_R1_INSTRUCTION
    assert tags_in(outcome.best_instruction, PROTOCOL_TAGS) == tags_in(SEARCH_R1_INSTRUCTION, PROTOCOL_TAGS)
    assert outcome.best_val_score == 1.0 and outcome.candidates >= 2
    # every metric call GEPA counted is one rollout the adapter played, and the budget held
    # up to GEPA's documented overshoot (one minibatch pair plus one validation pass)
    assert outcome.rollouts == outcome.metric_calls >= 24 - 2 * 2
    assert outcome.rollouts <= 24 + 2 * 2 + len(valset)
    assert outcome.proposer.calls >= 1 and outcome.proposer.accepted >= 1
    assert "Proposed new text" in (tmp_path / "gepa.log").read_text()


def test_gepa_with_its_own_reflection_prompt(world):
    valset, trainset, env = world
    rewrite = SEED + " Search for the key entity first."
    llm = FunctionLLM(lambda prompt: f"Here it is:\n```\n{rewrite}\n```")
    outcome = optimize_instruction(_adapter(env), SEARCH_R1_INSTRUCTION, trainset, valset,
                                   max_rollouts=16, llm=llm, reflection="gepa", minibatch_size=2)
    assert outcome.best_instruction == rewrite and outcome.best_val_score == 1.0
    # GEPA's prompt, not INSPO's, carried the current instruction and the feedback records
    assert "<ins_0>" not in llm.prompts[0] and SEARCH_R1_INSTRUCTION in llm.prompts[0]
    assert "correct answer is" in llm.prompts[0] and outcome.proposer is None
    # the proposal GEPA evaluated was kept, with its parent, the answers shown and GEPA's decision
    first = outcome.proposals[0]
    assert first.text == rewrite and first.parent == SEARCH_R1_INSTRUCTION and first.outcome == "accepted"
    assert set(first.shown_answers) <= {a for q in trainset for a in q.answers} and first.shown_answers
    assert first.shown_answers[0] in llm.prompts[0]


def test_evaluate_scores_are_rollout_rewards_and_sampling_is_reproducible(world):
    valset, _, env = world
    adapter = _adapter(env)
    batch = adapter.evaluate(valset, {"instruction": SEED}, capture_traces=True)
    assert batch.scores == [1.0] * len(valset) and adapter.rollouts == len(valset)
    assert [r.question.id for r in batch.trajectories] == [q.id for q in valset]
    seed_batch = adapter.evaluate(valset, {"instruction": SEARCH_R1_INSTRUCTION})
    assert seed_batch.scores == [0.0] * len(valset) and seed_batch.trajectories is None
    # an empty proposal (a weak reflection LLM writes them) scores 0 with the reason recorded
    empty = adapter.evaluate(valset, {"instruction": ""}, capture_traces=True)
    assert empty.scores == [0.0] * len(valset) and "instruction is empty" in empty.trajectories[0].error
    with pytest.raises(ValueError, match="no 'instruction' text"):
        adapter.evaluate(valset, {"prompt": SEED})


def _ro(reward: float, answer: str | None = "Paris", question: str = "Capital of France?") -> Rollout:
    q = Question(id=question, question=question, answers=("Paris",))
    return Rollout(question=q, instruction_id="x", response=f"<search>{question}</search>", reward=reward,
                   answer=answer, tool_calls=[ToolCall("search", question)], finish_reason="answer")


def test_feedback_says_what_went_wrong(world):
    # the feedback is the environment's (Search-R1's), GEPA's reflective "Feedback"
    env = world[2]
    assert env.feedback(_ro(1.0)).startswith("Correct.")
    wrong = env.feedback(_ro(0.0, "Lyon"))
    assert "answered 'Lyon'" in wrong and "correct answer is Paris" in wrong
    assert env.feedback(_ro(0.0, None)).startswith("No <answer>")
    record = reflective_record(_ro(0.5, "Paris, France"), env)
    assert record["Reward"] == 0.5 and record["Correct answers"] == ["Paris"] and "reward 0.50" in record["Feedback"]
    assert record["Feedback"] == env.feedback(_ro(0.5, "Paris, France"))


def test_inspo_proposer_reflects_on_failures_only_and_guards_candidates(world):
    env = world[2]
    records = [reflective_record(_ro(1.0, question="Q right?"), env), reflective_record(_ro(0.0, "Lyon", "Q wrong?"), env)]
    no_answer_tag = SEED.replace("<answer> and </answer>", "the end")
    good = SEED + " Copy the answer from the documents."
    llm = FunctionLLM(lambda p: f"Critique.\n<ins_1>\n{no_answer_tag}\n</ins_1>\n<ins_2>\n{good}\n</ins_2>")
    stats = ProposerStats()
    # optimize_instruction guards the environment's required tags (search, answer)
    assert env.required_tags == ("search", "answer")
    propose = inspo_reflection_proposer(llm, n_candidates=2, guard_tags=env.required_tags, stats=stats)
    assert propose({"instruction": SEED}, {"instruction": records}, ["instruction"]) == {"instruction": good}
    assert "Q wrong?" in llm.prompts[0] and "Q right?" not in llm.prompts[0] and f"<ins_0>\n{SEED}" in llm.prompts[0]
    assert stats.calls == 1 and stats.accepted == 1 and stats.rejected[0].startswith("drops protocol tag")
    # nothing failed: no call, no proposal (GEPA then skips the iteration)
    assert propose({"instruction": SEED}, {"instruction": records[:1]}, ["instruction"]) == {}
    assert len(llm.prompts) == 1 and stats.no_failures == 1
    # a failing optimizer call is recorded, not raised
    failing = ProposerStats()
    broken = inspo_reflection_proposer(FunctionLLM(failing_llm), stats=failing)
    assert broken({"instruction": SEED}, {"instruction": records}, ["instruction"]) == {}
    assert failing.errors and failing.accepted == 0


def test_optimize_instruction_rejects_bad_arguments(world):
    valset, trainset, env = world
    with pytest.raises(ValueError, match="reflection must be"):
        optimize_instruction(_adapter(env), SEED, trainset, valset, max_rollouts=8,
                             llm=FunctionLLM(str), reflection="other")
    with pytest.raises(ValueError, match="cannot even cover one pass"):
        optimize_instruction(_adapter(env), SEED, trainset, valset, max_rollouts=2, llm=FunctionLLM(str))


def test_a_stopped_gepa_run_resumes_from_its_saved_state(world, tmp_path):
    """GEPA saves its state in run_dir before every iteration; resume=True continues it (the budget
    used, the candidates, the adapter's counters and sampling stream), a new run starts over."""
    valset, trainset, env = world
    rewrites = iter(f"{SEED} Search for the key entity first ({i})." for i in range(100))
    llm = FunctionLLM(lambda prompt: f"```\n{next(rewrites)}\n```")
    run = str(tmp_path / "gepa")

    def optimize(budget, resume=False, adapter=None):
        return optimize_instruction(adapter or _adapter(env), SEARCH_R1_INSTRUCTION, trainset, valset,
                                    max_rollouts=budget, llm=llm, reflection="gepa", minibatch_size=2,
                                    run_dir=run, resume=resume)

    first = optimize(12)  # stands for a run stopped after its 12-rollout budget
    assert not first.resumed and first.replayed_rollouts == 0 and first.reflection_calls == len(llm.prompts) >= 1
    assert len(first.proposals) == first.reflection_calls  # one proposal a call, each kept
    adapter = _adapter(env)
    later = optimize(28, resume=True, adapter=adapter)
    assert later.resumed and "Loading gepa state" in (tmp_path / "gepa" / "gepa.log").read_text()
    # the budget used goes on from the saved run's, and the seed's re-scoring is counted apart
    assert later.metric_calls == later.rollouts > first.metric_calls and later.rollouts <= 28 + 2 * 2 + len(valset)
    assert later.replayed_rollouts == len(valset)
    # the saved candidates came back: the perfect one found before is still the best, with no new
    # reflection (GEPA skips minibatches it already solves), and the saved call count is carried
    assert later.best_instruction == first.best_instruction and later.best_val_score == 1.0
    assert later.candidates == first.candidates and later.reflection_calls == first.reflection_calls == len(llm.prompts)
    assert later.proposals == first.proposals  # read back from the folder: the first piece's are not lost
    assert adapter.calls > first.metric_calls // len(valset)  # the call counter (sampling stream) went on
    # without resume the same folder starts over, and what else is there stays
    (tmp_path / "gepa" / "notes.txt").write_text("mine")
    again = optimize(12)
    assert (tmp_path / "gepa" / "notes.txt").read_text() == "mine"
    assert not again.resumed and again.metric_calls == first.metric_calls and again.replayed_rollouts == 0
    assert [p.iteration for p in again.proposals] == [p.iteration for p in first.proposals]  # not appended
    # resume=True on a folder with no saved state starts a run, and proposals left there go
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "proposals.jsonl").write_text('{"iteration": 99, "text": "stale", "parent": "", "shown_answers": []}\n')
    started = optimize_instruction(_adapter(env), SEARCH_R1_INSTRUCTION, trainset, valset, max_rollouts=12, llm=llm,
                                   reflection="gepa", minibatch_size=2, run_dir=str(fresh), resume=True)
    assert not started.resumed and started.proposals and "stale" not in {p.text for p in started.proposals}
    with pytest.raises(ValueError, match="needs the run_dir"):
        optimize_instruction(_adapter(env), SEED, trainset, valset, max_rollouts=8, llm=FunctionLLM(str),
                             resume=True)


class SamplingLLM(FunctionLLM):
    """A sampling optimizer: each rewrite draws from its ``sampling_rng``, as the local model's
    sampling seeds do, so a new process starts its stream again unless a resume restores it."""

    def __init__(self):
        super().__init__(lambda prompt: f"```\n{SEED} Variant {self.sampling_rng.getrandbits(24)}.\n```")
        self.sampling_rng = random.Random(7)


def test_a_resumed_gepa_run_is_the_run_an_unbroken_one_would_have_been(world, tmp_path):
    """Stopped twice and resumed in fresh 'processes' (a new adapter, policy and optimizer each
    piece), GEPA proposes from the same parents and minibatches, with the same optimizer samples,
    as an unbroken run: its generator, its batch sampler and the optimizer's stream are saved with
    its state. The coin policy's rewards depend only on the call number, so the runs differ
    wherever a piece restarted a stream."""
    valset, trainset, env = world

    def optimize(budget, run, resume=False):
        adapter = _adapter(env, CoinPolicy())
        outcome = optimize_instruction(adapter, SEARCH_R1_INSTRUCTION, trainset, valset, max_rollouts=budget,
                                       llm=SamplingLLM(), reflection="gepa", minibatch_size=2, seed=3,
                                       run_dir=str(tmp_path / run), resume=resume)
        return outcome, adapter

    unbroken, _ = optimize(80, "unbroken")
    assert len(unbroken.proposals) >= 6 and unbroken.candidates >= 3  # long enough to draw parents and batches
    optimize(30, "pieces")
    optimize(55, "pieces", resume=True)
    resumed, adapter = optimize(80, "pieces", resume=True)
    assert resumed.resumed and resumed.resume_exact and adapter.replayed == len(valset)
    assert resumed.proposals == unbroken.proposals
    assert (resumed.best_instruction, resumed.best_val_score, resumed.candidates, resumed.rollouts) == \
        (unbroken.best_instruction, unbroken.best_val_score, unbroken.candidates, unbroken.rollouts)


def test_the_generator_and_sampler_built_here_give_gepas_default_run(world, tmp_path, monkeypatch):
    """optimize_instruction builds GEPA's generator, batch sampler and Pareto selector itself (so it
    can save them); a run must be the one gepa.optimize's own defaults give for the same seed."""
    import gepa

    valset, trainset, env = world

    def optimize(run):
        return optimize_instruction(_adapter(env, CoinPolicy()), SEARCH_R1_INSTRUCTION, trainset, valset,
                                    max_rollouts=60, llm=SamplingLLM(), reflection="gepa", minibatch_size=2, seed=3,
                                    run_dir=str(tmp_path / run))

    ours = optimize("ours")
    real = gepa.optimize

    def defaults(**kwargs):  # what optimize_instruction passed before it built these itself
        kwargs.pop("batch_sampler"), kwargs.pop("candidate_selection_strategy")
        return real(**kwargs, reflection_minibatch_size=2)

    monkeypatch.setattr(gepa, "optimize", defaults)
    theirs = optimize("theirs")
    assert len(ours.proposals) >= 5 and ours.proposals == theirs.proposals
    assert (ours.best_instruction, ours.candidates, ours.rollouts) == (theirs.best_instruction, theirs.candidates,
                                                                        theirs.rollouts)
    with pytest.raises(ValueError, match="minibatch_size must be >= 1"):
        optimize_instruction(_adapter(env), SEED, trainset, valset, max_rollouts=8, llm=FunctionLLM(str),
                             minibatch_size=0)


def test_a_stop_file_stops_gepa_at_its_next_iteration_and_resume_goes_on_as_if_unbroken(world, tmp_path):
    """The stop file, there before an iteration, makes GEPA save and stop: RunStopped (a run short of
    its budget is never returned as finished), the file removed, and --resume ends as the unbroken
    run does. GEPA's own run_dir/gepa.stop is honoured the same way."""
    from inspo.records import RunStopped

    valset, trainset, env = world
    stop = tmp_path / "STOP"

    class StopAsked(CoinPolicy):  # the user's stop arrives while the 12th batch plays
        def generate(self, inputs, **kwargs):
            if len(self.batches) == 11:
                stop.write_text("")
            return super().generate(inputs, **kwargs)

    def optimize(run, policy, resume=False):
        return optimize_instruction(_adapter(env, policy), SEARCH_R1_INSTRUCTION, trainset, valset, max_rollouts=60,
                                    llm=SamplingLLM(), reflection="gepa", minibatch_size=2, seed=3,
                                    run_dir=str(tmp_path / run), resume=resume, stop_file=stop)

    unbroken = optimize("unbroken", CoinPolicy())
    with pytest.raises(RunStopped, match=r"GEPA stopped as asked \(.*STOP was there, now removed\) with \d+ of 60"):
        optimize("pieces", StopAsked())
    stopped = ProposalLog(tmp_path / "pieces" / "proposals.jsonl").proposals()
    assert not stop.exists() and stopped and len(stopped) < len(unbroken.proposals)
    resumed = optimize("pieces", CoinPolicy(), resume=True)
    assert resumed.resume_exact and resumed.proposals == unbroken.proposals
    assert (resumed.best_instruction, resumed.rollouts) == (unbroken.best_instruction, unbroken.rollouts)
    (tmp_path / "pieces" / "gepa.stop").write_text("")  # GEPA's own stop file, left there
    with pytest.raises(RunStopped, match="gepa.stop was there"):
        optimize_instruction(_adapter(env, CoinPolicy()), SEARCH_R1_INSTRUCTION, trainset, valset, max_rollouts=90,
                             llm=SamplingLLM(), reflection="gepa", minibatch_size=2, seed=3,
                             run_dir=str(tmp_path / "pieces"), resume=True)
    assert not (tmp_path / "pieces" / "gepa.stop").exists()
    with pytest.raises(ValueError, match="stop_file needs a run_dir"):
        optimize_instruction(_adapter(env), SEED, trainset, valset, max_rollouts=8, llm=FunctionLLM(str),
                             stop_file=stop)


def test_a_state_saved_without_streams_resumes_with_them_restarted_and_says_so(world, tmp_path, caplog):
    from gepa.core.state import GEPAState

    valset, trainset, env = world
    run = str(tmp_path / "gepa")

    def optimize(budget, resume=False):
        return optimize_instruction(_adapter(env, CoinPolicy()), SEARCH_R1_INSTRUCTION, trainset, valset,
                                    max_rollouts=budget, llm=SamplingLLM(), reflection="gepa", minibatch_size=2,
                                    run_dir=run, resume=resume)

    assert optimize(30).resume_exact is None  # not resumed
    state = GEPAState.load(run)  # as an older inspo saved it: the adapter's counters, no streams
    del state.adapter_state["streams"]
    state.save(run)
    later = optimize(40, resume=True)
    assert later.resumed and later.resume_exact is False
    assert "not the one an unbroken run would have been" in caplog.text
    # saved before the first iteration (i = -1), nothing had drawn from the streams: exact, no warning
    caplog.clear()
    state = GEPAState.load(run)
    state.i = -1
    del state.adapter_state["streams"]
    state.save(run)
    assert optimize(50, resume=True).resume_exact is True
    assert "not the one an unbroken run" not in caplog.text


def test_a_resumed_run_keeps_the_inspo_proposers_stats(world, tmp_path):
    valset, trainset, env = world
    llm = RuleBasedReflector(random.Random(0), rules=RULES)

    def optimize(budget, resume=False):
        return optimize_instruction(_adapter(env), SEARCH_R1_INSTRUCTION, trainset, valset, max_rollouts=budget,
                                    llm=llm, reflection="inspo", minibatch_size=2, run_dir=str(tmp_path), resume=resume)

    first = optimize(12)
    assert first.proposer.calls == first.reflection_calls >= 1
    later = optimize(28, resume=True)
    # the saved stats go on in the new process (a fresh ProposerStats would have lost the first run's calls)
    assert later.resumed and later.proposer.calls == later.reflection_calls >= first.proposer.calls
    assert later.proposer.rejected[:len(first.proposer.rejected)] == first.proposer.rejected


def test_proposal_log_keeps_the_last_proposal_of_an_iteration_run_again(tmp_path):
    log = ProposalLog(tmp_path / "proposals.jsonl")
    dataset = {"instruction": [{"Correct answers": ["Paris"]}, {"Correct answers": ["Rome", "Paris"]}]}
    for iteration, text, outcome in [(1, "a", "rejected"), (2, "b", None), (2, "c", "accepted")]:
        log.on_iteration_start({"iteration": iteration})
        log.on_proposal_start({"iteration": iteration, "parent_candidate": {"instruction": "p"},
                               "reflective_dataset": dataset})
        log.on_proposal_end({"iteration": iteration, "new_instructions": {"instruction": text}})
        if outcome == "accepted":
            log.on_candidate_accepted({"iteration": iteration})
        elif outcome:
            log.on_candidate_rejected({"iteration": iteration})
    # iteration 2 was stopped before its decision and run again (a resumed run): the rerun counts
    expected = [GEPAProposal(1, "a", "p", ("Paris", "Rome"), "rejected"),
                GEPAProposal(2, "c", "p", ("Paris", "Rome"), "accepted")]
    assert log.proposals() == expected
    assert ProposalLog(tmp_path / "proposals.jsonl").proposals() == expected  # read back by a new process
    assert ProposalLog(None).proposals() == []


def test_a_proposal_log_hook_that_fails_is_counted_though_gepa_only_logs_it(tmp_path):
    from gepa.core.callbacks import notify_callbacks

    log = ProposalLog(tmp_path / "gone" / "proposals.jsonl")  # its folder does not exist: every write fails
    event = {"iteration": 3, "parent_candidate": {"instruction": "p"}, "reflective_dataset": {}}
    notify_callbacks([log], "on_proposal_start", event)
    notify_callbacks([log], "on_proposal_end", {"iteration": 3, "new_instructions": {"instruction": "q"}})  # no raise
    notify_callbacks([log], "on_candidate_rejected", {"iteration": 3})
    assert [e.split(":")[0] for e in log.errors()] == ["on_proposal_end at iteration 3",
                                                      "on_candidate_rejected at iteration 3"]
    assert "FileNotFoundError" in log.errors()[0]
    notify_callbacks([log], "on_proposal_end", {"iteration": 4})  # an event without what the hook reads
    assert log.errors()[-1].startswith("on_proposal_end at iteration 4: KeyError")


def test_failed_hooks_are_kept_with_the_proposals_so_a_resumed_run_counts_every_pieces(tmp_path):
    path = tmp_path / "proposals.jsonl"
    first = ProposalLog(path)
    first.on_iteration_start({"iteration": 1})
    first.on_proposal_start({"iteration": 1, "parent_candidate": {"instruction": "p"}, "reflective_dataset": {}})
    first.on_proposal_end({"iteration": 1, "new_instructions": {"instruction": "q"}})
    with pytest.raises(KeyError):
        first.on_proposal_start({"iteration": 2})  # GEPA would log this and go on
    second = ProposalLog(path)  # the next piece of a resumed run
    second.on_candidate_accepted({"iteration": 1})
    assert [e.split(":")[0] for e in second.errors()] == ["on_proposal_start at iteration 2"]
    assert second.proposals() == [GEPAProposal(1, "q", "p", (), "accepted")]


def test_proposal_yield_applies_inspos_guard_then_its_leak_check():
    parent = "Use <calc> x </calc>, then <answer> n </answer>."
    proposals = [
        GEPAProposal(1, "Just answer.", parent, ("245",), "accepted"),            # drops both tags
        GEPAProposal(2, parent + " The correct answer is 245.", parent, ("245",), "rejected"),  # a leak
        GEPAProposal(3, parent + " Check each step.", parent, ("245",), "accepted"),
        GEPAProposal(4, parent + " Check each step.", parent, (), ""),            # repeats proposal 3
        GEPAProposal(5, parent, parent, (), "rejected"),                          # its parent again
        GEPAProposal(6, parent + " Be brief." * 20, parent, (), "rejected"),     # too long for 150
    ]
    got = proposal_yield(proposals, ("calc", "answer"), max_chars=150)
    assert [r.split()[0] for r in got["guard_refusals"]] == ["drops", "duplicate", "duplicate", "too"]
    assert got["guard_refusals"][0].endswith("<answer>…</answer>, <calc>…</calc>")
    assert (got["proposals"], got["leaks"], got["would_verify"]) == (6, 1, 1)
    assert (got["accepted"], got["rejected"], got["undecided"], got["accepted_the_guard_refuses"]) == (2, 3, 1, 1)
    # without the tag check the first one would reach verification
    assert proposal_yield(proposals[:1], (), max_chars=150)["would_verify"] == 1
