"""GRPO training with co-evolving instructions, on TRL (heavy imports stay inside functions).

``inspo train`` runs :func:`inspo.training.run.run_training`; from Python, :func:`inspo.train`
(:func:`inspo.api.train`) is the plain function in front of it. The GRPO files are named after
TRL's own for the same roles: ``grpo_config.py`` (inspo's config mapped to ``GRPOConfig``, the
trainer built on it), ``grpo_trainer.py`` (the trainer subclass, ``rollout_func``, reward function
and step callback: the only module on TRL's private API); ``grpo_stage.py`` is one GRPO stage of
a run. docs/architecture.md maps the rest.
"""
