"""ruff over the whole repository (config in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig

from tests.support.paths import REPO


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff", path=sysconfig.get_path("scripts")) or shutil.which("ruff")
    assert ruff, "ruff missing: pip install -e '.[test]'"
    result = subprocess.run([ruff, "check", "--no-cache", str(REPO)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    mypy = shutil.which("mypy", path=sysconfig.get_path("scripts")) or shutil.which("mypy")
    assert mypy, "mypy missing: pip install -e '.[test]'"
    # What runs on the nodes is checked for their oldest Python (pyproject: python_version 3.9); the
    # dashboard generator runs on a developer's machine, with the newest grafana-foundation-sdk.
    for argv in (["agent", "collectors"], ["--python-version", "3.11", "dashboards"]):
        result = subprocess.run([mypy, "--no-incremental", *argv], capture_output=True, text=True, timeout=600,
                                cwd=REPO)
        assert result.returncode == 0, result.stdout + result.stderr
