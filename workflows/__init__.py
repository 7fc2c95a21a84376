"""The engine's deterministic workflow code, the agent SDK (``sdk``) and the example
agents (``agents``)."""
