"""OpenAIEngine against a real OpenAI-compatible completions server, and the text-only rollout.

The server (FastAPI + uvicorn on 127.0.0.1, started and stopped by the test) plays a scripted
policy the way vLLM's ``/v1/completions`` answers: the matched stop string is cut from the
text and reported in ``stop_reason``. Model ``"plain"`` leaves ``stop_reason`` out, as servers
other than vLLM do, so the engine must restore the tag from the unclosed opening tag.
"""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest

pytest.importorskip("openai")
pytest.importorskip("fastapi")
uvicorn = pytest.importorskip("uvicorn")

from inspo.engines.base import GenerationInput  # noqa: E402
from inspo.engines.openai_engine import OpenAIEngine  # noqa: E402
from inspo.envs.evaluate import make_evaluate  # noqa: E402
from inspo.envs.loop import AgentConfig  # noqa: E402
from inspo.envs.search_r1 import SearchR1Env  # noqa: E402
from inspo.envs.search_r1.protocol import SEARCH_R1_INSTRUCTION, STOP_STRINGS, format_observation  # noqa: E402
from inspo.processes import free_local_port  # noqa: E402
from inspo.records import Instruction, Passage, Question  # noqa: E402

pytestmark = pytest.mark.integration


def policy(prompt: str) -> str:
    """The scripted policy: search '<question> facts' first, then answer from the observation."""
    question = re.search(r"Question: (.*)", prompt).group(1).strip()
    seen = prompt.split("Question:", 1)[1]
    if "<information>" not in seen:
        return f"<think>I need facts.</think>\n<search>{question} facts</search>\n\nand more text"
    found = re.findall(r"Doc 1\(Title: ([^)]*)\)", seen)[-1]
    return f"<think>Found it.</think>\n<answer>{found}</answer> trailing"


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, str | None]:
    hits = [(text.find(s), s) for s in stop if s in text]
    if not hits:
        return text, None
    pos, s = min(hits)
    return text[:pos], s


class CompletionsServer:
    def __init__(self) -> None:
        from fastapi import FastAPI

        self.requests: list[dict] = []
        app = FastAPI()

        @app.post("/v1/completions")
        def completions(body: dict) -> dict:
            self.requests.append(body)
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            choices = []
            for i, prompt in enumerate(prompts):
                text, matched = cut_at_stop(policy(prompt), body.get("stop") or [])
                choice = {"index": i, "text": text, "finish_reason": "stop", "logprobs": None}
                if body["model"] != "plain":
                    choice["stop_reason"] = matched
                choices.append(choice)
            return {
                "id": "cmpl-1",
                "object": "text_completion",
                "created": 0,
                "model": body["model"],
                "choices": choices,
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.sock = sock

    def __enter__(self) -> CompletionsServer:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test completions server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


class TitleRetriever:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def search(self, queries, k=3):
        self.calls.append(list(queries))
        return [
            [Passage(f"{q}-{i}", q.split()[0].title(), f"about {q}") for i in range(k)]
            for q in queries
        ]


@pytest.fixture(scope="module")
def server():
    with CompletionsServer() as srv:
        yield srv


@pytest.mark.parametrize("model", ["vllm-like", "plain"])
def test_openai_engine_restores_the_stop_string(server, model):
    engine = OpenAIEngine(model, base_url=server.base_url, api_key="test-key")
    prompts = [
        GenerationInput([], [], "Question: paris\n"),
        GenerationInput([], [], "Question: rome\n"),
    ]
    gens = engine.generate(
        prompts, max_new_tokens=50, temperature=0.0, top_p=1.0, stop=STOP_STRINGS
    )
    assert [g.text for g in gens] == [
        "<think>I need facts.</think>\n<search>paris facts</search>",
        "<think>I need facts.</think>\n<search>rome facts</search>",
    ]
    assert [g.finish for g in gens] == ["stop", "stop"]
    assert all(g.token_ids == [] for g in gens)
    body = server.requests[-1]
    assert body["prompt"] == ["Question: paris\n", "Question: rome\n"]  # one batched request
    assert body["stop"] == list(STOP_STRINGS) and body["max_tokens"] == 50


def test_text_only_rollouts_through_an_openai_endpoint(server):
    engine = OpenAIEngine("vllm-like", base_url=server.base_url, api_key="test-key")
    retriever = TitleRetriever()
    evaluate = make_evaluate(
        engine, SearchR1Env(retriever), AgentConfig(max_turns=3, temperature=0), batch_size=2, progress=True
    )
    questions = [Question("a", "paris", ("Paris",)), Question("b", "rome", ("Milan",))]
    rollouts = evaluate(Instruction("seed", SEARCH_R1_INSTRUCTION), questions)

    assert retriever.calls == [["paris facts", "rome facts"]]  # one batched search per turn
    first, second = rollouts
    assert (first.finish_reason, first.turns, first.calls_of("search")) == ("answer", 2, ["paris facts"])
    assert (first.answer, first.reward) == ("Paris", 1.0)
    assert (second.answer, second.reward) == ("Rome", 0.0)
    obs = format_observation(retriever.search(["paris facts"], 3)[0])
    assert first.response == (
        "<think>I need facts.</think>\n<search>paris facts</search>"
        + obs
        + "<think>Found it.</think>\n<answer>Paris</answer>"
    )
    # text only: no token ids from an endpoint
    assert first.prompt_ids == first.completion_ids == first.env_mask == []
    # the second turn's prompt was the first prompt + the response so far, as text
    last_prompt = server.requests[-1]["prompt"][0]
    assert last_prompt.endswith("<search>paris facts</search>" + obs)
    assert last_prompt.startswith(SEARCH_R1_INSTRUCTION + "\n\nQuestion: paris")
    # the loop stopped each turn at the environment's stop strings, Search-R1's
    assert all(body["stop"] == list(STOP_STRINGS) for body in server.requests[-2:])


def test_an_unreachable_endpoint_becomes_error_rollouts():
    port = free_local_port()
    engine = OpenAIEngine(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0, timeout=5
    )
    evaluate = make_evaluate(engine, SearchR1Env(TitleRetriever()), AgentConfig(max_turns=2))
    rollouts = evaluate(
        Instruction("seed", SEARCH_R1_INSTRUCTION), [Question("a", "x", ("y",))] * 2
    )
    assert [r.finish_reason for r in rollouts] == ["error", "error"]
    assert all(r.reward == 0.0 and r.error.startswith("PolicyUnavailable: policy endpoint http://127.0.0.1")
               and "APIConnectionError" in r.error for r in rollouts)


def test_text_only_observations_are_capped_by_characters(server):
    # no tokenizer: the cap is max_obs_tokens * 4 characters, the block still closed
    engine = OpenAIEngine("vllm-like", base_url=server.base_url, api_key="test-key")
    retriever = TitleRetriever()
    config = AgentConfig(max_turns=3, max_obs_tokens=16, temperature=0)
    evaluate = make_evaluate(engine, SearchR1Env(retriever), config)
    (r,) = evaluate(
        Instruction("seed", SEARCH_R1_INSTRUCTION), [Question("a", "paris", ("Paris",))]
    )
    full = format_observation(retriever.search(["paris facts"], 3)[0])
    start = r.response.index("\n\n<information>")
    end = r.response.index("</information>\n\n") + len("</information>\n\n")
    obs = r.response[start:end]
    assert len(full) > 64 and len(obs) == 64
    assert obs == full[: 64 - len("</information>\n\n")] + "</information>\n\n"
    assert r.metrics["n_obs_truncated"] == 1.0 and r.answer == "Paris"
