"""The suite's tiers: one directory each under tests/ (docs/development.md, "Test layout")."""

from __future__ import annotations

from pathlib import Path

from tests.support.paths import TESTS

TIERS = ("unit", "integration", "e2e", "conformance")
# No subprocess, fork or listening socket here (tests/conftest.py refuses them): the edit-test loop.
FAST_TIERS = ("unit", "conformance")


class StartsSomething(AssertionError):
    """A test of a fast tier started a process or a server: it belongs in tests/integration."""


def tier_of(path: Path) -> str | None:
    """The tier directory a test module sits in (None: outside every tier)."""
    try:
        first = path.resolve().relative_to(TESTS).parts[0]
    except (ValueError, IndexError):
        return None
    return first if first in TIERS else None
