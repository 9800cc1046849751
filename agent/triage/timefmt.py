"""Times as triage prints them: local time of the machine that runs triage (as the logs print theirs)."""

from __future__ import annotations

import time

__all__ = ["clock", "span", "stamp"]


def stamp(at: float | None) -> str:
    """``2025-10-24 10:31:02``; ``?`` when unknown."""
    if at is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def clock(at: float | None, ref: float | None = None) -> str:
    """``10:31:02``, with the date in front when ``at`` is on another day than ``ref``."""
    if at is None:
        return "?"
    if ref is not None and time.localtime(at)[:3] != time.localtime(ref)[:3]:
        return stamp(at)
    return time.strftime("%H:%M:%S", time.localtime(at))


def span(first: float | None, last: float | None) -> str:
    """``2025-10-24 10:31:02 .. 10:36:40`` (the date once when both are on the same day)."""
    if first is None and last is None:
        return "?"
    if first is None or last is None or first == last:
        return stamp(first if first is not None else last)
    return f"{stamp(first)} .. {clock(last, first)}"
