"""Handling levels of npu-smi error codes: what to do about a chip that reports one.

The table is data (``collectors/fault_data``, derived from Huawei's Ascend device plugin: see the
NOTICE there) in the device plugin's own two formats, so a newer ``faultCode.json`` or
``faultCustomization.json`` loads the same way (config ``faults.codes_file``,
``faults.escalation_file``), read as the device plugin reads them: codes compared by value, ``null``
lists empty, and one bad rule skipped (and listed in ``FaultTable.skipped``) rather than the whole
file refused. Everything here is pure: the escalation that needs a code's history (seen N times in a
window, lasting N seconds) lives in ``agent.handling``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = [
    "AIC_BUS_CODES",
    "HBM_DOUBLE_BIT_CODE",
    "LEVELS",
    "NETWORK_CODES",
    "SAME_FAULT_S",
    "ChipLevels",
    "DurationRule",
    "FaultTable",
    "FrequencyRule",
    "Skipped",
    "chip_decision",
    "configured_table",
    "default_table",
    "judge_static",
    "load_table",
    "most_severe",
    "normalise",
    "parse_code_lists",
    "parse_codes",
    "parse_escalation",
    "same_fault",
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
HELD_LEVEL = "ManuallySeparateNPU"
# The device plugin's network codes (RoCE and UBOE port down, their sub-health and pre-separate forms): judged
# apart from the chip's own codes, and never at a restart level.
NETWORK_CODES = frozenset({"81078603", "81078607", "110000002", "110001024"})
_NETWORK_LEVELS = ("SeparateNPU", "PreSeparateNPU", "SubHealthFault", "NotHandleFault")
_RESTART_LEVELS = ("RestartNPU", "FreeRestartNPU", "RestartBusiness", "RestartRequest")
UNLISTED_NETWORK_LEVEL = "PreSeparateNPU"
# An AI Core or vector core bus error this close to an HBM double-bit error is that error seen again.
HBM_DOUBLE_BIT_CODE = "80E01801"
AIC_BUS_CODES = frozenset({"80C98009", "80CB8009"})
SAME_FAULT_S = 10.0
# The device plugin's limits on faultCustomization.json (seconds, except Times).
TIME_WINDOW_S = (60, 864000)
TIMES = (1, 100)
FAULT_TIMEOUT_S = (0, 600)
RECOVER_TIMEOUT_S = (0, 86400)

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
    """A code that occurs ``times`` times within ``window_s`` is handled at ``level``.

    An occurrence of a code that also has a duration rule is one that lasted past that rule's
    timeout. ``release_s``: the level is released once the code has stayed recovered that long (the
    device plugin's ReleaseTimeWindow); None: it stays until cleared by hand (ManuallySeparateNPU only).
    """

    codes: frozenset[str]
    window_s: float
    times: int
    level: str
    release_s: float | None = None


@dataclass(frozen=True)
class DurationRule:
    """A code active longer than ``timeout_s`` is handled at ``level`` until it has stayed clear for
    longer than ``recover_s``."""

    codes: frozenset[str]
    timeout_s: float
    level: str
    recover_s: float = 0.0


@dataclass(frozen=True)
class Skipped:
    """One entry of a table file that was not loaded: which file, which entry, why."""

    file: str
    entry: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}: {self.entry} skipped ({self.why})"


@dataclass(frozen=True)
class FaultTable:
    levels: Mapping[str, str]  # code (upper-case hex by value, no 0x) -> its listed level, the stricter of two
    frequency: tuple[FrequencyRule, ...] = ()
    duration: tuple[DurationRule, ...] = ()
    network: Mapping[str, str] = field(default_factory=dict)  # network code -> its listed network level
    skipped: tuple[Skipped, ...] = ()
    # the codes and escalation files read
    files: tuple[str, str] = field(default=(str(CODES_FILE), str(ESCALATION_FILE)), compare=False)

    def frequency_rule(self, code: str) -> FrequencyRule | None:
        return next((rule for rule in self.frequency if code in rule.codes), None)

    def duration_rule(self, code: str) -> DurationRule | None:
        return next((rule for rule in self.duration if code in rule.codes), None)

    def skipped_in(self, path: str) -> int:
        return sum(entry.file == path for entry in self.skipped)


_HEX = re.compile(r"(?:0[xX])?([0-9A-Fa-f]{1,16})")


def _value(code: str) -> int | None:
    match = _HEX.fullmatch(code.strip())
    return int(match.group(1), 16) if match else None


def normalise(code: str) -> str:
    """A code as the table keys it: its value in upper-case hex without ``0x`` or leading zeros
    (``020001002`` and ``20001002`` are one code; every code is hex, as the device plugin parses them).
    Text that is no hex number is kept upper-cased, so it matches nothing listed."""
    value = _value(code)
    return f"{value:X}" if value is not None else code.strip().upper()


def _list(doc: Mapping[str, Any], key: str, file: str, skipped: list[Skipped]) -> list[str]:
    """``doc[key]`` as a list of codes: missing or ``null`` is empty; an entry that is no hex code is skipped."""
    value = doc.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        skipped.append(Skipped(file, key, "expected a list of hex codes"))
        return []
    codes = []
    for entry in value:
        if isinstance(entry, str) and _value(entry) is not None:
            codes.append(normalise(entry))
        else:
            skipped.append(Skipped(file, f"{key} entry {entry!r}", "not a hex code"))
    return codes


def _stricter(known: str | None, level: str) -> str:
    return level if known is None else min(known, level, key=severity)


def parse_code_lists(doc: Any, file: str = "faultCode.json") -> tuple[dict[str, str], dict[str, str], list[Skipped]]:
    """``faultCode.json``: ``{"<Level>Codes": [code, ...], "<Level>NetworkCodes": [...]}`` -> (code -> level,
    network code -> network level, what was skipped). A code under two levels takes the stricter. A network
    code in a chip list keeps that level, except a restart level, which a network code cannot have: it is
    NotHandleFault. ValueError only when ``doc`` is not an object."""
    if not isinstance(doc, Mapping):
        raise ValueError("expected an object of <Level>Codes lists")
    skipped: list[Skipped] = []
    levels: dict[str, str] = {}
    network: dict[str, str] = {}
    for key in doc:
        name = str(key)
        level = name[: -len("NetworkCodes")] if name.endswith("NetworkCodes") else name[: -len("Codes")]
        if not name.endswith("Codes") or level not in _RANK or level == HELD_LEVEL:
            skipped.append(Skipped(file, name, "not a <Level>Codes list"))
            continue
        if name.endswith("NetworkCodes") and level not in _NETWORK_LEVELS:
            skipped.append(Skipped(file, name, f"a network code cannot be {level}"))
            continue
        for code in _list(doc, name, file, skipped):
            if name.endswith("NetworkCodes"):
                network[code] = _stricter(network.get(code), level)
                continue
            levels[code] = _stricter(levels.get(code), level)
            if code in NETWORK_CODES:
                network[code] = _stricter(network.get(code), "NotHandleFault" if level in _RESTART_LEVELS else level)
    return levels, network, skipped


def parse_codes(doc: Any) -> dict[str, str]:
    """``faultCode.json``'s chip lists: code -> level (see ``parse_code_lists``)."""
    return parse_code_lists(doc)[0]


def _number(rule: Mapping[str, Any], key: str, limits: tuple[int, int] | None = None) -> float:
    """``rule[key]``, missing or ``null`` as 0 (Go's zero value); ValueError outside ``limits``."""
    value = rule.get(key)
    if value is None:
        value = 0
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not float.is_integer(value))):
        raise ValueError(f"{key}: expected a whole number, got {str(value)[:40]}")
    if limits is not None and not limits[0] <= value <= limits[1]:
        shown = f"{value:g}" if abs(value) < 1e15 else str(value)[:40]
        raise ValueError(f"{key} {shown} is outside {limits[0]}-{limits[1]}")
    return float(value)


