"""The trained agent after ``inspo train``: one shareable folder and a way to play it.

- :func:`export_agent` writes a run's agent (full weights, tokenizer, ``instruction.txt``,
  ``population.json``, ``agent.json``, inspo's model card) into a folder transformers loads;
  :func:`push_agent` uploads it to the Hugging Face hub (:mod:`inspo.trained.export`);
- :func:`load_agent` plays an exported folder, a run directory or any model on questions,
  :meth:`Agent.ask` returning the episode turn by turn (:mod:`inspo.trained.play`).

Importing this package is cheap: torch and transformers load when a model does.
"""

from inspo.trained.export import ExportError, export_agent, push_agent
from inspo.trained.play import Agent, Answer, load_agent
from inspo.trained.settings import AgentSettings

__all__ = [
    "Agent",
    "AgentSettings",
    "Answer",
    "ExportError",
    "export_agent",
    "load_agent",
    "push_agent",
]
