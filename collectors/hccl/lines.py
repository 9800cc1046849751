"""What every HCCL / CANN log line shares: job prefixes, the quiet log levels, the block size, timestamps.

The line formats themselves are described in docs/hccl-log-formats.md.
"""

from __future__ import annotations

import functools
import re
import time

__all__ = ["BLOCK_LINES", "QUIET_LEVELS", "line_rank_device", "parse_timestamp", "split_prefixes"]

# plog levels that never carry an error: a line starting with one is skipped before any regular expression.
QUIET_LEVELS = ("[INFO]", "[DEBUG]", "[EVENT]", "[TRACE]")
# The lines one HCCL error block spans at most: lines this close belong to one incident or one fact.
BLOCK_LINES = 64

# Ray / vLLM worker prefixes ``(RayWorker pid=123)``, ``(VllmWorker rank=1 pid=123)``, torchrun ``[default0]:``,
# torch ``[rank1]:``
_PREFIX_RE = re.compile(r"(?:\([\w.:-]+(?: [\w.:-]+=[\w.:-]+)*? pid=\d+[^)]*\)\s?|\[(?:default|rank)\d+\]:\s?)")
# The rank or device a line is printed by (not a peer it names): torch ``[rank9]:`` and ``[Rank 9]``, vLLM
# ``rank=9 pid=``, torch_npu ``RankID:9`` / ``rank_id=9``, torch_npu ``Device:3`` and the runtime's
# ``device(chipId:3, dieId:0)`` / ``device(3)``. (substring that must be on the line, pattern): a pattern runs only
# where its substring is, since most HCCL lines say "rank" or "device" in some other way.
_RANK_RULES = (("[rank", re.compile(r"\[rank(\d+)\]")), ("[Rank ", re.compile(r"\[Rank (\d+)\]")),
               ("ankI", re.compile(r"\b[Rr]ankI[Dd]\s*[:=\[]\s*(\d+)")),
               ("rank_id", re.compile(r"\brank_id\s*[:=\[]\s*(\d+)")),
               (" rank=", re.compile(r"\(\w+ rank=(\d+) pid=")),
               ("rankSize:", re.compile(r"\brank:\s?(\d+), rankSize:")))  # MindIE's ATB runners
_DEVICE_RULES = (("Device", re.compile(r"\bDevice\s*:\s*(\d+)")),
                 ("device(", re.compile(r"(?:error from|occurs on) the device\((?:chipId:)?(\d+)|error from "
                                        r"device\((?:chipId:)?(\d+)")))
_PLOG_TS_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)-(\d\d):(\d\d):(\d\d)(?:\.(\d{3})\.(\d{3}))?")
_GLOG_TS_RE = re.compile(r"^\[?[EWIF](\d{3,4}) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
# MindIE's ATB and other C++/Python logs: ``[2025-05-13 02:25:58.64217] [error] [tid] [file:line]`` at the start
_BRACKET_TS_RE = re.compile(r"^\[(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,:](\d{1,9}))?[^\]]*\]")
_SYSLOG_TS_RE = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) ")
_DMESG_T_RE = re.compile(r"^\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\]")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}


def _local_epoch(year: int, month: int, day: int, clock: tuple[int, int, int]) -> float | None:
    hh, mm, ss = clock
    if not (1 <= month <= 12 and 1 <= day <= 31 and hh < 24 and mm < 60 and ss < 62):
        return None
    minute = _minute_epoch(year, month, day, hh, mm)
    return None if minute is None else minute + ss


@functools.lru_cache(maxsize=4096)
def _minute_epoch(year: int, month: int, day: int, hh: int, mm: int) -> float | None:
    """``mktime`` of a local minute, cached: log lines come minute after minute, and mktime is slow."""
    try:
        return time.mktime((year, month, day, hh, mm, 0, 0, 0, -1))
    except (OverflowError, ValueError):
        return None


def _with_year(month: int, day: int, clock: tuple[int, int, int], ref_time: float | None) -> float | None:
    """A month/day time stamped with the year of ``ref_time`` (a file's mtime)."""
    if ref_time is None:
        return None
    year = time.localtime(ref_time).tm_year
    value = _local_epoch(year, month, day, clock)
    # A December line in a file last written in January belongs to the year before.
    if value is not None and value > ref_time + 2 * 86400:
        value = _local_epoch(year - 1, month, day, clock)
    return value


def parse_timestamp(text: str, ref_time: float | None = None) -> float | None:
    """Epoch seconds of the time printed on a line (prefixes already stripped), or None.

    plog ``YYYY-MM-DD-HH:MM:SS.mmm.uuu`` anywhere on the line (the first one: later ones are
    payload such as ``timeStamp:[...]``); glog ``E0324 13:00:25.428`` / ``[E324 13:00:25...``,
    MindIE/ATB ``[2025-05-13 02:25:58.64217]``, syslog ``Aug  1 08:38:31`` and ``dmesg -T`` at the start.
    Year-less forms need ``ref_time``.
    dmesg relative ``[ 1197.584409]`` times give None.
    """
    match = _PLOG_TS_RE.search(text)
    if match is not None:
        y, mo, d, hh, mi, ss, ms, us = match.groups()
        value = _local_epoch(int(y), int(mo), int(d), (int(hh), int(mi), int(ss)))
        if value is not None and ms is not None:
            value += int(ms) / 1e3 + int(us) / 1e6
        return value
    match = _GLOG_TS_RE.match(text)
    if match is not None:
        digits, hh, mi, ss, frac = match.groups()
        month, day = (int(digits[0]), int(digits[1:])) if len(digits) == 3 else (int(digits[:2]),
                                                                                  int(digits[2:]))
        value = _with_year(month, day, (int(hh), int(mi), int(ss)), ref_time)
        if value is not None and frac:
            value += float("0." + frac)
        return value
    match = _BRACKET_TS_RE.match(text)
    if match is not None:
        y, mo, d, hh, mi, ss, frac = match.groups()
        value = _local_epoch(int(y), int(mo), int(d), (int(hh), int(mi), int(ss)))
        if value is not None and frac:
            value += float("0." + frac)
        return value
    match = _SYSLOG_TS_RE.match(text)
    if match is not None and match.group(1) in _MONTHS:
        mon, d, hh, mi, ss = match.groups()
        return _with_year(_MONTHS[mon], int(d), (int(hh), int(mi), int(ss)), ref_time)
    match = _DMESG_T_RE.match(text)
    if match is not None and match.group(1) in _MONTHS:
        mon, d, hh, mi, ss, y = match.groups()
        return _local_epoch(int(y), _MONTHS[mon], int(d), (int(hh), int(mi), int(ss)))
    return None


def line_rank_device(line: str) -> tuple[int | None, int | None]:
    """(rank, device) of the process that printed ``line``, where a prefix or field says so."""
    return _first(line, _RANK_RULES), _first(line, _DEVICE_RULES)


def _first(line: str, rules: tuple[tuple[str, re.Pattern[str]], ...]) -> int | None:
    for needle, pattern in rules:
        if needle in line:
            match = pattern.search(line)
            if match is not None:
                return int(next(group for group in match.groups() if group is not None))
    return None


def split_prefixes(line: str) -> tuple[str, bool]:
    """(text without Ray / torchrun prefixes, whether it was indented under them)."""
    text = line.rstrip()
    indented = text[:1].isspace()
    text = text.lstrip()
    for _ in range(3):
        if not text or text[0] not in "([":
            break
        match = _PREFIX_RE.match(text)
        if match is None:
            break
        rest = text[match.end():]
        indented = rest[:1].isspace()
        text = rest.lstrip()
    return text, indented
