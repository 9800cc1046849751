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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import raise_unparsed
from collectors.base import ChipRef, CollectContext, Sample, Source

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


@dataclass(frozen=True, slots=True)
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
    """Rows of ``npu-smi info -m`` in printed order.

    Raises ``ToolError`` when npu-smi printed an error instead of the mapping and
    ``ParseError`` for any other output without a single mapping row.
    """
    columns: tuple[str, ...] = _DEFAULT_COLUMNS
    rows: list[MappingRow] = []
    seen: set[tuple[int, int]] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        header = _header_columns(line)
        if header is not None:
            columns = header
            continue
        row = _parse_row(line.split(), columns)
        if row is not None and (row.npu, row.chip) not in seen:
            seen.add((row.npu, row.chip))
            rows.append(row)
    if not rows:
        raise_unparsed(text, "npu-smi info -m", "no mapping rows in npu-smi info -m output")
    return tuple(rows)


def _parse_row(tokens: list[str], columns: tuple[str, ...]) -> MappingRow | None:
    id_columns = [column for column in columns if column != "name"]
    if len(tokens) < 2:
        return None
    values = dict(zip(id_columns, tokens, strict=False))
    npu = _int_or_none(values.get("npu"))
    chip = _int_or_none(values.get("chip"))
    if npu is None or chip is None:
        return None
    name = " ".join(tokens[len(id_columns):])
    return MappingRow(
        npu=npu,
        chip=chip,
        logic_id=_int_or_none(values.get("logic_id")),
        phy_id=_int_or_none(values.get("phy_id")),
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
