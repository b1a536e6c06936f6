"""inspo.llm"""
