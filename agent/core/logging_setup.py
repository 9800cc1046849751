"""Logging to stderr in a form journald understands.

Under systemd (``JOURNAL_STREAM`` set) each line starts with a ``<N>`` syslog
priority and carries no timestamp (journald adds its own); in a terminal lines
get a timestamp and a level name instead.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["setup_logging"]

_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


class _JournalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = _PRIORITY.get(record.levelno, 6)
        text = super().format(record).replace("\n", "\n  ")
        return f"<{priority}>{text}"


def setup_logging(level: str = "info", verbose: bool = False) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if os.environ.get("JOURNAL_STREAM"):
        handler.setFormatter(_JournalFormatter("%(name)s: %(message)s"))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else getattr(logging, level.upper(), logging.INFO))
    # APScheduler logs every job run at INFO, and a turn skipped while the last one still runs (a hung
    # tool: every 10 s) at WARNING; the agent reports the hang itself. Its errors stay; the rest is -v.
    logging.getLogger("apscheduler").setLevel(logging.DEBUG if verbose else logging.ERROR)
