"""The recent HCCL/CANN logs of a node: the tails of the files written within a look-back window.

One scan for every command: ``npuwatch check`` looks back ``check.hccl_window`` (15 min),
``npuwatch diagnose`` two hours. How each file's lines become incidents is ``read_file``'s job: the
classifier alone by default; diagnose passes triage's log reader, which also keeps triage's records.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import Protocol

from agent.health.readings import LogScan
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.hints import Hint
from collectors.hccl.tail import DEFAULT_GLOBS, LogTailer, split_complete_lines

__all__ = ["DEFAULT_FILE_BYTES", "FileReader", "classify_file", "scan_logs", "tail"]

DEFAULT_FILE_BYTES = 8 << 20  # per file: a few hours of a busy plog
_MAX_LINE = 64 << 10


class FileReader(Protocol):
    """Turns the tail of one log file (from a line start) into its incidents and culprit hints."""

    def __call__(self, path: str, mtime: float, data: bytes) -> tuple[Sequence[Event], Sequence[Hint]]:
        ...


def classify_file(path: str, mtime: float, data: bytes) -> tuple[Sequence[Event], Sequence[Hint]]:
    """The HCCL classifier over the file's lines (a last line without its newline counts too)."""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    lines, _ = split_complete_lines(data, _MAX_LINE)
    events, hints = StreamClassifier(source=path, ref_time=mtime).feed_lines(lines)
    return events, hints


def scan_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *, window_s: float,
              byte_budget: int, per_file_bytes: int = DEFAULT_FILE_BYTES, now: float | None = None,
              read_file: FileReader = classify_file) -> LogScan:
    """Read the tail of every log file written within ``window_s`` (newest files first).

    At most ``per_file_bytes`` from the end of each file and ``byte_budget`` in all; events and hints
    older than the window (by their own timestamps) are dropped.
    """
    now = time.time() if now is None else now
    cutoff = now - window_s
    # the CANN layout plus the operator's job-log globs, as the agent reads them
    tailer = LogTailer(list(paths), (*DEFAULT_GLOBS, *globs), kernel_log, None)
    scan = LogScan(window_s=window_s, roots=[str(p) for p in paths], roots_exist=tailer.roots_exist(),
                   missing_roots=[str(p) for p in paths if not os.path.exists(p)])
    recent: list[tuple[float, str]] = []
    for path, real in tailer.discover():
        with contextlib.suppress(OSError):
            mtime = os.stat(real).st_mtime
            if mtime >= cutoff:
                recent.append((mtime, path))
            else:
                scan.older_files += 1
    budget = byte_budget
    for mtime, path in sorted(recent, reverse=True):  # newest first: the budget goes to what matters
        if budget <= 0:
            scan.errors.append(f"byte budget spent; {path} and older files not read")
            break
        try:
            data = tail(path, min(per_file_bytes, budget))
        except OSError as exc:
            scan.errors.append(f"{path}: {exc.strerror or exc}")
            continue
        budget -= len(data)
        scan.files += 1
        scan.bytes_read += len(data)
        events, hints = read_file(path, mtime, data)
        scan.events.extend(e for e in events if e.timestamp is None or e.timestamp >= cutoff)
        scan.hints.update((h.kind, h.value) for h in hints if h.timestamp is None or h.timestamp >= cutoff)
    return scan


def tail(path: str, limit: int) -> bytes:
    """The last ``limit`` bytes of a file, from a line start (a fragment at the cut is dropped)."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read(limit)
    if start > 0:  # began mid-line: drop the fragment
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline >= 0 else b""
    return data
