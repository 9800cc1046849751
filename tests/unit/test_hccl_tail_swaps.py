"""The log tailer when the files under it change identity: a path swapped for a FIFO (or another
file) between the stat and the open never blocks a scan (issue 41, item 3)."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from collectors.hccl import tail_io
from collectors.hccl.tail import LogTailer
from tests.support.plog_files import NOW, write
from tests.support.plog_files import plog_dir as plog_root


def new_tailer(root: Path) -> LogTailer:
    return LogTailer([root], clock=lambda: NOW)


def poll_within(tailer: LogTailer, fifo: Path, seconds: float = 5.0) -> list[str]:
    """The lines of one poll; a poll still running after ``seconds`` is unblocked and fails the test."""
    result: list[str] = []
    worker = threading.Thread(target=lambda: result.extend(line for c in tailer.poll() for line in c.lines),
                              daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):  # a writer that leaves at once: EOF
            pass
        worker.join(5)
        pytest.fail("the scan blocked on a FIFO swapped in for a log file")
    return result


def to_fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def swap_after_stat(monkeypatch: pytest.MonkeyPatch, target: Path, swap: Callable[[Path], None],
                    nth: int = 1) -> None:
    """Swap ``target`` just after the ``nth`` stat of it that says it is a regular file: the race
    (a poll stats a file when it finds it, then again to read its size)."""
    real_stat = os.stat
    seen = []

    def racing_stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        info = real_stat(path, *args, **kwargs)  # type: ignore[arg-type]
        if os.fspath(path) == str(target) and stat.S_ISREG(info.st_mode):  # type: ignore[arg-type]
            seen.append(True)
            if len(seen) == nth:
                swap(target)
        return info

    monkeypatch.setattr(os, "stat", racing_stat)


@pytest.mark.parametrize("nth", [1, 2])
def test_a_new_file_swapped_for_a_fifo_after_its_stat_is_a_problem_not_a_hang(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    root = plog_root(tmp_path)
    log = root / "debug/plog/plog-1.log"
    write(log, "one\n")
    tailer = new_tailer(root)
    swap_after_stat(monkeypatch, log, to_fifo, nth)
    assert poll_within(tailer, log) == []
    assert len(tailer.read_errors) == 1 and "FIFO" in tailer.read_errors[0], tailer.read_errors
    monkeypatch.undo()
    log.unlink()
    write(log, "two\n")
    assert poll_within(tailer, log) == ["two"]
    assert tailer.read_errors == []


@pytest.mark.parametrize("nth", [1, 2])
def test_a_followed_file_swapped_for_a_fifo_is_a_problem_and_the_next_scan_reads(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    root = plog_root(tmp_path)
    log = root / "debug/plog/plog-1.log"
    write(log, "one\n")
    tailer = new_tailer(root)
    assert poll_within(tailer, log) == ["one"]
    write(log, "two\n")
    swap_after_stat(monkeypatch, log, to_fifo, nth)
    assert poll_within(tailer, log) == []
    assert any("FIFO" in error for error in tailer.read_errors), tailer.read_errors
    monkeypatch.undo()
    log.unlink()
    write(log, "three\n")
    assert poll_within(tailer, log) == ["three"]
    assert tailer.read_errors == []


def test_a_file_swapped_for_another_between_stat_and_open_is_read_next_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = plog_root(tmp_path)
    log = root / "debug/plog/plog-1.log"
    write(log, "one\n")
    tailer = new_tailer(root)

    def replace(path: Path) -> None:
        other = path.with_name("other")
        write(other, "replaced\n")
        os.replace(other, path)

    swap_after_stat(monkeypatch, log, replace, nth=2)
    assert poll_within(tailer, log) == []
    assert any("replaced by another file" in error for error in tailer.read_errors), tailer.read_errors
    monkeypatch.undo()
    assert poll_within(tailer, log) == ["replaced"]


def test_open_regular_refuses_a_fifo_a_directory_and_a_symlink(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "target")
    (tmp_path / "target").write_text("x\n")
    for path, words in ((fifo, "a FIFO"), (tmp_path, "a directory"), (link, "symlink")):
        with pytest.raises(tail_io.NotRegular, match=words):
            tail_io.open_regular(str(path))
    fd = tail_io.open_regular(str(tmp_path / "target"))
    try:
        assert tail_io.read_at(fd, 10, 0) == b"x\n"
    finally:
        os.close(fd)
