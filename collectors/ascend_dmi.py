"""Compute and bandwidth self-tests: ``ascend-dmi -f -t <dtype> -q`` and ``ascend-dmi --bw -q`` (opt-in).

Both tests load the device for tens of seconds, so the sources are off by
default and meant for an idle node. ``-q`` skips the ``(Y/N)`` prompt; the
parser tolerates the prompt anyway. Real ``-f`` capture (CANN 8.5.0, 310P)::

    This test will affect the business ... Do you want to continue?(Y/N)Y
    -----------------------------------------------------------------------
        Device        Execute Times        Duration(ms)        TFLOPS@FP16          Power(W)
    -----------------------------------------------------------------------
        0             600,000,000          14222               88.475             85.1999969
    -----------------------------------------------------------------------

The rate header carries the unit and dtype (``TFLOPS@FP16``, ``TOPS@INT8``);
T/G/M/K/P prefixes are applied, so ``npu_dmi_flops`` is in FLOP/s (or OP/s for
integer dtypes). ``Device`` is the id ascend-dmi printed (the ``-d`` id) and
becomes the ``npu`` label.

``--bw`` text **[assumed]**: no capture exists. The parser accepts a table whose
header has a ``Bandwidth(<unit>/s)`` column (``KB``/``MB``/``GB``/``TB`` decimal,
``KiB``/``MiB``/``GiB`` binary) and whose rows carry a device id and a transfer
path (``h2d``, ``d2h``, ``d2d``, ``p2p``) either in a cell or in a preceding
section title line. When one path is printed for several sizes, the best
(highest) bandwidth is kept, as ``npu_dmi_bandwidth_bytes_per_second{npu,path}``.

``--format json`` / ``-fmt json`` **[assumed]**: the shape is not documented for
``-f``/``--bw``. ``parse_json`` walks any nesting of lists and dicts and takes
every dict that names a device (``device``/``device_id``/``npu``/``card_id``/
``logic_id``/``chip_id``, inherited from an enclosing dict) together with either a
dtype (``dtype``/``data_type``/``type``) and a rate (a key containing ``flops``
or ``ops``; the key's or the value's T/G/... prefix is applied) or a path
(``path``/``direction``/``type``/``mode``) and a bandwidth (a key containing
``bandwidth``; unit from the key or the value, else GB/s).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import number
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source, ToolError, label_pairs

__all__ = [
    "BW_SOURCE",
    "FLOPS_SOURCE",
    "SOURCES",
    "BandwidthResult",
    "FlopsResult",
    "flops_source",
    "parse_bandwidth",
    "parse_flops",
    "parse_json",
    "samples",
    "supports_json",
]

_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}
_BYTE_UNITS = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
               "kib": 2.0**10, "mib": 2.0**20, "gib": 2.0**30, "tib": 2.0**40}
_RATE_UNIT_RE = re.compile(r"^(?P<prefix>[KMGTP]?)(?:FLOPS|OPS)(?:@(?P<dtype>\w+))?$", re.IGNORECASE)
_BW_HEADER_RE = re.compile(r"bandwidth\s*\((?P<unit>[KMGT]?i?B)/s\)", re.IGNORECASE)
_PATH_RE = re.compile(r"\b(h2d|d2h|d2d|p2p)\b", re.IGNORECASE)
_CELL_SPLIT_RE = re.compile(r"\s*\|\s*|\s{2,}")
_RULE_RE = re.compile(r"^[-=+|\s]+$")
_ERROR_HINT_RE = re.compile(
    r"\b(?:error|failed|fail|invalid|usage|not\s+support(?:ed)?|permission|denied|not found|no device)\b",
    re.IGNORECASE)
_DTYPE_RE = re.compile(r"^(?:fp|bf|hf|int|uint)\d+$", re.IGNORECASE)
_DEVICE_KEYS = ("device", "device_id", "deviceid", "npu", "npu_id", "card_id", "logic_id", "chip_id")
_DTYPE_KEYS = ("dtype", "data_type", "datatype", "type")
_PATH_KEYS = ("path", "direction", "type", "mode")
_JSON_RATE_KEY_RE = re.compile(r"^(?P<prefix>[kmgtp]?)(?:flops|ops)(?:@(?P<dtype>\w+)|_\w*)?$", re.IGNORECASE)
_VALUE_UNIT_RE = re.compile(r"^\s*(?P<num>[-+]?\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z/@0-9]*)\s*$")


@dataclass(frozen=True)
class FlopsResult:
    device: int
    dtype: str  # lowercase, e.g. "fp16", "int8"
    flops: float  # FLOP/s (OP/s for integer dtypes)
    power_watts: float | None = None
    execute_times: int | None = None
    duration_seconds: float | None = None


@dataclass(frozen=True)
class BandwidthResult:
    device: int
    path: str  # h2d / d2h / d2d / p2p
    bytes_per_second: float
    size_bytes: int | None = None


def supports_json(help_text: str) -> bool:
    """True when ``ascend-dmi -h`` lists a ``--format``/``-fmt`` option and mentions json."""
    return bool(re.search(r"(?:--format|-fmt)\b", help_text)) and "json" in help_text.lower()


def _cells(line: str) -> list[str]:
    return [cell for cell in _CELL_SPLIT_RE.split(line.strip().strip("|")) if cell]


def _no_table(text: str, what: str) -> ParseError:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ToolError(f"ascend-dmi printed nothing where {what} was expected")
    if _ERROR_HINT_RE.search(text):
        return ToolError(f"ascend-dmi reported an error instead of {what}", 1, lines[0])
    return ParseError(f"{what} not found in ascend-dmi output", 1, lines[0])


def _is_id(cell: str) -> bool:
    return cell.isascii() and cell.isdigit()


def _looks_like_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


def parse_flops(text: str) -> list[FlopsResult]:
    """``ascend-dmi -f`` text (or ``--format json``) as one result per device."""
    if _looks_like_json(text):
        return parse_json(text)[0]
    header: list[str] | None = None
    multiplier = 1.0
    dtype = ""
    results: list[FlopsResult] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or _RULE_RE.match(line):
            continue
        cells = _cells(line)
        if header is None:
            rate = next((m for cell in cells if (m := _RATE_UNIT_RE.match(cell)) and m.group("dtype")), None)
            if rate is not None and any(cell.lower() == "device" for cell in cells):
                header = [cell.lower() for cell in cells]
                multiplier = _PREFIX[rate.group("prefix").lower()]
                dtype = rate.group("dtype").lower()
            continue
        if not _is_id(cells[0]):
            continue
        if len(cells) != len(header):
            cells = line.split()
        if len(cells) != len(header):
            raise ParseError("row does not match the header's columns", line_no, raw)
        row = dict(zip(header, cells))
        rate_cell = next(value for key, value in row.items() if _RATE_UNIT_RE.match(key))
        rate_value = number(rate_cell)
        if rate_value is None or not math.isfinite(rate_value * multiplier):
            raise ParseError("rate is not a number", line_no, raw)
        times = number(row.get("execute times"))
        duration_ms = number(row.get("duration(ms)"))
        results.append(FlopsResult(
            device=int(cells[0]),
            dtype=dtype,
            flops=rate_value * multiplier,
            power_watts=number(row.get("power(w)")),
            execute_times=int(times) if times is not None else None,
            duration_seconds=duration_ms / 1000 if duration_ms is not None else None,
        ))
    if header is None:
        raise _no_table(text, "a compute result table")
    if not results:
        raise ParseError("compute result table has no device rows")
    return results


def parse_bandwidth(text: str) -> list[BandwidthResult]:
    """``ascend-dmi --bw`` text **[assumed layout, see module doc]** (or ``--format json``)."""
    if _looks_like_json(text):
        return parse_json(text)[1]
    header: list[str] | None = None
    scale = 1.0
    section_path: str | None = None
    best: dict[tuple[int, str], BandwidthResult] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or _RULE_RE.match(line):
            continue
        cells = _cells(line)
        unit = _BW_HEADER_RE.search(line)
        if unit is not None:
            header = [cell.lower() for cell in cells]
            scale = _BYTE_UNITS[unit.group("unit").lower()]
            continue
        if header is None or not _is_id(cells[0]):
            paths = {match.lower() for match in _PATH_RE.findall(line)}
            if len(paths) == 1:
                section_path = paths.pop()
            continue
        result = _bandwidth_row(header, cells, scale=scale, section_path=section_path,
                                line_no=line_no, raw=raw)
        key = (result.device, result.path)
        if key not in best or result.bytes_per_second > best[key].bytes_per_second:
            best[key] = result
    if header is None:
        raise _no_table(text, "a bandwidth table")
    if not best:
        raise ParseError("bandwidth table has no device rows")
    return list(best.values())


def _bandwidth_row(header: list[str], cells: list[str], *, scale: float, section_path: str | None,
                   line_no: int, raw: str) -> BandwidthResult:
    if len(cells) != len(header):
        raise ParseError("row does not match the header's columns", line_no, raw)
    row = dict(zip(header, cells))
    path = next((cell.lower() for cell in cells if _PATH_RE.fullmatch(cell)), section_path)
    if path is None:
        raise ParseError("no transfer path (h2d/d2h/d2d/p2p) for this row", line_no, raw)
    value = number(next(value for key, value in row.items() if _BW_HEADER_RE.search(key)))
    if value is None or not math.isfinite(value * scale):
        raise ParseError("bandwidth is not a number", line_no, raw)
    size = next((number(value) for key, value in row.items() if "size" in key), None)
    return BandwidthResult(device=int(cells[0]), path=path, bytes_per_second=value * scale,
                           size_bytes=int(size) if size is not None else None)


def parse_json(text: str) -> tuple[list[FlopsResult], list[BandwidthResult]]:
    """``ascend-dmi ... --format json`` **[assumed shape, see module doc]**."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"ascend-dmi JSON output is not valid JSON: {exc}") from None
    flops: list[FlopsResult] = []
    bandwidth: list[BandwidthResult] = []
    for node, device, dtype in _dicts(document, None, None):
        if device is None:
            continue
        rate = _json_rate(node, dtype)
        if rate is not None:
            flops.append(FlopsResult(device=device, dtype=rate[0], flops=rate[1],
                                     power_watts=_json_number(node, ("power", "power_w", "power(w)"))))
            continue
        bw = _json_bandwidth(node)
        if bw is not None:
            bandwidth.append(BandwidthResult(device=device, path=bw[0], bytes_per_second=bw[1]))
    if not flops and not bandwidth:
        raise ParseError("no compute or bandwidth results in ascend-dmi JSON output")
    return flops, bandwidth


