"""One poll of one chip's error codes against its history: the new history and each code's level.

Pure, and the device plugin's rules over time (docs/fault-codes.md):

- A code *occurs* when it becomes active (absent at the previous poll, present now); a poll that still
  sees it is the same occurrence. A code that also has a duration rule occurs, for its frequency rule,
  only when an appearance lasts past that rule's timeout, so short blips count nothing.
- A duration level starts once the code has been active longer than ``FaultTimeout`` and stays until the
  code has stayed clear longer than ``RecoverTimeout``: a flapping code keeps its level.
- A frequency level starts when the code has occurred ``Times`` times within ``TimeWindow`` (the count then
  starts again) and stays until the code has stayed recovered for ``ReleaseTimeWindow``, counted from the
  last recovery. A ManuallySeparateNPU without a release window stays until ``npuwatch faults clear``.
  A level other than ManuallySeparateNPU follows its rule as the table has it now: a reload that changes the
  rule's level changes the held level, one that removes the rule releases it.

Durations are known to the resolution of the poll interval: a code seen by one poll only has lasted 0 s.

Each chip also keeps when it last faulted (``faults``: a poll at which a code of a level that resets or
separates the chip appeared), for ``REPEAT_WINDOW_S``: a chip that faults again and again is a repeat
offender to repair, not to reset once more (``agent.health.faults.repeat_offender``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from collectors.fault_levels import (
    AIC_BUS_CODES,
    HBM_DOUBLE_BIT_CODE,
    SAME_FAULT_S,
    ChipLevels,
    FaultTable,
    chip_decision,
    most_severe,
    normalise,
    static_level,
)

__all__ = ["ACTION_LEVELS", "HELD_LEVEL", "REPEAT_WINDOW_S", "ChipHistory", "Held", "Raised", "step"]

HELD_LEVEL = "ManuallySeparateNPU"
# The levels that take the chip out of service, now or after its job: a code of one of them is a fault of the chip.
ACTION_LEVELS = frozenset({"ManuallySeparateNPU", "SeparateNPU", "PreSeparateNPU", "RestartNPU", "FreeRestartNPU"})
REPEAT_WINDOW_S = 7 * 86400.0  # how long a chip's faults are remembered (the repeat offender's look-back)


@dataclass(frozen=True)
class Held:
    """A manual separation: since when, and after how long recovered it releases itself (None: never)."""

    since: float
    release_s: float | None = None


@dataclass(frozen=True)
class Raised:
    """A frequency level other than ManuallySeparateNPU, held until the code has stayed recovered ``release_s``."""

    level: str
    since: float
    release_s: float


@dataclass(frozen=True)
class ChipHistory:
    active: Mapping[str, float] = field(default_factory=dict)  # code -> when a poll first saw it, this time
    seen: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # code -> its counted occurrences
    held: Mapping[str, Held] = field(default_factory=dict)  # code -> its held manual separation
    raised: Mapping[str, Raised] = field(default_factory=dict)  # code -> its held frequency level
    lasting: Mapping[str, float] = field(default_factory=dict)  # code -> since when its duration level holds
    cleared: Mapping[str, float] = field(default_factory=dict)  # code -> when it last went away
    recovered: Mapping[str, float] = field(default_factory=dict)  # code -> its last recovery (for release windows)
    faults: tuple[float, ...] = ()  # when the chip faulted (a code of an ACTION_LEVELS level appeared), 7 days

    def empty(self) -> bool:
        return not (self.active or self.seen or self.held or self.raised or self.lasting or self.faults)


def _kept_s(table: FaultTable, code: str) -> float:
    """How long a code's history still matters: its window, release window and recover timeout."""
    frequency, duration = table.frequency_rule(code), table.duration_rule(code)
    spans = [frequency.window_s, frequency.release_s or 0.0] if frequency else []
    spans += [duration.recover_s] if duration else []
    return max(spans, default=0.0)


def _echoes(active: Mapping[str, float]) -> set[str]:
    """The active AI Core bus errors that began within SAME_FAULT_S of the active HBM double-bit error."""
    hbm = active.get(HBM_DOUBLE_BIT_CODE)
    if hbm is None:
        return set()
    return {code for code in AIC_BUS_CODES & set(active) if abs(active[code] - hbm) < SAME_FAULT_S}


def _lasts(table: FaultTable, code: str, history: ChipHistory, appeared: Mapping[str, float],
           now: float) -> tuple[float | None, float | None]:
    """The code's duration level after this poll: (since when it holds, or None; when an earlier one was
    released, or None). A level released while the code was away may start again from a new appearance
    (``appeared``: code -> when the appearance that lasts until now began)."""
    rule = table.duration_rule(code)
    if rule is None:
        return None, None
    since, released = history.lasting.get(code), None
    gone = history.cleared.get(code)
    if since is not None:
        if gone is None or now - gone <= rule.recover_s:
            return since, None
        since, released = None, gone + rule.recover_s
    began = appeared.get(code)
    if began is not None and (now - began > rule.timeout_s or rule.timeout_s == 0):
        since = began + rule.timeout_s
    return since, released


def _released(mark: Held | Raised, code: str, faulty: Mapping[str, float], recovered: Mapping[str, float],
              now: float) -> bool:
    """Whether the code has stayed recovered for the mark's release window (``faulty``: codes active or lasting)."""
    last = recovered.get(code, mark.since)
    if mark.release_s is None or code in faulty or last < mark.since:
        return False
    return now - last > mark.release_s


