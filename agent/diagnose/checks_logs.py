"""The log check of ``npuwatch diagnose``: recent HCCL/CANN errors, read the way ``npuwatch triage`` reads them."""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Sequence

from agent.diagnose.readings import LogScan
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
    scan = LogScan(window_s=window_s, roots=[str(p) for p in paths], roots_exist=tailer.roots_exist())
    recent: list[tuple[float, str]] = []
    for path, real in tailer.discover():
        with contextlib.suppress(OSError):
            mtime = os.stat(real).st_mtime
            if mtime >= cutoff:
                recent.append((mtime, path))
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


_CATEGORY_HINTS = {
    "exec_timeout": "HCCL_EXEC_TIMEOUT expired: a rank stopped taking part; start with the rank named",
    "connect_timeout": "links were never set up: check the peer's RoCE port, IP and firewall",
    "rendezvous_timeout": "not every rank reached the rendezvous: look for a rank that crashed or was late",
    "roce_cqe": "RoCE completion errors: check link, optics and PFC on this and the peer's port",
    "heartbeat": "a rank or device stopped its heartbeat: find the rank that died first",
    "watchdog_timeout": "torch_npu's watchdog hit a collective timeout: find the rank that stopped first",
}


def check_logs(scan: LogScan) -> Check:
    """HCCL/CANN errors of the recent window, by category, with the peers they blame."""
    name = "hccl_logs"
    window = window_text(scan.window_s)
    if not scan.roots_exist:
        return Check(name, UNKNOWN, f"no log directory at {', '.join(scan.roots) or '(none configured)'}",
                     "set collectors.hccl_logs.paths to where CANN writes plogs ($ASCEND_PROCESS_LOG_PATH)")
    if not scan.events:
        suffix = f"; {scan.errors[0]}" if scan.errors else ""
        return Check(name, PASS, f"no HCCL errors in the last {window} ({scan.files} files read){suffix}")
    categories = scan.by_category()
    codes = scan.by_code()
    parts = [f"{category} x{count}" for category, count in categories.most_common()]
    evidence = (f"{len(scan.events)} incidents in the last {window}: {', '.join(parts)}"
                f" (codes {', '.join(code for code, _ in codes.most_common(4))})")
    if scan.hints:
        evidence += "; blamed: " + ", ".join(f"{kind} {value} x{count}"
                                             for (kind, value), count in scan.hints.most_common(3))
    top = categories.most_common(1)[0][0]
    hint = _CATEGORY_HINTS.get(top, "read the first error: `npuwatch scan-logs` on the log directory")
    findings = tuple(
        Finding("heartbeat_lost", FAIL, int(value), f"NPU {value}",
                f"kernel log: Heartbeat lost! (device={value})")
        for (kind, value), _ in scan.hints.most_common() if kind == "device" and value.isdigit()
    )
    return Check(name, FAIL if findings else WARN, evidence, hint,
                 findings[0].npu if findings else None, findings)
