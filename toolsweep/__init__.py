"""toolsweep: a distributed evaluation cluster for LLM tool-use agents, on Ray."""

__version__ = "0.1.0"
