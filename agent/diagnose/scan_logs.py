"""``npuwatch scan-logs PATH... [--json]``: one-shot HCCL / CANN error scan of log files.

PATH may be a file or a directory (read recursively); ``.gz`` files are decompressed on the fly.
Plogs, device logs, training job stdout/stderr (Ray and torchrun prefixes included) and kernel log
dumps can be mixed. Each file is one stream for incident dedup (see ``collectors.hccl_classify``).
Files whose first 8 KiB hold a NUL byte are treated as binary and skipped.

Output: files scanned, the first error (the earliest timestamped one; without any timestamps the
first one read), the time range of the errors, counts per category and per code, and the culprit
hints (peers, ranks, devices the logs blame), most frequent first. ``--json`` prints one object
with ``files``, ``counts_by_category``, ``counts_by_code``, ``first_error``, ``time_range``,
``hints``, ``events_total``, ``lines``, ``bytes`` and ``errors``.

Exit status: 0 no error found, 1 errors found, 2 some input could not be read (missing path,
permission, corrupt gzip) - 2 wins over 1 because the scan is incomplete; the results for the
readable inputs are still printed.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import time
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from collectors.hccl_classify import Event, Hint, StreamClassifier
from collectors.hccl_tail import iter_line_batches

__all__ = ["EXIT_ERRORS", "EXIT_OK", "EXIT_UNREADABLE", "ScanReport", "main", "scan_paths"]

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_UNREADABLE = 2
BINARY_PROBE = 8192


@dataclass
class FileResult:
    path: str
    lines: int = 0
    bytes: int = 0
    events: int = 0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "lines": self.lines, "bytes": self.bytes, "events": self.events,
                "error": self.error}


@dataclass
class ScanReport:
    """Aggregates of a scan; holds no per-line data, so any amount of logs fits."""

    files: list[FileResult] = field(default_factory=list)
    by_category: Counter[str] = field(default_factory=Counter)
    by_code: Counter[str] = field(default_factory=Counter)
    code_category: dict[str, str] = field(default_factory=dict)
    hints: Counter[tuple[str, str]] = field(default_factory=Counter)
    first_error: Event | None = None
    first_in_order: Event | None = None
    earliest: float | None = None
    latest: float | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def events_total(self) -> int:
        return sum(self.by_code.values())

    def add(self, event: Event) -> None:
        self.by_category[event.category] += 1
        self.by_code[event.code] += 1
        self.code_category.setdefault(event.code, event.category)
        if self.first_in_order is None:
            self.first_in_order = event
        ts = event.timestamp
        if ts is None:
            return
        if self.earliest is None or ts < self.earliest:
            self.earliest = ts
            self.first_error = event
        if self.latest is None or ts > self.latest:
            self.latest = ts

    def add_hint(self, hint: Hint) -> None:
        self.hints[(hint.kind, hint.value)] += 1

    @property
    def first(self) -> Event | None:
        return self.first_error if self.first_error is not None else self.first_in_order

    def to_dict(self) -> dict[str, Any]:
        first = self.first
        return {
            "files": [f.to_dict() for f in self.files],
            "lines": sum(f.lines for f in self.files),
            "bytes": sum(f.bytes for f in self.files),
            "events_total": self.events_total,
            "counts_by_category": dict(self.by_category.most_common()),
            "counts_by_code": dict(self.by_code.most_common()),
            "code_categories": dict(sorted(self.code_category.items())),
            "first_error": first.to_dict() if first is not None else None,
            "time_range": None if self.earliest is None else {
                "start": self.earliest, "end": self.latest,
                "start_iso": _iso(self.earliest), "end_iso": _iso(self.latest)},
            "hints": [{"kind": kind, "value": value, "count": count}
                      for (kind, value), count in self.hints.most_common()],
            "errors": list(self.errors),
        }


def _iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))


def _expand(paths: list[str], report: ScanReport) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for root, dirs, names in os.walk(path, onerror=lambda exc: report.errors.append(str(exc))):
                dirs.sort()
                for name in sorted(names):
                    candidate = Path(root) / name
                    if candidate.is_file():
                        yield candidate
        elif path.is_file():
            yield path
        else:
            report.errors.append(f"{raw}: no such file or directory")


def _open(path: Path) -> BinaryIO:
    if path.suffix == ".gz":
        return cast(BinaryIO, gzip.open(path, "rb"))
    return path.open("rb")


def _scan_file(path: Path, report: ScanReport) -> None:
    result = FileResult(str(path))
    report.files.append(result)
    try:
        ref_time = path.stat().st_mtime
        with _open(path) as stream:
            head = stream.read(BINARY_PROBE)
            if b"\0" in head:
                result.error = "binary file skipped"
                return
            classifier = StreamClassifier(source=str(path), ref_time=ref_time)
            for lines in iter_line_batches(_Rejoin(head, stream).read):
                result.lines += len(lines)
                result.bytes += sum(len(line) + 1 for line in lines)
                # A block split across batches is judged whole: flush only after the last batch.
                events, hints = classifier.feed_lines(lines, flush=False)
                _count(report, result, events, hints)
            _count(report, result, classifier.flush(), ())
    except (OSError, EOFError, zlib.error) as exc:
        result.error = f"unreadable: {exc}"
        report.errors.append(f"{path}: {exc}")


def _count(report: ScanReport, result: FileResult, events: Sequence[Event], hints: Sequence[Hint]) -> None:
    for event in events:
        report.add(event)
    for hint in hints:
        report.add_hint(hint)
    result.events += len(events)


class _Rejoin:
    """A read() that first returns the bytes already taken for the binary probe."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        if self._head:
            data, self._head = self._head, b""
            return data
        return self._stream.read(size)


