"""``npu-smi info -t hccs -i N [-c C]``: HCCS link health and per-port counters.

Sample output (910-series; arrays hold one element per HCCS port)::

    hccs health status             : OK
    hccs lane mode                 : [4                    4                    ]
    hccs link speed                : [224                  224                  ]
    hccs tx packets                : [1993002168   1434439505   1588783520]
    hccs retry count               : [0            0            0]
    hccs error count               : [0            0            0]

The ``xlink`` product variant prints the same lines with ``xlink`` for
``hccs``. Exported: ``npu_hccs_healthy`` (1 for OK, 0 otherwise),
``npu_hccs_errors_total{link}`` and ``npu_hccs_retries_total{link}`` where
``link`` is the array index.

Every element must be a non-negative integer within its range (``collectors.bounds``:
counters, lane counts, link speeds); any other element is None and listed in
``HccsRecord.rejected``. An array longer than ``LIMITS["links"]`` (64 ports; each
is a series) is dropped whole and reported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from collectors._text import is_absent, number
from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import BOUNDS, LIMITS, Rejection, Rejects
from collectors.npu_smi_kv import KvBlock, chip_argv, chip_sample, one_record, parse_blocks, require_block

__all__ = ["SOURCE", "HccsRecord", "parse", "parse_array", "samples"]

_PREFIX = r"(?:hccs|xlink)\s*"
_HEALTH = _PREFIX + r"health\s*status"
_ARRAYS = {
    "lane_modes": r"lane\s*mode",
    "link_speeds_gbps": r"link\s*speed",
    "tx_packets": r"tx\s*packets",
    "tx_bytes": r"tx\s*bytes",
    "rx_packets": r"rx\s*packets",
    "rx_bytes": r"rx\s*bytes",
    "retry_counts": r"retry\s*count",
    "error_counts": r"error\s*count",
}

Counts = tuple[Optional[float], ...]  # evaluated at run time: no `X | None` on 3.9

_BOUND_OF = {"lane_modes": "hccs_lanes", "link_speeds_gbps": "hccs_link_speed_gbps"}  # others: "counter"


@dataclass(frozen=True)
class HccsRecord:
    """HCCS state of one chip; each tuple has one entry per port (None where unparsable)."""

    health: str | None = None
    lane_modes: Counts = ()
    link_speeds_gbps: Counts = ()
    tx_packets: Counts = ()
    tx_bytes: Counts = ()
    rx_packets: Counts = ()
    rx_bytes: Counts = ()
    retry_counts: Counts = ()
    error_counts: Counts = ()
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)

    @property
    def healthy(self) -> bool | None:
        return None if self.health is None else self.health.strip().upper() == "OK"


def _array_tokens(value: str) -> list[str]:
    inner = value.strip()
    if inner.startswith("["):
        inner = inner[1:]
        inner = inner.removesuffix("]")
    return inner.split()


def parse_array(value: str | None) -> Counts:
    """``[0            0            3]`` as (0.0, 0.0, 3.0); a bare scalar gives a 1-tuple.

    Elements that are not non-negative numbers are None (no range or length check:
    ``parse`` does those).
    """
    if value is None:
        return ()
    values = tuple(number(token) for token in _array_tokens(value))
    return tuple(None if v is None or v < 0 else v for v in values)


def _checked_array(block: KvBlock, pattern: str, bound_name: str, rejects: Rejects) -> Counts:
    value = block.get(pattern)
    if value is None:
        return ()
    tokens = _array_tokens(value)
    line_no, line = block.where(pattern)
    if len(tokens) > LIMITS["links"]:
        rejects.add(f"{len(tokens)} ports, more than {LIMITS['links']}", line_no, line)
        return ()
    bound = BOUNDS[bound_name]
    out: list[float | None] = []
    for token in tokens:
        element = number(token)
        if element is None and is_absent(token):
            out.append(None)
        elif element is None or not element.is_integer() or not bound.contains(element):
            rejects.add(f"{token!r} is not an integer in {bound.low:g}..{bound.high:g}", line_no, line)
            out.append(None)
        else:
            out.append(element)
    return tuple(out)


def _arrays(block: KvBlock, rejects: Rejects) -> dict[str, Counts]:
    return {field: _checked_array(block, _PREFIX + pattern, _BOUND_OF.get(field, "counter"), rejects)
            for field, pattern in _ARRAYS.items()}


def parse(text: str, chip: int | None = None) -> HccsRecord:
    """Parse ``-t hccs`` output; raises ParseError when no hccs key is printed."""
    patterns = (_HEALTH, *(_PREFIX + p for p in _ARRAYS.values()))
    rejects = Rejects()
    block = require_block(parse_blocks(text, rejects), patterns, "hccs", chip)
    arrays = _arrays(block, rejects)
    return HccsRecord(health=block.text(_HEALTH), **arrays, rejected=rejects.freeze())


def parse_records(text: str) -> list[HccsRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def samples(records: Sequence[Any] | HccsRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, HccsRecord)
    if record is None or chip is None:
        return []
    out: list[Sample] = []
    if record.healthy is not None:
        out.append(chip_sample("npu_hccs_healthy", chip, 1 if record.healthy else 0))
    for metric, counts in (("npu_hccs_errors_total", record.error_counts),
                           ("npu_hccs_retries_total", record.retry_counts)):
        out.extend(chip_sample(metric, chip, value, link=link)
                   for link, value in enumerate(counts) if value is not None)
    return out


SOURCE = Source(
    name="npu_smi_hccs",
    tool="npu-smi",
    group="health",
    scope="chip",
    argv=lambda chip: chip_argv("hccs", chip),
    parse=parse_records,
    samples=samples,
)
