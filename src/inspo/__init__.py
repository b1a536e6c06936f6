"""inspo: Instruction-Policy Co-Evolution (INSPO) for agentic RL of LLMs.

Importing ``inspo`` is cheap: torch, transformers, TRL, faiss and friends load only when a
component that needs them is built.

From Python (:mod:`inspo.api`)::

    import inspo

    config = inspo.load_config("cpu-tiny", overrides={"rl.steps": 2, "output_dir": "runs/mine"})
    summary = inspo.train(config)          # or inspo.evolve(config), inspo.evaluate(config, ...)
    agent = inspo.load_agent(summary.run_dir)   # the trained agent: agent.ask("...")

Your own agent is an environment (:mod:`inspo.envs`): ``inspo.TaggedToolEnv`` with your tools as
typed functions (``inspo.tool``), or ``inspo.NativeToolEnv`` for the model's own tool-call format,
given as ``inspo.train(config, env=...)`` or named ``env.name=module:attr``; docs/your-own-agent.md.
"""

from inspo.records import Candidate, Instruction, Passage, Question, Rollout

__all__ = [
    "Candidate",
    "Instruction",
    "NativeToolEnv",
    "Passage",
    "Question",
    "Rollout",
    "Rubric",
    "TaggedToolEnv",
    "__version__",
    "evaluate",
    "evolve",
    "export_agent",
    "load_agent",
    "load_config",
    "make_env",
    "push_agent",
    "tool",
    "train",
]
__version__ = "0.1.0"

#: Names of ``inspo`` imported from their module when first used (``inspo.train``,
#: ``inspo.load_agent``). ``inspo.train`` is a plain function; the training package is
#: ``inspo.training``.
_LAZY = {
    "train": "inspo.api",
    "evolve": "inspo.api",
    "evaluate": "inspo.api",
    "load_config": "inspo.api",
    "export_agent": "inspo.trained",
    "load_agent": "inspo.trained",
    "push_agent": "inspo.trained",
    "TaggedToolEnv": "inspo.envs",
    "tool": "inspo.envs",
    "make_env": "inspo.envs",
    "Rubric": "inspo.envs",
    "NativeToolEnv": "inspo.envs",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'inspo' has no attribute {name!r}")
