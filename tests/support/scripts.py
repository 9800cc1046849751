"""Executable shell scripts written into a test's directory: the fake tools of the tool-runner tests."""

from __future__ import annotations

import stat
from pathlib import Path

__all__ = ["shell_script"]


def shell_script(directory: Path, name: str, body: str) -> str:
    """``directory/name``, a ``#!/bin/sh`` script running ``body``, executable; its path."""
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