def _handling(rule: Mapping[str, Any], allowed: Iterable[str]) -> str:
    level = rule.get("FaultHandling")
    if level not in tuple(allowed):
        raise ValueError(f"FaultHandling {level!r} is not one of {', '.join(allowed)}")
    return str(level)


def _frequency(rule: Mapping[str, Any], codes: frozenset[str]) -> FrequencyRule:
    window = _number(rule, "TimeWindow", TIME_WINDOW_S)
    release = _number(rule, "ReleaseTimeWindow")
    if release < 0:
        raise ValueError(f"ReleaseTimeWindow {release:g} is negative")
    times = int(_number(rule, "Times", TIMES))
    level = _handling(rule, LEVELS)
    if level != HELD_LEVEL and not release:
        raise ValueError(f"FaultHandling {level} needs a ReleaseTimeWindow")
    return FrequencyRule(codes, window, times, level, release or None)


def _duration(rule: Mapping[str, Any], codes: frozenset[str]) -> DurationRule:
    timeout = _number(rule, "FaultTimeout", FAULT_TIMEOUT_S)
    recover = _number(rule, "RecoverTimeout", RECOVER_TIMEOUT_S)
    level = _handling(rule, (level for level in LEVELS if level != HELD_LEVEL))
    return DurationRule(codes, timeout, level, recover)


