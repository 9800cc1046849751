"""RoCE port packet counters: ``hccn_tool -i <devid> -stat -g``.

Sample output (910/910B: ``name:value`` without a space; the 950 UB variant
``-g -stat -i 0 -u 0 -p 4`` prints ``name: value``; both parse)::

    packet statistics:
    roce_rx_err_pkt_num:0
    roce_tx_err_pkt_num:0
    mac_rx_bad_pkt_num:0

Every integer counter is kept in the record. Three kinds are exported:

- error-like counters, as ``npu_roce_errors_total{npu,chip,counter}`` with the name as printed:
  a counter qualifies when its name contains one of ``err``, ``drop``, ``rty``, ``retry``,
  ``timeout``, ``unexpected``, ``bad`` or ``discard`` (``ERROR_COUNTER_WORDS``);
- the port's transmitted bytes, as ``npu_roce_transmitted_bytes_total{npu,chip}``, from
  ``mac_tx_total_oct_num`` (``TRANSMITTED_BYTES``): every octet the port's MAC sent, RoCE and the
  NIC path alike (``nic_tx_all_oct_num`` is the NIC path only and is not used);
- PFC pause frames per direction, as ``npu_roce_pfc_pause_frames_total{npu,chip,direction}``
  (``rx`` received, ``tx`` sent), from the port's total, ``mac_{rx,tx}_pfc_pkt_num`` or, as a
  950 port's statistics struct names it, ``core_mib_{rx,tx}pfcpkts`` (``PFC_TOTALS``); a port that
  prints only the per-priority counters ``mac_{rx,tx}_pfc_pri<0-7>_pkt_num`` gets their sum.

Where the names come from: the ``-stat -g`` printer of hccn_tool in the Ascend driver source
(public mirror ``verylucky01/driver``) prints, after ``packet statistics:``, ``mac_tx_mac_pause_num``,
``mac_rx_mac_pause_num``, ``mac_tx_pfc_pkt_num``, ``mac_tx_pfc_pri0..7_pkt_num``,
``mac_rx_pfc_pkt_num``, ``mac_rx_pfc_pri0..7_pkt_num``, ``mac_{tx,rx}_total_{pkt,oct}_num``,
``mac_{tx,rx}_bad_{pkt,oct}_num``, the ``roce_*`` packet and error counters and
``nic_{tx,rx}_all_{pkg,oct}_num``; Ascend's fault-collection guide shows the same shape
(``nic_tx_all_oct_num:16921741``), and the DCMI reference (``dcmi_network_pkt_stats_info``)
describes ``mac_tx_total_oct_num`` as the bytes the MAC sent and ``mac_tx_pfc_pkt_num`` as the PFC
frames it sent, with the per-priority counters per scheduling queue. The 950 ``-stat -u -p``
listing prints UB flit and packet counters (no bytes); its struct ``dcmi_port_pkt_stats_info``
(``dcmi_interface_api.h``) ends in ``core_mib_rxpfcpkts``/``core_mib_txpfcpkts``. The 802.3x
link-level pause counters (``mac_*_mac_pause_num``) are not PFC and are not exported. A port that
prints none of these names exports no such series (never a 0 in its place).

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

__all__ = [
    "ERROR_COUNTER_WORDS", "PFC_TOTALS", "SOURCE", "TRANSMITTED_BYTES", "StatRecord", "is_error_counter",
    "parse", "pfc_pause_frames", "samples", "transmitted_bytes",
]

ERROR_COUNTER_WORDS: tuple[str, ...] = (
    "err", "drop", "rty", "retry", "timeout", "unexpected", "bad", "discard")

TRANSMITTED_BYTES = "mac_tx_total_oct_num"
PFC_TOTALS: dict[str, tuple[str, ...]] = {
    "rx": ("mac_rx_pfc_pkt_num", "core_mib_rxpfcpkts"),
    "tx": ("mac_tx_pfc_pkt_num", "core_mib_txpfcpkts"),
}
_PFC_PRIORITY_RE = re.compile(r"^mac_(?P<direction>rx|tx)_pfc_pri[0-7]_pkt_num$")

_COUNTER_RE = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]{0,63})\s*:\s*(?P<value>\S.*)$", re.ASCII)
_COUNTER_SHAPED_RE = re.compile(r"^[^\s:]+\s*:\s*\S")
_INTEGER_RE = re.compile(r"[0-9]{1,20}")
# The usual answer, whole: the header, then ``name:value`` lines with nothing the line-by-line parse would
# refuse or read differently. It is read with one pattern (see ``parse``).
_PLAIN_LISTING_RE = re.compile(
    r"(?:packet statistics:\n)?(?:[A-Za-z_][\w.\-]{0,63}:[0-9]{1,20}\n)*[A-Za-z_][\w.\-]{0,63}:[0-9]{1,20}\n?",
    re.ASCII)
_PLAIN_COUNTER_RE = re.compile(r"^([A-Za-z_][\w.\-]{0,63}):([0-9]{1,20})$", re.ASCII | re.MULTILINE)


@dataclass(frozen=True)
class StatRecord:
    counters: dict[str, int] = field(default_factory=dict)  # every integer counter, name as printed
    rejected: tuple[Rejection, ...] = ()  # lines refused (collectors.bounds)


@functools.lru_cache(maxsize=1024)  # the names a port prints, judged every round
def is_error_counter(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in ERROR_COUNTER_WORDS)


def parse(text: str) -> StatRecord:
    plain = _parse_plain(text)
    return plain if plain is not None else _parse_lines(text)


def _parse_lines(text: str) -> StatRecord:
    counters: dict[str, int] = {}
    rejects = Rejects()
    prose = 0
    bound, most = BOUNDS["counter"], LIMITS["counters"]
    for line_no, line in clean_lines(text, rejects):
        match = _COUNTER_RE.match(line)
        if match is None:
            if _COUNTER_SHAPED_RE.match(line):
                rejects.add("counter name is not ASCII of at most 64 characters", line_no, line)
            else:
                prose += line.strip() != ""  # headers ("packet statistics:"), blank values, prose
            continue
        name, value = match.group("name", "value")
        if not _INTEGER_RE.fullmatch(value) or not bound.contains(number := int(value)):
            rejects.add(f"counter {name}: {value!r} is not a non-negative 64-bit integer", line_no, line)
        elif name not in counters and len(counters) >= most:
            rejects.add(f"more than {most} counters", line_no, line)
        else:
            counters[name] = number
    if not counters or prose > len(counters):
        # A listing is a header and counters; junk with a stray "x:1" line in it is still junk.
        raise_unparsable(text, "packet counters")
    return StatRecord(counters=counters, rejected=rejects.freeze())


@functools.lru_cache(maxsize=1024)  # the names a port prints, looked at every round
def _priority_direction(name: str) -> str | None:
    """``rx`` or ``tx`` for a per-priority PFC counter's name, else None."""
    match = _PFC_PRIORITY_RE.match(name)
    return None if match is None else match.group("direction")


