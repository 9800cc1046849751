"""Shared reader for the ``npu-smi info -t <type> -i N [-c C]`` key : value family.

Lines look like ``\\tHBM Capacity(MB)               : 65536`` (TAB, key padded to
30 or 40 columns, `` : ``, value). Publishers often turn the TAB into spaces or
drop it, so every line is stripped and split at its FIRST colon only (values such
as error texts and bus ids contain colons).

Blank lines separate blocks. A card-level call prints a header block
(``NPU ID``, ``Chip Count``), then one block per chip and possibly an MCU block
(``Chip Name : mcu``). ``Chip ID`` / ``Chip Name`` may close a block or open it
depending on the driver, so a block is never identified by its first line; and
a key repeated inside one block starts a new block (an MCU block whose blank
separator was lost repeats ``Temperature(C)``).

Continuation lines have an empty key (``\\t            : node type=...``, health
``Error Information``); they extend the previous key's value, even across blank
lines.

Lines longer than ``LIMITS["line_chars"]`` or holding control characters are
not npu-smi's: they are skipped and reported to the caller's ``Rejects``. Each
parser then checks its values with ``KvBlock.checked`` against
``collectors.bounds.BOUNDS``: a value that is not a number, or outside its range,
is dropped (None) and reported with its line; the record keeps the rest. A
ParseError would blank every other reading of the chip for one bad sensor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

from collectors._text import is_absent, number, split_key_value
from collectors.base import ChipRef, ParseError, Sample, ToolError
from collectors.bounds import LIMITS, Rejects, has_control_chars
from collectors.catalogue import spec

__all__ = [
    "KvBlock",
    "chip_argv",
    "chip_sample",
    "find_block",
    "find_mcu_block",
    "one_record",
    "parse_blocks",
    "raise_on_tool_error",
    "require_block",
]

# npu-smi prints these instead of data when the card or the arguments are wrong.
_ERROR_PREFIXES = ("invalid card id", "error parameter", "usage: npu-smi")

R = TypeVar("R")


@lru_cache(maxsize=256)
def _key_regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


@dataclass(frozen=True)
class KvBlock:
    """One blank-line separated block of ``key : value`` pairs, keys as printed.

    ``line_no`` is the 1-based line of the block's first pair (for error messages).
    """

    pairs: tuple[tuple[str, str], ...]
    line_no: int = 0
    line_nos: tuple[int, ...] = ()  # the line of each pair, when known

    def get(self, pattern: str) -> str | None:
        """Value of the first key that fully matches ``pattern`` (regex, case-insensitive)."""
        regex = _key_regex(pattern)
        for key, value in self.pairs:
            if regex.fullmatch(key):
                return value
        return None

    def get_all(self, pattern: str) -> list[tuple[str, str]]:
        """Every (key, value) whose key fully matches ``pattern``, in printed order."""
        regex = _key_regex(pattern)
        return [(key, value) for key, value in self.pairs if regex.fullmatch(key)]

    def where(self, pattern: str) -> tuple[int | None, str]:
        """(line number, ``key : value``) of the first key matching ``pattern``, for rejections."""
        regex = _key_regex(pattern)
        for index, (key, value) in enumerate(self.pairs):
            if regex.fullmatch(key):
                return (self.line_nos[index] if index < len(self.line_nos) else None), f"{key} : {value}"
        return None, ""

    def checked(self, pattern: str, bound: str, rejects: Rejects, scale: float = 1.0) -> float | None:
        """The first matching value, scaled, when it is a number inside ``BOUNDS[bound]``.

        ``NA``-like cells give None silently; anything else that is not a number,
        or a number out of range, gives None and a rejection naming the line.
        """
        found = self.checked_all(pattern, bound, rejects, scale, first_only=True)
        return found[0][1] if found else None

    def checked_all(self, pattern: str, bound: str, rejects: Rejects, scale: float = 1.0,
                    *, first_only: bool = False) -> list[tuple[str, float | None]]:
        """Every (key, checked value) whose key matches ``pattern``, as ``checked`` judges each."""
        regex = _key_regex(pattern)
        out: list[tuple[str, float | None]] = []
        for index, (key, text) in enumerate(self.pairs):
            if not regex.fullmatch(key):
                continue
            line_no = self.line_nos[index] if index < len(self.line_nos) else None
            out.append((key, _checked_value(key, text, line_no, bound, rejects=rejects, scale=scale)))
            if first_only:
                break
        return out

    def has(self, pattern: str) -> bool:
        return self.get(pattern) is not None

    def number(self, pattern: str) -> float | None:
        """The first matching value as a float; absent, ``NA``, ``-`` or junk give None."""
        return number(self.get(pattern))

    def text(self, pattern: str) -> str | None:
        """The first matching value as text; absent, empty and ``NA`` give None."""
        value = self.get(pattern)
        if value is None or value.upper() in {"", "NA", "N/A", "-", "--"}:
            return None
        return value

    @property
    def is_mcu(self) -> bool:
        """True for the board MCU block (``Chip Name : mcu``), which repeats chip keys."""
        for key in ("Chip Name", "Chip Type"):
            value = self.get(key)
            if value is not None and value.strip().lower() == "mcu":
                return True
        return False

    @property
    def chip_id(self) -> int | None:
        value = self.number(r"Chip\s*ID")
        return int(value) if value is not None and value >= 0 and value.is_integer() else None


def _checked_value(key: str, text: str, line_no: int | None, bound: str, *, rejects: Rejects,
                   scale: float) -> float | None:
    if is_absent(text):
        return None
    line = f"{key} : {text}"
    value = number(text)
    if value is None:
        rejects.add(f"{key}: {text!r} is not a number", line_no, line)
        return None
    return rejects.value(bound, value * scale, line_no, line, key)


def raise_on_tool_error(lines: Sequence[str]) -> None:
    """Raise ToolError when npu-smi printed its usage/invalid-id text, whatever else is there."""
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line.lower().startswith(_ERROR_PREFIXES):
            raise ToolError("npu-smi reported an error instead of data", line_no, line)


def parse_blocks(text: str, rejects: Rejects | None = None) -> list[KvBlock]:
    """Split ``npu-smi info -t <type>`` output into key : value blocks.

    Raises ToolError for npu-smi error text, or when no ``key : value`` line exists.
    Lines without a colon (headers, ``No process in device.``) are ignored; lines
    too long or with control characters are skipped and reported to ``rejects``.
    """
    lines = text.splitlines()
    raise_on_tool_error(lines)
    report = rejects if rejects is not None else Rejects()
    blocks: list[KvBlock] = []
    # (key, value parts): continuations append a part, joined once at the end (linear time).
    current: list[tuple[str, list[str]]] = []
    current_lines: list[int] = []
    start = 0
    seen: set[str] = set()

    def close() -> None:
        nonlocal current, current_lines, seen
        if current:
            pairs = tuple((key, _joined(parts)) for key, parts in current)
            blocks.append(KvBlock(pairs, start, tuple(current_lines)))
        current, current_lines, seen = [], [], set()

    pending_break = False
    last_parts: list[str] | None = None
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            pending_break = True
            continue
        if len(line) > LIMITS["line_chars"]:
            report.add(f"line longer than {LIMITS['line_chars']} characters", line_no, line)
            continue
        if has_control_chars(line):
            report.add("control characters in a key : value line", line_no, line)
            continue
        split = split_key_value(line)
        if split is None:
            continue
        key, value = split
        if not key:
            if last_parts is not None:
                last_parts.append(value)
            pending_break = False
            continue
        if pending_break or key in seen:
            close()
        pending_break = False
        if not current:
            start = line_no
        last_parts = [value]
        current.append((key, last_parts))
        current_lines.append(line_no)
        seen.add(key)
    close()
    if not blocks:
        first = next((ln for ln in lines if ln.strip()), "")
        raise ToolError("no 'key : value' lines in npu-smi output", 1 if first else None, first or None)
    return blocks


def _joined(parts: list[str]) -> str:
    """A value and its continuation lines, newline-separated; empty leading parts are dropped."""
    first = next((index for index, part in enumerate(parts) if part), len(parts))
    return "\n".join(parts[first:])


def find_block(blocks: Iterable[KvBlock], patterns: Sequence[str], chip: int | None = None) -> KvBlock | None:
    """The chip (non-MCU) block that holds any key matching ``patterns``.

    When ``chip`` is given and several chip blocks qualify (310P Duo card-level
    output), the one whose ``Chip ID`` equals ``chip`` wins; otherwise the first.
    """
    candidates = [b for b in blocks if not b.is_mcu and any(b.has(p) for p in patterns)]
    if chip is not None:
        for block in candidates:
            if block.chip_id == chip:
                return block
    return candidates[0] if candidates else None


def find_mcu_block(blocks: Iterable[KvBlock]) -> KvBlock | None:
    return next((b for b in blocks if b.is_mcu), None)


def require_block(blocks: Sequence[KvBlock], patterns: Sequence[str], what: str,
                  chip: int | None = None) -> KvBlock:
    """Like ``find_block`` but raises ParseError naming the output type when nothing matches."""
    block = find_block(blocks, patterns, chip)
    if block is None:
        first = blocks[0] if blocks else None
        raise ParseError(f"no {what} keys in npu-smi output",
                         first.line_no if first else None,
                         ": ".join(first.pairs[0]) if first else None)
    return block


def one_record(records: object, record_type: type[R]) -> R | None:
    """The record a ``samples`` mapper should use.

    Sources' ``parse`` returns a one-element list; callers may also pass the bare
    record. Anything else (empty list, wrong type) gives None, i.e. no samples.
    """
    if isinstance(records, record_type):
        return records
    if isinstance(records, Sequence) and not isinstance(records, str):
        for item in records:
            if isinstance(item, record_type):
                return item
    return None


def chip_sample(metric: str, chip: ChipRef, value: float, **extra: str | int) -> Sample:
    """A per-chip sample whose label names are checked against the catalogue."""
    labels = chip.labels() + tuple((k, str(v)) for k, v in extra.items())
    expected = spec(metric).labels
    if tuple(k for k, _ in labels) != expected:
        raise ValueError(f"{metric}: labels {[k for k, _ in labels]} != catalogue {list(expected)}")
    return Sample(metric, labels, float(value))


def chip_argv(type_name: str, chip: ChipRef | None, *, card_level: bool = False) -> list[str]:
    """``info -t <type> -i <npu> [-c <chip>]`` for one chip (``-c`` only where the layout has chip ids)."""
    if chip is None:
        raise ValueError(f"npu-smi -t {type_name} is a per-chip source and needs a chip")
    argv = ["info", "-t", type_name, "-i", str(chip.npu)]
    if chip.has_chip_id and not card_level:
        argv += ["-c", str(chip.chip)]
    return argv
