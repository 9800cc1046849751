"""``npu-smi info -t hccs-bw -i N [-c C]``: HCCS bandwidth per link (GB/S, GB = 1e9 bytes).

Not key : value. Format from the npu-smi source (no real capture is known)::

    hccs link                      tx_bandwidth(GB/S)             rx_bandwidth(GB/S)
    0                                   12.500000                      0.000000
    1                                   3.250000                       4.000000
    total                               15.750000                      4.000000

Rows are wider than the header, so columns are split on whitespace, never by
position; the tx/rx order is read from the header. The ``xlink`` product variant
prints ``xlink link``. Exported: ``npu_hccs_bandwidth_bytes_per_second{link,
direction}`` per link (the ``total`` row is kept in the record only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import number
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source
from collectors.npu_smi_kv import chip_argv, chip_sample, one_record, raise_on_tool_error

__all__ = ["SOURCE", "HccsBandwidthRecord", "LinkBandwidth", "parse", "samples"]

GB = 1e9
_HEADER_RE = re.compile(r"(?:hccs|xlink)\s+link\s+(tx|rx)_bandwidth\(GB/S\)\s+(tx|rx)_bandwidth\(GB/S\)",
                        re.IGNORECASE)
_ROW_RE = re.compile(r"(\d{1,9}|total)\s+(\S+)\s+(\S+)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class LinkBandwidth:
    link: int
    tx_bytes_per_second: float | None
    rx_bytes_per_second: float | None


@dataclass(frozen=True, slots=True)
class HccsBandwidthRecord:
    links: tuple[LinkBandwidth, ...] = ()
    total_tx_bytes_per_second: float | None = None
    total_rx_bytes_per_second: float | None = None


def _rate(cell: str) -> float | None:
    value = number(cell)
    return None if value is None or value < 0 else value * GB


def parse(text: str) -> HccsBandwidthRecord:
    """Parse ``-t hccs-bw`` output; ToolError for npu-smi error text, ParseError without header/rows."""
    lines = text.splitlines()
    raise_on_tool_error(lines)
    order: tuple[str, str] | None = None
    links: list[LinkBandwidth] = []
    totals: dict[str, float | None] = {}
    for raw in lines:
        line = raw.strip()
        header = _HEADER_RE.fullmatch(line)
        if header:
            order = (header.group(1).lower(), header.group(2).lower())
            continue
        row = _ROW_RE.fullmatch(line) if order else None
        if order is None or row is None:
            continue
        rates = dict(zip(order, (_rate(row.group(2)), _rate(row.group(3))), strict=True))
        if row.group(1).lower() == "total":
            totals = rates
        else:
            links.append(LinkBandwidth(int(row.group(1)), rates.get("tx"), rates.get("rx")))
    if order is None:
        first = next(((n, ln.strip()) for n, ln in enumerate(lines, 1) if ln.strip()), (None, None))
        raise ParseError("no 'hccs link tx_bandwidth(GB/S) rx_bandwidth(GB/S)' header", *first)
    if not links and not totals:
        raise ParseError("hccs-bw header without link rows")
    return HccsBandwidthRecord(tuple(links), totals.get("tx"), totals.get("rx"))


def parse_records(text: str) -> list[HccsBandwidthRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def samples(records: Sequence[Any] | HccsBandwidthRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, HccsBandwidthRecord)
    if record is None or chip is None:
        return []
    out: list[Sample] = []
    for link in record.links:
        for direction, value in (("tx", link.tx_bytes_per_second), ("rx", link.rx_bytes_per_second)):
            if value is not None:
                out.append(chip_sample("npu_hccs_bandwidth_bytes_per_second", chip, value,
                                       link=link.link, direction=direction))
    return out


SOURCE = Source(
    name="npu_smi_hccs_bw",
    tool="npu-smi",
    group="health",
    scope="chip",
    argv=lambda chip: chip_argv("hccs-bw", chip),
    parse=parse_records,
    samples=samples,
)
