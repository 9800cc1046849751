"""The log check of ``npuwatch diagnose``: recent HCCL/CANN errors, read the way ``npuwatch triage`` reads them."""

from __future__ import annotations

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
