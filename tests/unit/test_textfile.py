"""Textfile mode's atomic writes for node_exporter, in process.

A demo agent writing through a full or read-only disk: tests/integration/test_textfile.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.core.textfile import TextfileWriter


def test_failed_write_keeps_the_old_file_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    writer = TextfileWriter(out, lambda: b"first 1\n")
    writer.write()
    failing = TextfileWriter(out, lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError):
        failing.write()
    assert (out / "npuwatch.prom").read_text() == "first 1\n"
    assert sorted(p.name for p in out.iterdir()) == ["npuwatch.prom"]


def test_each_write_replaces_the_file_and_never_writes_into_it(tmp_path: Path) -> None:
    """Atomic = a new file renamed over the old one: a reader holding the old file sees it whole."""
    writer = TextfileWriter(tmp_path, lambda: b"generation 1\n")
    writer.write()
    held = tmp_path / "held-by-a-reader"
    os.link(tmp_path / "npuwatch.prom", held)  # the old inode, as node_exporter might hold it open
    before = (tmp_path / "npuwatch.prom").stat().st_ino
    TextfileWriter(tmp_path, lambda: b"generation 2\n").write()
    assert (tmp_path / "npuwatch.prom").read_text() == "generation 2\n"
    assert held.read_text() == "generation 1\n"  # written in place, the old inode would read generation 2
    assert (tmp_path / "npuwatch.prom").stat().st_ino != before


def test_a_write_that_fails_midway_removes_its_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = TextfileWriter(tmp_path, lambda: b"first 1\n")
    writer.write()

    def no_space(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        TextfileWriter(tmp_path, lambda: b"second 2\n").write()
    assert (tmp_path / "npuwatch.prom").read_text() == "first 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["npuwatch.prom"]  # the temp file is gone
