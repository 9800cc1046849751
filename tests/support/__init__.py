"""Shared helpers of the test suite: harnesses (agents, Prometheus, web servers, torch jobs), golden-file
writers and the repository's paths. Test modules import from here, never from each other
(tests/unit/test_architecture.py holds that)."""
