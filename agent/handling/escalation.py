"""One poll of one chip's error codes against its history: the new history and each code's level.

Pure. An occurrence is a code becoming active (absent at the previous poll, present now), not each poll
that still sees it. A code's duration is counted from the poll that first saw it, so it is known to the
resolution of the poll interval: a code seen by two consecutive polls has lasted at least one interval,
one seen by a single poll is taken as shorter than that. A level of ManuallySeparateNPU is held after
its code goes away, until ``npuwatch faults clear`` (or, for a rule with a release window, until the
code has not become active again for that long).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from collectors.fault_levels import ChipLevels, FaultTable, most_severe, normalise, static_level

__all__ = ["HELD_LEVEL", "ChipHistory", "Held", "step"]

HELD_LEVEL = "ManuallySeparateNPU"


@dataclass(frozen=True)
class Held:
    """A manual separation: since when, and after how long without the code it releases itself (None: never)."""

    since: float
    release_s: float | None = None


@dataclass(frozen=True)
class ChipHistory:
    active: Mapping[str, float] = field(default_factory=dict)  # code -> when a poll first saw it, this time
    seen: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # code -> when it became active
    held: Mapping[str, Held] = field(default_factory=dict)  # code -> its held manual separation

    def empty(self) -> bool:
        return not (self.active or self.seen or self.held)


def _kept_s(table: FaultTable, code: str) -> float:
    """How long an occurrence of ``code`` still counts: its longest window (or release window)."""
    spans = [max(rule.window_s, rule.release_s or 0.0) for rule in table.frequency if code in rule.codes]
    return max(spans, default=0.0)


def _level(table: FaultTable, code: str, health: str | None, history: ChipHistory, now: float) -> str:
    if code in history.held:
        return HELD_LEVEL
    candidates = [static_level(table, code, health)]
    seen = history.seen.get(code, ())
    candidates += [rule.level for rule in table.frequency
                   if code in rule.codes and sum(now - at <= rule.window_s for at in seen) >= rule.times]
    since = history.active.get(code)
    candidates += [rule.level for rule in table.duration
                   if code in rule.codes and since is not None and now - since >= rule.timeout_s]
    return most_severe(candidates) or candidates[0]


def _release_s(table: FaultTable, code: str) -> float | None:
    windows = [rule.release_s for rule in table.frequency if code in rule.codes and rule.level == HELD_LEVEL]
    return None if not windows or None in windows else max(w for w in windows if w is not None)


def step(table: FaultTable, history: ChipHistory, health: str | None, codes: Sequence[str],
         now: float) -> tuple[ChipHistory, ChipLevels]:
    """The chip's history after a poll that saw ``codes`` at ``now``, and its levels (keyed by code as printed)."""
    printed = {normalise(code): code for code in codes}
    active = {code: history.active.get(code, now) for code in printed}
    seen = {code: times for code, times in history.seen.items()}
    for code in printed:
        if code not in history.active and _kept_s(table, code) > 0:
            seen[code] = (*seen.get(code, ()), now)
    seen = {code: kept for code, times in seen.items()
            if (kept := tuple(at for at in times if now - at <= _kept_s(table, code)))}
    held = {code: mark for code, mark in history.held.items()
            if code in active or mark.release_s is None
            or now - max(seen.get(code, ()), default=mark.since) < mark.release_s}
    current = ChipHistory(active, seen, held)
    levels = {code: _level(table, code, health, current, now) for code in printed}
    for code, level in levels.items():
        if level == HELD_LEVEL and code not in held:
            held[code] = Held(now, _release_s(table, code))
    after = ChipHistory(active, seen, held)
    chip = most_severe([*levels.values(), *([HELD_LEVEL] if held else [])])
    return after, ChipLevels({printed[code]: level for code, level in levels.items()}, chip)
