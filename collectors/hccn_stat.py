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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collectors.base import ChipRef, CollectContext, Sample, label_pairs
from collectors.hccn_link import clean_lines, hccn_source, raise_unparsable

__all__ = ["ERROR_COUNTER_WORDS", "SOURCE", "StatRecord", "is_error_counter", "parse", "samples"]

ERROR_COUNTER_WORDS: tuple[str, ...] = (
    "err", "drop", "rty", "retry", "timeout", "unexpected", "bad", "discard")

_COUNTER_RE = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*)\s*:\s*(?P<value>\d+)$")


@dataclass(frozen=True, slots=True)
class StatRecord:
    counters: dict[str, int] = field(default_factory=dict)  # every integer counter, name as printed


def is_error_counter(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ERROR_COUNTER_WORDS)


def parse(text: str) -> StatRecord:
    counters: dict[str, int] = {}
    for _line_no, line in clean_lines(text):
        match = _COUNTER_RE.match(line)
        if match is not None:
            counters[match.group("name")] = int(match.group("value"))
    if not counters:
        raise_unparsable(text, "packet counters")
    return StatRecord(counters=counters)


def samples(record: StatRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    return [
        Sample("npu_roce_errors_total", label_pairs(npu=chip.npu, chip=chip.chip, counter=name), float(value))
        for name, value in sorted(record.counters.items())
        if is_error_counter(name)
    ]


SOURCE = hccn_source("hccn_stat", "stat", parse, samples)
