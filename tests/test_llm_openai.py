"""The OpenAI-compatible client against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import logging
import random

import pytest

from inspo.core.optimizer_llm import LLMClient, LLMError
from inspo.llm.openai_client import OpenAICompatibleClient, Secret
from inspo.processes import free_local_port
from openai_compat_server import OpenAICompatServer, echo_backend, model_backend

KEY = "sk-test-SECRET-4f9c2b7e"
CHAT = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def echo_server():
    with OpenAICompatServer(echo_backend, api_key=KEY, slow_s=1.0) as server:
        yield server


@pytest.fixture(scope="module")
def model_server(smollm2_chat):
    from inspo.llm.local import LocalTransformersClient

    model, tokenizer = smollm2_chat
    backend = model_backend(LocalTransformersClient(model=model, tokenizer=tokenizer, seed=0))
    with OpenAICompatServer(backend, api_key=KEY) as server:
        yield server


def make_client(server, model, *, sleeps=None, **kw) -> OpenAICompatibleClient:
    kw.setdefault("timeout_s", 10.0)
    kw.setdefault("max_retries", 2)
    return OpenAICompatibleClient(
        base_url=server.base_url,
        model=model,
        api_key=kw.pop("api_key", KEY),
        rng=kw.pop("rng", random.Random(0)),
        sleep=(sleeps.append if sleeps is not None else (lambda s: None)),
        env={},
        **kw,
    )


# ------------------------------------------------------------------ real model round trips


@pytest.mark.slow
def test_real_completion_round_trip_counts_server_usage(model_server, smollm2_chat):
    from inspo.llm.local import LocalTransformersClient

    client = make_client(model_server, "smollm2")
    [text] = client.generate(CHAT, n=1, temperature=0.0, max_tokens=16)

    model, tokenizer = smollm2_chat
    direct = LocalTransformersClient(model=model, tokenizer=tokenizer)
    assert text == direct.generate(CHAT, n=1, temperature=0.0, max_tokens=16)[0]
    assert text.strip()
    assert isinstance(client, LLMClient)
    assert client.usage.calls == 1
    assert client.usage.estimated is False
    assert client.usage.prompt_tokens == direct.usage.prompt_tokens > 10
    assert client.usage.completion_tokens == direct.usage.completion_tokens
    assert 1 <= client.usage.completion_tokens <= 16


@pytest.mark.slow
def test_n_completions_in_one_request(model_server):
    client = make_client(model_server, "smollm2-n")
    before = model_server.calls["smollm2-n"]
    texts = client.generate(CHAT, n=3, temperature=1.0, max_tokens=12)
    assert len(texts) == 3 and all(isinstance(t, str) for t in texts)
    assert model_server.calls["smollm2-n"] - before == 1
    assert model_server.requests[-1]["n"] == 3
    assert client.usage.calls == 1 and client.usage.completion_tokens >= 3


# ------------------------------------------------------------------ n handling


def test_server_ignoring_n_gets_extra_requests(echo_server):
    client = make_client(echo_server, "n-ignored")
    texts = client.generate(CHAT, n=3)
    assert len(texts) == 3
    assert echo_server.calls["n-ignored"] == 3
    assert [r.get("n") for r in echo_server.requests if r["model"] == "n-ignored"] == [3, 2, None]
    assert client.usage.calls == 3


def test_n_one_sends_no_n_field(echo_server):
    client = make_client(echo_server, "plain")
    assert client.generate(CHAT, n=1) == ["echo 0: What is the capital of France? Answer in one word."]
    assert "n" not in echo_server.requests[-1]


# ------------------------------------------------------------------ retries and failures


def test_timeout_retries_then_raises(echo_server):
    sleeps: list[float] = []
    client = make_client(echo_server, "slow", timeout_s=0.2, max_retries=2, sleeps=sleeps)
    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): timed out after 0.2 s"):
        client.generate(CHAT)
    assert echo_server.calls["slow"] == 3
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] < 1.5 and 1.0 <= sleeps[1] < 3.0  # base 1 s, doubled, jitter in [0.5, 1.5)
    assert client.usage.failures == 1 and client.usage.calls == 0


def test_503_then_ok_is_retried(echo_server, caplog):
    caplog.set_level(logging.WARNING, logger="inspo.llm")
    sleeps: list[float] = []
    client = make_client(echo_server, "flaky-2", max_retries=3, sleeps=sleeps)
    assert client.generate(CHAT) == ["echo 0: What is the capital of France? Answer in one word."]
    assert echo_server.calls["flaky-2"] == 3
    assert len(sleeps) == 2
    assert "HTTP 503; retry 1/3" in caplog.text and "retry 2/3" in caplog.text
    assert client.usage.calls == 1 and client.usage.failures == 0


def test_backoff_jitter_comes_from_injected_rng():
    def delays(seed):
        client = OpenAICompatibleClient(model="m", rng=random.Random(seed), backoff_max_s=3.0, env={})
        return [client._backoff(a) for a in range(4)]

    assert delays(42) == delays(42) != delays(43)
    first = delays(42)
    assert all(0.5 * b <= d < 1.5 * b for d, b in zip(first, [1.0, 2.0, 3.0, 3.0], strict=True))  # capped at 3 s


def test_retries_exhausted_on_503(echo_server):
    client = make_client(echo_server, "flaky-5", max_retries=1)
    with pytest.raises(LLMError, match=r"failed after 2 attempt\(s\): HTTP 503"):
        client.generate(CHAT)
    assert echo_server.calls["flaky-5"] == 2


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("malformed-json", r"malformed answer .* not valid JSON"),
        ("malformed-no-choices", r"malformed answer .* no 'choices'"),
        ("malformed-no-content", r"malformed answer .* choice 0 has no text message.content"),
    ],
)
def test_malformed_answer_raises_clear_error_without_retry(echo_server, model, message):
    client = make_client(echo_server, model)
    with pytest.raises(LLMError, match=message):
        client.generate(CHAT)
    assert echo_server.calls[model] == 1


def test_400_is_not_retried_and_n_falls_back_to_one(echo_server):
    client = make_client(echo_server, "bad-request")
    with pytest.raises(LLMError, match="HTTP 400"):
        client.generate(CHAT, n=2)
    # one request with n=2, then one with n=1 (some servers refuse n > 1), no retries
    assert [r.get("n") for r in echo_server.requests if r["model"] == "bad-request"] == [2, None]


def test_switches_to_max_completion_tokens_when_asked(echo_server):
    client = make_client(echo_server, "new-style")
    assert len(client.generate(CHAT, max_tokens=7)) == 1
    sent = [r for r in echo_server.requests if r["model"] == "new-style"]
    assert [("max_tokens" in r, r.get("max_completion_tokens")) for r in sent] == [(True, None), (False, 7)]


def test_missing_usage_is_estimated(echo_server):
    client = make_client(echo_server, "no-usage")
    client.generate(CHAT)
    assert client.usage.estimated is True
    assert client.usage.prompt_tokens == (len(CHAT[0]["content"]) + 3) // 4
    assert client.usage.completion_tokens > 0


def test_wrong_key_fails_fast(echo_server):
    client = make_client(echo_server, "plain-wrong-key", api_key="sk-wrong-key-0000")
    with pytest.raises(LLMError, match="HTTP 401") as info:
        client.generate(CHAT)
    assert echo_server.calls["plain-wrong-key"] == 0  # refused before counting
    assert "sk-wrong-key-0000" not in str(info.value)
    with pytest.raises(LLMError, match="refused the API key"):
        client.check()


# ------------------------------------------------------------------ check()


def test_check_lists_models(echo_server):
    assert make_client(echo_server, "smollm2").check() == ["smollm2"]


def test_check_warns_when_the_model_is_not_listed(echo_server, caplog):
    caplog.set_level(logging.WARNING, logger="inspo.llm")
    assert make_client(echo_server, "gpt-unknown").check() == ["smollm2"]
    assert "does not list model 'gpt-unknown'" in caplog.text


def test_check_without_models_route_falls_back_to_a_tiny_completion():
    with OpenAICompatServer(echo_backend, models_route=False) as server:
        client = make_client(server, "tiny", api_key=None)
        assert client.check() == []
        assert server.calls["tiny"] == 1
        assert server.requests[-1]["max_tokens"] == 1


def test_check_unreachable_port_raises():
    port = free_local_port()
    client = OpenAICompatibleClient(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=2.0, env={}
    )
    with pytest.raises(LLMError, match=f"cannot reach optimizer endpoint at http://127.0.0.1:{port}/v1"):
        client.check()
    assert client.ping == client.check


def test_unreachable_generate_retries_connection_errors():
    sleeps: list[float] = []
    client = OpenAICompatibleClient(
        base_url=f"http://127.0.0.1:{free_local_port()}/v1", model="m", timeout_s=2.0, max_retries=2,
        sleep=sleeps.append, env={},
    )
    with pytest.raises(LLMError, match=r"failed after 3 attempt\(s\): connection error"):
        client.generate(CHAT)
    assert len(sleeps) == 2


# ------------------------------------------------------------------ the key stays secret


def test_key_never_in_repr_or_logs(echo_server, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the SDK's and httpx's included
    client = make_client(echo_server, "flaky-1", max_retries=2)
    client.generate(CHAT)
    client.check()
    with pytest.raises(LLMError) as info:
        make_client(echo_server, "malformed-json").generate(CHAT)
    assert echo_server.calls["flaky-1"] == 2  # the key was sent and accepted
    assert KEY not in repr(client) and "'***'" in repr(client)
    assert KEY not in str(info.value)
    assert KEY not in caplog.text
    assert caplog.text  # something was logged, so the check above means something


def test_secret_hides_value():
    s = Secret("abc")
    assert repr(s) == "'***'" and str(s) == "'***'" and s.reveal() == "abc" and bool(s)
    assert repr(Secret(None)) == "''" and not Secret("")


# ------------------------------------------------------------------ settings


def test_settings_from_environment():
    env = {
        "INSPO_OPTIMIZER_BASE_URL": "http://127.0.0.1:9/v1/",
        "INSPO_OPTIMIZER_MODEL": "qwen",
        "OPENAI_API_KEY": "sk-env-key",
    }
    client = OpenAICompatibleClient(env=env)
    assert client.base_url == "http://127.0.0.1:9/v1"
    assert client.model == "qwen"
    assert client._api_key.reveal() == "sk-env-key"
    assert "sk-env-key" not in repr(client)
    # explicit arguments win; OPENAI_BASE_URL is the fallback; OpenAI's URL the last resort
    assert OpenAICompatibleClient("http://h:1/v1", "m", env=env).base_url == "http://h:1/v1"
    assert OpenAICompatibleClient(model="m", env={"OPENAI_BASE_URL": "http://o:2/v1"}).base_url == "http://o:2/v1"
    assert OpenAICompatibleClient(model="m", env={}).base_url == "https://api.openai.com/v1"
    key_first = {"INSPO_OPTIMIZER_API_KEY": "a", "OPENAI_API_KEY": "b"}
    assert OpenAICompatibleClient(model="m", env=key_first)._api_key.reveal() == "a"


def test_missing_model_is_a_clear_error():
    with pytest.raises(LLMError, match="INSPO_OPTIMIZER_MODEL"):
        OpenAICompatibleClient(base_url="http://127.0.0.1:9/v1", env={})


def test_bad_arguments():
    with pytest.raises(ValueError, match="timeout_s"):
        OpenAICompatibleClient(model="m", timeout_s=0, env={})
    with pytest.raises(ValueError, match="max_retries"):
        OpenAICompatibleClient(model="m", max_retries=-1, env={})
    with pytest.raises(ValueError, match="n must be"):
        OpenAICompatibleClient(model="m", env={}).generate(CHAT, n=0)


# ------------------------------------------------------------------ keys never recorded (issue 21, item 6)


def test_an_endpoint_echoing_the_key_has_it_redacted_from_the_error(echo_server):
    from inspo.core.optimizer_llm import REDACTED

    client = make_client(echo_server, "echo-key", max_retries=0)
    with pytest.raises(LLMError) as caught:
        client.generate([{"role": "user", "content": "hi"}], n=1, max_tokens=4)
    assert KEY not in str(caught.value) and REDACTED in str(caught.value)
    assert caught.value.__cause__ is None  # the raw body (with the key) is not chained either
    assert "HTTP 400" in str(caught.value)  # the rest of the message is kept


def test_the_proposer_records_a_redacted_reason(echo_server):
    from inspo.core.proposer import Proposer
    from inspo.records import Instruction

    proposer = Proposer(make_client(echo_server, "echo-key", max_retries=0), n_candidates=2)
    ids = iter(range(100))
    proposal = proposer.propose(Instruction(id="s", text="Use <search> q </search> and <answer> a </answer>."), [],
                                new_id=lambda: f"c{next(ids)}")
    assert proposal.error and KEY not in proposal.error and "***" in proposal.error


def test_redact_leaves_placeholders_and_short_strings_alone():
    from inspo.core.optimizer_llm import redact

    assert redact("key sk-abc123 here, sk-abc123", "sk-abc123") == "key *** here, ***"
    assert redact("EMPTY body", "EMPTY") == "EMPTY body" and redact("a b c", "b") == "a b c"
    assert redact("nothing", None, "") == "nothing"


def test_the_policy_engine_redacts_the_key_from_endpoint_errors():
    from inspo.engines.base import GenerationInput
    from inspo.engines.openai_engine import OpenAIEngine

    class Failing:
        api_key = "sk-policy-secret"

        class completions:  # noqa: N801 - the SDK's attribute name
            @staticmethod
            def create(**kw):
                raise ValueError("401: key sk-policy-secret is not valid")

    engine = OpenAIEngine("m", client=Failing())
    with pytest.raises(RuntimeError) as caught:
        engine.generate([GenerationInput(prompt_ids=[], completion_ids=[], text="q")], max_new_tokens=4, temperature=0.0, top_p=1.0, stop=[])
    assert "sk-policy-secret" not in str(caught.value) and "***" in str(caught.value)
