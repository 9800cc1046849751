"""How a line of the ``npu-smi info`` table splits: cells, ids, value tokens, and the header's columns.

A row is cut on ``|`` and whitespace; the value cell's tokens are matched to the columns the
header names (scalars and ``used / total`` pairs separately), defaulting to the usual order when
no header was printed. A row that does not follow the layout raises ``RowRejected``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collectors._text import column_labels, number
from collectors.bounds import BOUNDS

__all__ = [
    "ABSENT_CELLS",
    "BUS_ID_RE",
    "CHIP_LINE_DEFAULT",
    "NPU_LINE_DEFAULT",
    "Line",
    "RowRejected",
    "checked_id",
    "column_keys",
    "id_and_rest",
    "int_or_none",
    "is_bus_cell",
    "is_number_or_absent",
    "split_cells",
    "split_values",
    "value_tokens",
]

_INT_RE = re.compile(r"[0-9]{1,12}")
BUS_ID_RE = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
ABSENT_CELLS = frozenset({"", "NA", "N/A", "-", "--"})
_PAIR_GAP_RE = re.compile(r"\s*/\s*")
_SLASHED_NA_RE = re.compile(r"(?<!\S)N/A(?!\S)", re.IGNORECASE)

# Value-cell columns: scalars and "used / total" pairs are matched to header
# columns separately, so a header column npuwatch does not know keeps its slot.
_PAIR_COLUMNS = frozenset({"hugepages", "memory", "hbm", "other-pair"})
NPU_LINE_DEFAULT = ("power", "temp", "hugepages")
CHIP_LINE_DEFAULT = ("aicore", "memory", "hbm")


class RowRejected(Exception):
    """A row that does not follow the layout; the reason becomes a Rejection."""


@dataclass
class Line:
    number: int
    text: str


def int_or_none(token: str | None) -> int | None:
    if token is None or not _INT_RE.fullmatch(token):
        return None
    return int(token)


def checked_id(token: str, what: str) -> int:
    value = int_or_none(token)
    if value is None:
        raise RowRejected(f"{what} {token!r} is not an integer")
    if not BOUNDS["id"].contains(value):
        raise RowRejected(f"{what} {value} is beyond any id npu-smi prints")
    return value


def split_cells(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|").removesuffix("|")
    # Whitespace runs are squeezed first: the regexes below then never see long runs.
    return [" ".join(cell.split()) for cell in body.split("|")]


def column_keys(value_cell: str, default: tuple[str, ...]) -> tuple[str, ...]:
    keys: list[str] = []
    for label in column_labels(value_cell):
        low = label.strip().lower()
        if low.startswith("power"):
            keys.append("power")
        elif low.startswith("temp"):
            keys.append("temp")
        elif low.startswith("hugepages"):
            keys.append("hugepages")
        elif low.startswith(("aicore", "npu util")):
            keys.append("aicore")
        elif low.startswith("memory"):
            keys.append("memory")
        elif low.startswith("hbm"):
            keys.append("hbm")
        elif "/" in low or "usage" in low:
            keys.append("other-pair")
        else:
            keys.append("other")
    return tuple(keys) or default


def value_tokens(value_cell: str) -> list[str]:
    """``87.2  33  0    / 0`` -> ``["87.2", "33", "0/0"]``; a lone ``N/A`` stays one scalar (``NA``)."""
    return _PAIR_GAP_RE.sub("/", _SLASHED_NA_RE.sub("NA", value_cell.strip())).split()


def is_number_or_absent(token: str) -> bool:
    return token in ABSENT_CELLS or number(token) is not None


def split_values(value_cell: str, columns: tuple[str, ...]) -> dict[str, str]:
    """Map a value cell onto column keys (scalars and ``used/total`` pairs separately, in order).

    Raises ``RowRejected`` for a token that is neither a number, ``NA``/``-`` nor a
    pair of those, and for more values than the header has columns.
    """
    scalars: list[str] = []
    pairs: list[str] = []
    for token in value_tokens(value_cell):
        if "/" in token:
            used, _, total = token.partition("/")
            if not (is_number_or_absent(used) and is_number_or_absent(total)):
                raise RowRejected(f"{token!r} is not a 'used / total' pair of numbers")
            pairs.append(token)
        elif is_number_or_absent(token):
            scalars.append(token)
        else:
            raise RowRejected(f"{token!r} is not a number")
    scalar_keys = [key for key in columns if key not in _PAIR_COLUMNS]
    pair_keys = [key for key in columns if key in _PAIR_COLUMNS]
    if len(scalars) > len(scalar_keys) or len(pairs) > len(pair_keys):
        raise RowRejected(f"{len(scalars) + len(pairs)} values for {len(columns)} columns")
    values = dict(zip(scalar_keys, scalars))
    values.update(zip(pair_keys, pairs))
    return values


def is_bus_cell(cell: str) -> bool:
    return cell in ABSENT_CELLS or BUS_ID_RE.fullmatch(cell) is not None


def id_and_rest(cells: list[str]) -> tuple[list[str], str, str]:
    """(id tokens, middle cell, value cell); 950's ``NPU ID | Name`` split is joined back."""
    if len(cells) >= 3:
        return " ".join(cells[:-2]).split(), cells[-2], cells[-1]
    if len(cells) == 2:
        return cells[0].split(), cells[1], ""
    return cells[0].split() if cells else [], "", ""
