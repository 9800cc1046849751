"""RoCE port link state: ``hccn_tool -i <devid> -link -g``.

Sample output (910/910B/A3, and 950 ``-g -link -i 0 -u 0 -p 4``)::

    link status: UP

Exported as ``npu_roce_link_up{npu} 1|0``. This module also holds the helpers
every ``hccn_*`` collector shares: ``device_id`` (which id ``-i`` expects),
tool-error detection and the adapters between a one-record parser and the
list-based ``Source`` contract.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source, ToolError, label_pairs
from collectors.bounds import LIMITS, Rejects, has_control_chars

__all__ = [
    "SOURCE",
    "LinkRecord",
    "clean_lines",
    "device_id",
    "hccn_argv",
    "hccn_source",
    "parse",
    "raise_unparsable",
    "samples",
]

R = TypeVar("R")

_DEVID_PREFIX_RE = re.compile(r"^\[dev(?:ice)?\s*id\s*\d+\]\s*", re.IGNORECASE)
# Words that only appear when hccn_tool printed a complaint instead of data
# ("Invalid device id", "dev id error", usage text, "not support", permissions).
_ERROR_HINT_RE = re.compile(
    r"\b(?:invalid|error|usage|not\s+support(?:ed)?|unsupported|permission|denied|cannot|can't|"
    r"fail(?:ed)?|no such|not found|unknown (?:command|option|parameter)|parameters?)\b",
    re.IGNORECASE,
)
_LINK_RE = re.compile(r"^link\s+status\s*:\s*(?P<state>.*?)\s*$", re.IGNORECASE)


def device_id(chip: ChipRef) -> int:
    """The id ``hccn_tool -i`` expects: the physical id when known, else the logic id, else the NPU id."""
    if chip.phy_id is not None:
        return chip.phy_id
    if chip.logic_id is not None:
        return chip.logic_id
    return chip.npu


def hccn_argv(command: str) -> Callable[[ChipRef | None], list[str]]:
    """``-i <devid> -<command> -g`` for one chip (910/910B/A3 syntax)."""

    def argv(chip: ChipRef | None) -> list[str]:
        if chip is None:
            raise ValueError(f"hccn_tool -{command} is a per-chip source")
        return ["-i", str(device_id(chip)), f"-{command}", "-g"]

    return argv


def clean_lines(text: str, rejects: Rejects | None = None) -> list[tuple[int, str]]:
    """Non-blank lines as (1-based line number, stripped text without a ``[devid N]`` prefix).

    Lines longer than ``LIMITS["line_chars"]`` or holding control characters are not
    hccn_tool's: they are left out (so no pattern runs on them) and reported to ``rejects``.
    """
    result: list[tuple[int, str]] = []
    longest = LIMITS["line_chars"]
    # One look at the whole text: the usual answer has no control character but its newlines, and
    # then no line needs its own look (run for every port every few seconds by the fail-slow sampling).
    clean = not has_control_chars(text.replace("\n", ""))
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if len(line) > longest or (not clean and has_control_chars(line)):
            if rejects is not None:
                rejects.add("line too long or with control characters", number, line)
            continue
        if line.startswith("["):
            line = _DEVID_PREFIX_RE.sub("", line).strip()
        if line:
            result.append((number, line))
    return result


def raise_unparsable(text: str, what: str) -> NoReturn:
    """Raise ``ToolError`` when the output looks like an hccn_tool complaint, else ``ParseError``.

    Callers use this once they found none of the lines they expect.
    """
    lines = clean_lines(text)
    if not lines:
        raise ToolError(f"hccn_tool printed nothing where {what} was expected")
    first_no, first = lines[0]
    if _ERROR_HINT_RE.search(text):
        raise ToolError(f"hccn_tool reported an error instead of {what}", first_no, first)
    raise ParseError(f"{what} not found in hccn_tool output", first_no, first)


def hccn_source(
    name: str,
    command: str,
    parse_one: Callable[[str], R],
    samples_one: Callable[[R, ChipRef, CollectContext], list[Sample]],
    default_enabled: bool = True,
) -> Source:
    """A per-chip ``Source`` around a parser that returns one record per call."""

    def parse_list(text: str) -> Sequence[Any]:
        return [parse_one(text)]

    def samples_list(records: Sequence[Any], chip: ChipRef | None, ctx: CollectContext) -> list[Sample]:
        if chip is None:
            raise ValueError(f"{name} is a per-chip source")
        out: list[Sample] = []
        for record in records:
            out.extend(samples_one(record, chip, ctx))
        return out

    return Source(
        name=name,
        tool="hccn_tool",
        group="roce",
        scope="chip",
        argv=hccn_argv(command),
        parse=parse_list,
        samples=samples_list,
        default_enabled=default_enabled,
    )


@dataclass(frozen=True)
class LinkRecord:
    up: bool
    state: str  # as printed: "UP" / "DOWN"


def parse(text: str) -> LinkRecord:
    """Parse ``link status: UP|DOWN``; any other state text is a ``ParseError``."""
    for line_no, line in clean_lines(text):
        match = _LINK_RE.match(line)
        if match is None:
            continue
        state = match.group("state")
        if state.upper() == "UP":
            return LinkRecord(up=True, state=state)
        if state.upper() == "DOWN":
            return LinkRecord(up=False, state=state)
        raise ParseError(f"unknown link status {state!r}", line_no, line)
    raise_unparsable(text, "a 'link status' line")


def samples(record: LinkRecord, chip: ChipRef, ctx: CollectContext) -> list[Sample]:
    return [Sample("npu_roce_link_up", label_pairs(npu=chip.npu, chip=chip.chip), 1.0 if record.up else 0.0)]


SOURCE = hccn_source("hccn_link", "link", parse, samples)
