"""The recent HCCL/CANN logs of a node: the tails of the files written within a look-back window.

One scan for every command: ``npuwatch check`` looks back ``check.hccl_window`` (15 min),
``npuwatch diagnose`` two hours; ``npuwatch bundle`` copies the same files of its window
(``recent_logs``). How each file's lines become incidents is ``read_file``'s job: the classifier alone
by default; diagnose passes triage's log reader, which also keeps triage's records.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agent.health.readings import LogScan
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.hints import Hint
from collectors.hccl.tail import DEFAULT_GLOBS, LogTailer, split_complete_lines
from collectors.hccl.tail_io import open_regular

__all__ = ["DEFAULT_FILE_BYTES", "FileReader", "RecentLogs", "classify_file", "recent_logs", "scan_logs", "tail"]

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


@dataclass
class RecentLogs:
    """The log files written since a moment, as the agent finds them: newest first, each ``(mtime, size, path
    as found, real path)``; how many older ones were passed over, and what could not be looked at."""

    files: list[tuple[float, int, str, str]] = field(default_factory=list)
    older: int = 0
    problems: list[str] = field(default_factory=list)  # directories that could not be listed, files gone
    capped: str | None = None  # why the walk stopped early
    roots_exist: bool = False


def recent_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, since: float) -> RecentLogs:
    """The log files of ``npuwatch check``, ``diagnose`` and ``bundle``: the CANN layout plus the operator's
    job-log globs and the kernel log, found as the agent finds them (``collectors.hccl.tail``), modified at
    ``since`` or later."""
    tailer = LogTailer(list(paths), (*DEFAULT_GLOBS, *globs), kernel_log, None)
    found = RecentLogs(roots_exist=tailer.roots_exist())
    for path, real in tailer.discover():
        try:
            info = os.stat(real)
        except OSError as exc:
            found.problems.append(f"{path}: {exc.strerror or exc}")
            continue
        if info.st_mtime >= since:
            found.files.append((info.st_mtime, info.st_size, path, real))
        else:
            found.older += 1
    found.problems.extend(tailer.read_errors)
    found.capped = tailer.discovery_capped
    found.files.sort(reverse=True)  # newest first: a byte budget goes to what matters
    return found


def scan_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *, window_s: float,
              byte_budget: int, per_file_bytes: int = DEFAULT_FILE_BYTES, now: float | None = None,
              read_file: FileReader = classify_file) -> LogScan:
    """Read the tail of every log file written within ``window_s`` (newest files first).

    At most ``per_file_bytes`` from the end of each file and ``byte_budget`` in all; events and hints
    older than the window (by their own timestamps) are dropped. A directory that could not be listed and
    a walk cut short are errors of the scan.
    """
    now = time.time() if now is None else now
    cutoff = now - window_s
    recent = recent_logs(paths, globs, kernel_log, cutoff)
    scan = LogScan(window_s=window_s, roots=[str(p) for p in paths], roots_exist=recent.roots_exist,
                   missing_roots=[str(p) for p in paths if not os.path.exists(p)], older_files=recent.older,
                   errors=[*recent.problems, *([recent.capped] if recent.capped else [])])
    budget = byte_budget
    for mtime, _size, path, _real in recent.files:
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
    with os.fdopen(open_regular(path), "rb") as handle:  # a path swapped for a FIFO must not hang the check
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read(limit)
    if start > 0:  # began mid-line: drop the fragment
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline >= 0 else b""
    return data
