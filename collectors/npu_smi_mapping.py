"""Parser for ``npu-smi info -m``: which logic id (and physical id) each NPU chip has.

Reproduce by hand: ``npu-smi info -m``. Sample (910B4 / 310P Duo)::

    NPU ID                         Chip ID                        Chip Logic ID                  Chip Name
    1                              0                              0                              Ascend 910B4
    1                              1                              -                              Mcu

Layouts seen: the ``%-30s`` columns above (often TAB-indented), the misaligned
narrow columns of the oldest 310 (``MiniD``), newer A3 drivers that add a
``Chip Phy-ID`` column, and 950 (``NPU ID  Slot ID  Chip ID  Chip Phy-ID  Chip
Name``, no logic id). The chip name contains a space (``Ascend 910B4``), so
rows are split on whitespace and everything after the id columns is the name.
The logic id is what ``ASCEND_RT_VISIBLE_DEVICES`` and the runtime use.

A row whose ids are not integers in range or whose name is not printable ASCII
(at most 64 characters), a line that is too long or holds control characters,
and a second row for the same chip are dropped and listed in the result's
``rejected`` attribute (``collectors.bounds.RowTuple``) with their line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import raise_unparsed
from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import BOUNDS, LIMITS, Rejects, RowTuple, has_control_chars, is_label_text

__all__ = ["SOURCE", "MappingRow", "inventory", "parse"]

_INT_RE = re.compile(r"[0-9]{1,12}")
_COLUMN_GAP_RE = re.compile(r"\s{2,}|\t")
# Header column label (lowercased, spaces squeezed) -> field.
_HEADER_FIELDS = {
    "npu id": "npu",
    "chip id": "chip",
    "chip logic id": "logic_id",
    "chip phy-id": "phy_id",
    "chip phy id": "phy_id",
    "slot id": "slot",
    "chip name": "name",
}
_DEFAULT_COLUMNS = ("npu", "chip", "logic_id", "name")


@dataclass(frozen=True)
class MappingRow:
    """One line of ``npu-smi info -m``; ``logic_id`` is None for ``Mcu`` rows and on 950."""

    npu: int
    chip: int
    logic_id: int | None
    phy_id: int | None
    name: str
    is_mcu: bool


def _int_or_none(token: str | None) -> int | None:
    if token is None or not _INT_RE.fullmatch(token):
        return None
    return int(token)


def _header_columns(line: str) -> tuple[str, ...] | None:
    """Field names of a header line, or None when ``line`` is not a header."""
    labels = [" ".join(part.split()).lower() for part in _COLUMN_GAP_RE.split(line.strip()) if part.strip()]
    if "npu id" not in labels or not any(label.startswith("chip") for label in labels):
        return None
    return tuple(_HEADER_FIELDS.get(label, "other") for label in labels)


def parse(text: str) -> tuple[MappingRow, ...]:
    """Rows of ``npu-smi info -m`` in printed order (a ``RowTuple`` carrying ``rejected``).

    Raises ``ToolError`` when npu-smi printed an error instead of the mapping and
    ``ParseError`` for any other output without a single mapping row.
    """
    columns: tuple[str, ...] = _DEFAULT_COLUMNS
    rows: list[MappingRow] = []
    rejects = Rejects()
    seen: set[tuple[int, int]] = set()
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > LIMITS["line_chars"] or has_control_chars(line):
            rejects.add("line too long or with control characters", line_no, line.strip())
            continue
        header = _header_columns(line)
        if header is not None:
            columns = header
            continue
        try:
            row = _parse_row(line.split(), columns)
        except ValueError as exc:
            rejects.add(f"npu-smi info -m row rejected: {exc}", line_no, line.strip())
            continue
        if (row.npu, row.chip) in seen:
            rejects.add(f"npu {row.npu} chip {row.chip} is listed twice; the first row is kept", line_no, line.strip())
            continue
        seen.add((row.npu, row.chip))
        rows.append(row)
    if not rows:
        raise_unparsed(text, "npu-smi info -m", "no mapping rows in npu-smi info -m output", rejects)
    return RowTuple.of(rows, rejects.freeze())


def _checked_id(token: str | None) -> int | None:
    value = _int_or_none(token)
    if value is not None and not BOUNDS["id"].contains(value):
        raise ValueError(f"id {value} is beyond any id npu-smi prints")
    return value


def _parse_row(tokens: list[str], columns: tuple[str, ...]) -> MappingRow:
    """A mapping row; ValueError naming the problem for a line that is not one."""
    id_columns = [column for column in columns if column != "name"]
    if len(tokens) < 2:
        raise ValueError("fewer than two columns")
    values = dict(zip(id_columns, tokens))
    npu = _checked_id(values.get("npu"))
    if npu is None:
        raise ValueError(f"NPU ID {values.get('npu')!r} is not an integer")
    chip = _checked_id(values.get("chip"))
    if chip is None:
        raise ValueError(f"Chip ID {values.get('chip')!r} is not an integer")
    name = " ".join(tokens[len(id_columns):])
    if not is_label_text(name):
        raise ValueError("Chip Name is not printable ASCII of at most 64 characters")
    return MappingRow(
        npu=npu,
        chip=chip,
        logic_id=_checked_id(values.get("logic_id")),
        phy_id=_checked_id(values.get("phy_id")),
        name=name,
        is_mcu=name.strip().lower() == "mcu",
    )


def inventory(rows: Iterable[MappingRow]) -> dict[tuple[int, int], dict[str, str]]:
    """``npu_info`` labels this source knows: ``{(npu, chip): {"logic_id": "3"}}`` (MCU rows skipped)."""
    facts: dict[tuple[int, int], dict[str, str]] = {}
    for row in rows:
        if row.is_mcu or row.logic_id is None:
            continue
        facts[(row.npu, row.chip)] = {"logic_id": str(row.logic_id)}
    return facts


def _samples(_rows: Sequence[Any], _chip: ChipRef | None, _ctx: CollectContext) -> list[Sample]:
    # The mapping exports nothing itself; the agent feeds inventory() into npu_info.
    return []


SOURCE = Source(
    name="npu_smi_mapping",
    tool="npu-smi",
    group="inventory",
    scope="node",
    argv=lambda _chip: ["info", "-m"],
    parse=parse,
    samples=_samples,
)