def _rejudged(table: FaultTable, raised: Mapping[str, Raised]) -> tuple[dict[str, Raised], dict[str, Held]]:
    """The held frequency levels under the table's rules now (a reload may have changed them): a code whose rule
    is gone is released, one whose rule changed takes the new level and release window from the same start
    (the device plugin re-judges its upgraded faults so on a reload); a new ManuallySeparateNPU is a held one."""
    kept: dict[str, Raised] = {}
    held: dict[str, Held] = {}
    for code, mark in raised.items():
        rule = table.frequency_rule(code)
        if rule is None:
            continue
        if rule.level == HELD_LEVEL:
            held[code] = Held(mark.since, rule.release_s)
        else:
            kept[code] = Raised(rule.level, mark.since, rule.release_s or 0.0)
    return kept, held


def _escalated(table: FaultTable, code: str, static: str, marks: ChipHistory) -> str:
    """The code's level: its static one or the stricter level its history (``marks``) holds."""
    levels = [static, *([HELD_LEVEL] if code in marks.held else [])]
    levels += [marks.raised[code].level] if code in marks.raised else []
    duration = table.duration_rule(code)
    if duration is not None and code in marks.lasting:
        levels.append(duration.level)
    return most_severe(levels) or static


def step(table: FaultTable, history: ChipHistory, health: str | None, codes: Sequence[str],
         now: float, *, exact: bool = False) -> tuple[ChipHistory, ChipLevels]:
    """The chip's history after a poll that saw ``codes`` at ``now``, and its levels (keyed by code as printed).

    ``exact``: the call reports a change as it happens (a DCMI fault event), so a code it no longer lists ended
    at ``now`` and lasted from its first sighting until then; a poll only knows that it ended since the last one.
    """
    keys = {code: normalise(code) for code in codes}
    active = {key: history.active.get(key, now) for key in keys.values()}
    echoes = _echoes(active)
    cleared = {code: at for code, at in history.cleared.items() if code not in active}
    cleared.update({code: now for code in history.active if code not in active})
    recovered = dict(history.recovered)
    seen = {code: list(times) for code, times in history.seen.items()}
    lasting: dict[str, float] = {}
    appeared = {**({code: at for code, at in history.active.items() if code not in active} if exact else {}),
                **active}
    for code in (set(appeared) | set(history.lasting)) - echoes:
        since, released = _lasts(table, code, history, appeared, now)
        if released is not None:
            recovered[code] = released
        if since is not None:
            lasting[code] = since
            if since != history.lasting.get(code) and table.frequency_rule(code) is not None:
                seen.setdefault(code, []).append(since)  # an appearance that lasted: one occurrence
    for code in set(active) - set(history.active) - echoes:
        if table.duration_rule(code) is None and table.frequency_rule(code) is not None:
            seen.setdefault(code, []).append(now)
    for code in set(history.active) - set(active):
        if table.duration_rule(code) is None:
            recovered[code] = now
    faulty = {**active, **lasting}
    marked, promoted = _rejudged(table, history.raised)
    held = {code: mark for code, mark in {**promoted, **history.held}.items()
            if not _released(mark, code, faulty, recovered, now)}
    raised = {code: mark for code, mark in marked.items() if not _released(mark, code, faulty, recovered, now)}
    for code, times in list(seen.items()):
        rule = table.frequency_rule(code)
        kept = [at for at in times if rule is not None and now - at <= rule.window_s]
        seen[code] = kept
        if rule is None or code in held or code in raised:
            seen[code] = []  # an escalated code counts again once released
        elif len(kept) >= rule.times:
            seen[code] = []
            if rule.level == HELD_LEVEL:
                held[code] = Held(now, rule.release_s)
            else:
                raised[code] = Raised(rule.level, now, rule.release_s or 0.0)
    statics = {key: static_level(table, key, health) for key in active}
    faults = [at for at in history.faults if now - at <= REPEAT_WINDOW_S]
    if any(statics[code] in ACTION_LEVELS for code in set(active) - set(history.active) - echoes):
        faults.append(now)  # one fault a poll, however many of its codes appeared together
    marks = ChipHistory(held=held, raised=raised, lasting=lasting)
    levels = {key: _escalated(table, key, statics[key], marks) for key in active}
    deciding = {key: level for key, level in statics.items() if key not in echoes}
    for key in echoes:
        levels[key] = levels[HBM_DOUBLE_BIT_CODE]
    escalated = [*([HELD_LEVEL] if held else []), *(mark.level for mark in raised.values()),
                 *(lasted.level for code in lasting if (lasted := table.duration_rule(code)) is not None)]
    chip = most_severe([level for level in (chip_decision(table, deciding), *escalated) if level is not None])
    keep = {code for code in (*active, *held, *raised, *lasting)}
    horizon = {code: _kept_s(table, code) for code in set(cleared) | set(recovered)}
    after = ChipHistory(
        active,
        {code: tuple(times) for code, times in seen.items() if times},
        held,
        raised,
        lasting,
        {code: at for code, at in cleared.items() if code in keep or now - at <= horizon[code]},
        {code: at for code, at in recovered.items() if code in keep or now - at <= horizon[code]},
        tuple(faults),
    )
    return after, ChipLevels({code: levels[key] for code, key in keys.items()}, chip)
