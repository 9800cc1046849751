"""RoCE port packet counters: ``hccn_tool -i <devid> -stat -g``.

Sample output (910/910B: ``name:value`` without a space; the 950 UB variant
``-g -stat -i 0 -u 0 -p 4`` prints ``name: value``; both parse)::

    packet statistics:
    roce_rx_err_pkt_num:0
    roce_tx_err_pkt_num:0
    mac_rx_bad_pkt_num:0

Every integer counter is kept in the record. Only error-like counters are
exported, as ``npu_roce_errors_total{npu,counter}`` with the name as printed:
a counter qualifies when its name contains one of ``err``, ``drop``, ``rty``,
``retry``, ``timeout``, ``unexpected``, ``bad`` or ``discard`` (``ERROR_COUNTER_WORDS``).
Traffic counters (packets, bytes) would add dozens of series per chip that the
host's own RoCE stats already cover.

A counter is an ASCII name of at most 64 characters and a non-negative integer
below 2^64. A counter line with another name, or with any other value (negative, fraction, text) is
dropped and listed in ``StatRecord.rejected``, as are counters beyond
``LIMITS["counters"]`` (1024; each error counter is a series). Output with
more lines of prose than counters is not a listing and fails to parse.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from collectors.base import ChipRef, CollectContext, Sample, label_pairs
from collectors.bounds import BOUNDS, LIMITS, Rejection, Rejects
from collectors.hccn_link import clean_lines, hccn_source, raise_unparsable

__all__ = ["ERROR_COUNTER_WORDS", "SOURCE", "StatRecord", "is_error_counter", "parse", "samples"]

ERROR_COUNTER_WORDS: tuple[str, ...] = (
    "err", "drop", "rty", "retry", "timeout", "unexpected", "bad", "discard")

_COUNTER_RE = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]{0,63})\s*:\s*(?P<value>\S.*)$", re.ASCII)
_COUNTER_SHAPED_RE = re.compile(r"^[^\s:]+\s*:\s*\S")
_INTEGER_RE = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True)
class StatRecord:
    counters: dict[str, int] = field(default_factory=dict)  # every integer counter, name as printed
    rejected: tuple[Rejection, ...] = ()  # lines refused (collectors.bounds)


@functools.lru_cache(maxsize=1024)  # the names a port prints, judged every round
def is_error_counter(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ERROR_COUNTER_WORDS)


def parse(text: str) -> StatRecord:
    counters: dict[str, int] = {}
    rejects = Rejects()
    prose = 0
    for line_no, line in clean_lines(text, rejects):
        match = _COUNTER_RE.match(line)
        if match is None:
            if _COUNTER_SHAPED_RE.match(line):
                rejects.add("counter name is not ASCII of at most 64 characters", line_no, line)
            else:
                prose += line.strip() != ""  # headers ("packet statistics:"), blank values, prose
            continue
        name, value = match.group("name"), match.group("value")
        if not _INTEGER_RE.fullmatch(value) or not BOUNDS["counter"].contains(int(value)):
            rejects.add(f"counter {name}: {value!r} is not a non-negative 64-bit integer", line_no, line)
        elif name not in counters and len(counters) >= LIMITS["counters"]:
            rejects.add(f"more than {LIMITS['counters']} counters", line_no, line)
        else:
            counters[name] = int(value)
    if not counters or prose > len(counters):
        # A listing is a header and counters; junk with a stray "x:1" line in it is still junk.
        raise_unparsable(text, "packet counters")
    return StatRecord(counters=counters, rejected=rejects.freeze())


def samples(record: StatRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    return [
        Sample("npu_roce_errors_total", label_pairs(npu=chip.npu, chip=chip.chip, counter=name), float(value))
        for name, value in sorted(record.counters.items())
        if is_error_counter(name)
    ]


SOURCE = hccn_source("hccn_stat", "stat", parse, samples)
