"""The log tailer recognises what it has already read under another name or in place (issue 41, item
10): a copytruncate copy that matches the glob continues from the offset read in the original, and a
file truncated and rewritten before the next poll is read again from 0 even when its first 256 bytes
did not change."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from collectors.hccl.collector import HcclLogCollector
from collectors.hccl.tail import HEAD_BYTES, LogTailer
from tests.support.plog_files import NOW, plog_dir, write

HEADER = "".join(f"[INFO] HCCL(1,python):2026-01-01-00:00:00.000.000 [init.cc:1] starting line {n:02d}\n"
                 for n in range(5))
EI0002 = "EI0002: [PID: 1] 2026-01-01-{h:02d}:00:00.000.000 The wait execution of the Notify register times out. " \
         "remote rank [3].\n"
ERRORS = (("code", "EI0002"), ("category", "exec_timeout"))




def new_tailer(root: Path, state: Path | None = None) -> LogTailer:
    return LogTailer([root], None, None, state, clock=lambda: NOW)


def lines_of(tailer: LogTailer) -> list[str]:
    return [line for chunk in tailer.poll() for line in chunk.lines]


def copytruncate(log: Path, dated: Path) -> None:
    shutil.copyfile(log, dated)  # logrotate's copytruncate: copy, then truncate the original in place
    os.truncate(log, 0)
    for path in (log, dated):  # both written just now
        os.utime(path, (NOW, NOW))


def test_a_copytruncate_copy_matching_the_glob_is_not_read_again(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    log = root / "debug/plog/plog-1.log"
    write(log, HEADER + "a\nb\n")
    tailer = new_tailer(root)
    assert lines_of(tailer)[-2:] == ["a", "b"]
    write(log, "c\n")  # written after the poll, before the rotation: read once, from the copy
    copytruncate(log, root / "debug/plog/plog-1.20261207.log")
    write(log, "d\n")
    assert sorted(lines_of(tailer)) == ["c", "d"]
    assert lines_of(tailer) == []


def test_a_copy_is_recognised_after_a_restart_from_the_state_file(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    state = tmp_path / "state.json"
    log = root / "debug/plog/plog-1.log"
    write(log, HEADER + "a\n")
    first = new_tailer(root, state)
    assert lines_of(first)[-1] == "a"
    assert first.commit()
    copytruncate(log, root / "debug/plog/plog-1.20261207.log")
    write(log, "b\n")
    assert lines_of(new_tailer(root, state)) == ["b"]


def test_a_copy_of_a_small_file_inside_the_head_is_recognised(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    log = root / "debug/plog/plog-1.log"
    write(log, "a\n")
    tailer = new_tailer(root)
    assert lines_of(tailer) == ["a"]
    copytruncate(log, root / "debug/plog/plog-1.old.log")
    assert lines_of(tailer) == []


def test_a_new_file_that_only_starts_like_a_followed_one_is_read_whole(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    write(root / "debug/plog/plog-1.log", HEADER + "a\n")
    tailer = new_tailer(root)
    lines_of(tailer)
    write(root / "debug/plog/plog-2.log", HEADER + "b\n")  # same head, other content where we stopped
    assert lines_of(tailer) == [*HEADER.splitlines(), "b"]


def test_five_incidents_rotated_by_copytruncate_are_counted_five_times(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    log = root / "debug/plog/plog-1.log"
    collector = HcclLogCollector([root], None, None, tmp_path / "state.json", clock=lambda: NOW)
    write(log, HEADER + "".join(EI0002.format(h=n) for n in range(3)))
    collector.collect()
    write(log, "".join(EI0002.format(h=n) for n in range(3, 5)))
    copytruncate(log, root / "debug/plog/plog-1.log.20261207.log")
    samples = collector.collect()
    assert {s.labels: s.value for s in samples if s.metric == "npu_hccl_errors_total"}[ERRORS] == 5


def test_a_file_truncated_and_rewritten_with_the_same_head_is_read_from_0(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    log = root / "debug/plog/plog-1.log"
    assert len(HEADER) > HEAD_BYTES
    write(log, HEADER + "old 1\nold 2\n")
    tailer = new_tailer(root)
    lines_of(tailer)
    write(log, HEADER + "new 1\nnew 2\nnew 3\nnew 4\n", mode="w")  # truncated, rewritten before the poll
    chunks = list(tailer.poll())
    assert chunks[0].restarted
    assert [line for chunk in chunks for line in chunk.lines] == [*HEADER.splitlines(), "new 1", "new 2", "new 3",
                                                                  "new 4"]


def test_a_file_that_shrank_since_the_last_poll_restarts_even_above_the_offset(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    log = root / "debug/plog/plog-1.log"
    write(log, HEADER + "a\n" + "p" * 100)  # a partial last line: the offset stops before it
    tailer = new_tailer(root)
    lines_of(tailer)
    write(log, HEADER + "a\nb\n", mode="w")  # shorter than before, longer than the offset
    chunks = list(tailer.poll())
    assert chunks and chunks[0].restarted
    assert [line for chunk in chunks for line in chunk.lines][-2:] == ["a", "b"]


def test_three_of_eleven_incidents_rewritten_in_place_are_all_counted(tmp_path: Path) -> None:
    root = plog_dir(tmp_path)
    log = root / "debug/plog/plog-1.log"
    collector = HcclLogCollector([root], None, None, None, clock=lambda: NOW)
    write(log, HEADER + "".join(EI0002.format(h=n) for n in range(8)))
    collector.collect()
    # Truncated and rewritten: the same header, 3 new incidents (hours later) then more lines.
    write(log, HEADER + "".join(EI0002.format(h=n) for n in range(10, 13))
          + "x" * 600 + "\n", mode="w")
    samples = collector.collect()
    assert {s.labels: s.value for s in samples if s.metric == "npu_hccl_errors_total"}[ERRORS] == 11
