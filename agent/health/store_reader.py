"""The agent's own readings as a ``NodeReader``: what its collectors stored last, with no tool run.

``check`` and ``diagnose`` read the node through ``ToolReader`` (the tools, DCMI first); the agent judges every
collection round through this reader over its snapshot store, so the one check set (``agent.health.checks``)
judges both, and only the source of the readings differs.

A reading is the source's latest stored record for the chip asked about. A source whose last run failed gives
the run's error, worded as the tool reader words the same failure (a hang, a missing tool, unreadable output),
so ``check_tools`` judges it the same way; records older than the source's max age are no reading at all.
The two sources the checks sample twice (optics and RoCE counters) give the run before the latest on the
first read of an evaluation and the latest on the second, so a counter that rose between two collection
rounds is seen rising, as ``check`` sees it rise between its two samples.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from agent.core.snapshot import SourceSnapshot
from agent.health.checks_node import NOT_COLLECTED
from agent.health.readings import Reading
from collectors.base import ChipRef, Source
from collectors.sources import RecordStore

__all__ = ["SAMPLED_TWICE", "StoreReader", "TwoRounds"]

SAMPLED_TWICE = frozenset({"hccn_optical", "hccn_stat"})
_KEY = tuple[str, int, int]


class TwoRounds:
    """The two latest records of each twice-sampled source and chip, kept across evaluations."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[_KEY, tuple[tuple[float, Any], tuple[float, Any]]] = {}

    def note(self, key: _KEY, at: float, record: Any) -> tuple[float, Any]:
        """Remember ``record`` of the run started ``at``; the earlier of the two latest runs."""
        with self._lock:
            pair = self._seen.get(key)
            if pair is None:
                self._seen[key] = ((at, record), (at, record))
            elif pair[1][0] != at:
                self._seen[key] = (pair[1], (at, record))
            return self._seen[key][0]


def _one(records: Any) -> Any:
    """A Source's stored sequence as the one record a chip-bound parser would have made."""
    if isinstance(records, (list, tuple)):
        if len(records) != 1:
            raise ValueError(f"{len(records)} records where one was expected")
        return records[0]
    return records


def _error(snap: SourceSnapshot, source: Source, chip: ChipRef | None) -> str:
    """The stored failure in the words the tool reader uses for it (``checks_node.tool_error_kind`` reads them)."""
    shown = " ".join([source.tool, *source.argv(chip)])
    reason, error = snap.error_reason, snap.error or "failed"
    if reason == "timeout":
        return f"{shown}: no answer within the timeout (killed): {error}"
    if reason == "missing_tool":
        return f"{source.tool}: not found ({error})"
    if reason == "parse":
        return f"{shown}: unreadable output: {error}"
    return f"{shown}: {error}"


class StoreReader:
    """A ``NodeReader`` over the agent's snapshot store (``collectors.sources.RecordStore``)."""

    def __init__(self, store: RecordStore, *, max_chips: int, clock: Callable[[], float] = time.time,
                 rounds: TwoRounds | None = None) -> None:
        self._store = store
        self._max_chips = max_chips
        self._clock = clock
        self._rounds = rounds if rounds is not None else TwoRounds()
        self._reads: dict[_KEY, int] = {}
        self._lock = threading.Lock()
        self._offset = clock() - time.monotonic()  # once: the readings' differences are the runs' own
        self.waiting: set[str] = set()  # sources asked about that have not run once yet

    @property
    def parallelism(self) -> int:
        return 0  # it answers at once: its calls run in the caller's thread

    @property
    def max_chips(self) -> int:
        return self._max_chips

    def hung(self) -> list[str]:
        return []

    def _at(self, wall: float | None) -> float:
        """A stored run's wall time on the monotonic clock the readers' ``Reading.at`` uses."""
        return (wall if wall is not None else self._clock()) - self._offset

    def read(self, source: Source, chip: ChipRef | None = None, parse: Callable[[str], Any] | None = None) -> Reading:
        snap = self._store.get(source.name)
        if snap is None:
            return Reading(error=f"{source.name}: {NOT_COLLECTED}", at=self._at(None))
        at = self._at(snap.started_at)
        if snap.started_at is None and snap.last_success is None:
            with self._lock:
                self.waiting.add(source.name)
            return Reading(error=f"{source.name}: not collected yet", at=at)
        failed = not snap.ok and snap.error_reason is not None
        # A run that failed for some chips only stored the others' records (its success came after it started).
        partly = failed and snap.last_success is not None and snap.started_at is not None \
            and snap.last_success >= snap.started_at and chip is not None
        if failed and not partly:
            return Reading(error=_error(snap, source, chip), at=at)
        records = self._store.records(source.name)
        if records is None:
            why = snap.error or ("not collected yet" if snap.last_success is None else "its last reading is stale")
            return Reading(error=f"{source.name}: {why}", at=at)
        if chip is not None and isinstance(records, dict):
            found = records.get(chip)
            if found is None:  # the same chip with other ids (a mapping read since)
                found = next((value for ref, value in records.items()
                              if ref is not None and (ref.npu, ref.chip) == (chip.npu, chip.chip)), None)
            if found is None:
                if failed:
                    return Reading(error=_error(snap, source, chip), at=at)
                return Reading(error=f"{source.name}: no reading of NPU {chip.npu} chip {chip.chip}", at=at)
            records = found
        try:
            value = _one(records) if parse is not None and parse is not source.parse else records
        except ValueError as exc:
            return Reading(error=f"{source.name}: {exc}", at=at)
        if source.name in SAMPLED_TWICE and chip is not None:
            key = (source.name, chip.npu, chip.chip)
            with self._lock:
                count = self._reads.get(key, 0)
                self._reads[key] = count + 1
            started = snap.started_at if snap.started_at is not None else 0.0
            earlier_at, earlier = self._rounds.note(key, started, value)
            if count == 0:
                return Reading(value=earlier, at=self._at(earlier_at))
        return Reading(value=value, at=at)
