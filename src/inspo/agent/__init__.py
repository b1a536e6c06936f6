"""inspo.agent"""
