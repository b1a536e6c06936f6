"""inspo.core"""
