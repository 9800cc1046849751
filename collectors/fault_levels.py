"""Handling levels of npu-smi error codes: what to do about a chip that reports one.

The table is data (``collectors/fault_data``, derived from Huawei's Ascend device plugin: see the
NOTICE there) in the device plugin's own two formats, so a newer ``faultCode.json`` or
``faultCustomization.json`` loads the same way (config ``faults.codes_file``,
``faults.escalation_file``). Everything here is pure: the escalation that needs a code's history
(seen N times in a window, lasting N seconds) lives in ``agent.faults``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LEVELS",
    "ChipLevels",
    "DurationRule",
    "FaultTable",
    "FrequencyRule",
    "configured_table",
    "default_table",
    "judge_static",
    "load_table",
    "most_severe",
    "normalise",
    "parse_codes",
    "parse_escalation",
    "severity",
    "static_level",
]

# Most severe first: a chip with several codes is handled at the first of its levels here.
LEVELS: tuple[str, ...] = (
    "ManuallySeparateNPU",
    "SeparateNPU",
    "PreSeparateNPU",
    "RestartNPU",
    "FreeRestartNPU",
    "RestartBusiness",
    "RestartRequest",
    "SubHealthFault",
    "NotHandleFault",
)
_RANK = {level: rank for rank, level in enumerate(LEVELS)}
# faultCode.json's keys are the level names with "Codes" appended (ManuallySeparateNPU has no list:
# only escalation reaches it).
_SUFFIX = "Codes"

DATA_DIR = Path(__file__).with_name("fault_data")
CODES_FILE = DATA_DIR / "fault_codes.json"
ESCALATION_FILE = DATA_DIR / "fault_escalation.json"


def severity(level: str) -> int:
    """Smaller is more severe (0: ManuallySeparateNPU); ValueError for a name not in LEVELS."""
    try:
        return _RANK[level]
    except KeyError:
        raise ValueError(f"unknown handling level {level!r}; known: {', '.join(LEVELS)}") from None


def most_severe(levels: Iterable[str]) -> str | None:
    """The most severe of ``levels``; None when there is none."""
    return min(levels, key=severity, default=None)


@dataclass(frozen=True)
class FrequencyRule:
    """A code that becomes active ``times`` times within ``window_s`` is handled at ``level``.

    ``release_s``: the level is released once the code has not become active for that long (the
    device plugin's ReleaseTimeWindow); None: it stays until cleared by hand.
    """

    codes: frozenset[str]
    window_s: float
    times: int
    level: str
    release_s: float | None = None


@dataclass(frozen=True)
class DurationRule:
    """A code active for ``timeout_s`` or longer is handled at ``level``."""

    codes: frozenset[str]
    timeout_s: float
    level: str


@dataclass(frozen=True)
class FaultTable:
    levels: Mapping[str, str]  # code (upper-case hex, no 0x) -> its listed level, the stricter of two
    frequency: tuple[FrequencyRule, ...] = ()
    duration: tuple[DurationRule, ...] = ()


def normalise(code: str) -> str:
    """A code as the table keys it: upper-case hex without ``0x`` (npu-smi prints either)."""
    text = code.strip().upper()
    return text[2:] if text.startswith("0X") else text


def parse_codes(doc: Any) -> dict[str, str]:
    """``faultCode.json``: ``{"<Level>Codes": [code, ...]}`` -> code -> level; a code under two levels
    takes the stricter. ValueError for an unknown level or a list that is not of strings."""
    if not isinstance(doc, Mapping):
        raise ValueError("expected an object of <Level>Codes lists")
    levels: dict[str, str] = {}
    for key, codes in doc.items():
        level = str(key)[: -len(_SUFFIX)] if str(key).endswith(_SUFFIX) else str(key)
        severity(level)
        if not isinstance(codes, list) or not all(isinstance(code, str) for code in codes):
            raise ValueError(f"{key}: expected a list of hex codes")
        for printed in codes:
            code = normalise(printed)
            known = levels.get(code)
            levels[code] = level if known is None else min(known, level, key=severity)
    return levels


def _rule_codes(rule: Mapping[str, Any]) -> frozenset[str]:
    codes = rule.get("EventId")
    if not isinstance(codes, list) or not all(isinstance(code, str) for code in codes):
        raise ValueError("EventId: expected a list of hex codes")
    return frozenset(normalise(code) for code in codes)


def _number(rule: Mapping[str, Any], key: str) -> float:
    value = rule.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ValueError(f"{key}: expected a positive number, got {value!r}")
    return float(value)


def parse_escalation(doc: Any) -> tuple[tuple[FrequencyRule, ...], tuple[DurationRule, ...]]:
    """``faultCustomization.json``'s ``FaultFrequency`` and ``FaultDuration`` (other keys are not used)."""
    if not isinstance(doc, Mapping):
        raise ValueError("expected an object with FaultFrequency and FaultDuration lists")
    frequency = []
    for rule in doc.get("FaultFrequency") or ():
        release = rule.get("ReleaseTimeWindow")
        frequency.append(FrequencyRule(
            _rule_codes(rule), _number(rule, "TimeWindow"), int(_number(rule, "Times")),
            _level(rule), _number(rule, "ReleaseTimeWindow") if release is not None else None))
    duration = [DurationRule(_rule_codes(rule), _number(rule, "FaultTimeout"), _level(rule))
                for rule in doc.get("FaultDuration") or ()]
    return tuple(frequency), tuple(duration)


def _level(rule: Mapping[str, Any]) -> str:
    level = str(rule.get("FaultHandling"))
    severity(level)
    return level


def load_table(codes_file: str | Path | None = None, escalation_file: str | Path | None = None) -> FaultTable:
    """The table from the two files (None: the packaged one); OSError or ValueError naming the file."""
    docs = []
    for path in (codes_file or CODES_FILE, escalation_file or ESCALATION_FILE):
        try:
            docs.append(json.loads(Path(path).read_text(encoding="utf-8")))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    try:
        levels = parse_codes(docs[0])
    except ValueError as exc:
        raise ValueError(f"{codes_file or CODES_FILE}: {exc}") from None
    try:
        frequency, duration = parse_escalation(docs[1])
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"{escalation_file or ESCALATION_FILE}: {exc}") from None
    return FaultTable(levels, frequency, duration)


