"""Unit tier: pure functions and in-process objects; no subprocess, server, agent or torch worker."""
