"""Recovery: the pure recovery ladder and auto-resume policy, and the health agent
that applies them inside the daemon."""
