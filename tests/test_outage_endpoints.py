"""Endpoints that die, freeze or were never there (issue 21, item 1), against real servers on
127.0.0.1: the project's retrieval server (uvicorn) stopped mid-evaluation, a socket that accepts
and never answers, dead ports. An outage is counted apart and stops the run with a one-line
message and a non-zero exit; a dead endpoint is refused before any work; a frozen one costs a
bounded number of requests (counted, not timed)."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from contextlib import contextmanager

import pytest

from agent_helpers import ScriptedPolicy
from inspo.cli import main
from inspo.data.sources import load_qa_source
from inspo.engines.base import Generation
from inspo.engines.openai_engine import OpenAIEngine
from inspo.envs.evaluate import make_evaluate
from inspo.envs.loop import AgentConfig
from inspo.envs.search_r1 import SearchR1Env
from inspo.processes import free_local_port
from inspo.records import Instruction, Passage, TooManyErrors
from inspo.retrieval.bm25 import BM25Retriever
from inspo.retrieval.http_client import HttpRetriever
from inspo.retrieval.server import build_app

pytestmark = pytest.mark.integration

CORPUS = [Passage(f"d{i}", f"Title {i}", f"Passage number {i} about things.") for i in range(8)]
GOOD = Instruction("good", "Search first, then answer in <answer></answer>.")


class Answers(ScriptedPolicy):
    """Searches the question, then answers it right, whatever the instruction: every rollout that
    did not fail scores 1, so an outage counted as 0 would show in the mean."""

    def generate(self, inputs, **kwargs):
        out = []
        for x in inputs:
            question = re.search(r"Question: (.*?)(?:<search>|\n|$)", x.text).group(1).strip()
            if "<information>" not in x.text.rpartition("Question: ")[2]:  # not searched yet
                out.append(Generation([], f"<search>{question}</search>", "stop"))
            else:
                out.append(Generation([], f"<answer>{self.answers[question]}</answer>", "stop"))
        return out


class Dying:
    """A retriever that serves ``alive`` searches and then stops the server it runs in: the
    request after that gets a 500 until the socket closes, then nothing listens (refused)."""

    backend = "dying"

    def __init__(self, alive: int):
        self.inner, self.alive, self.calls, self.server = BM25Retriever(CORPUS), alive, 0, None

    def __len__(self) -> int:
        return len(self.inner)

    def search(self, queries, k=3):
        self.calls += 1
        if self.calls >= self.alive:
            self.server.should_exit = True
        if self.calls > self.alive:
            raise RuntimeError("shutting down")
        return self.inner.search(queries, k)


@contextmanager
def dying_server(alive: int):
    import uvicorn

    retriever = Dying(alive)
    server = uvicorn.Server(uvicorn.Config(build_app(retriever), host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="off"))
    retriever.server = server
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the retrieval server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}", retriever
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def frozen_endpoint():
    """A socket that accepts connections and never answers (a SIGSTOPped server); yields the URL
    and the list of accepted connections."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", accepted
    finally:
        listener.close()
        for conn in accepted:
            conn.close()


QUESTIONS = load_qa_source("world", split="test")[:24]


def test_a_retriever_killed_mid_evaluation_is_counted_apart_and_stops_the_call():
    with dying_server(alive=2) as (url, served), HttpRetriever(url, retries=1, backoff=0.0) as retriever:
        evaluate = make_evaluate(Answers(), SearchR1Env(retriever), AgentConfig(max_turns=2), batch_size=4,
                                 max_error_rate=0.1)
        with pytest.raises(TooManyErrors) as info:
            evaluate(GOOD, QUESTIONS)
    played = info.value.rollouts
    errors = [r for r in played if r.error is not None]
    answered = [r for r in played if r.error is None]
    assert len(answered) == 8 and all(r.reward == 1.0 for r in answered)  # the 2 batches served
    assert len(errors) == 4 and len(played) == 12  # the next batch of 4 failed at once; no more was played
    assert all(r.finish_reason == "error" and r.error.startswith("RetrievalUnavailable: cannot reach retrieval "
                                                                 f"server at {url}") for r in errors)
    message = str(info.value)
    assert message.startswith(f"4 of 12 played of 24 rollouts failed (RetrievalUnavailable: cannot reach retrieval "
                              f"server at {url}")
    assert "over rl.max_error_rate=0.1" in message


