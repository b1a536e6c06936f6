"""What the rule-based reflector knows of an environment stays in the environment, and holds no
entity of the data: an advice sentence that names one (``<search> Kanor Observatory </search>``) was
copied by a trained agent into its searches for other questions (issue 31)."""

from __future__ import annotations

import re

import pytest

from inspo.core.reflector import ANSWER_RULES, RuleBasedReflector
from inspo.core.templates import render_reflection
from inspo.data.sources import load_corpus_source
from inspo.envs.registry import builtin_names, make_env
from inspo.envs.search_r1.reflector_rules import RULES as SEARCH_R1_RULES
from inspo.records import Question, Rollout


def _sentences(rules) -> list[str]:
    out = [s for wordings in rules.guidance.values() for s in wordings]
    out += list(rules.generic)
    out += [new for _, new in rules.rewordings]
    return out


def _world_names() -> set[str]:
    """Every title of the built-in worlds' passages (people, places, organisations ...)."""
    names = set()
    for corpus in ("world", "world-multihop", "world-chain"):
        names |= {p.title for p in load_corpus_source(corpus) if p.title}
    return names


def _rules_of_builtins():
    out = {"answer-only": ANSWER_RULES, "search-r1": SEARCH_R1_RULES}
    for name in builtin_names():
        if name == "search-r1":
            continue  # building it indexes a corpus; its rules are the module's RULES
        out[name] = make_env(name).reflector_rules
    return out


@pytest.mark.parametrize("which", ["answer-only", "search-r1", "calculator"])
def test_no_advice_sentence_names_an_entity_of_the_data(which):
    rules = _rules_of_builtins()[which]
    names = _world_names()
    assert len(names) > 400  # the check has something to look for
    sentences = _sentences(rules)
    assert sentences
    for sentence in sentences:
        found = sorted(n for n in names if re.search(rf"\b{re.escape(n)}\b", sentence))
        assert not found, f"{which}: {sentence!r} names {found}"
    # and the advice's example tags hold placeholders, never a concrete query
    for sentence in sentences:
        for content in re.findall(r"<(?:search|calc)>(.*?)</(?:search|calc)>", sentence):
            words = content.strip().split()
            assert all(w.islower() or not w.isalpha() for w in words), f"{which}: example {content!r} in {sentence!r}"


def test_the_reflector_writes_the_environments_rules_and_no_other():
    """The same failing search trajectory: Search-R1's rules advise searching; the answer-only
    default never mentions a search (the core knows nothing of searches)."""
    q = Question("q", "Who founded the Kel Museum?", ("Ada Lovelace",))
    failure = Rollout(q, "ins-1", "<answer>Beijing</answer>", reward=0.0, answer="Beijing")
    parent = ("Answer the question. Search with <search> query </search>, results come in <information> "
              "</information>; answer in <answer> </answer>.")
    prompt = render_reflection(parent, [failure], 3)
    messages = [{"role": "user", "content": prompt}]
    search = RuleBasedReflector(seed=0, rules=SEARCH_R1_RULES).generate(messages, n=1, temperature=1.0,
                                                                         max_tokens=2000)[0]
    answer_only = RuleBasedReflector(seed=0).generate(messages, n=1, temperature=1.0, max_tokens=2000)[0]
    assert "never searched" in search and "<search>" in search.split("</ins_0>")[-1]
    added = [c.replace(parent, "") for c in re.findall(r"<ins_\d>\n(.*?)\n</ins_\d>", answer_only, re.DOTALL)]
    assert added and not any("search" in a.lower() for a in added), added