def configured_table(codes_file: str | Path | None, escalation_file: str | Path | None) -> tuple[FaultTable,
                                                                                                  str | None]:
    """The table of the config's ``faults.codes_file`` and ``faults.escalation_file`` (None: the packaged file),
    and, when one cannot be loaded, why the packaged table is used instead: a bad file must not stop the agent."""
    if codes_file is None and escalation_file is None:
        return default_table(), None
    try:
        return load_table(codes_file, escalation_file), None
    except (OSError, ValueError) as exc:
        return default_table(), f"fault table not loaded ({exc}); using the packaged table"


_DEFAULT: list[FaultTable] = []


def default_table() -> FaultTable:
    """The packaged table, read once."""
    if not _DEFAULT:
        _DEFAULT.append(load_table())
    return _DEFAULT[0]


def static_level(table: FaultTable, code: str, health: str | None) -> str:
    """A code's level without its history. A code in no list is SeparateNPU while npu-smi's health word
    (``health``, as printed) says Alarm or Critical, SubHealthFault otherwise."""
    level = table.levels.get(normalise(code))
    if level is not None:
        return level
    return "SeparateNPU" if (health or "").strip().lower() in ("alarm", "critical") else "SubHealthFault"


@dataclass(frozen=True)
class ChipLevels:
    """One chip's judgement: each active code's level, and the chip's (the most severe of them, or a
    manual separation still held after its code went away)."""

    codes: Mapping[str, str]
    chip: str | None


def judge_static(table: FaultTable, health: str | None, codes: Iterable[str]) -> ChipLevels:
    """Levels without history: what ``npuwatch check`` and ``diagnose`` see in one reading."""
    levels = {code: static_level(table, code, health) for code in codes}
    return ChipLevels(levels, most_severe(levels.values()))