def _parse_plain(text: str) -> StatRecord | None:
    """The record of a plain listing (``_PLAIN_LISTING_RE``), the same the line-by-line parse makes of it,
    in a fifth of its time (run for every port every few seconds by the fail-slow sampling); None for any
    other text, or for a value or a count the line-by-line parse would refuse, which it then reports."""
    if _PLAIN_LISTING_RE.fullmatch(text) is None:
        return None
    pairs = _PLAIN_COUNTER_RE.findall(text)
    if len(pairs) > LIMITS["counters"]:
        return None
    counters = {name: int(value) for name, value in pairs}
    if max(counters.values()) > BOUNDS["counter"].high:
        return None
    return StatRecord(counters=counters)


def transmitted_bytes(record: StatRecord) -> int | None:
    return record.counters.get(TRANSMITTED_BYTES)


def pfc_pause_frames(record: StatRecord) -> dict[str, int]:
    """PFC frames per direction: the port's total where it prints one, else its priorities' sum."""
    by_priority: dict[str, int] = {}
    for name, value in record.counters.items():
        direction = _priority_direction(name)
        if direction is not None:
            by_priority[direction] = by_priority.get(direction, 0) + value
    frames: dict[str, int] = {}
    for direction, names in PFC_TOTALS.items():
        total = next((record.counters[name] for name in names if name in record.counters), None)
        if total is None:
            total = by_priority.get(direction)
        if total is not None:
            frames[direction] = total
    return frames


def samples(record: StatRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    port = label_pairs(npu=chip.npu, chip=chip.chip)
    out = [
        Sample("npu_roce_errors_total", (*port, ("counter", name)), float(value))
        for name, value in sorted(record.counters.items())
        if is_error_counter(name)
    ]
    sent = transmitted_bytes(record)
    if sent is not None:
        out.append(Sample("npu_roce_transmitted_bytes_total", port, float(sent)))
    out += [
        Sample("npu_roce_pfc_pause_frames_total", (*port, ("direction", direction)), float(frames))
        for direction, frames in sorted(pfc_pause_frames(record).items())
    ]
    return out


SOURCE = hccn_source("hccn_stat", "stat", parse, samples)
