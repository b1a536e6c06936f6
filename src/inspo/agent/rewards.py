"""Moved: ``inspo.agent.rewards`` is gone since the environment seam; Search-R1's rewards are inspo.envs.search_r1.rewards (RewardSpec, em_reward, f1_reward, format_ok); exact_match, f1_score and normalize_answer are inspo.answers.

Importing this module raises ImportError with that message (inspo.agent keeps the policy engines).
"""

raise ImportError("inspo.agent.rewards moved with the environment seam: Search-R1's rewards are inspo.envs.search_r1.rewards (RewardSpec, em_reward, f1_reward, format_ok); exact_match, f1_score and normalize_answer are inspo.answers. See docs/your-own-agent.md")
