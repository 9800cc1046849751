"""The log check of ``npuwatch diagnose``: recent HCCL/CANN errors, read the way ``npuwatch triage`` reads them."""

from __future__ import annotations

from typing import Any

from agent.core.humanize import plural, size
from agent.diagnose.advice import category_action
from agent.diagnose.results import (
    FAIL,
    PASS,
    UNKNOWN,
    WARN,
    Check,
    Finding,
    window_text,
)
from agent.health.readings import LogScan
from agent.health.results import Result

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

    Judged as ``npuwatch check``'s ``hccl_errors``: no log directory is UNKNOWN; a directory where
    nothing was written in the window is PASS (an idle node writes no log); a file that could not be
    read, with nothing else read, is UNKNOWN; incidents warn, a device's lost heartbeat fails.
    """
    name = "hccl_errors"
    window = window_text(scan.window_s)
    fields: dict[str, Any] = {"threshold": 0, "unit": "incidents", "basis": f"diagnose --window ({window})"}
    if not scan.roots_exist:
        text = f"no CANN log directory at {', '.join(scan.roots) or '(none configured)'}"
        return Check(name, UNKNOWN, text, _LOG_PATH_HINT, results=(Result(UNKNOWN, text),))
    if not scan.events:
        if scan.files == 0:
            text = _nothing_read(scan, window)
            status = UNKNOWN if scan.errors else PASS
            return Check(name, status, text, _LOG_PATH_HINT if scan.errors else "",
                         results=(Result(status, text, value=0, **fields),))
        suffix = f"; {scan.errors[0]}" if scan.errors else ""
        read = f"{plural(scan.files, 'file')} read, {size(scan.bytes_read)}"
        text = f"no HCCL errors in the last {window} ({read}){suffix}"
        return Check(name, PASS, text, results=(Result(PASS, text, value=0, **fields),))
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
    lost = [int(value) for (kind, value), _ in scan.hints.most_common() if kind == "device" and value.isdigit()]
    findings = tuple(Finding("heartbeat_lost", FAIL, npu, f"NPU {npu}", f"kernel log: Heartbeat lost! (device={npu})")
                     for npu in lost)
    results = tuple(Result(FAIL, f"NPU {npu}: kernel log says its heartbeat was lost", npu=npu, kind="device_lost",
                           value=len(scan.events), **fields) for npu in lost)
    results += (Result(WARN, evidence, value=len(scan.events), **fields),)
    return Check(name, FAIL if findings else WARN, evidence, category_action(top),
                 findings[0].npu if findings else None, findings, results)
