"""Parser for ``npu-smi info -l``: how many NPUs, their chip counts and (on cards) serial numbers.

Reproduce by hand: ``npu-smi info -l``. Sample (950 PCIe card)::

    Total Count                    : 1

    NPU ID                         : 0
    Product Name                   : A5 PCIe Card
    Serial Number                  : IT23HMDA0502FAA

Server boards print ``NPU ID`` and ``Chip Count`` only; 310/310B say ``Card
Count`` instead of ``Total Count``. Blocks are separated by blank lines, but a
new ``NPU ID`` line is what starts a block here, so missing blank lines do not
merge NPUs. Parser only: the agent uses ``inventory()`` to label ``npu_info``
with serial numbers.

Serial numbers and product names become labels: any value that is not printable
ASCII of at most 64 characters is dropped (None), as are counts and ids that are
not integers in range (``collectors.bounds``); each is listed in
``NpuList.rejected`` with its line. More than ``max_npus`` NPU blocks (default
64, the chip cap) is a ParseError: ``inventory()`` would grow with their product.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collectors._text import raise_unparsed, split_key_value
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source
from collectors.bounds import BOUNDS, LIMITS, Rejection, Rejects, has_control_chars, is_label_text

__all__ = ["SOURCE", "ListedNpu", "NpuList", "inventory", "parse"]

_INT_RE = re.compile(r"[0-9]{1,12}")
_ABSENT = frozenset({"", "NA", "N/A", "-", "--"})


@dataclass(frozen=True)
class ListedNpu:
    npu: int
    chip_count: int | None
    product_name: str | None
    serial: str | None


@dataclass(frozen=True)
class NpuList:
    """``total`` is the printed Total/Card Count (None when not printed)."""

    total: int | None
    npus: tuple[ListedNpu, ...]
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _int_or_none(text: str) -> int | None:
    return int(text) if _INT_RE.fullmatch(text) else None


class _Checker:
    """Value checks for one line; failures become rejections of that line."""

    def __init__(self, rejects: Rejects, line_no: int, line: str) -> None:
        self._rejects, self._line_no, self._line = rejects, line_no, line

    def integer(self, value: str, bound: str, what: str) -> int | None:
        number = _int_or_none(value)
        if number is None or not BOUNDS[bound].contains(number):
            if value not in _ABSENT:
                self._rejects.add(f"{what} {value!r} is not an integer in range", self._line_no, self._line)
            return None
        return number

    def text(self, value: str, what: str) -> str | None:
        if value in _ABSENT:
            return None
        if not is_label_text(value):
            self._rejects.add(f"{what} is not printable ASCII of at most 64 characters", self._line_no, self._line)
            return None
        return value


def parse(text: str, max_npus: int = LIMITS["max_chips"]) -> NpuList:
    """Parse ``npu-smi info -l``; ``ToolError``/``ParseError`` when there is no count and no NPU."""
    total: int | None = None
    npus: list[ListedNpu] = []
    rejects = Rejects()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if len(line) > LIMITS["line_chars"] or has_control_chars(line):
            rejects.add("line too long or with control characters", line_no, line.strip())
            continue
        pair = split_key_value(line)
        if pair is None:
            continue
        key, value = " ".join(pair[0].split()).lower(), pair[1]
        check = _Checker(rejects, line_no, line.strip())
        if key in ("total count", "card count"):
            total = check.integer(value, "id", "Total Count")
        elif key == "npu id":
            npu = check.integer(value, "id", "NPU ID")
            if npu is not None:
                npus.append(ListedNpu(npu=npu, chip_count=None, product_name=None, serial=None))
                if len(npus) > max_npus:
                    raise ParseError(f"more than max_npus={max_npus} NPUs", line_no, line.strip())
        elif npus and key == "chip count":
            npus[-1] = replace(npus[-1], chip_count=check.integer(value, "chips_per_npu", "Chip Count"))
        elif npus and key == "product name":
            npus[-1] = replace(npus[-1], product_name=check.text(value, "Product Name"))
        elif npus and key == "serial number":
            npus[-1] = replace(npus[-1], serial=check.text(value, "Serial Number"))
    if total is None and not npus:
        raise_unparsed(text, "npu-smi info -l", "no NPU in npu-smi info -l output", rejects)
    return NpuList(total=total, npus=tuple(npus), rejected=rejects.freeze())


def inventory(
    listing: NpuList, chips: Iterable[tuple[int, int]] | None = None
) -> dict[tuple[int, int], dict[str, str]]:
    """``{(npu, chip): {"serial": ...}}`` for NPUs with a printed serial.

    The serial belongs to the NPU (card), so every chip of it gets it: the
    chips given (e.g. from the info table) or else chips ``0..Chip Count-1``.
    """
    serials = {npu.npu: npu.serial for npu in listing.npus if npu.serial}
    counts = {npu.npu: npu.chip_count or 1 for npu in listing.npus}
    keys = list(chips) if chips is not None else [
        (npu, chip) for npu in serials for chip in range(counts.get(npu, 1))
    ]
    return {(npu, chip): {"serial": serials[npu]} for npu, chip in keys if npu in serials}


def _parse_records(text: str) -> tuple[NpuList]:
    return (parse(text),)


def _samples(_records: Sequence[Any], _chip: ChipRef | None, _ctx: CollectContext) -> list[Sample]:
    return []  # inventory only: feeds npu_info through inventory()


SOURCE = Source(
    name="npu_smi_list",
    tool="npu-smi",
    group="inventory",
    scope="node",
    argv=lambda _chip: ["info", "-l"],
    parse=_parse_records,
    samples=_samples,
    default_enabled=False,
)