def parse_escalation(doc: Any, file: str = "faultCustomization.json") -> tuple[
        tuple[FrequencyRule, ...], tuple[DurationRule, ...], tuple[Skipped, ...]]:
    """``faultCustomization.json``'s ``FaultFrequency`` and ``FaultDuration`` (other keys are not used): the valid
    rules, and each rule (or code) skipped with why. A code in an earlier rule of the same kind keeps that rule.
    ValueError only when ``doc`` is not an object."""
    if not isinstance(doc, Mapping):
        raise ValueError("expected an object with FaultFrequency and FaultDuration lists")
    skipped: list[Skipped] = []
    parsed: dict[str, list[Any]] = {"FaultFrequency": [], "FaultDuration": []}
    for kind, build in (("FaultFrequency", _frequency), ("FaultDuration", _duration)):
        rules = doc.get(kind)
        if rules is None:
            continue
        if not isinstance(rules, list):
            skipped.append(Skipped(file, kind, "expected a list of rules"))
            continue
        taken: set[str] = set()
        for index, rule in enumerate(rules):
            where = f"{kind}[{index}]"
            if not isinstance(rule, Mapping):
                skipped.append(Skipped(file, where, "expected an object"))
                continue
            codes = _list(rule, "EventId", file, skipped) if isinstance(rule.get("EventId"), list) else None
            if not codes:
                skipped.append(Skipped(file, where, "EventId: expected a non-empty list of hex codes"))
                continue
            try:
                built = build(rule, frozenset(codes))
            except ValueError as exc:
                skipped.append(Skipped(file, where, str(exc)))
                continue
            again = set(codes) & taken
            skipped += [Skipped(file, f"{where} EventId {code}", f"already in an earlier {kind} rule")
                        for code in sorted(again)]
            if again:
                built = replace(built, codes=frozenset(codes) - again)
            taken |= set(codes)
            if built.codes:
                parsed[kind].append(built)
    return tuple(parsed["FaultFrequency"]), tuple(parsed["FaultDuration"]), tuple(skipped)


_MAX_INT_DIGITS = 18  # every number of these files is a code count or seconds; more digits is a broken file


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise ValueError(f"a {len(text.lstrip('-'))}-digit integer is too large")
    return int(text)


