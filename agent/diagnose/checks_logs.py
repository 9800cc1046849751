"""The log check of ``npuwatch diagnose``: recent HCCL/CANN errors, read the way ``npuwatch triage`` reads them."""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Sequence

from agent.core.humanize import plural, size
from agent.diagnose.advice import category_action
from agent.diagnose.results import (
    DEFAULT_LOG_TAIL_BYTES,
    DEFAULT_WINDOW_S,
    FAIL,
    PASS,
    UNKNOWN,
    WARN,
    Check,
    Finding,
    window_text,
)
from agent.health.readings import LogScan
from agent.triage.evidence import Evidence
from agent.triage.logs import LogReader, read_stream
from collectors.hccl_tail import DEFAULT_GLOBS, LogTailer


def scan_recent_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *,
                     window_s: float = DEFAULT_WINDOW_S, byte_budget: int = 64 << 20,
                     per_file_bytes: int = DEFAULT_LOG_TAIL_BYTES, now: float | None = None,
                     node: str = "this node") -> LogScan:
    """Read the tail of every log file written within ``window_s`` (newest files first).

    At most ``per_file_bytes`` from the end of each file and ``byte_budget`` in all; events
    and hints older than the window (by their own timestamps) are dropped. Each file goes through
    triage's log reader (``agent.triage.logs``), so ``scan.evidence`` holds the same records
    ``npuwatch triage`` would read from these files.
    """
    now = time.time() if now is None else now
    cutoff = now - window_s
    # the CANN layout plus the operator's job-log globs, as the agent reads them
    tailer = LogTailer(paths, (*DEFAULT_GLOBS, *globs), kernel_log, None)
    scan = LogScan(window_s=window_s, roots=[str(p) for p in paths], roots_exist=tailer.roots_exist(),
                   missing_roots=[str(p) for p in paths if not os.path.exists(p)],
                   evidence=Evidence())
    recent: list[tuple[float, str]] = []
    for path, real in tailer.discover():
        with contextlib.suppress(OSError):
            mtime = os.stat(real).st_mtime
            if mtime >= cutoff:
                recent.append((mtime, path))
            else:
                scan.older_files += 1
    budget = byte_budget
    for mtime, path in sorted(recent, reverse=True):
        if budget <= 0:
            scan.errors.append(f"byte budget spent; {path} and older files not read")
            break
        try:
            data = _tail(path, min(per_file_bytes, budget))
        except OSError as exc:
            scan.errors.append(f"{path}: {exc.strerror or exc}")
            continue
        budget -= len(data)
        scan.files += 1
        scan.bytes_read += len(data)
        reader = LogReader(node, path, mtime, keep_hints=True)
        read_stream(io.BytesIO(data).read, reader)
        evidence = reader.finish()
        scan.evidence.extend(evidence)
        scan.events.extend(e for e in reader.events if e.timestamp is None or e.timestamp >= cutoff)
        scan.hints.update((h.kind, h.value) for h in reader.raw_hints if h.timestamp is None or h.timestamp >= cutoff)
    scan.evidence.coverage(node).inputs.extend(str(p) for p in paths)
    return scan


def _tail(path: str, limit: int) -> bytes:
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


_LOG_PATH_HINT = ("set $ASCEND_PROCESS_LOG_PATH (or collectors.hccl_logs.paths in the config) to where CANN "
                  "writes its logs; without either, ~/ascend/log is read")


def _nothing_read(scan: LogScan, window: str) -> str:
    """Why the scan read no file: nothing recent, or the files it found could not be read."""
    roots = ", ".join(root for root in scan.roots if root not in scan.missing_roots) or "the configured globs"
    if scan.errors:
        return f"no log file could be read under {roots}: {scan.errors[0]}"
    notes = [f"{plural(scan.older_files, 'older file')} not read"] if scan.older_files else []
    notes += [f"no directory at {root}" for root in scan.missing_roots]
    return f"no log file under {roots} was written in the last {window}" + (f" ({'; '.join(notes)})" if notes else "")


def check_logs(scan: LogScan) -> Check:
    """HCCL/CANN errors of the recent window, by category, with the peers they blame.

    A scan that read no file is UNKNOWN: no log directory, or nothing written in the window (a
    node without a job, or logs that go elsewhere), says nothing about HCCL.
    """
    name = "hccl_logs"
    window = window_text(scan.window_s)
    if not scan.roots_exist:
        return Check(name, UNKNOWN, f"no CANN log directory at {', '.join(scan.roots) or '(none configured)'}",
                     _LOG_PATH_HINT)
    if not scan.events:
        if scan.files == 0:
            return Check(name, UNKNOWN, _nothing_read(scan, window), _LOG_PATH_HINT)
        suffix = f"; {scan.errors[0]}" if scan.errors else ""
        return Check(name, PASS, f"no HCCL errors in the last {window} ({plural(scan.files, 'file')} read, "
                                 f"{size(scan.bytes_read)}){suffix}")
    categories = scan.by_category()
    codes = [code for code, _ in scan.by_code().most_common(4)]
    parts = [f"{category} x{count}" for category, count in categories.most_common()]
    code_word = "code" if len(codes) == 1 else "codes"
    evidence = (f"{plural(len(scan.events), 'incident')} in the last {window}: {', '.join(parts)}"
                f" ({code_word} {', '.join(codes)})")
    if scan.hints:
        evidence += "; blamed: " + ", ".join(f"{kind} {value} x{count}"
                                             for (kind, value), count in scan.hints.most_common(3))
    top = categories.most_common(1)[0][0]
    findings = tuple(
        Finding("heartbeat_lost", FAIL, int(value), f"NPU {value}",
                f"kernel log: Heartbeat lost! (device={value})")
        for (kind, value), _ in scan.hints.most_common() if kind == "device" and value.isdigit()
    )
    return Check(name, FAIL if findings else WARN, evidence, category_action(top),
                 findings[0].npu if findings else None, findings)
