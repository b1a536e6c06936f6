"""inspo: Instruction-Policy Co-Evolution (INSPO) for agentic RL of LLMs.

Importing ``inspo`` is cheap: torch, transformers, TRL, faiss and friends load only when a
component that needs them is built.
"""

from inspo.records import Candidate, Instruction, Passage, Question, Rollout

__all__ = ["Candidate", "Instruction", "Passage", "Question", "Rollout", "__version__",
           "export_agent", "load_agent", "push_agent"]
__version__ = "0.1.0"

#: Names of ``inspo`` imported from their module when first used (``inspo.load_agent``).
_LAZY = {"export_agent": "inspo.trained", "load_agent": "inspo.trained", "push_agent": "inspo.trained"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'inspo' has no attribute {name!r}")
