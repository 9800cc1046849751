"""Handling levels with history: escalation of repeated and lasting error codes, the state file that keeps
that history across restarts, held manual separations and ``npuwatch faults``."""
