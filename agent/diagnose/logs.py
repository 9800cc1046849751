"""Diagnose's log scan: the node's one log scan (``agent.health.logscan``) read through triage's log
reader, so the scan also holds the records ``npuwatch triage`` would read from the same files."""

from __future__ import annotations

import io
from collections.abc import Sequence

from agent.health.logscan import scan_logs
from agent.health.readings import LogScan
from agent.health.thresholds import INCIDENT_LOOK_BACK_S
from agent.triage.evidence import Evidence
from agent.triage.logs import LogReader, read_stream
from collectors.hccl.classify import Event
from collectors.hccl.hints import Hint

__all__ = ["scan_recent_logs"]


class _TriageFiles:
    """Reads each file with triage's log reader and keeps its evidence."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.evidence = Evidence()

    def __call__(self, path: str, mtime: float, data: bytes) -> tuple[Sequence[Event], Sequence[Hint]]:
        reader = LogReader(self.node, path, mtime, keep_hints=True)
        read_stream(io.BytesIO(data).read, reader)
        self.evidence.extend(reader.finish())
        return reader.events, reader.raw_hints


def scan_recent_logs(paths: Sequence[str], globs: Sequence[str], kernel_log: str | None, *,
                     window_s: float = INCIDENT_LOOK_BACK_S, byte_budget: int = 64 << 20, now: float | None = None,
                     node: str = "this node") -> LogScan:
    """The logs of the last ``window_s``; ``scan.evidence`` holds triage's records of the files read."""
    files = _TriageFiles(node)
    scan = scan_logs(paths, globs, kernel_log, window_s=window_s, byte_budget=byte_budget, now=now, read_file=files)
    files.evidence.coverage(node).inputs.extend(str(p) for p in paths)
    scan.evidence = files.evidence
    return scan
