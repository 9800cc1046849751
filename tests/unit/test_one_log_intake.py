"""One log intake: ``scan-logs`` and ``triage`` take in the same directory as the same files and the same
problems, and agree on whether anything was read (``agent.health.log_files``); ``check``/``diagnose`` and
``bundle`` find the same files of their window (``agent.health.logscan.recent_logs``).

The directory holds what a log directory collects: a plain log, a rotated gzip without ``.gz`` in its name,
a corrupt gzip, a core dump, the gzip of a core dump, a file that cannot be opened, a symlink inside and one
out of the directory, a hidden file and a file nested two levels down.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import build_config
from agent.diagnose.scan_logs import scan_paths, verdict
from agent.health import log_files, logscan
from agent.health.log_files import BINARY_SKIPPED, Content, Limits
from agent.triage.bundle import BundleOptions, _logs, _Manifest, _Writer
from agent.triage.engine import analyze
from agent.triage.inputs import read_input
from collectors import log_walk

FAILED = (b"[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.000 [t.cc:1] [7]Task run failed, groupRank information is "
          b"group:[G], user define information[], rankSize[2], rankId[%d].\n")
UNOPENABLE = "secret.log"


@pytest.fixture
def unopenable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The intake cannot open ``secret.log`` (the tests run as root, where a mode of 000 does not stop a read)."""
    real = os.open

    def refusing(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith(UNOPENABLE):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(log_files.os, "open", refusing)


def mixed(root: Path) -> Path:
    node = root / "node-q"
    (node / "deep" / "er").mkdir(parents=True)
    (node / "plain.log").write_bytes(FAILED % 0)
    (node / "plog.1").write_bytes(gzip.compress(FAILED % 1))  # logrotate's name: gzip told by content
    (node / "broken.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (node / "core").write_bytes(b"\x7fELF\x00\x00binary")
    (node / "core.gz").write_bytes(gzip.compress(b"\x7fELF\x00\x00binary"))
    (node / UNOPENABLE).write_bytes(FAILED % 0)
    (node / "alias.log").symlink_to(node / "plain.log")
    outside = root / "outside.log"
    outside.write_bytes(FAILED % 7)
    (node / "escape.log").symlink_to(outside)
    (node / ".hidden.log").write_bytes(FAILED % 5)
    (node / "deep" / "er" / "nested.log").write_bytes(FAILED % 1)
    return node


def test_the_same_directory_gives_the_same_files_and_problems(tmp_path: Path, unopenable: None) -> None:
    node = mixed(tmp_path)
    scan = scan_paths([str(node)])
    evidence = read_input(str(node))
    coverage = evidence.nodes["node-q"]
    assert sorted(scan.errors) == sorted(coverage.problems)
    assert sorted(problem.split(": ")[1] for problem in scan.errors) == [
        "Permission denied", "corrupt gzip", "symlink out of " + str(node) + " not followed"]
    read = sorted(Path(f.path).name for f in scan.files if f.error is None)
    assert read == [".hidden.log", "alias.log", "nested.log", "plain.log", "plog.1"]
    assert coverage.files == len(read)
    assert sorted(Path(f.path).name for f in scan.files if f.error == BINARY_SKIPPED) == ["core", "core.gz"]
    # the same lines read: one failure per plain, alias, rotated, nested and hidden log
    assert sorted(f.rank for f in evidence.failures) == [0, 0, 1, 1, 5]
    # scan-logs counts a failure once however many files copy it: plain.log and its alias, plog.1 and nested.log
    assert (scan.events_total, scan.copies) == (3, 2)
    # scan-logs cannot vouch for a directory it could not read whole; triage lists what it could not read
    assert verdict(scan).word == "UNKNOWN"
    assert sorted(analyze(evidence).problems) == sorted(f"node-q: {problem}" for problem in scan.errors)


@pytest.mark.parametrize("content", [None, b"\0\1binary"], ids=["empty", "binary-only"])
def test_nothing_read_is_unknown_to_both(tmp_path: Path, content: bytes | None) -> None:
    node = tmp_path / "node-e"
    node.mkdir()
    if content is not None:
        (node / "core").write_bytes(content)
    assert verdict(scan_paths([str(node)])).exit_code() == 3
    assert analyze(read_input(str(node))).exit_code == 3


def test_an_unreadable_file_and_nothing_found_is_unknown_to_both(tmp_path: Path, unopenable: None) -> None:
    node = tmp_path / "node-u"
    node.mkdir()
    (node / "clean.log").write_text("step 1 loss 0.5\n")
    (node / UNOPENABLE).write_text("step 1 loss 0.5\n")
    scan = scan_paths([str(node)])
    report = analyze(read_input(str(node)))
    assert verdict(scan).exit_code() == report.exit_code == 3
    assert report.verdict.endswith("but 1 problem reading the inputs")


def test_the_limits_count_what_a_gzip_holds(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.log"
    bomb.write_bytes(gzip.compress(b"[INFO] noise line that compresses very well\n" * 100_000))  # 4.4 MB, a few kB
    limits = Limits(member_bytes=1 << 20, input_bytes=1 << 30)
    scan = scan_paths([str(bomb)], limits=limits)
    assert scan.files[0].bytes <= (1 << 20) + 1  # + the newline a last partial line is counted with
    assert scan.errors == [f"{bomb}: only the first {1 << 20} bytes of its content read (a gzip holds more)"]
    evidence = read_input(str(bomb), limits)
    assert evidence.nodes[tmp_path.name].problems == scan.errors
    assert evidence.nodes[tmp_path.name].bytes <= (1 << 20) + 1


def test_content_reads_from_the_start_and_never_raises(tmp_path: Path) -> None:
    data = b"".join(b"line %d\n" % n for n in range(20_000))
    whole = gzip.compress(data)
    corrupt = whole[:len(whole) // 2]  # cut off: the stream ends before its end marker
    for raw, gzipped in ((data, False), (gzip.compress(data), True), (corrupt, True)):
        path = tmp_path / "x"
        path.write_bytes(raw)
        with path.open("rb") as handle:
            content = Content(handle, 1 << 30)
            assert content.gzipped is gzipped
            assert content.head == data[:len(content.head)] and content.head
            read = b"".join(iter(lambda: content.read(4096), b""))  # noqa: B023 - consumed in this turn
        assert data.startswith(read)
        assert (read == data) is (content.error is None)


# ----------------------------------------------------------------------------- the window's log files


def test_check_and_bundle_find_the_same_logs_and_the_same_problems(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """check's and diagnose's scan (``logscan.scan_logs``) and bundle take the window's files from one
    ``recent_logs``: the same files, and a log directory that cannot be listed is a problem to both."""
    root = tmp_path / "ascend" / "log"
    plog = root / "debug" / "plog"
    plog.mkdir(parents=True)
    (plog / "plog-1_1.log").write_bytes(FAILED % 0)
    (plog / "plog-2_1.log").write_bytes(FAILED % 1)
    old = plog / "plog-3_1.log"
    old.write_bytes(FAILED % 1)
    os.utime(old, (time.time() - 86_400, time.time() - 86_400))
    locked = root / "debug" / "device-0"
    locked.mkdir()
    real = os.scandir

    def refusing(path: Any = ".") -> Any:
        if str(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(log_walk.os, "scandir", refusing)
    since = time.time() - 3600
    scan = logscan.scan_logs([str(root)], [], None, window_s=3600, byte_budget=1 << 20)
    config = build_config({"collectors": {"hccl_logs": {"paths": [str(root)]}}, "web": {"port": 1}})
    manifest = _Manifest("node", time.time(), since)
    with tarfile.open(fileobj=io.BytesIO(), mode="w") as tar:
        _logs(_Writer(tar, "top", time.time(), manifest), config, BundleOptions(), since, lambda text: None)
    bundled = sorted(Path(entry["source"]).name for entry in manifest.included)
    assert bundled == ["plog-1_1.log", "plog-2_1.log"]
    assert scan.files == len(bundled) and scan.older_files == 1
    assert scan.errors == manifest.failed == [f"{locked}: permission denied"]


def test_a_fifo_named_or_found_is_not_waited_on(tmp_path: Path) -> None:
    node = tmp_path / "node-f"
    node.mkdir()
    os.mkfifo(node / "pipe")
    (node / "plain.log").write_bytes(FAILED % 0)
    scan = scan_paths([str(node), str(node / "pipe")])
    assert scan.errors == [f"{node / 'pipe'}: not a regular file"]  # the walk passes over it; named, it is a problem
    assert read_input(str(node / "pipe")).problems == [f"node-f: {node / 'pipe'}: not a regular file"]