def test_a_frozen_retriever_costs_one_call_per_batch_not_one_per_episode():
    with frozen_endpoint() as (url, accepted), HttpRetriever(url, timeout=0.2, retries=1, backoff=0.0) as retriever:
        evaluate = make_evaluate(Answers(), SearchR1Env(retriever), AgentConfig(max_turns=2), batch_size=4)
        rollouts = evaluate(GOOD, QUESTIONS[:8])  # no budget: every batch is played
        assert [r.finish_reason for r in rollouts] == ["error"] * 8
        assert "ReadTimeout" in rollouts[0].error
        # 2 batches x (1 try + 1 retry); replayed episode by episode it was 2 x (1 + 4) x 2 = 20
        assert len(accepted) == 4
        stopping = make_evaluate(Answers(), SearchR1Env(retriever), AgentConfig(max_turns=2), batch_size=4,
                                 max_error_rate=0.1)
        with pytest.raises(TooManyErrors):
            stopping(GOOD, QUESTIONS[:8])
        assert len(accepted) == 6  # the first batch's 2 tries, then it stopped


def test_a_frozen_policy_endpoint_fails_the_batch_without_replaying_it():
    with frozen_endpoint() as (url, accepted):
        engine = OpenAIEngine("m", base_url=f"{url}/v1", api_key="EMPTY", timeout=0.2, max_retries=0)
        rollouts = make_evaluate(engine, SearchR1Env(BM25Retriever(CORPUS)), AgentConfig(max_turns=2), batch_size=4)(
            GOOD, QUESTIONS[:4])
        assert all(r.error.startswith(f"PolicyUnavailable: policy endpoint {url}/v1") for r in rollouts)
        assert len(accepted) == 1  # one request for the batch; replayed it was 1 + 4


def test_the_first_outage_is_logged_once_as_a_warning(caplog):
    with frozen_endpoint() as (url, _), HttpRetriever(url, timeout=0.2, retries=1, backoff=0.0) as retriever:
        make_evaluate(Answers(), SearchR1Env(retriever), AgentConfig(max_turns=2), batch_size=4)(GOOD, QUESTIONS[:8])
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and r.name == "inspo.retrieval"]
    assert len(warnings) == 1 and url in warnings[0].getMessage() and "ReadTimeout" in warnings[0].getMessage()


# ------------------------------------------------------------------------------------- the CLI


