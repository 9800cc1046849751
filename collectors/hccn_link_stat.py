"""RoCE link flap history: ``hccn_tool -i <devid> -link_stat -g``.

910/910B/A3 output (every line carries a ``[devid N]`` prefix, newest record first)::

    [devid 0]current time        : Wed Aug  2 03:09:26 2022
    [devid 0]link up count       : 2
    [devid 0]link change records :
    [devid 0]    Tue Aug  1 14:43:40 2022    LINK UP
    [devid 0]    Tue Aug  1 14:43:40 2022    LINK DOWN

Newer drivers add ``link down count``. The 950 (UB) ``-g -link_stat -i 0 -u 0 -p 4``
prints the counts without a prefix and the records as a box table with
``LINK_UP``/``LINK_DOWN``; both shapes parse into the same record.

Timestamps are the tool's local wall time (ctime). The parser keeps them naive
(``datetime`` without tzinfo, no clock or timezone lookup); ``samples`` converts
the newest one with the host's local timezone. Exported:
``npu_roce_link_up_transitions_total{npu}`` (link up count) and
``npu_roce_link_last_change_timestamp_seconds{npu}``.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from collectors.base import ChipRef, CollectContext, ParseError, Sample, label_pairs
from collectors.bounds import BOUNDS
from collectors.hccn_link import clean_lines, hccn_source, raise_unparsable

__all__ = [
    "LINK_DOWN",
    "LINK_UP",
    "SOURCE",
    "LinkChange",
    "LinkStatRecord",
    "changes_within",
    "parse",
    "parse_ctime",
    "samples",
]

LINK_UP = "LINK UP"
LINK_DOWN = "LINK DOWN"

_MONTHS = {name: index for index, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1)}
_CTIME = (r"(?:[A-Za-z]{3}\s+)?(?P<mon>[A-Za-z]{3})\s+(?P<day>\d{1,2})\s+"
          r"(?P<hour>\d{1,2}):(?P<minute>\d{2}):(?P<second>\d{2})\s+(?P<year>\d{4})")
_CTIME_RE = re.compile(rf"^{_CTIME}$")
_RECORD_RE = re.compile(rf"^(?P<when>{_CTIME})\s+LINK[ _](?P<state>UP|DOWN)$", re.IGNORECASE)
_STATE_CELL_RE = re.compile(r"^LINK[ _](UP|DOWN)$", re.IGNORECASE)
_KEY_RE = re.compile(r"^(?P<key>[A-Za-z ]+?)\s*:\s*(?P<value>.*)$")


@dataclass(frozen=True)
class LinkChange:
    at: datetime  # naive local wall time as printed
    state: str  # LINK_UP or LINK_DOWN constants ("LINK UP" / "LINK DOWN")


@dataclass(frozen=True)
class LinkStatRecord:
    link_up_count: int
    link_down_count: int | None
    current_time: datetime | None
    changes: tuple[LinkChange, ...]  # in printed order (newest first)

    @property
    def newest_change(self) -> LinkChange | None:
        return max(self.changes, key=lambda change: change.at, default=None)


def parse_ctime(text: str) -> datetime:
    """``Tue Aug  1 14:43:40 2022`` (any spacing, weekday optional) as a naive datetime; locale-free."""
    match = _CTIME_RE.match(" ".join(text.split()))
    if match is None:
        raise ValueError(f"not a ctime timestamp: {text!r}")
    return _from_match(match)


def _from_match(match: re.Match[str]) -> datetime:
    month = _MONTHS.get(match.group("mon").lower())
    if month is None:
        raise ValueError(f"unknown month {match.group('mon')!r}")
    return datetime(int(match.group("year")), month, int(match.group("day")),
                    int(match.group("hour")), int(match.group("minute")), int(match.group("second")))


def _change(when: str, state: str, line_no: int, line: str) -> LinkChange:
    try:
        at = parse_ctime(when)
    except ValueError as exc:
        raise ParseError(f"bad link change timestamp: {exc}", line_no, line) from None
    return LinkChange(at=at, state=LINK_UP if state.upper().endswith("UP") else LINK_DOWN)


def _table_row(line: str, line_no: int) -> LinkChange | None:
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    state = next((cell for cell in cells if _STATE_CELL_RE.match(cell)), None)
    if state is None:
        return None  # header row
    when = next((cell for cell in cells if _CTIME_RE.match(" ".join(cell.split()))), None)
    if when is None:
        raise ParseError("link change row without a timestamp", line_no, line)
    return _change(when, state, line_no, line)


def _count(value: str, line_no: int, line: str) -> int:
    if not (value.isascii() and value.isdigit()):
        raise ParseError("link count is not a number", line_no, line)
    if len(value) > 20 or not BOUNDS["counter"].contains(int(value)):
        raise ParseError("link count beyond a 64-bit counter", line_no, line)
    return int(value)


def parse(text: str) -> LinkStatRecord:
    up_count: int | None = None
    down_count: int | None = None
    current: datetime | None = None
    changes: list[LinkChange] = []
    for line_no, line in clean_lines(text):
        if line.startswith("+"):
            continue
        if line.startswith("|"):
            row = _table_row(line, line_no)
            if row is not None:
                changes.append(row)
            continue
        record = _RECORD_RE.match(line)
        if record is not None:
            changes.append(_change(record.group("when"), record.group("state"), line_no, line))
            continue
        key_value = _KEY_RE.match(line)
        if key_value is None:
            continue
        key = " ".join(key_value.group("key").lower().split())
        value = key_value.group("value").strip()
        if key == "link up count":
            up_count = _count(value, line_no, line)
        elif key == "link down count":
            down_count = _count(value, line_no, line)
        elif key == "current time":
            try:
                current = parse_ctime(value)
            except ValueError as exc:
                raise ParseError(f"bad current time: {exc}", line_no, line) from None
    if up_count is None:
        raise_unparsable(text, "a 'link up count' line")
    return LinkStatRecord(link_up_count=up_count, link_down_count=down_count, current_time=current,
                          changes=tuple(changes))


def changes_within(record: LinkStatRecord, window_s: float, now: datetime | None = None) -> list[LinkChange]:
    """Changes no older than ``window_s`` before ``now`` (default: the tool's own ``current time``,
    else the newest record), so callers need neither a clock nor the node's timezone."""
    reference = now or record.current_time
    if reference is None:
        newest = record.newest_change
        if newest is None:
            return []
        reference = newest.at
    cutoff = reference - timedelta(seconds=window_s)
    return [change for change in record.changes if change.at >= cutoff]


def samples(record: LinkStatRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    labels = label_pairs(npu=chip.npu, chip=chip.chip)
    out = [Sample("npu_roce_link_up_transitions_total", labels, float(record.link_up_count))]
    newest = record.newest_change
    if newest is not None:
        # A year the platform's mktime cannot represent drops the series.
        with contextlib.suppress(OverflowError, OSError, ValueError):
            out.append(Sample("npu_roce_link_last_change_timestamp_seconds", labels, newest.at.timestamp()))
    return out


SOURCE = hccn_source("hccn_link_stat", "link_stat", parse, samples)
