"""Small text helpers shared by the parsers: NA handling, numbers, key/value lines."""

from __future__ import annotations

import math
import re
from typing import NoReturn

from collectors.base import ParseError, ToolError
from collectors.bounds import Rejects

__all__ = [
    "MIB",
    "USED_TOTAL_RE",
    "column_labels",
    "is_absent",
    "number",
    "percent_ratio",
    "raise_unparsed",
    "split_key_value",
    "used_total",
]

MIB = 1 << 20  # npu-smi's "MB" is 2^20 bytes

# "Failed" is what npu-smi prints for a sensor it could not read (TEMP_VALUE_INVALID).
_ABSENT = frozenset({"", "NA", "N/A", "-", "--", "null", "None", "unknown", "Unknown", "Failed"})
_NOT_LABEL_CHAR_RE = re.compile(r"[^A-Za-z\- ]")
_NUMBER_RE = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
USED_TOTAL_RE = re.compile(r"(\d+)\s*/\s*(\d+)")


def number(cell: str | None) -> float | None:
    """A numeric cell as float; ``NA``, ``-``, blanks and anything unparsable are ``None``.

    Thousands separators (``600,000,000``) are accepted.
    """
    if cell is None:
        return None
    text = cell.strip().replace(",", "")
    if text in _ABSENT or not _NUMBER_RE.match(text):
        return None
    value = float(text)
    if not math.isfinite(value):
        return None
    return value


def is_absent(cell: str | None) -> bool:
    """True for the cells npu-smi prints instead of a value (``NA``, ``-``, blank, ``Failed``...)."""
    return cell is None or cell.strip() in _ABSENT


def percent_ratio(cell: str | None) -> float | None:
    """A percentage cell as a 0..1 ratio; out-of-range values are rejected as absent."""
    value = number(cell)
    if value is None or value < 0 or value > 100:
        return None
    return value / 100.0


def used_total(cell: str | None) -> tuple[float, float] | None:
    """``"3397 / 65536"`` (any spacing) as (used, total); None when absent."""
    if cell is None:
        return None
    match = USED_TOTAL_RE.search(cell)
    if match is None:
        return None
    return float(match.group(1)), float(match.group(2))


def column_labels(text: str) -> list[str]:
    """Header labels with a unit in parentheses, as printed: ``"Power(W)   Temp(C)"`` -> ``["Power(W)", "Temp(C)"]``.

    A label is the run of letters, dashes and spaces (starting with a letter) just
    before a ``(...)`` group. Worked out piece by piece between parentheses, so the
    time stays linear in the line length whatever the line holds (a backtracking
    regex over a long run of letters would be quadratic).
    """
    labels: list[str] = []
    for piece in text.split(")")[:-1]:
        head, sep, unit = piece.rpartition("(")
        if not sep:
            continue
        name = _NOT_LABEL_CHAR_RE.split(head)[-1].lstrip(" -")
        if name:
            labels.append(f"{name}({unit})")
    return labels


def split_key_value(line: str) -> tuple[str, str] | None:
    """Split ``key : value`` at the first colon, stripping both sides; None without a colon."""
    key, sep, value = line.partition(":")
    if not sep:
        return None
    return key.strip(), value.strip()


# Words that mark npu-smi printing an error or its usage text instead of data.
TOOL_ERROR_MARKERS = ("invalid", "error", "usage:", "not found", "failed", "permission denied")


def raise_unparsed(text: str, what: str, message: str, rejects: Rejects | None = None) -> NoReturn:
    """Explain output a parser found nothing in: empty, a tool error (ToolError), or unknown (ParseError).

    With ``rejects`` holding the lines the parser refused, the ParseError names the first of them.
    """
    lines = [(number_, line.strip()) for number_, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ParseError(f"empty {what} output")
    if any(marker in text.lower() for marker in TOOL_ERROR_MARKERS):
        raise ToolError(f"npu-smi reported an error: {lines[0][1][:200]}")
    if rejects is not None and len(rejects):
        raise rejects.error(message)
    raise ParseError(message, lines[0][0], lines[0][1][:200])
