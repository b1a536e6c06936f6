"""Other instruction optimizers run on inspo's agent, for side-by-side comparisons."""
