"""Textfile mode: atomic writes for node_exporter; a full or read-only disk never stops the agent."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from tests.support.agent_harness import demo_bundle


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


def test_a_full_disk_empties_the_file_and_the_agent_says_so_in_its_own_metrics(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "textfile"
    out.mkdir()
    bundle = demo_bundle(tmp_path, {"textfile": {"enabled": True, "directory": str(out)}})
    try:
        bundle.agent.collect_once()
        bundle.agent.collect_once()
        assert "npu_temperature_celsius{" in (out / "npuwatch.prom").read_text()

        def no_space(*_args: object, **_kwargs: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(tempfile, "mkstemp", no_space)
        bundle.agent.collect_once()
        assert (out / "npuwatch.prom").read_text() == ""  # nothing stale for node_exporter to serve
        body = bundle.agent.cache.render().body.decode()
        assert 'npuwatch_collector_up{collector="textfile"} 0.0' in body
        monkeypatch.undo()
        bundle.agent.collect_once()
        assert "npu_temperature_celsius{" in (out / "npuwatch.prom").read_text()
    finally:
        bundle.agent.stop()
    assert (out / "npuwatch.prom").read_text() == ""  # a stopped agent leaves no values behind