def _dicts(node: Any, device: int | None, dtype: str | None,
           depth: int = 0) -> Iterator[tuple[Mapping[str, Any], int | None, str | None]]:
    """Every dict in the document with the device and dtype it names or inherits."""
    if depth > 32:
        return
    if isinstance(node, Mapping):
        own_device = _json_device(node)
        device = own_device if own_device is not None else device
        dtype = _json_dtype(node) or dtype
        yield node, device, dtype
        children: Sequence[Any] = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        return
    for child in children:
        yield from _dicts(child, device, dtype, depth + 1)


def _lower_keys(node: Mapping[str, Any]) -> dict[str, Any]:
    return {str(key).lower(): value for key, value in node.items()}


def _json_device(node: Mapping[str, Any]) -> int | None:
    keys = _lower_keys(node)
    for key in _DEVICE_KEYS:
        value = keys.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and _is_id(value.strip()):
            return int(value.strip())
    return None


def _json_number(node: Mapping[str, Any], names: tuple[str, ...]) -> float | None:
    keys = _lower_keys(node)
    for name in names:
        value = keys.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            parsed = number(value)
            if parsed is not None:
                return parsed
    return None


def _value_with_unit(value: Any) -> tuple[float, str] | None:
    if isinstance(value, bool):
        return None
    amount: float | None = None
    unit = ""
    if isinstance(value, (int, float)):
        amount = float(value)
    elif isinstance(value, str) and (match := _VALUE_UNIT_RE.match(value)) is not None:
        amount, unit = float(match.group("num").replace(",", "")), match.group("unit")
    # A rate is never negative; the caller scales by up to 1e15, so keep the product finite.
    if amount is None or not math.isfinite(amount) or amount < 0 or amount > 1e290:
        return None
    return amount, unit


