"""Textfile mode: atomic writes for node_exporter; a full or read-only disk never stops the agent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.core.textfile import TextfileWriter
from tests.agent_harness import demo_bundle


def test_agent_writes_the_exposition_atomically(tmp_path: Path) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    bundle = demo_bundle(tmp_path, {"textfile": {"enabled": True, "directory": str(out)}, "web": {"enabled": False}})
    bundle.agent.collect_once()
    bundle.agent.collect_once()  # the second pass writes the first pass's complete data
    text = (out / "npuwatch.prom").read_text()
    assert "npu_power_watts{" in text and 'npuwatch_collector_up{collector="textfile"} 1.0' in text
    assert [p.name for p in out.iterdir()] == ["npuwatch.prom"]  # no temp file left behind
    assert oct((out / "npuwatch.prom").stat().st_mode & 0o777) == "0o644"
    bundle.agent.stop()


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


def test_read_only_directory_is_an_error_on_the_collector_not_a_crash(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        # root ignores directory permissions; point at a path that cannot be a directory instead.
        target = tmp_path / "a-file"
        target.write_text("")
    else:
        target = tmp_path / "ro"
        target.mkdir()
        target.chmod(0o500)
    bundle = demo_bundle(tmp_path, {"textfile": {"enabled": True, "directory": str(target)}})
    bundle.agent.collect_once()
    snap = bundle.agent.store.get("textfile")
    assert snap is not None and not snap.ok and snap.errors["exit"] == 1
    assert bundle.agent.store.get("npu_smi_info").ok  # type: ignore[union-attr]
    bundle.agent.stop()


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
