"""Moved: ``inspo.agent.evaluate`` is gone since the environment seam; the evaluate seam is inspo.envs.evaluate (make_evaluate(engine, env, config, ...), Evaluate, play_isolated).

Importing this module raises ImportError with that message (inspo.agent keeps the policy engines).
"""

raise ImportError("inspo.agent.evaluate moved with the environment seam: the evaluate seam is inspo.envs.evaluate (make_evaluate(engine, env, config, ...), Evaluate, play_isolated). See docs/your-own-agent.md")
