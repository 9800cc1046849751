"""Parser for ``npu-smi info watch`` (streaming whitespace table). Parser only: no Source.

Reproduce by hand: ``npu-smi info watch`` (stop with Ctrl-C). Sample (310B)::

    NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)  AI Cpu(%)   Ctrl Cpu(%) ...
    0           0           8.7         55          0           2           64          ...

Every field is printed ``%-12s`` (rows carry trailing spaces) and the header is
printed once. 950 drops the ``ChipId(Idx)`` column and newer builds append
``NPU Util(%)`` and ``AI Cube(%)``, so columns are mapped from the header's
labels and rows are split on whitespace. The agent does not schedule ``watch``
(it never ends); this parser serves captures and diagnostics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors._text import number, percent_ratio, raise_unparsed

__all__ = ["WatchRow", "latest", "parse"]

_LABEL_RE = re.compile(r"[A-Za-z][A-Za-z ]*\([^)]*\)")
_INT_RE = re.compile(r"[0-9]{1,12}")
_RATIO_FIELDS = {
    "ai core(%)": "aicore_ratio",
    "ai cpu(%)": "aicpu_ratio",
    "ctrl cpu(%)": "ctrlcpu_ratio",
    "memory(%)": "memory_ratio",
    "memory bw(%)": "memory_bandwidth_ratio",
    "npu util(%)": "npu_util_ratio",
    "ai cube(%)": "aicube_ratio",
}


@dataclass(frozen=True, slots=True)
class WatchRow:
    """One sample line; ratios are 0..1, absent columns None. ``chip`` is 0 where none is printed."""

    npu: int
    chip: int
    has_chip_id: bool
    power_watts: float | None = None
    temperature_celsius: float | None = None
    aicore_ratio: float | None = None
    aicpu_ratio: float | None = None
    ctrlcpu_ratio: float | None = None
    memory_ratio: float | None = None
    memory_bandwidth_ratio: float | None = None
    npu_util_ratio: float | None = None
    aicube_ratio: float | None = None


def parse(text: str) -> list[WatchRow]:
    """All sample rows in printed order (several per chip: the stream repeats)."""
    labels: list[str] | None = None
    rows: list[WatchRow] = []
    for line in text.splitlines():
        if labels is None:
            found = [" ".join(label.split()).lower() for label in _LABEL_RE.findall(line)]
            if found and found[0].startswith("npuid"):
                labels = found
            continue
        row = _parse_row(line.split(), labels)
        if row is not None:
            rows.append(row)
    if labels is None or not rows:
        raise_unparsed(text, "npu-smi info watch", "no rows in npu-smi info watch output")
    return rows


def _parse_row(tokens: list[str], labels: list[str]) -> WatchRow | None:
    if len(tokens) != len(labels):
        return None  # a cut line or stray text
    cells = dict(zip(labels, tokens, strict=True))
    npu = cells.get("npuid(idx)")
    if npu is None or not _INT_RE.fullmatch(npu):
        return None
    chip_cell = cells.get("chipid(idx)")
    chip = int(chip_cell) if chip_cell is not None and _INT_RE.fullmatch(chip_cell) else None
    ratios = {field: percent_ratio(cells.get(label)) for label, field in _RATIO_FIELDS.items()}
    return WatchRow(
        npu=int(npu),
        chip=chip or 0,
        has_chip_id=chip is not None,
        power_watts=number(cells.get("pwr(w)")),
        temperature_celsius=number(cells.get("temp(c)")),
        **ratios,
    )




def latest(rows: list[WatchRow]) -> dict[tuple[int, int], WatchRow]:
    """The newest row per (npu, chip)."""
    return {(row.npu, row.chip): row for row in rows}
