"""End to end: the offline rule-based reflector improves instructions on a synthetic task whose
failures it can detect (never searching, whole-question queries, long answers, ignoring the
retrieved answer)."""

import random

from inspo.core.coevolution import CoEvolution
from inspo.core.config import CoEvolutionConfig
from inspo.core.proposer import Proposer
from inspo.core.reflector import RuleBasedReflector
from inspo.envs.search_r1 import SEARCH_R1_INSTRUCTION
from inspo.synthetic import (
    FEATURES,
    GUARD_TAGS,
    SyntheticEnv,
    make_questions,
    reflector_rules,
    run_synthetic,
)


def test_rule_based_reflector_raises_true_quality_of_best_instruction():
    env = SyntheticEnv(seed=4)
    cfg = CoEvolutionConfig(evolve_until=61, validation_size=40, seed=4)
    # the synthetic task speaks Search-R1's tags: it borrows Search-R1's reflector rules and guard tags
    reflector = RuleBasedReflector(rng=random.Random(4), rules=reflector_rules())
    coevo = CoEvolution(cfg, SEARCH_R1_INSTRUCTION, Proposer(reflector, guard_tags=GUARD_TAGS))
    best_quality = []

    def on_step(t, report):
        if report.evolved:
            best_quality.append(env.quality(coevo.population.top(1)[0].text))

    run_synthetic(coevo, env, make_questions(80), steps=60, batch_size=16, group_size=5, on_step=on_step)
    seed_q = env.quality(SEARCH_R1_INSTRUCTION)
    final = env.quality(coevo.best().text)
    assert final >= seed_q + 0.3, (seed_q, final, coevo.best().text)
    # the guidance it added answers failure modes the environment showed
    assert sum(f.present(coevo.best().text) for f in FEATURES) >= 2
    # every admitted instruction kept the seed's protocol tags
    for ins in coevo.population.instructions:
        for tag in ("<think>", "</think>", "<search>", "</search>", "<information>", "</information>", "<answer>", "</answer>"):
            assert tag in ins.text
    assert coevo.ledger.optimizer_calls >= 4 and coevo.ledger.optimizer_failures == 0
