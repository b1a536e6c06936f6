"""Moved: ``inspo.agent.protocol`` is gone since the environment seam; Search-R1's tag protocol is inspo.envs.search_r1.protocol (SEARCH_R1_INSTRUCTION, parse_action, extract_answer, format_observation ...); build_prompt is inspo.envs.tagged.build_prompt; a prompt is now env.messages(instruction, question) rendered by the engine.

Importing this module raises ImportError with that message (inspo.agent keeps the policy engines).
"""

raise ImportError("inspo.agent.protocol moved with the environment seam: Search-R1's tag protocol is inspo.envs.search_r1.protocol (SEARCH_R1_INSTRUCTION, parse_action, extract_answer, format_observation ...); build_prompt is inspo.envs.tagged.build_prompt; a prompt is now env.messages(instruction, question) rendered by the engine. See docs/your-own-agent.md")
