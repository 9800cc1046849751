"""What a parser accepts from a vendor tool: physical ranges, label rules, size caps, rejected lines.

A broken or malicious ``npu-smi``/``hccn_tool`` must not be able to take the agent
down (series explosions, binary label values, quadratic parsing) nor to publish
impossible readings. Every parser checks what it reads against the tables below.

Policy, shared by all parsers:

- A value outside its physical range (``BOUNDS``) is dropped, as if the tool had
  printed ``NA``, and the line is reported as a ``Rejection``. The rest of the
  output stays usable: one broken sensor must not blank a healthy node.
- A row whose identity cannot be trusted (an id that is not an integer, a name or
  bus id that is not printable text of the expected shape) is dropped whole and
  reported: without a trustworthy identity its values cannot be filed anywhere.
- Only when nothing usable is left, or when a structural cap (``LIMITS``) is
  exceeded, does the parser raise ``ParseError`` naming the line.

Rejections travel with the parsed records (a ``rejected`` field or attribute), so
the agent can count them (``rejections(records)``) without failing the source.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collectors.base import ParseError

__all__ = [
    "BOUNDS",
    "LIMITS",
    "Bound",
    "Rejection",
    "Rejects",
    "RowList",
    "RowTuple",
    "clip",
    "has_control_chars",
    "is_label_text",
    "rejections",
]

MIB = 1 << 20
TIB = 1 << 40


@dataclass(frozen=True)
class Bound:
    """An inclusive physical range; ``why`` says where the limit comes from."""

    low: float
    high: float
    unit: str
    why: str

    def contains(self, value: float) -> bool:
        return math.isfinite(value) and self.low <= value <= self.high


# One table for every reading any parser accepts. Ranges are deliberately wide: they
# only exist to refuse what no hardware can report, never to judge a healthy reading.
BOUNDS: Mapping[str, Bound] = {
    "power_watts": Bound(0, 2000, "W", "the largest Ascend module draws under 1 kW; 2 kW also covers card totals"),
    "temperature_celsius": Bound(-40, 150, "C", "chips, HBM, boards and optics stop working outside -40..150 C"),
    "percent": Bound(0, 100, "%", "a utilisation or usage rate is a share of 100"),
    "memory_bytes": Bound(0, TIB, "B", "no chip carries 1 TiB of HBM or DDR (950: 144 GB)"),
    "memory_mib": Bound(0, TIB // MIB, "MiB", "the same 1 TiB limit in npu-smi's MB (2^20) unit"),
    "hugepages": Bound(0, TIB // 4096, "pages", "1 TiB of the smallest (4 KiB) pages"),
    "frequency_hertz": Bound(0, 10e9, "Hz", "no AI Core, HBM or DDR clock reaches 10 GHz"),
    "aicore_count": Bound(0, 4096, "cores", "a chip has tens of AI Cores"),
    "counter": Bound(0, 2**64 - 1, "", "hardware counters are unsigned and at most 64-bit"),
    "hccs_lanes": Bound(0, 64, "lanes", "an HCCS port has a handful of lanes"),
    "hccs_link_speed_gbps": Bound(0, 10_000, "Gb/s", "HCCS lanes run at tens of Gb/s; 10 Tb/s is far beyond"),
    "hccs_bandwidth_bytes_per_second": Bound(0, 1e13, "B/s", "one HCCS link moves tens of GB/s; 10 TB/s is beyond"),
    "roce_speed_bits_per_second": Bound(0, 3.2e12, "b/s", "Ethernet ports top out at 800G-1.6T; 3.2 Tb/s is beyond"),
    "optical_power_watts": Bound(0, 1.0, "W", "pluggable optics emit milliwatts; a watt would burn the receiver"),
    "optical_voltage_volts": Bound(0, 10, "V", "module supply is 3.3 V"),
    "optical_bias_amps": Bound(0, 1, "A", "laser bias currents are milliamps"),
    "snr_db": Bound(-100, 100, "dB", "a signal-to-noise ratio beyond +-100 dB is not a measurement"),
    "id": Bound(0, 2**31 - 1, "", "npu-smi and hccn_tool print ids from C ints"),
    "pid": Bound(1, 2**22, "", "Linux caps pids at 2^22 (PID_MAX_LIMIT)"),
    "chips_per_npu": Bound(0, 64, "chips", "a card holds at most a few dies (Atlas 300I: 4)"),
}

# Structural caps. A table beyond them is not npu-smi's output but a broken or hostile tool.
LIMITS: Mapping[str, int] = {
    "max_chips": 64,  # the densest Ascend node has 16 NPUs x 2 dies; config collectors.npu_smi.max_chips
    "line_chars": 1024,  # the longest real line in the corpus is 146 characters; regexes stay linear
    "label_chars": 64,  # longest real label value is a 20-character serial or version
    "links": 64,  # HCCS/UB ports per chip: 8 on 910B, 18 on 950; each port is a series
    "lanes": 16,  # optical module lanes (QSFP-DD: 8)
    "error_codes": 64,  # npu-smi prints a handful of active error codes per chip
    "counters": 1024,  # hccn_tool -stat prints about 100 counters; each error counter is a series
    "processes": 4096,  # process rows in one table (npu-smi caps the rows per chip)
    "rejections": 100,  # rejections kept per parse; the count beyond is summarised in one entry
}

# npu-smi prints integral MB: a used value above total by more than this is not rounding.
USED_OVER_TOTAL_SLACK = 1.0

_LINE_CLIP = 80
_CONTROL_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")
_LABEL_RE = re.compile(r"[\x20-\x7e]*")


def clip(line: str, limit: int = _LINE_CLIP) -> str:
    """``line`` cut to ``limit`` characters (marked with ``...``), control characters escaped (``\\x1b``).

    Rejected lines end up in logs and in ``npuwatch diagnose`` output: a hostile
    tool must not reach the reader's terminal through them.
    """
    head = line[: limit + 1]
    if _CONTROL_RE.search(head):
        head = _CONTROL_RE.sub(lambda match: ascii(match.group())[1:-1], head)
    return head if len(head) <= limit and len(line) <= limit else head[: limit - 3] + "..."


def has_control_chars(text: str) -> bool:
    """True when ``text`` holds a control character other than TAB (C0, DEL, C1, line separators)."""
    return _CONTROL_RE.search(text) is not None


def is_label_text(text: str, max_chars: int | None = None) -> bool:
    """Printable ASCII of bounded length: safe as a Prometheus label value."""
    limit = LIMITS["label_chars"] if max_chars is None else max_chars
    return len(text) <= limit and _LABEL_RE.fullmatch(text) is not None


@dataclass(frozen=True)
class Rejection:
    """A line (or value) a parser refused; ``line`` is clipped to about 80 characters."""

    line_no: int | None
    line: str
    reason: str

    def __str__(self) -> str:
        where = "" if self.line_no is None else f" (line {self.line_no}: {self.line!r})"
        return f"{self.reason}{where}"


class Rejects:
    """Collects the rejections of one parse (bounded) and checks values against ``BOUNDS``."""

    def __init__(self) -> None:
        self._items: list[Rejection] = []
        self._dropped = 0

    def __len__(self) -> int:
        return len(self._items) + self._dropped

    def add(self, reason: str, line_no: int | None = None, line: str = "") -> None:
        if len(self._items) < LIMITS["rejections"]:
            self._items.append(Rejection(line_no, clip(line), reason))
        else:
            self._dropped += 1

    def value(self, bound_name: str, value: float | None, line_no: int | None = None, line: str = "",
              what: str = "") -> float | None:
        """``value`` when inside ``BOUNDS[bound_name]``; else None and a rejection (None passes)."""
        if value is None:
            return None
        bound = BOUNDS[bound_name]
        if bound.contains(value):
            return value
        label = what or bound_name
        self.add(f"{label} {value:g} outside {bound.low:g}..{bound.high:g} {bound.unit}".rstrip(), line_no, line)
        return None

    def first(self) -> Rejection | None:
        return self._items[0] if self._items else None

    def error(self, message: str) -> ParseError:
        """A ParseError naming the first rejected line (for output with nothing usable left)."""
        first = self.first()
        if first is None:
            return ParseError(message)
        return ParseError(f"{message}: {first.reason}", first.line_no, first.line)

    def freeze(self) -> tuple[Rejection, ...]:
        if self._dropped:
            summary = Rejection(None, "", f"{self._dropped} more rejections not listed")
            return (*self._items, summary)
        return tuple(self._items)


class RowList(list):  # type: ignore[type-arg]
    """A list of parsed rows that also carries the parse's ``rejected`` lines."""

    rejected: tuple[Rejection, ...] = ()

    @classmethod
    def of(cls, rows: Iterable[Any], rejected: tuple[Rejection, ...]) -> RowList:
        out = cls(rows)
        out.rejected = rejected
        return out


class RowTuple(tuple):  # type: ignore[type-arg]
    """A tuple of parsed rows that also carries the parse's ``rejected`` lines."""

    rejected: tuple[Rejection, ...] = ()

    @classmethod
    def of(cls, rows: Iterable[Any], rejected: tuple[Rejection, ...]) -> RowTuple:
        out = cls(rows)
        out.rejected = rejected
        return out


def rejections(records: Any) -> tuple[Rejection, ...]:
    """Every rejection carried by what a ``Source.parse`` returned (a record, a list of them, ...)."""
    own = getattr(records, "rejected", None)
    if isinstance(own, tuple):
        return own
    if isinstance(records, Mapping):  # the agent keeps per-chip records by chip
        records = list(records.values())
    if isinstance(records, (list, tuple)):
        found: list[Rejection] = []
        for record in records:
            found.extend(rejections(record))
        return tuple(found)
    return ()
