"""Probe runtime in the agent: worker supervision, scheduling job, lock, peak table, probe CLI."""
