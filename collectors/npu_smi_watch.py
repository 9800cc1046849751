"""Parser for ``npu-smi info watch`` (streaming whitespace table). Parser only: no Source.

Reproduce by hand: ``npu-smi info watch`` (stop with Ctrl-C). Sample (310B)::

    NpuID(Idx)  ChipId(Idx) Pwr(W)      Temp(C)     AI Core(%)  AI Cpu(%)   Ctrl Cpu(%) ...
    0           0           8.7         55          0           2           64          ...

Every field is printed ``%-12s`` (rows carry trailing spaces) and the header is
printed once. 950 drops the ``ChipId(Idx)`` column and newer builds append
``NPU Util(%)`` and ``AI Cube(%)``, so columns are mapped from the header's
labels and rows are split on whitespace. The agent does not schedule ``watch``
(it never ends); this parser serves captures and diagnostics.

A row with a non-integer or out-of-range id, or a cell that is neither a number
nor ``NA``/``-``, is dropped; a reading outside its physical range
(``collectors.bounds``) is None. Both are listed in the result's ``rejected``
attribute (``collectors.bounds.RowList``). Cut lines (fewer cells than the
header, the usual end of a stream stopped with Ctrl-C) are skipped silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors._text import column_labels, is_absent, number, raise_unparsed
from collectors.bounds import BOUNDS, LIMITS, Rejects, RowList, has_control_chars

__all__ = ["WatchRow", "latest", "parse"]

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


@dataclass(frozen=True)
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
    """All sample rows in printed order (several per chip: the stream repeats); a ``RowList``."""
    labels: list[str] | None = None
    rows: list[WatchRow] = []
    rejects = Rejects()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if len(line) > LIMITS["line_chars"] or has_control_chars(line):
            rejects.add("line too long or with control characters", line_no, line.strip())
            continue
        if labels is None:
            found = [" ".join(label.split()).lower() for label in column_labels(line)]
            if found and found[0].startswith("npuid"):
                labels = found
            continue
        try:
            row = _parse_row(line.split(), labels, rejects, line_no, line.strip())
        except ValueError as exc:
            rejects.add(f"npu-smi info watch row rejected: {exc}", line_no, line.strip())
            continue
        if row is not None:
            rows.append(row)
    if labels is None or not rows:
        raise_unparsed(text, "npu-smi info watch", "no rows in npu-smi info watch output", rejects)
    return RowList.of(rows, rejects.freeze())


def _id(cell: str | None, what: str) -> int | None:
    if cell is None:
        return None
    if not _INT_RE.fullmatch(cell) or not BOUNDS["id"].contains(int(cell)):
        raise ValueError(f"{what} {cell!r} is not an integer id")
    return int(cell)


def _parse_row(tokens: list[str], labels: list[str], rejects: Rejects, line_no: int, line: str) -> WatchRow | None:
    if len(tokens) != len(labels):
        return None  # a cut line or stray text
    cells = dict(zip(labels, tokens))
    npu = _id(cells.get("npuid(idx)"), "NpuID")
    if npu is None:
        return None
    chip = _id(cells.get("chipid(idx)"), "ChipId")
    bad = next((cell for cell in tokens if number(cell) is None and not is_absent(cell)), None)
    if bad is not None:
        raise ValueError(f"{bad!r} is not a number")

    def checked(label: str, bound: str) -> float | None:
        return rejects.value(bound, number(cells.get(label)), line_no, line, label)

    power, temperature = checked("pwr(w)", "power_watts"), checked("temp(c)", "temperature_celsius")
    ratios = {field: checked(label, "percent") for label, field in _RATIO_FIELDS.items()}
    return WatchRow(
        npu=npu,
        chip=chip or 0,
        has_chip_id=chip is not None,
        power_watts=power,
        temperature_celsius=temperature,
        **{field: None if value is None else value / 100.0 for field, value in ratios.items()},
    )


def latest(rows: list[WatchRow]) -> dict[tuple[int, int], WatchRow]:
    """The newest row per (npu, chip)."""
    return {(row.npu, row.chip): row for row in rows}
