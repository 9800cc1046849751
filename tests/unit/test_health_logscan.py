"""The one log scan (``agent.health.logscan``): the window is a parameter, newest files first within the
byte budget, tails from a line start; check's reader and diagnose's (triage's log reader) see the same."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from agent.diagnose.logs import scan_recent_logs
from agent.health.logscan import classify_file, scan_logs, tail

NOW = time.time()


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(at)) + ".123.456"


def timeout_block(at: float, rank: int = 5, peer: str = "29.7.0.15") -> str:
    """An HCCL execution timeout that blames a remote rank, as CANN writes it to a plog."""
    when = stamp(at)
    return (
        f"[ERROR] HCCL(4242,python3):{when} [task_exception_handler.cc:812] [4300]"
        f"[TaskExceptionHandler] Task from HCCL run failed.\n"
        f"EI0002: [PID: 4242] {when} The wait execution of the Notify register times out. Reason: "
        f"The Notify register has not received the Notify record from remote rank [{rank}].base "
        f"information: [streamID:[14], taskID[4], taskType[Notify Wait], tag[AllReduce_1].] task "
        f"information: [notify id:[0x1], stage:[ffffffff], remote rank:[{rank}].\n"
        f"[ERROR] HCCL(4242,python3):{when} [hccl_impl.cc:90] [4300]Cluster Exception "
        f"Location[IP/ID]:[{peer}/{rank}]\n"
    )


def plog(root: Path, name: str, text: str, mtime: float) -> Path:
    path = root / "debug" / "plog" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (mtime, mtime))
    return path


def scan(root: Path, window_s: float, byte_budget: int = 64 << 20, **kwargs: int) -> object:
    return scan_logs([str(root)], [], None, window_s=window_s, byte_budget=byte_budget, now=NOW, **kwargs)


def test_the_window_decides_which_files_are_read(tmp_path: Path) -> None:
    plog(tmp_path, "plog-1_old.log", timeout_block(NOW - 3600), NOW - 3600)
    plog(tmp_path, "plog-2_new.log", timeout_block(NOW - 60), NOW - 60)
    check_like = scan_logs([str(tmp_path)], [], None, window_s=900, byte_budget=1 << 20, now=NOW)
    assert (check_like.files, check_like.older_files) == (1, 1)
    assert check_like.by_category() == {"exec_timeout": 1}
    diagnose_like = scan_logs([str(tmp_path)], [], None, window_s=7200, byte_budget=1 << 20, now=NOW)
    assert (diagnose_like.files, diagnose_like.older_files) == (2, 0)
    assert diagnose_like.by_category() == {"exec_timeout": 2}
    assert diagnose_like.window_s == 7200 and diagnose_like.roots_exist and diagnose_like.missing_roots == []


def test_events_older_than_the_window_in_a_fresh_file_are_dropped(tmp_path: Path) -> None:
    plog(tmp_path, "plog-1_mixed.log", timeout_block(NOW - 3600, rank=1) + timeout_block(NOW - 60, rank=2), NOW)
    recent = scan_logs([str(tmp_path)], [], None, window_s=900, byte_budget=1 << 20, now=NOW)
    assert recent.files == 1 and len(recent.events) == 1
    assert all(event.timestamp is not None and event.timestamp >= NOW - 900 for event in recent.events)


def test_the_budget_goes_to_the_newest_files_first(tmp_path: Path) -> None:
    older = plog(tmp_path, "plog-1_older.log", timeout_block(NOW - 120), NOW - 120)
    newer = plog(tmp_path, "plog-2_newer.log", timeout_block(NOW - 60), NOW - 60)
    budget = newer.stat().st_size
    result = scan_logs([str(tmp_path)], [], None, window_s=900, byte_budget=budget, now=NOW)
    assert result.files == 1 and result.bytes_read == budget
    assert result.errors == [f"byte budget spent; {older} and older files not read"]


def test_a_tail_starts_at_a_line_start(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"first line\nsecond line\nthird")
    assert tail(str(path), 100) == b"first line\nsecond line\nthird"
    assert tail(str(path), 16) == b"third"  # "line\nthird" began mid-line: the fragment goes
    assert tail(str(path), 3) == b""


def test_a_log_swapped_for_a_fifo_is_an_error_of_the_scan_not_a_hang(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """check's log scan lists the files, then opens them: a FIFO put there in between is refused at once."""
    path = plog(tmp_path, "plog-1.log", timeout_block(NOW - 60), NOW - 60)
    real_stat = os.stat
    swapped: list[bool] = []

    def racing_stat(target: object, *args: object, **kwargs: object) -> os.stat_result:
        info = real_stat(target, *args, **kwargs)  # type: ignore[arg-type]
        if not swapped and os.fspath(target) == str(path):  # type: ignore[arg-type]
            swapped.append(True)
            path.unlink()
            os.mkfifo(path)
        return info

    monkeypatch.setattr(os, "stat", racing_stat)
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(scan(tmp_path, 3600)), daemon=True)
    worker.start()
    worker.join(5)
    monkeypatch.undo()
    if worker.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # unblock the hung open
        worker.join(5)
        raise AssertionError("the log scan blocked on a FIFO")
    assert swapped and any("FIFO" in error for error in done[0].errors), done  # type: ignore[attr-defined]


def test_the_per_file_limit_keeps_the_newest_lines(tmp_path: Path) -> None:
    text = timeout_block(NOW - 300, rank=1) + timeout_block(NOW - 60, rank=2)
    plog(tmp_path, "plog-1_two.log", text, NOW)
    last = len(timeout_block(NOW - 60, rank=2).encode())
    result = scan_logs([str(tmp_path)], [], None, window_s=900, byte_budget=1 << 20, per_file_bytes=last + 5,
                       now=NOW)
    assert len(result.events) == 1 and result.bytes_read == last
    assert result.hints  # the culprit named in the kept block


def test_a_last_line_without_its_newline_is_classified(tmp_path: Path) -> None:
    block = timeout_block(NOW - 60).rstrip("\n").encode()
    events, hints = classify_file("p.log", NOW, block)
    assert [event.category for event in events] == ["exec_timeout"]
    assert ("exception_location", "29.7.0.15/5") in {(hint.kind, hint.value) for hint in hints}  # the last line's


def test_check_and_diagnose_read_the_same_incidents_from_the_same_files(tmp_path: Path) -> None:
    plog(tmp_path, "plog-1_a.log", timeout_block(NOW - 200, rank=3, peer="29.7.0.13"), NOW - 200)
    plog(tmp_path, "plog-2_b.log", timeout_block(NOW - 100, rank=5), NOW - 100)
    for window in (900.0, 7200.0):
        check = scan_logs([str(tmp_path)], [], None, window_s=window, byte_budget=1 << 20, now=NOW)
        diagnose = scan_recent_logs([str(tmp_path)], [], None, window_s=window, byte_budget=1 << 20, now=NOW,
                                    node="n1")
        assert [(e.category, e.code, e.timestamp) for e in check.events] == \
               [(e.category, e.code, e.timestamp) for e in diagnose.events]
        assert check.hints == diagnose.hints and check.hints
        assert (check.files, check.bytes_read) == (diagnose.files, diagnose.bytes_read)
        assert check.evidence is None
        assert diagnose.evidence is not None and len(diagnose.evidence.failures) == 2
        assert diagnose.evidence.coverage("n1").inputs == [str(tmp_path)]
