"""A training run: the loop, its long-lived components, its state, resume and preflight checks."""
