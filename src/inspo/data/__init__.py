"""inspo.data"""
