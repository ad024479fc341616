"""Agents: the Agent base and the value-based algorithms built on it."""
