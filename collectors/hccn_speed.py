"""RoCE port speed: ``hccn_tool -i <devid> -speed -g``.

No capture of this command is in the corpus. The expected shape, as other
consumers of hccn_tool document it, is::

    Speed: 100000 Mb/s

and ``Speed: Unknown!`` while the link is down. Accepted: a number followed by
``Mb/s``, ``Mbps``, ``Mbit/s``, ``M``, ``Gb/s``, ``Gbps``, ``Gbit/s`` or ``G``
(bits per second, converted to bytes per second). ``Unknown`` parses to a record
without a speed (no sample); any other shape, and a speed beyond 3.2 Tb/s
(``collectors.bounds``; the record holds nothing else), is a ``ParseError``.
Exported: ``npu_roce_link_speed_bytes_per_second{npu}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors.base import ChipRef, CollectContext, ParseError, Sample, label_pairs
from collectors.bounds import BOUNDS
from collectors.hccn_link import clean_lines, hccn_source, raise_unparsable

__all__ = ["SOURCE", "SpeedRecord", "parse", "samples"]

_SPEED_LINE_RE = re.compile(r"^speed\s*:\s*(?P<value>.*?)\s*$", re.IGNORECASE)
_VALUE_RE = re.compile(r"^(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[MG])(?:b/s|bps|bit/s)?$", re.IGNORECASE)
_BITS_PER_UNIT = {"m": 1e6, "g": 1e9}


@dataclass(frozen=True)
class SpeedRecord:
    bytes_per_second: float | None  # None: the tool said Unknown (link down)
    printed: str


def parse(text: str) -> SpeedRecord:
    for line_no, line in clean_lines(text):
        match = _SPEED_LINE_RE.match(line)
        if match is None:
            continue
        printed = match.group("value")
        if printed.rstrip("!").strip().lower() == "unknown":
            return SpeedRecord(bytes_per_second=None, printed=printed)
        value = _VALUE_RE.match(printed)
        if value is None:
            raise ParseError("unrecognised speed", line_no, line)
        bits = float(value.group("num")) * _BITS_PER_UNIT[value.group("unit").lower()]
        bound = BOUNDS["roce_speed_bits_per_second"]
        if not bound.contains(bits):
            raise ParseError(f"speed out of range 0..{bound.high:g} b/s", line_no, line)
        return SpeedRecord(bytes_per_second=bits / 8, printed=printed)
    raise_unparsable(text, "a 'speed' line")


def samples(record: SpeedRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    if record.bytes_per_second is None:
        return []
    labels = label_pairs(npu=chip.npu, chip=chip.chip)
    return [Sample("npu_roce_link_speed_bytes_per_second", labels, record.bytes_per_second)]


SOURCE = hccn_source("hccn_speed", "speed", parse, samples)
