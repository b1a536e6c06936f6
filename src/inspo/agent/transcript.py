"""Moved: ``inspo.agent.transcript`` is gone since the environment seam; an episode turn by turn is inspo.envs.transcript (turns_of(env, rollout), transcript_lines).

Importing this module raises ImportError with that message (inspo.agent keeps the policy engines).
"""

raise ImportError("inspo.agent.transcript moved with the environment seam: an episode turn by turn is inspo.envs.transcript (turns_of(env, rollout), transcript_lines). See docs/your-own-agent.md")
