"""The log check of ``npuwatch diagnose``: recent HCCL/CANN errors and the remote ranks they blame."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence

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
from collectors.hccl_classify import StreamClassifier
from collectors.hccl_tail import DEFAULT_GLOBS, LogTailer, split_complete_lines

_IPV4_RE = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])")
_RANK_KINDS = ("remote_rank", "crimer_rank", "dst_rank", "missing_rank")
_IP_KINDS = ("exception_location", "dst_rank", "link_peer", "peer", "root_server")


def scan_recent_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *,
                     window_s: float = DEFAULT_WINDOW_S, byte_budget: int = 64 << 20,
                     per_file_bytes: int = DEFAULT_LOG_TAIL_BYTES, now: float | None = None) -> LogScan:
    """Classify the tail of every log file written within ``window_s`` (newest files first).

    At most ``per_file_bytes`` from the end of each file and ``byte_budget`` in all; events
    and hints older than the window (by their own timestamps) are dropped.
    """
    now = time.time() if now is None else now
    cutoff = now - window_s
    tailer = LogTailer(paths, tuple(globs) or DEFAULT_GLOBS, kernel_log, None)
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
            lines, used = _tail_lines(path, min(per_file_bytes, budget))
        except OSError as exc:
            scan.errors.append(f"{path}: {exc.strerror or exc}")
            continue
        budget -= used
        scan.files += 1
        scan.bytes_read += used
        classifier = StreamClassifier(source=path, ref_time=mtime)
        events, hints = classifier.feed_lines(lines)
        scan.events.extend(e for e in events if e.timestamp is None or e.timestamp >= cutoff)
        scan.hints.update((h.kind, h.value) for h in hints if h.timestamp is None or h.timestamp >= cutoff)
    return scan


def _tail_lines(path: str, limit: int) -> tuple[list[str], int]:
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        handle.seek(start)
        data = handle.read(limit)
    if start > 0:  # began mid-line: drop the fragment
        newline = data.find(b"\n")
        data = data[newline + 1:] if newline >= 0 else b""
    if data and not data.endswith(b"\n"):
        data += b"\n"
    lines, _ = split_complete_lines(data, 64 << 10)
    return lines, len(data)


def remote_culprit(hints: Counter[tuple[str, str]],
                   local_ips: Iterable[str] = ()) -> tuple[str | None, str | None]:
    """(remote rank, remote IP) the logs blame most often; local addresses are not culprits."""
    local = set(local_ips)
    ranked = hints.most_common()
    rank = next((value for (kind, value), _ in ranked if kind in _RANK_KINDS and value.isdigit()), None)
    address = None
    for (kind, value), _ in hints.most_common():
        if kind not in _IP_KINDS:
            continue
        for candidate in _IPV4_RE.findall(value):
            with contextlib.suppress(ValueError):
                ipaddress.ip_address(candidate)
                if candidate not in local:
                    address = candidate
                    break
        if address is not None:
            break
    return rank, address


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
