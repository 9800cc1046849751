"""``npuwatch scan-logs PATH... [--json]``: one-shot HCCL / CANN error scan of log files.

PATH may be a file or a directory, read through the one intake triage reads with
(``agent.health.log_files``: the agent's bounded walk, symlinks out of a directory not followed, gzip told
by its content and decompressed within byte limits, files whose first 8 KiB hold a NUL byte skipped as
binary). Plogs, device logs, training job stdout/stderr (Ray and torchrun prefixes included) and kernel log
dumps can be mixed. Each file is one stream for incident dedup (see ``collectors.hccl.classify``); a failure
another file already counted (the job log's copy of a plog line, the screen's code for the plog's wording: same
category, process and second, ``collectors.hccl.copies``) counts once, under its printed code (``copies``).

Output: files scanned, the first error (the earliest timestamped one; without any timestamps the
first one read) with its ``path:line``, the time range of the errors, counts per category and per
code, the culprit hints (peers, ranks, devices the logs blame; most frequent first, each with the
``path:line`` places it was read at), then a verdict that leads with its severity word and says
what to do next. Inputs that could not be read are listed on stderr. ``--json`` prints one object
with ``files``, ``counts_by_category``, ``counts_by_code``, ``first_error``, ``time_range``,
``hints``, ``events_total``, ``copies``, ``lines``, ``bytes`` and ``errors``.

The verdict on errors found is the ``hccl_errors`` check's (``agent.health.checks_node``) over what was
read, led by ``agent.health.verdict.lead`` as ``check`` and ``diagnose`` lead it: a local fault the logs show
(a device that dropped out, an SDMA fault: FAIL; an OOM, an AI Core exception: WARN) with its kind as the
cause, else the errors with no local cause (``log_errors``, WARN); errors of the program or its
configuration alone (``program_error``, ``config_error``) leave the node fine (ok).

Exit status: the one policy of ``agent.health.status``, from the verdict: 0 no error found (or only errors of
the program or its configuration: the node is fine), 1 warn, 2 a fault of the node the logs show, 3 could
not tell: a scan that read nothing (an empty directory, binary files only) or one whose
inputs could not all be read (missing path, permission, corrupt gzip, a symlink out of a directory, a
byte limit; the results for the readable inputs are still printed). ``--json`` also carries the verdict
object every command prints.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from agent.core.humanize import duration, plural, size
from agent.core.printable import printable, printable_lines
from agent.core.terminal import Progress, Style, use_color
from agent.diagnose.advice import category_action, category_runbook
from agent.diagnose.render import verdict_lines
from agent.health.checks_node import check_hccl_errors
from agent.health.log_files import BINARY_SKIPPED, Intake, Limits, LogFile
from agent.health.readings import LogScan, NodeReadings, QuickReadings, Reading
from agent.health.settings import JudgeSettings
from agent.health.verdict import Verdict, lead
from agent.triage.timefmt import span, stamp
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.codes import PROGRAM_CATEGORIES
from collectors.hccl.copies import CopyFolder
from collectors.hccl.hints import Hint
from collectors.hccl.tail import iter_line_batches

__all__ = ["ScanReport", "main", "scan_paths", "verdict"]

SHOWN_PLACES = 3  # path:line places printed per culprit hint
SHOWN_HINTS = 20
KEPT_EVENTS = 20_000  # incidents kept for the verdict's judgement (the counts above it stay exact)


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
    hint_places: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # the first few path:line
    first_error: Event | None = None
    first_in_order: Event | None = None
    # the same, of the errors that are not the program's or its configuration's (PROGRAM_CATEGORIES)
    first_fault: Event | None = None
    first_fault_in_order: Event | None = None
    earliest: float | None = None
    latest: float | None = None
    errors: list[str] = field(default_factory=list)
    kept: list[Event] = field(default_factory=list)  # the first KEPT_EVENTS incidents, for the verdict
    copies: int = 0  # events another file had counted already (not in the counts)
    _folder: CopyFolder = field(default_factory=CopyFolder, repr=False)

    @property
    def events_total(self) -> int:
        return sum(self.by_code.values())

    def add(self, event: Event) -> None:
        counted = self._folder.fold(event)
        if counted is not None:
            self.copies += 1
            if self._folder.prefer(counted, event):  # the printed code stands for the failure, not its wording
                self.by_code[counted.code] -= 1
                if self.by_code[counted.code] <= 0:
                    del self.by_code[counted.code]
                self.by_code[event.code] += 1
                self.code_category.setdefault(event.code, event.category)
                self._folder.recoded(counted, event)
            return
        self.by_category[event.category] += 1
        self.by_code[event.code] += 1
        self.code_category.setdefault(event.code, event.category)
        if len(self.kept) < KEPT_EVENTS:
            self.kept.append(event)
        if self.first_in_order is None:
            self.first_in_order = event
        fault = event.category not in PROGRAM_CATEGORIES
        if fault and self.first_fault_in_order is None:
            self.first_fault_in_order = event
        ts = event.timestamp
        if ts is None:
            return
        if fault and (self.first_fault is None or self.first_fault.timestamp is None
                      or ts < self.first_fault.timestamp):
            self.first_fault = event
        if self.earliest is None or ts < self.earliest:
            self.earliest = ts
            self.first_error = event
        if self.latest is None or ts > self.latest:
            self.latest = ts

    def add_hint(self, hint: Hint, place: str = "") -> None:
        """Count ``hint``; ``place`` (``path:line``) is where it was read."""
        key = (hint.kind, hint.value)
        self.hints[key] += 1
        places = self.hint_places.setdefault(key, [])
        if place and len(places) < SHOWN_PLACES and place not in places:
            places.append(place)

    @property
    def files_read(self) -> int:
        """Files whose text was read (not skipped as binary, not unreadable)."""
        return sum(1 for f in self.files if f.error is None)

    @property
    def first(self) -> Event | None:
        return self.first_error if self.first_error is not None else self.first_in_order

    @property
    def lead(self) -> Event | None:
        """The first error that is not the program's or its configuration's, else the first."""
        fault = self.first_fault if self.first_fault is not None else self.first_fault_in_order
        return fault if fault is not None else self.first

    @property
    def program_errors(self) -> int:
        return sum(self.by_category[category] for category in PROGRAM_CATEGORIES)

    def to_dict(self) -> dict[str, Any]:
        first = self.first
        return {
            "files": [f.to_dict() for f in self.files],
            "lines": sum(f.lines for f in self.files),
            "bytes": sum(f.bytes for f in self.files),
            "events_total": self.events_total,
            "copies": self.copies,
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


def _scan_file(file: LogFile, report: ScanReport) -> None:
    result = FileResult(file.path)
    report.files.append(result)
    content = file.content
    if content.binary:
        result.error = BINARY_SKIPPED
        return
    classifier = StreamClassifier(source=file.path, ref_time=file.mtime)
    for lines in iter_line_batches(content.read):
        result.lines += len(lines)
        result.bytes += sum(len(line) + 1 for line in lines)
        # A block split across batches is judged whole: flush only after the last batch.
        for line in lines:
            events, hints = classifier.feed(line)
            if events or hints:
                _count(report, result, events, hints, f"{file.path}:{classifier.line_no}")
    _count(report, result, classifier.flush(), (), "")
    if content.error is not None:
        result.error = content.error  # the intake names it among the problems too


def _count(report: ScanReport, result: FileResult, events: Sequence[Event], hints: Sequence[Hint],
           place: str) -> None:
    for event in events:
        report.add(event)
    for hint in hints:
        report.add_hint(hint, place)
    result.events += len(events)


def scan_paths(paths: list[str], say: Callable[[str], None] | None = None, limits: Limits | None = None) -> ScanReport:
    """Scan files and directories through the one intake (``agent.health.log_files``: its walk, gzip,
    limits and binary test, as triage reads them); never raises for unreadable input (see ``errors``).

    ``say`` hears each file as it starts (for a progress line).
    """
    report = ScanReport()
    done = 0
    intake = Intake(limits or Limits(), report.errors.append)
    for file in intake.each(paths):
        if say is not None:
            say(f"{plural(len(report.files), 'file')}, {size(done)} read; {file.path}")
        _scan_file(file, report)
        done += report.files[-1].bytes
    return report


def _place(event: Event) -> str:
    return f"{event.source}:{event.line_no}" if event.line_no else event.source


def _format_event(event: Event) -> str:
    when = stamp(event.timestamp) if event.timestamp is not None else "(no timestamp)"
    # Two lines of ours: each field is escaped on its own, so a newline in a file name makes no third.
    return f"{when}  {printable(event.code)} [{event.category}]  {printable(_place(event))}\n    " \
           f"{printable(event.text)}"


def _summary_lines(report: ScanReport) -> list[str]:
    files = report.files
    skipped = sum(1 for f in files if f.error == BINARY_SKIPPED)
    note = f" ({skipped} binary skipped)" if skipped else ""
    out = [f"scanned {plural(len(files), 'file')}{note}, {plural(sum(f.lines for f in files), 'line')}, "
           f"{size(sum(f.bytes for f in files))}"]
    if report.events_total == 0:
        return out
    first = report.first
    assert first is not None
    copies = f" ({plural(report.copies, 'copy', 'copies')} in other files counted once)" if report.copies else ""
    out.append(plural(report.events_total, "error incident") + copies)
    out.append("first error: " + _format_event(first))
    if report.earliest is not None and report.latest is not None:
        lasted = report.latest - report.earliest
        out.append(f"time range: {span(report.earliest, report.latest)}" + (f" ({duration(lasted)})" if lasted else ""))
    width = max(len(name) for name in [*report.by_category, *report.by_code]) + 2
    out.append("by category:")
    out.extend(f"  {cat:<{width}}{n:>6}" for cat, n in report.by_category.most_common())
    out.append("by code:")
    out.extend(f"  {code:<{width}}{n:>6}  {report.code_category[code]}" for code, n in report.by_code.most_common())
    return out


def _places_text(places: Sequence[str]) -> str:
    """``a.log:2,9, b.log:4``: the lines of one file together, files in the order first seen."""
    lines: dict[str, list[str]] = {}
    for place in places:
        path, _, line = place.rpartition(":")
        lines.setdefault(path, []).append(line)
    return ", ".join(f"{printable(path)}:{','.join(numbers)}" for path, numbers in lines.items())


def _hint_lines(report: ScanReport) -> list[str]:
    if not report.hints:
        return []
    shown = report.hints.most_common(SHOWN_HINTS)
    kind_width = max(len(kind) for (kind, _), _ in shown) + 2
    value_width = max(len(printable(value)) for (_, value), _ in shown) + 2
    out = ["culprit hints (what the logs blame, and where):"]
    for key, n in shown:
        places = report.hint_places.get(key, [])
        more = n - len(places)
        where = _places_text(places) + (f" and {more} more" if more > 0 and places else "")
        out.append(f"  {key[0]:<{kind_width}}{printable(key[1]):<{value_width}}x{n:<4} {where}".rstrip())
    if len(report.hints) > SHOWN_HINTS:
        out.append(f"  ({len(report.hints) - SHOWN_HINTS} more in --json)")
    return out


def _judged(report: ScanReport, paths: Sequence[str]) -> Verdict:
    """The ``hccl_errors`` check over what was read, led as ``check`` leads it."""
    span = (report.latest - report.earliest) if report.latest is not None and report.earliest is not None else 0.0
    scan = LogScan(window_s=span, roots=list(paths), roots_exist=True, files=report.files_read,
                   bytes_read=sum(f.bytes for f in report.files), events=list(report.kept), hints=report.hints,
                   errors=list(report.errors))
    readings = QuickReadings(NodeReadings(table=Reading(error="not read by scan-logs"), logs=scan))
    settings = JudgeSettings(window_s=span, window_basis="the logs given")
    return lead([check_hccl_errors(readings, settings)])


def verdict(report: ScanReport, paths: Sequence[str] = ()) -> Verdict:
    """The scan's verdict: the ``hccl_errors`` check's on errors found (the one lead: a local fault's kind, else
    ``log_errors``), unknown when nothing was read or the scan is incomplete, ok a clean one."""
    unreadable = f"{plural(len(report.errors), 'input')} could not be read (named on stderr)"
    if report.events_total:
        first = report.lead
        assert first is not None
        judged = _judged(report, paths)
        with_errors = sum(1 for f in report.files if f.events)
        program = report.program_errors
        summary = (f"{plural(report.events_total, 'HCCL/CANN error incident')} in {with_errors} of "
                   f"{plural(len(report.files), 'file')}; the first: {first.code} ({first.category}) at "
                   f"{_place(first)}")
        if program == report.events_total:
            # the program or its configuration failed: the node is fine, so the scan does not warn
            summary = f"the program failed, the node is fine: {summary}"
        elif program:
            summary += f"; {plural(program, 'incident')} where the program failed (program_error, config_error)"
        if judged.cause not in (None, "log_errors"):
            summary = f"{judged.summary}; {summary}"
        if report.errors:
            summary += f"; {unreadable}, so the scan is incomplete"
        step = judged.action if judged.cause not in (None, "log_errors") else category_action(
            first.category, f"read the lines around the first error ({_place(first)})")
        if report.hints:
            (kind, value), n = report.hints.most_common(1)[0]
            places = report.hint_places.get((kind, value), [])
            step += f"; the logs blame {value} most ({kind} x{n}" + (f", first at {places[0]})" if places else ")")
        runbook = judged.runbook if judged.cause not in (None, "log_errors") else category_runbook(first.category)
        status = "unknown" if report.errors and judged.status != "fail" else judged.status
        cause = first.category if program == report.events_total else judged.cause  # the program's own error
        return Verdict(status, cause, judged.npu, summary, judged.also, step, runbook, judged.check,
                       judged.evidence)
    if report.files_read == 0:
        if report.errors:
            why = unreadable
        elif report.files:
            why = f"only binary files under {', '.join(paths) or 'the inputs'}"
        else:
            why = f"no files under {', '.join(paths) or 'the inputs'}"
        return Verdict("unknown", "nothing_read", None, f"nothing read: {why}",
                       action="point scan-logs at the CANN log directory ($ASCEND_PROCESS_LOG_PATH, by default "
                              "~/ascend/log) or at the job's log files")
    read = plural(report.files_read, "file")
    if report.errors:
        return Verdict("unknown", "not_read", None, f"no HCCL/CANN errors in the {read} read, but {unreadable}",
                       action="fix the paths or permissions of those inputs and scan again")
    return Verdict("ok", None, None,
                   f"no HCCL/CANN errors found in {read} ({plural(sum(f.lines for f in report.files), 'line')})")


def render_text(report: ScanReport, style: Style | None = None, paths: Sequence[str] = ()) -> str:
    """What was scanned, the first error, counts, culprit hints with their places, then the verdict."""
    # Log text, file names and what the logs blame are data: no control character of theirs reaches the terminal.
    out = [printable_lines(line) for line in _summary_lines(report) + _hint_lines(report)]
    judged = verdict(report, paths)
    out.append("")
    out.extend(verdict_lines(judged.word, judged.summary, action=judged.action, runbook=judged.runbook, style=style))
    return "\n".join(out) + "\n"


def main(paths: list[str], as_json: bool, out: IO[str] | None = None, err: IO[str] | None = None,
         color: str | None = None) -> int:
    """Run the scan and print it; the exit status is the verdict's (0 clean, 1 errors found, 3 unreadable input).

    Inputs that could not be read are named on ``err`` (stderr); ``color`` is ``--color``'s value.
    """
    stream = out if out is not None else sys.stdout
    errors = err if err is not None else sys.stderr
    with Progress("scan-logs", errors) as progress:
        report = scan_paths(paths, progress)
    for error in report.errors:
        errors.write(f"npuwatch scan-logs: cannot read {printable(error)}\n")
    errors.flush()
    judged = verdict(report, paths)
    if as_json:
        json.dump({**report.to_dict(), "verdict": judged.to_dict(), "exit_code": judged.exit_code()}, stream,
                  indent=2, sort_keys=False)
        stream.write("\n")
    else:
        stream.write(render_text(report, Style(use_color(color, stream)), paths))
    stream.flush()
    return judged.exit_code()
