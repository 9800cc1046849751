"""The running agent: the Agent service (schedule, collect, serve) and how it is built from a config."""
