"""A CANN log directory for the tailer's tests: its plog folder, and lines appended at a fixed time."""

from __future__ import annotations

import os
from pathlib import Path

NOW = 1_800_000_000.0  # the tests' clock, and every file's mtime


def plog_dir(tmp_path: Path) -> Path:
    """``<tmp>/ascend/log`` with its ``debug/plog`` folder made."""
    root = tmp_path / "ascend" / "log"
    (root / "debug" / "plog").mkdir(parents=True)
    return root


def write(path: Path, text: str, mode: str = "a") -> None:
    """``text`` written to ``path`` (appended by default), its mtime set to ``NOW``."""
    with path.open(mode, encoding="utf-8") as handle:
        handle.write(text)
    os.utime(path, (NOW, NOW))
