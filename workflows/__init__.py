"""Deterministic workflow code: the thread workflow, the agents it runs, and its models."""
