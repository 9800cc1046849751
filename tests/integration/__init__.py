"""Integration tier: real subprocesses, agents, HTTP servers, torch workers, promtool."""
