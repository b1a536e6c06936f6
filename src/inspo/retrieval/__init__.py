"""inspo.retrieval"""