def test_inspo_eval_stops_on_a_killed_retriever_keeps_what_was_played_and_exits_non_zero(
        tmp_path, capsys, monkeypatch):
    import inspo.cli_eval
    import inspo.engines.load

    monkeypatch.setattr(inspo.engines.load, "load_engine", lambda *a, **k: Answers())  # a scripted policy
    instruction = tmp_path / "good.txt"
    instruction.write_text(GOOD.text)
    out = tmp_path / "eval"
    with dying_server(alive=2) as (url, _):
        code = main(["eval", "--policy", "tiny-qwen2", "--instruction", str(instruction), "--dataset", "world@test",
                     "--limit", "24", "--batch-size", "4", "--retriever", "http", "--retriever-url", url,
                     "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    line = [x for x in err.splitlines() if x.startswith("inspo: error: ")]
    assert len(line) == 1 and "Traceback" not in err
    assert "4 of 12 played of 24 rollouts failed (RetrievalUnavailable: cannot reach retrieval server at " in line[0]
    assert "raise --max-error-rate (rl.max_error_rate)" in line[0] and str(out / "eval.json") in line[0]
    data = json.loads((out / "eval.json").read_text())
    cell = data["cells"][0]
    assert (cell["n"], cell["errors"], cell["reward"], cell["metrics"]["em"], cell["stopped"]) == (12, 4, 1.0, 1.0, True)  # EM 8/12 if errors were 0
    assert data["errors"] == 4 and data["stopped"] and len(data["questions"]) == 8
    table = (out / "eval.md").read_text()
    assert "| world@test (stopped) | 12 | 4 | 1.000 | 1.000 |" in table and "Stopped before the end" in table  # reward, em


def test_inspo_eval_refuses_a_dead_retriever_url_before_any_work(capsys):
    url = f"http://127.0.0.1:{free_local_port()}"
    code = main(["eval", "--policy", "tiny-qwen2", "--dataset", "world@test", "--limit", "2", "--retriever", "http",
                 "--retriever-url", url])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"cannot reach retrieval server at {url}" in err


def test_inspo_evolve_refuses_a_dead_policy_url_before_any_work(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_local_port()}/v1"
    code = main(["evolve", "--policy-url", url, "--policy-model", "m", "--output-dir", str(tmp_path / "run"),
                 "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("inspo: error: ")]
    assert len(lines) == 1 and f"--policy-url {url}: policy endpoint {url}" in lines[0] and "does not answer" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing was started


def test_a_policy_endpoint_that_does_not_serve_the_model_is_refused():
    from openai_compat_server import OpenAICompatServer

    with OpenAICompatServer(served_model="echo") as server:
        OpenAIEngine("echo", base_url=server.base_url, api_key="EMPTY").check()  # served: passes
        with pytest.raises(ValueError, match="does not serve model 'nope' \\(it serves: echo\\)"):
            OpenAIEngine("nope", base_url=server.base_url, api_key="EMPTY").check()
    with OpenAICompatServer(models_route=False) as server:  # no model list (404): it answered, that is enough
        OpenAIEngine("any", base_url=server.base_url, api_key="EMPTY").check()


def test_inspo_evolve_stops_on_a_killed_retriever_with_every_step_before_it_saved(tmp_path):
    from inspo import artifacts
    from inspo.config.train import resolve
    from inspo.training.evolve import run_evolve

    out = tmp_path / "evo"
    with dying_server(alive=8) as (url, served):
        config = resolve("cpu-tiny", overrides=[
            f"output_dir={out}", "model.name_or_path=tiny-qwen2", "offline_steps=6", "rl.questions_per_step=2",
            "rl.group_size=2", "rl.prefill=", "data.warmup_questions=2", "env.retriever=http",
            f"env.retriever_url={url}", "coevolution.population_size=3",
            "coevolution.evolve_every=2", "coevolution.evolve_until=4", "coevolution.validation_size=2",
            "coevolution.candidates_per_call=2", "coevolution.max_rounds=1",
        ])
        with pytest.raises(TooManyErrors) as info:
            run_evolve(config, engine=Answers(), progress=False)
    saved = artifacts.read_json(out / artifacts.STATE_FILE)["last_step"]
    message = str(info.value)
    assert message.startswith(f"step {saved + 1}: ") and "RetrievalUnavailable: cannot reach retrieval server" in message
    assert message.endswith(f"(the run up to step {saved} is saved in {out}: continue it with --resume)")
    metrics = artifacts.read_jsonl(out / artifacts.METRICS_FILE)
    assert saved >= 1 and [m["step"] for m in metrics] == list(range(1, saved + 1))
    assert all(m["rollout/errors"] == 0 and m["reward/mean"] == 1.0 for m in metrics)  # no outage was scored
    assert not (out / artifacts.SUMMARY_FILE).exists()


def test_a_grpo_step_whose_rollouts_hit_an_outage_stops_instead_of_training_on_zeros(monkeypatch):
    from contextlib import nullcontext
    from types import SimpleNamespace

    import inspo.training.grpo_trainer as grpo
    from inspo.core.coevolution import CoEvolution
    from inspo.core.config import CoEvolutionConfig
    from inspo.core.proposer import Proposer
    from inspo.core.reflector import RuleBasedReflector
    from inspo.envs.search_r1.reflector_rules import RULES
    from inspo.training.rollout_context import RolloutContext

    monkeypatch.setattr(grpo, "generation_model", lambda trainer: nullcontext(None))
    coevo = CoEvolution(CoEvolutionConfig(), "Answer.", Proposer(RuleBasedReflector(seed=0, rules=RULES)))
    questions = QUESTIONS[:2]
    ctx = RolloutContext(coevo=coevo, env=SearchR1Env(HttpRetriever(f"http://127.0.0.1:{free_local_port()}", retries=0)),
                              agent=AgentConfig(max_turns=2), questions={q.id: q for q in questions},
                              tokenizer=None, mini_batches=1, seed=0)
    ctx.policy = lambda *a, **k: Answers()  # the scripted policy instead of the training model
    trainer = SimpleNamespace(_inspo_inputs=[{"question_id": q.id} for q in questions for _ in range(2)],
                              state=SimpleNamespace(global_step=0))
    with pytest.raises(TooManyErrors, match=r"the 4 training rollouts of step 1 failed \(cannot reach retrieval"):
        grpo.make_rollout_func(ctx)([None] * 4, trainer)
    assert ctx.in_flight == [] and ctx.pending == []  # nothing reaches the reward function or the core