def _read(path: Path) -> Any:
    """The JSON document; ValueError naming the file for anything that is not plain, finite JSON
    (``Infinity``, ``NaN``, ``1e400``, a huge integer, nesting deeper than the parser's stack)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant, parse_float=_finite,
                          parse_int=_bounded_int)
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _codes_part(path: Path) -> tuple[dict[str, str], dict[str, str], list[Skipped]]:
    try:
        return parse_code_lists(_read(path), str(path))
    except ValueError as exc:
        raise ValueError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None


def _escalation_part(path: Path) -> tuple[tuple[FrequencyRule, ...], tuple[DurationRule, ...], tuple[Skipped, ...]]:
    try:
        return parse_escalation(_read(path), str(path))
    except ValueError as exc:
        raise ValueError(str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}") from None


def load_table(codes_file: str | Path | None = None, escalation_file: str | Path | None = None) -> FaultTable:
    """The table from the two files (None: the packaged one); OSError or ValueError naming the file when one
    cannot be read at all. A bad rule or code is skipped and listed in ``FaultTable.skipped``."""
    codes_path, escalation_path = Path(codes_file or CODES_FILE), Path(escalation_file or ESCALATION_FILE)
    levels, network, skipped = _codes_part(codes_path)
    frequency, duration, more = _escalation_part(escalation_path)
    return FaultTable(levels, frequency, duration, network, (*skipped, *more), (str(codes_path), str(escalation_path)))


def configured_table(codes_file: str | Path | None, escalation_file: str | Path | None) -> tuple[FaultTable,
                                                                                                  str | None]:
    """The table of the config's ``faults.codes_file`` and ``faults.escalation_file`` (None: the packaged file),
    and, when one of them cannot be read at all, why the packaged copy of that one file is used instead: a bad
    file must not stop the agent, and must not replace the other file. Skipped rules are in the table."""
    if codes_file is None and escalation_file is None:
        return default_table(), None
    problems = []
    codes_path, escalation_path = Path(codes_file or CODES_FILE), Path(escalation_file or ESCALATION_FILE)
    try:
        levels, network, skipped = _codes_part(codes_path)
    except (OSError, ValueError) as exc:
        problems.append(f"fault codes not loaded ({exc}); using the packaged {CODES_FILE.name}")
        levels, network, skipped = dict(default_table().levels), dict(default_table().network), []
        codes_path = CODES_FILE
    try:
        frequency, duration, more = _escalation_part(escalation_path)
    except (OSError, ValueError) as exc:
        problems.append(f"fault escalation not loaded ({exc}); using the packaged {ESCALATION_FILE.name}")
        frequency, duration, more = default_table().frequency, default_table().duration, ()
        escalation_path = ESCALATION_FILE
    table = FaultTable(levels, frequency, duration, network, (*skipped, *more), (str(codes_path), str(escalation_path)))
    return table, "; ".join(problems) or None


_DEFAULT: list[FaultTable] = []


def default_table() -> FaultTable:
    """The packaged table, read once."""
    if not _DEFAULT:
        _DEFAULT.append(load_table())
    return _DEFAULT[0]


def static_level(table: FaultTable, code: str, health: str | None) -> str:
    """A code's level without its history. A network code takes its network level (PreSeparateNPU when it is
    in no list). Another code in no list is SeparateNPU while npu-smi's health word (``health``, as printed)
    says Alarm or Critical, SubHealthFault otherwise."""
    key = normalise(code)
    if key in NETWORK_CODES:
        return table.network.get(key, UNLISTED_NETWORK_LEVEL)
    level = table.levels.get(key)
    if level is not None:
        return level
    return "SeparateNPU" if (health or "").strip().lower() in ("alarm", "critical") else "SubHealthFault"


def _listed(table: FaultTable, code: str) -> bool:
    return code in (table.network if code in NETWORK_CODES else table.levels)


def chip_decision(table: FaultTable, levels: Mapping[str, str]) -> str | None:
    """The chip's level from its codes' static levels (``levels``: normalised code -> level), the device
    plugin's way: chip codes and network codes are judged apart and the stricter of the two is the chip's; in
    each, a listed code decides over codes in no list."""
    decided = []
    for part in (NETWORK_CODES, None):
        codes = [code for code in levels if (code in NETWORK_CODES) == (part is not None)]
        listed = [code for code in codes if _listed(table, code)]
        decided.append(most_severe(levels[code] for code in (listed or codes)))
    return most_severe(level for level in decided if level is not None)


@dataclass(frozen=True)
class ChipLevels:
    """One chip's judgement: each active code's level, and the chip's (the most severe of them, or a
    manual separation still held after its code went away)."""

    codes: Mapping[str, str]
    chip: str | None


def same_fault(codes: Iterable[str]) -> set[str]:
    """Of ``codes`` (normalised) seen together, the AI Core bus errors that are the HBM double-bit error's."""
    codes = set(codes)
    return codes & AIC_BUS_CODES if HBM_DOUBLE_BIT_CODE in codes else set()


def judge_static(table: FaultTable, health: str | None, codes: Iterable[str]) -> ChipLevels:
    """Levels without history: what ``npuwatch check`` and ``diagnose`` see in one reading. An AI Core bus
    error beside an HBM double-bit error takes that error's level and does not decide."""
    keys = {code: normalise(code) for code in codes}
    levels = {key: static_level(table, key, health) for key in keys.values()}
    echoes = same_fault(levels)
    deciding = {key: level for key, level in levels.items() if key not in echoes}
    for key in echoes:
        levels[key] = levels[HBM_DOUBLE_BIT_CODE]
    return ChipLevels({code: levels[key] for code, key in keys.items()}, chip_decision(table, deciding))
