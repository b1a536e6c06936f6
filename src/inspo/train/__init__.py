"""GRPO training with co-evolving instructions, on TRL (heavy imports stay inside functions)."""