def _json_dtype(node: Mapping[str, Any]) -> str | None:
    keys = _lower_keys(node)
    return next((str(keys[k]).lower() for k in _DTYPE_KEYS
                 if isinstance(keys.get(k), str) and _DTYPE_RE.match(keys[k])), None)


def _json_rate(node: Mapping[str, Any], dtype: str | None) -> tuple[str, float] | None:
    keys = _lower_keys(node)
    for key, value in keys.items():
        parsed = _value_with_unit(value)
        if parsed is None:
            continue
        amount, unit = parsed
        key_match = _JSON_RATE_KEY_RE.match(key)
        unit_match = _RATE_UNIT_RE.match(unit) if unit else None
        if key_match is None and unit_match is None:
            continue
        chosen = unit_match or key_match
        assert chosen is not None
        prefix = chosen.group("prefix").lower()
        found_dtype = dtype or next(
            (m.group("dtype").lower() for m in (key_match, unit_match) if m and m.group("dtype")), "")
        if found_dtype:
            return found_dtype, amount * _PREFIX[prefix]
    return None


def _json_bandwidth(node: Mapping[str, Any]) -> tuple[str, float] | None:
    keys = _lower_keys(node)
    path = next((str(keys[k]).lower() for k in _PATH_KEYS
                 if isinstance(keys.get(k), str) and _PATH_RE.fullmatch(keys[k])), None)
    if path is None:
        return None
    for key, value in keys.items():
        if "bandwidth" not in key:
            continue
        parsed = _value_with_unit(value)
        if parsed is None:
            continue
        amount, unit = parsed
        unit_text = unit or key
        unit_match = re.search(r"(?P<unit>[KMGT]?i?B)(?:/s|ps)", unit_text, re.IGNORECASE)
        scale = _BYTE_UNITS[unit_match.group("unit").lower()] if unit_match else _BYTE_UNITS["gb"]
        return path, amount * scale
    return None


