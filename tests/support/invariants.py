"""Invariants every parser result holds, whatever the input: for property (hypothesis) tests.

- every number a record carries is inside its documented physical bound (collectors.bounds.BOUNDS),
  chosen by the field's name (``*_celsius``: temperature_celsius, ``*_ratio``: 0..1, ...);
- every rejected line came from the input: its text (clipped and escaped as ``clip`` does) is part of
  the input, its line number is one the input has, and no parse keeps more than LIMITS["rejections"]
  of them (plus one summary).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

from collectors.bounds import BOUNDS, LIMITS, Bound, clip, rejections

RATIO = Bound(0, 1, "", "a usage ratio is a percentage divided by 100")

# Field name (exact, or a suffix after "_") -> the bound every number under that field keeps.
_BY_NAME: dict[str, Bound] = {
    "aicore_count": BOUNDS["aicore_count"],
    "chip_count": BOUNDS["chips_per_npu"],
    "link_speeds_gbps": BOUNDS["hccs_link_speed_gbps"],
    "tx_power_watts": BOUNDS["optical_power_watts"],
    "rx_power_watts": BOUNDS["optical_power_watts"],
    "tx_bias_amps": BOUNDS["optical_bias_amps"],
    "vcc_volts": BOUNDS["optical_voltage_volts"],
    "snr_db": BOUNDS["snr_db"],
    "counters": BOUNDS["counter"],
}
_BY_SUFFIX: tuple[tuple[str, Bound], ...] = (
    ("_bytes_per_second", BOUNDS["hccs_bandwidth_bytes_per_second"]),
    ("_capacity_bytes", BOUNDS["memory_bytes"]),
    ("_total_pages", BOUNDS["hugepages"]),
    ("_ratio", RATIO),
    ("_celsius", BOUNDS["temperature_celsius"]),
    ("_watts", BOUNDS["power_watts"]),
    ("_hertz", BOUNDS["frequency_hertz"]),
    ("_errors", BOUNDS["counter"]),
    ("_pages", BOUNDS["counter"]),
    ("_count", BOUNDS["counter"]),
)


def bound_of(field_name: str) -> Bound | None:
    if field_name in _BY_NAME:
        return _BY_NAME[field_name]
    return next((bound for suffix, bound in _BY_SUFFIX if field_name.endswith(suffix)), None)


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _numbers(item)


def bounded_fields(records: Any) -> Iterator[tuple[str, float, Bound | None]]:
    """(field name, number, its bound or None) for every number in ``records``, however nested."""
    if dataclasses.is_dataclass(records) and not isinstance(records, type):
        for field in dataclasses.fields(records):
            if field.name in ("rejected", "rejects"):
                continue
            value = getattr(records, field.name)
            if dataclasses.is_dataclass(value) or (isinstance(value, (list, tuple)) and any(
                    dataclasses.is_dataclass(item) for item in value)):
                yield from bounded_fields(value)
                continue
            bound = bound_of(field.name)
            for number in _numbers(value):
                yield field.name, number, bound
    elif isinstance(records, dict):
        for value in records.values():
            yield from bounded_fields(value)
    elif isinstance(records, (list, tuple)):
        for item in records:
            yield from bounded_fields(item)


def assert_values_within_bounds(records: Any) -> None:
    for name, number, bound in bounded_fields(records):
        assert math.isfinite(number), (name, number)
        if bound is not None:
            assert bound.contains(number), (name, number, f"{bound.low:g}..{bound.high:g}")


def _folded(text: str) -> str:
    return " ".join(text.split())


def assert_rejections_come_from(records: Any, text: str) -> None:
    """Every rejection ``records`` carry names a line of ``text`` (clipped, escaped) by a real line number."""
    found = rejections(records)
    assert len(found) <= LIMITS["rejections"] + 1
    escaped = clip(text, limit=4 * len(text) + 4)  # every control character escaped, nothing cut
    line_count = max(len(text.splitlines()), text.count("\n") + 1)
    for rejection in found:
        core = rejection.line[:-3] if rejection.line.endswith("...") else rejection.line
        # A value continued on the next line (npu-smi board's wrapped fields) is rejected as one, joined by "\n";
        # a key-value line is quoted as "key : value", its runs of blanks folded to one. A key whose own line
        # had no value ("Chip Count : " then " : mcu") is quoted with the value of its continuation line.
        pieces = core.split("\\n")
        if _folded(pieces[0]) not in _folded(escaped) and " : " in pieces[0]:
            key, value = pieces[0].split(" : ", 1)
            pieces[:1] = [f"{key} :", f": {value}"]
        assert all(_folded(piece) in _folded(escaped) for piece in pieces), rejection
        assert rejection.line_no is None or 0 <= rejection.line_no <= line_count, (rejection, line_count)
