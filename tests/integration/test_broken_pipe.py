"""`npuwatch ... | head`: a reader that goes away ends the command quietly (no traceback), as SIGPIPE would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import paths

FIXTURES = paths.FIXTURES / "hccl_logs"


def run_with_closed_stdout(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write fails with EPIPE
    try:
        return subprocess.run([sys.executable, "-m", "agent", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(FIXTURES.parents[2])})
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [
    ["scan-logs", str(FIXTURES)],
    ["scan-logs", "--json", str(FIXTURES)],
    ["check-config", "/dev/null"],
])
def test_a_closed_stdout_ends_quietly(argv: list[str], tmp_path: Path) -> None:
    result = run_with_closed_stdout(argv, tmp_path)
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    assert b"BrokenPipeError" not in result.stderr
    assert result.returncode == 141


def test_once_on_the_demo_ends_quietly(tmp_path: Path) -> None:
    result = run_with_closed_stdout(["once", "--demo", "--demo-dir", str(tmp_path / "demo")], tmp_path)
    assert b"Traceback" not in result.stderr, result.stderr.decode()[-2000:]
    assert result.returncode == 141
