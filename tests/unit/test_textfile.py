"""Textfile mode's atomic writes for node_exporter, in process.

A demo agent writing through a full or read-only disk: tests/integration/test_textfile.py.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pytest

from agent.core.textfile import TextfileError, TextfileWriter


def no_space(*_args: object) -> None:
    raise OSError(28, "No space left on device")


def test_a_failed_write_empties_the_old_file_so_no_stale_value_is_served(tmp_path: Path) -> None:
    """Full disk: node_exporter must not go on serving 61 C (and collector_up 1) for a chip at 97 C."""
    out = tmp_path / "textfile"
    out.mkdir()
    writer = TextfileWriter(out, lambda: b'npu_temperature_celsius{npu="0"} 61\n')
    writer.write()
    failing = TextfileWriter(out, lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(TextfileError, match="No space left on device; the old file was emptied") as raised:
        failing.write()
    assert raised.value.logged
    assert (out / "npuwatch.prom").read_text() == ""
    assert sorted(p.name for p in out.iterdir()) == ["npuwatch.prom"]


def test_a_run_of_failures_is_logged_once_and_leaves_the_emptied_file_to_age(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    writer = TextfileWriter(tmp_path, lambda: b"first 1\n")
    writer.write()
    monkeypatch.setattr(os, "fsync", no_space)
    caplog.set_level(logging.INFO, logger="agent.core.textfile")
    with pytest.raises(TextfileError):
        writer.write()
    os.utime(tmp_path / "npuwatch.prom", (1000.0, 1000.0))
    for _ in range(3):
        with pytest.raises(TextfileError, match="the file is empty"):
            writer.write()
    # Emptied once: its mtime stays where it was, so node_textfile_mtime_seconds ages (NPUWatchTextfileStale).
    assert (tmp_path / "npuwatch.prom").stat().st_mtime == 1000.0
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    monkeypatch.undo()
    writer.write()
    assert (tmp_path / "npuwatch.prom").read_text() == "first 1\n"
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    assert "is written again" in caplog.records[-1].getMessage()


def test_a_file_that_cannot_be_emptied_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = TextfileWriter(tmp_path, lambda: b"first 1\n")
    writer.write()
    monkeypatch.setattr(os, "fsync", no_space)
    monkeypatch.setattr(os, "truncate", no_space)
    with pytest.raises(TextfileError, match="the old file was removed"):
        writer.write()
    assert not (tmp_path / "npuwatch.prom").exists()


def test_a_file_that_can_be_neither_emptied_nor_removed_is_said_to_be_stale(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = TextfileWriter(tmp_path, lambda: b"first 1\n")
    writer.write()

    def read_only(*_args: object) -> None:
        raise OSError(30, "Read-only file system")

    for name in ("fsync", "truncate", "unlink"):
        monkeypatch.setattr(os, name, read_only)
    with pytest.raises(TextfileError, match=r"neither emptied .* nor removed .*: node_exporter goes on serving"):
        writer.write()


def test_stop_empties_the_file_and_no_write_comes_after(tmp_path: Path) -> None:
    writer = TextfileWriter(tmp_path, lambda: b"first 1\n")
    writer.write()
    writer.close()
    assert (tmp_path / "npuwatch.prom").read_text() == ""
    assert writer.write() == []  # a write the scheduler had started: it leaves the file empty
    assert (tmp_path / "npuwatch.prom").read_text() == ""


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

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError, match="No space"):
        TextfileWriter(tmp_path, lambda: b"second 2\n").write()
    assert (tmp_path / "npuwatch.prom").read_text() == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["npuwatch.prom"]  # the temp file is gone


def test_stop_does_not_wait_for_a_write_stuck_on_the_disk(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    def stuck() -> bytes:
        entered.set()
        release.wait(10)
        return b"late 1\n"

    writer = TextfileWriter(tmp_path, lambda: b"first 1\n")
    writer.write()
    writer._render = stuck  # type: ignore[method-assign]
    thread = threading.Thread(target=writer.write)
    thread.start()
    assert entered.wait(5)
    started = time.monotonic()
    writer.close()
    assert time.monotonic() - started < 5
    assert (tmp_path / "npuwatch.prom").read_text() == ""
    release.set()
    thread.join(5)
    assert (tmp_path / "npuwatch.prom").read_text() == ""  # the late write left nothing behind
