"""Fault diagnosis: ``ascend-dmi --dg [-i item,...] [--scene ...] [-q]`` (also spelled ``-dg``).

Text layout (MindCluster 7.3 ToolBox guide, pages toolboxug_0155..0165)::

    Summary:
        Arch: aarch64
        Mode: ******
        Time: 20250529-19:19:35
                               <- this line holds one space
    Hardware:
        driver:
            HEALTH
        aicore:
            FAIL
            *** Device 4: a timeout error occurred.

Section headers sit at column 0 (``Summary:``, ``Hardware:``, ``Software:``), an item key at 4 spaces
ending in ``:``, its status on the next line at 8 spaces, and failure details after the status as
8-space lines starting ``*** ``. Between ``Time`` and the first section there may be a line holding a
single space. Without ``-q`` the tool first prints ``...Do you want to continue?(Y/N)`` and the typed
answer lands on the same line (``(Y/N)y``); that line is recognised and skipped.

Status words differ per item (from the guide): driver HEALTH / GENERAL_WARN / IMPORTANT_WARN /
EMERGENCY_WARN / FAIL; device the same plus SKIP and WARN; cann PASS / FAIL; network PASS / SKIP /
INFO / WARN / FAIL; bandwidth PASS / SKIP / FAIL; signalQuality PASS / SKIP / IMPORTANT_WARN / FAIL;
stress items PASS / FAIL. Each maps to a verdict (``pass``/``warn``/``fail``/``skip``/``info``) and the
raw word is kept. A status outside that vocabulary is kept with verdict ``unknown``; an item outside
the documented list is kept with ``known_item=False``; a key whose status never arrived (cut output)
has verdict ``incomplete``. Nothing is dropped.

``-fmt json`` prints a different document (``DiagnosisItems[].sub_items[]``); it is not parsed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from collectors.base import ParseError

__all__ = [
    "KNOWN_ITEMS",
    "STATUS_VERDICTS",
    "DiagItem",
    "DiagSummary",
    "Diagnosis",
    "Verdict",
    "parse",
]

Verdict = Literal["pass", "warn", "fail", "skip", "info", "unknown", "incomplete"]

STATUS_VERDICTS: dict[str, Verdict] = {
    "HEALTH": "pass",
    "PASS": "pass",
    "GENERAL_WARN": "warn",
    "IMPORTANT_WARN": "warn",
    "EMERGENCY_WARN": "warn",
    "WARN": "warn",
    "FAIL": "fail",
    "SKIP": "skip",
    "INFO": "info",
}

# Item keys the 7.3 help text and scene output name; newer guides add dsa, 310P cards say chipMemory.
KNOWN_ITEMS = frozenset({
    "driver", "cann", "device", "network", "signalQuality", "hbm", "chipMemory", "bandwidth", "aiflops",
    "nic", "prbs", "aicore", "edp", "tdp", "aicpu", "random", "dsa", "hbmStress", "bandwidthStress",
})

_OK_VERDICTS = frozenset({"pass", "skip", "info"})
_SECTION_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z ]*):$")
_ITEM_RE = re.compile(r"^ {4}(?P<name>[A-Za-z][\w.-]*):$")
_SUMMARY_RE = re.compile(r"^ {4}(?P<key>[A-Za-z][\w ]*?):\s*(?P<value>.*)$")
_DEEP_RE = re.compile(r"^ {8,}(?P<text>\S.*)$")
_DETAIL_PREFIX = "*** "
_PROMPT_RE = re.compile(r"\(Y/N\)\s*(?P<answer>\S*)\s*$", re.IGNORECASE)
_TIME_FORMAT = "%Y%m%d-%H:%M:%S"


@dataclass(frozen=True)
class DiagSummary:
    """The ``Summary:`` block. ``time`` is naive local time as printed; ``time_text`` keeps the raw text."""

    arch: str | None
    mode: str | None
    time: datetime | None
    time_text: str | None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DiagItem:
    section: str
    name: str
    status: str | None
    verdict: Verdict
    details: tuple[str, ...] = ()
    known_item: bool = True

    @property
    def complete(self) -> bool:
        return self.status is not None

    @property
    def known_status(self) -> bool:
        return self.status in STATUS_VERDICTS

    @property
    def is_problem(self) -> bool:
        """Anything but pass/skip/info: warnings, failures, unknown words and cut-off items."""
        return self.verdict not in _OK_VERDICTS


@dataclass(frozen=True)
class Diagnosis:
    summary: DiagSummary | None
    items: tuple[DiagItem, ...]

    def item(self, name: str) -> DiagItem | None:
        return next((item for item in self.items if item.name == name), None)

    @property
    def problems(self) -> tuple[DiagItem, ...]:
        return tuple(item for item in self.items if item.is_problem)

    @property
    def incomplete(self) -> tuple[DiagItem, ...]:
        return tuple(item for item in self.items if not item.complete)


@dataclass
class _OpenItem:
    section: str
    name: str
    status: str | None = None
    details: list[str] = field(default_factory=list)

    def close(self) -> DiagItem:
        if self.status is None:
            verdict: Verdict = "incomplete"
        else:
            verdict = STATUS_VERDICTS.get(self.status, "unknown")
        return DiagItem(section=self.section, name=self.name, status=self.status, verdict=verdict,
                        details=tuple(self.details), known_item=self.name in KNOWN_ITEMS)


def _summary(values: dict[str, str]) -> DiagSummary:
    time_text = values.pop("Time", None)
    when: datetime | None = None
    if time_text:
        try:
            when = datetime.strptime(time_text, _TIME_FORMAT)
        except ValueError:
            when = None
    return DiagSummary(arch=values.pop("Arch", None), mode=values.pop("Mode", None), time=when,
                       time_text=time_text, extra=values)


def parse(text: str) -> Diagnosis:
    """Parse ``ascend-dmi --dg`` text output into the summary and the ordered items."""
    section: str | None = None
    summary_values: dict[str, str] | None = None
    items: list[DiagItem] = []
    current: _OpenItem | None = None

    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line:
            continue
        prompt = _PROMPT_RE.search(line)
        if prompt is not None and section is None:
            if prompt.group("answer").lower().startswith("n"):
                raise ParseError("diagnosis declined at the (Y/N) prompt", line_no, raw)
            continue
        header = _SECTION_RE.match(line)
        if header is not None:
            if current is not None:
                items.append(current.close())
                current = None
            section = header.group("name")
            if section == "Summary":
                if summary_values is not None:
                    raise ParseError("a second Summary: block", line_no, raw)
                summary_values = {}
            continue
        if section is None:
            raise ParseError("text before the first Summary:/Hardware:/Software: header", line_no, raw)
        if section == "Summary":
            match = _SUMMARY_RE.match(line)
            if match is None or summary_values is None:
                raise ParseError("expected '    Key: value' in Summary:", line_no, raw)
            summary_values[match.group("key")] = match.group("value").strip()
            continue
        item = _ITEM_RE.match(line)
        if item is not None:
            if current is not None:
                items.append(current.close())
            current = _OpenItem(section=section, name=item.group("name"))
            continue
        deep = _DEEP_RE.match(line)
        if deep is None:
            raise ParseError("expected an item key at 4 spaces or a status at 8", line_no, raw)
        if current is None:
            raise ParseError("status or detail line before any item key", line_no, raw)
        value = deep.group("text")
        if value.startswith(_DETAIL_PREFIX):
            current.details.append(value[len(_DETAIL_PREFIX):].strip())
        elif current.status is None:
            current.status = value.strip()
        else:
            current.details.append(value.strip())
    if current is not None:
        items.append(current.close())
    if not items and summary_values is None:
        raise ParseError("no Summary:, Hardware: or Software: section in ascend-dmi --dg output")
    return Diagnosis(summary=_summary(summary_values) if summary_values is not None else None, items=tuple(items))
