"""The scripted fake optimizer used by tests."""

from __future__ import annotations

import pytest

from inspo.core.optimizer_llm import LLMClient, LLMError
from inspo.llm.scripted import ScriptedLLM

CHAT = [{"role": "user", "content": "x" * 40}]


def test_list_in_order_then_exhausted():
    llm = ScriptedLLM(["a", "b", "c"])
    assert isinstance(llm, LLMClient)
    assert llm.generate(CHAT, n=2) == ["a", "b"]
    assert llm.generate(CHAT) == ["c"]
    with pytest.raises(LLMError, match="ran out of responses after 3"):
        llm.generate(CHAT)
    assert llm.usage.calls == 2 and llm.usage.failures == 1
    assert llm.usage.prompt_tokens == 20 and llm.usage.estimated
    assert len(llm.prompts) == 3 and llm.prompts[0] == CHAT


def test_cycle_and_scripted_exception():
    llm = ScriptedLLM(["a", LLMError("endpoint down")], cycle=True)
    assert llm.generate(CHAT) == ["a"]
    with pytest.raises(LLMError, match="endpoint down"):
        llm.generate(CHAT)
    assert llm.generate(CHAT) == ["a"]
    with pytest.raises(ValueError, match="at least one"):
        ScriptedLLM([], cycle=True)


def test_callable_single_or_list():
    seen = []

    def fn(messages, n):
        seen.append(n)
        return "same" if n == 1 else [f"r{i}" for i in range(n)]

    llm = ScriptedLLM(fn)
    assert llm.generate(CHAT) == ["same"]
    assert llm.generate(CHAT, n=3) == ["r0", "r1", "r2"]
    assert seen == [1, 3]
    with pytest.raises(LLMError, match="returned 1 items for n=2"):
        ScriptedLLM(lambda m, n: ["only one"]).generate(CHAT, n=2)

    def broken(messages, n):
        raise RuntimeError("boom")

    with pytest.raises(LLMError, match="scripted LLM failed: boom"):
        ScriptedLLM(broken).generate(CHAT)
