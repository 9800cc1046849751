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

A rate that is not a number or lies outside 0..10 TB/s is None, a link printed
twice keeps its first row, and rows beyond ``LIMITS["links"]`` (64) are dropped;
each is listed in ``HccsBandwidthRecord.rejected`` with its line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import is_absent, number
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source
from collectors.bounds import LIMITS, Rejection, Rejects, has_control_chars
from collectors.npu_smi_kv import chip_argv, chip_sample, one_record, raise_on_tool_error

__all__ = ["SOURCE", "HccsBandwidthRecord", "LinkBandwidth", "parse", "samples"]

GB = 1e9
_HEADER_RE = re.compile(r"(?:hccs|xlink)\s+link\s+(tx|rx)_bandwidth\(GB/S\)\s+(tx|rx)_bandwidth\(GB/S\)",
                        re.IGNORECASE)
_ROW_RE = re.compile(r"(\d{1,9}|total)\s+(\S+)\s+(\S+)", re.IGNORECASE)


@dataclass(frozen=True)
class LinkBandwidth:
    link: int
    tx_bytes_per_second: float | None
    rx_bytes_per_second: float | None


@dataclass(frozen=True)
class HccsBandwidthRecord:
    links: tuple[LinkBandwidth, ...] = ()
    total_tx_bytes_per_second: float | None = None
    total_rx_bytes_per_second: float | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _rate(cell: str, rejects: Rejects, line_no: int, line: str) -> float | None:
    value = number(cell)
    if value is None:
        if not is_absent(cell):
            rejects.add(f"{cell!r} is not a bandwidth in GB/S", line_no, line)
        return None
    return rejects.value("hccs_bandwidth_bytes_per_second", value * GB, line_no, line, "bandwidth")


def parse(text: str) -> HccsBandwidthRecord:
    """Parse ``-t hccs-bw`` output; ToolError for npu-smi error text, ParseError without header/rows."""
    lines = text.splitlines()
    raise_on_tool_error(lines)
    rejects = Rejects()
    order: tuple[str, str] | None = None
    links: dict[int, LinkBandwidth] = {}
    totals: dict[str, float | None] = {}
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if len(line) > LIMITS["line_chars"] or has_control_chars(line):
            rejects.add("line too long or with control characters", line_no, line)
            continue
        header = _HEADER_RE.fullmatch(line)
        if header:
            order = (header.group(1).lower(), header.group(2).lower())
            continue
        row = _ROW_RE.fullmatch(line) if order else None
        if order is None or row is None:
            continue
        tx_rx = (_rate(row.group(2), rejects, line_no, line), _rate(row.group(3), rejects, line_no, line))
        rates = dict(zip(order, tx_rx))
        if row.group(1).lower() == "total":
            totals = rates
        elif int(row.group(1)) in links:
            rejects.add(f"link {int(row.group(1))} printed twice; the first row is kept", line_no, line)
        elif len(links) >= LIMITS["links"]:
            rejects.add(f"more than {LIMITS['links']} links", line_no, line)
        else:
            link = int(row.group(1))
            links[link] = LinkBandwidth(link, rates.get("tx"), rates.get("rx"))
    if order is None:
        first = next(((n, ln.strip()) for n, ln in enumerate(lines, 1) if ln.strip()), (None, None))
        raise ParseError("no 'hccs link tx_bandwidth(GB/S) rx_bandwidth(GB/S)' header", *first)
    if not links and not totals:
        raise ParseError("hccs-bw header without link rows")
    return HccsBandwidthRecord(tuple(links.values()), totals.get("tx"), totals.get("rx"), rejects.freeze())


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