def samples(records: Sequence[Any], chip: ChipRef | None = None,
            ctx: CollectContext | None = None) -> list[Sample]:
    """``npu_dmi_flops{npu,dtype}`` and ``npu_dmi_bandwidth_bytes_per_second{npu,path}``; last one wins."""
    by_key: dict[tuple[str, str, str], Sample] = {}
    for record in records:
        if isinstance(record, FlopsResult):
            labels = label_pairs(npu=record.device, dtype=record.dtype)
            by_key[("flops", str(record.device), record.dtype)] = Sample(
                "npu_dmi_flops", labels, record.flops)
        elif isinstance(record, BandwidthResult):
            labels = label_pairs(npu=record.device, path=record.path)
            by_key[("bw", str(record.device), record.path)] = Sample(
                "npu_dmi_bandwidth_bytes_per_second", labels, record.bytes_per_second)
    return list(by_key.values())


def flops_source(dtype: str = "fp16") -> Source:
    """The ``ascend-dmi -f -t <dtype> -q`` source (off by default)."""
    return Source(
        name="ascend_dmi_flops" if dtype == "fp16" else f"ascend_dmi_flops_{dtype}",
        tool="ascend-dmi",
        group="dmi",
        scope="node",
        argv=lambda _chip: ["-f", "-t", dtype, "-q"],
        parse=parse_flops,
        samples=samples,
        default_enabled=False,
    )


FLOPS_SOURCE = flops_source("fp16")
BW_SOURCE = Source(
    name="ascend_dmi_bw",
    tool="ascend-dmi",
    group="dmi",
    scope="node",
    argv=lambda _chip: ["--bw", "-q"],
    parse=parse_bandwidth,
    samples=samples,
    default_enabled=False,
)
SOURCES: tuple[Source, ...] = (FLOPS_SOURCE, BW_SOURCE)
