"""inspo: Instruction-Policy Co-Evolution (INSPO) for agentic RL of LLMs.

Importing ``inspo`` is cheap: torch, transformers, TRL, faiss and friends load only when a
component that needs them is built.
"""

from inspo.records import Candidate, Instruction, Passage, Question, Rollout

__all__ = ["Candidate", "Instruction", "Passage", "Question", "Rollout", "__version__"]
__version__ = "0.1.0"
