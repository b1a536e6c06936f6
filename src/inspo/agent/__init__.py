"""The search agent: Search-R1 tag protocol, rewards, policy engines, batched rollouts, evaluate.

Importing this package is cheap; torch/transformers/openai/vllm load when an engine is built.
"""

from inspo.agent.engines import (
    Generation,
    GenerationInput,
    HFEngine,
    OpenAIEngine,
    PolicyEngine,
)
from inspo.agent.evaluate import Evaluate, make_evaluate
from inspo.agent.load import load_engine
from inspo.agent.protocol import (
    SEARCH_R1_INSTRUCTION,
    Action,
    build_chat,
    build_prompt,
    extract_answer,
    format_observation,
    parse_action,
)
from inspo.agent.rewards import (
    RewardSpec,
    em_reward,
    exact_match,
    f1_reward,
    f1_score,
    format_ok,
    normalize_answer,
)
from inspo.agent.rollout import AgentConfig, Episode, run_rollouts
from inspo.agent.vllm_engine import VLLMEngine, VLLMOptions
from inspo.records import EvaluateFn

__all__ = [
    "SEARCH_R1_INSTRUCTION",
    "Action",
    "AgentConfig",
    "Episode",
    "Evaluate",
    "EvaluateFn",
    "Generation",
    "GenerationInput",
    "HFEngine",
    "OpenAIEngine",
    "PolicyEngine",
    "RewardSpec",
    "VLLMEngine",
    "VLLMOptions",
    "build_chat",
    "build_prompt",
    "em_reward",
    "exact_match",
    "extract_answer",
    "f1_reward",
    "f1_score",
    "load_engine",
    "format_observation",
    "format_ok",
    "make_evaluate",
    "normalize_answer",
    "parse_action",
    "run_rollouts",
]
