"""Moved: ``inspo.agent.rollout`` is gone since the environment seam; the rollout loop is inspo.envs.loop (AgentConfig, Episode, run_rollouts(engine, env, config, episodes)); the retriever is the search-r1 environment's tool: SearchR1Env(retriever, topk=3).

Importing this module raises ImportError with that message (inspo.agent keeps the policy engines).
"""

raise ImportError("inspo.agent.rollout moved with the environment seam: the rollout loop is inspo.envs.loop (AgentConfig, Episode, run_rollouts(engine, env, config, episodes)); the retriever is the search-r1 environment's tool: SearchR1Env(retriever, topk=3). See docs/your-own-agent.md")