def scan_paths(paths: list[str]) -> ScanReport:
    """Scan files and directories; never raises for unreadable input (see ``errors``)."""
    report = ScanReport()
    for path in _expand(paths, report):
        _scan_file(path, report)
    return report


def _format_event(event: Event) -> str:
    when = _iso(event.timestamp) or "(no timestamp)"
    return f"{when}  {event.code} [{event.category}]  {event.source}:{event.line_no}\n    {event.text}"


def render_text(report: ScanReport) -> str:
    out: list[str] = []
    files = report.files
    out.append(f"scanned {len(files)} file(s), {sum(f.lines for f in files)} lines, "
               f"{sum(f.bytes for f in files)} bytes")
    if report.events_total == 0:
        out.append("no HCCL/CANN errors found")
    else:
        first = report.first
        assert first is not None
        out.append(f"{report.events_total} error incident(s)")
        out.append("first error: " + _format_event(first))
        if report.earliest is not None:
            out.append(f"time range: {_iso(report.earliest)} .. {_iso(report.latest)}")
        out.append("by category:")
        out.extend(f"  {cat:<22}{n:>6}" for cat, n in report.by_category.most_common())
        out.append("by code:")
        out.extend(f"  {code:<22}{n:>6}  {report.code_category[code]}"
                   for code, n in report.by_code.most_common())
    if report.hints:
        out.append("culprit hints:")
        out.extend(f"  {kind:<20}{value:<28} x{n}" for (kind, value), n in report.hints.most_common(20))
    for error in report.errors:
        out.append(f"error: {error}")
    return "\n".join(out) + "\n"


def main(paths: list[str], as_json: bool, out: IO[str] = sys.stdout) -> int:
    """Run the scan and print it; the exit status (0 clean, 1 errors found, 2 unreadable input)."""
    report = scan_paths(paths)
    if as_json:
        json.dump(report.to_dict(), out, indent=2, sort_keys=False)
        out.write("\n")
    else:
        out.write(render_text(report))
    if report.errors:
        return EXIT_UNREADABLE
    return EXIT_ERRORS if report.events_total else EXIT_OK
