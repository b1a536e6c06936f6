"""Environments: what is specific to one tool-using agent, behind one seam.

- :mod:`.base`: the :class:`Environment` protocol and its rules, :func:`check_environment`;
  :class:`ToolProtocol` (from :mod:`inspo.tool_protocol`) is an environment's optional protocol
  block, its tags and how to use them (``coevolution.protocol_block``);
- :mod:`.tools`: tools as typed Python functions with a docstring (:func:`tool`), run with a
  timeout, errors counted apart;
- :mod:`.tagged`: :class:`TaggedToolEnv`, the ``<tool> args </tool>`` protocol most agents speak;
- :mod:`.native`: :class:`NativeToolEnv`, tools called in the model's own chat-template format
  (``<tool_call>{json}</tool_call>``), their schemas (:mod:`.tool_schema`) in the template;
- :mod:`.loop`: batched multi-turn episodes of any environment, token ids and ``env_mask`` end to
  end (:func:`run_rollouts`);
- :mod:`.evaluate`: the ``evaluate(instruction, questions)`` seam the core and the eval command
  share (:func:`make_evaluate`);
- :mod:`.transcript`: an episode turn by turn, for people;
- :mod:`.registry`: environments by name (``env.name``: ``search-r1``, ``calculator``, or a user's
  ``module:attr``; :func:`make_env`);
- :mod:`.build`: an environment, its questions and the agent's settings from a run's config;
- built-in environments: :mod:`.search_r1` (the paper's search agent) and :mod:`.calculator`.

Importing this package is cheap: engines, retrievers and models load when an environment is built.
"""

from inspo.envs.base import (
    EnvError,
    Environment,
    FinalAnswer,
    ToolCall,
    ToolProtocol,
    check_environment,
)
from inspo.envs.evaluate import Evaluate, make_evaluate
from inspo.envs.loop import AgentConfig, Episode, run_rollouts
from inspo.envs.native import NativeToolEnv
from inspo.envs.registry import EnvNameError, builtin_names, make_env, resolve_seed
from inspo.envs.rubric import Criterion, Rubric
from inspo.envs.tagged import TaggedToolEnv, build_prompt
from inspo.envs.tools import Tool, ToolFailed, ToolInputError, tool

__all__ = [
    "AgentConfig",
    "Criterion",
    "EnvError",
    "EnvNameError",
    "Environment",
    "Episode",
    "Evaluate",
    "FinalAnswer",
    "NativeToolEnv",
    "Rubric",
    "TaggedToolEnv",
    "Tool",
    "ToolCall",
    "ToolFailed",
    "ToolInputError",
    "ToolProtocol",
    "build_prompt",
    "builtin_names",
    "check_environment",
    "make_env",
    "make_evaluate",
    "resolve_seed",
    "run_rollouts",
    "tool",
]
