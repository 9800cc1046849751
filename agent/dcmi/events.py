"""``FaultEvents``: the driver's fault events applied to the node model as they arrive (docs/dcmi.md).

The DCMI client hands each event over on its reader thread (``handle``, which only queues it); a
thread of this object's applies what has queued, in order, and then updates the store once:

- a raised code becomes one of the chip's active codes and a recovery removes it, on top of the
  chip's last polled codes (``npu_smi_health``'s records); the chip's ``npu_error_code_active`` and
  ``npu_fault_handling`` series are rebuilt by that source's own sample builder, so the handling level
  and its escalation are the context's ``fault_levels`` (agent/handling), exactly as for a poll, and a
  code both paths saw is one series; then ``changed`` tells the agent, which judges again at once (its
  exported findings, which the alerts read, follow the event within a second, not at the next round);
- before that, ``judge_at`` judges the chip's codes as each event left them, at the time the helper
  received it (as the device plugin stamps events): a batch that says a code went down at 50 s, came
  back at 81 s and went down at 82 s is one appearance of 31 s and then another, not one raise at the
  batch's end, so a duration rule's ``FaultTimeout`` and ``RecoverTimeout`` see the times the events give;
- a one-off event is counted and never made active;
- a poll stays the referee: when a new ``npu_smi_health`` run is stored, what events said before that
  run began is forgotten (the poll has the truth), what came after it is applied on top again, so a
  missed event cannot leave a code stuck past the next poll.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agent.core.snapshot import SnapshotStore, SourceSnapshot
from agent.dcmi.backend import DcmiBackend
from agent.dcmi.event_chips import ChipIds, EventChips
from agent.dcmi.event_counts import NO_CODE, EventCounts, FaultEvent, parse_event
from agent.dcmi.event_serials import EventSerials
from collectors import npu_smi_health
from collectors.base import ChipRef, CollectContext, Sample
from collectors.npu_smi_health import HealthRecord

__all__ = ["EVENTS_SOURCE", "HEALTH_SOURCE", "FaultEvents", "JudgeAt"]

log = logging.getLogger(__name__)

HEALTH_SOURCE = npu_smi_health.SOURCE.name
EVENTS_SOURCE = "dcmi_events"  # the internal job of the stream's own metrics (event_counts)
RAISED, RECOVERY = 1, 0
_STOP = object()

# (chip, health word, the chip's codes after one event, when the event was received): the escalation history's
# judge of an event as it happened (agent.handling.levels.FaultLevels with exact=True and at=)
JudgeAt = Callable[[ChipRef, "str | None", Sequence[str], float], object]


@dataclass
class _ChipEvents:
    """What events said about one chip since its last poll: code -> when the agent applied it."""

    raised: dict[str, float] = field(default_factory=dict)
    recovered: dict[str, float] = field(default_factory=dict)

    def forget_before(self, when: float) -> None:
        self.raised = {code: at for code, at in self.raised.items() if at >= when}
        self.recovered = {code: at for code, at in self.recovered.items() if at >= when}

    def empty(self) -> bool:
        return not (self.raised or self.recovered)


class FaultEvents:
    """Applies fault events to ``store``'s health snapshot and counts them; ``close()`` stops its thread."""

    def __init__(self, backend: DcmiBackend, store: SnapshotStore, context: Callable[[], CollectContext],
                 chips: Callable[[], list[ChipRef]], clock: Callable[[], float] = time.time, *,
                 changed: Callable[[], None] = lambda: None, judge_at: JudgeAt | None = None) -> None:
        self.backend = backend
        self._judge_at = judge_at
        self._judged_at: dict[ChipRef, float] = {}  # each chip's last event time judged (kept in order)
        self.changed = changed  # told once a batch changed a chip's codes: the agent judges again
        self.store = store
        self._context = context
        self._chips = chips
        self._clock = clock
        self.chips = EventChips(self._chip_ids, self._codes_of)
        self.serials = EventSerials()
        self.counts = EventCounts(lambda: backend.client.subscription, lambda: backend.client.subscribed)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()  # the per-chip state and the health snapshot's rebuilds
        self._state: dict[ChipRef, _ChipEvents] = {}
        self._polled: dict[ChipRef, HealthRecord] = {}
        self._thread = threading.Thread(target=self._run, name="dcmi-fault-events", daemon=True)
        self._thread.start()
        backend.client.on_event = self.handle

    # --- the client's reader thread
    def handle(self, event: dict[str, Any]) -> None:
        self._queue.put(event)

    # --- this object's thread
    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(item is _STOP for item in batch)
            try:
                self.apply([item for item in batch if item is not _STOP])
            except Exception:  # a bug here must not end the stream
                log.exception("applying %d DCMI fault event(s) failed", len(batch))
            if stop:
                return

    def apply(self, raw_events: list[dict[str, Any]]) -> None:
        """Apply events in order, then rebuild each chip they touched and store the result once."""
        counted = self._accepted(raw_events)
        if not counted:
            return
        touched: set[ChipRef] = set()
        with self._lock:
            for chip, event in counted:
                if event.assertion not in (RAISED, RECOVERY):
                    continue  # one-off: counted, never active
                state = self._state.setdefault(chip, _ChipEvents())
                now = self._clock()
                if event.assertion == RAISED:
                    state.raised[event.code] = now
                    state.recovered.pop(event.code, None)
                else:
                    state.recovered[event.code] = now
                    state.raised.pop(event.code, None)
                touched.add(chip)
                self._judge_event(chip, event.received_at, now)
            self._rebuild(touched)
        updated_at = self._clock()
        for chip, event in counted:
            self.counts.counted(chip, event, updated_at)
        self._publish(updated_at)
        if touched:
            self.changed()

    def _accepted(self, raw_events: list[dict[str, Any]]) -> list[tuple[ChipRef, FaultEvent]]:
        """The events to apply, each with its chip; the rest counted as dropped. Outside the lock: placing
        an event may ask the library (EventChips)."""
        out = []
        for raw in raw_events:
            try:
                event = parse_event(raw)
            except ValueError as exc:
                log.debug("unreadable DCMI fault event %r: %s", raw, exc)
                self.counts.dropped("unreadable")
                continue
            if event.code == NO_CODE:  # event id 0 names no fault: never an active code
                self.counts.dropped("no_code")
                continue
            missed = self.serials.accept(event)
            if missed is None:  # a copy of one applied already (a library that replays to a new helper)
                self.counts.dropped("duplicate")
                continue
            if missed:
                log.warning("DCMI fault events: %d event(s) the driver raised during a helper restart never "
                            "arrived; the next health poll finds what is still active", missed)
                self.counts.missed(missed)
            chip = self.chips.chip(event.deviceid, event.code if event.assertion == RAISED else None)
            if chip is None:
                self.counts.dropped("unknown_chip")
                continue
            out.append((chip, event))
        return out

    def _publish(self, started: float) -> None:
        """The stream's metrics on /metrics now, not at the ``dcmi_events`` job's next run."""
        if self.store.get(EVENTS_SOURCE) is not None:
            self.store.put_success(EVENTS_SOURCE, self.counts.samples(), None, started, self._clock() - started)

    # --- the store's listener (the collector's thread): a poll of the health source was stored
    def polled(self, snap: SourceSnapshot) -> None:
        if snap.source != HEALTH_SOURCE or not isinstance(snap.records, dict):
            return
        started = snap.started_at if snap.started_at is not None else self._clock()
        with self._lock:
            self._polled = {chip: record for chip, records in snap.records.items()
                            if isinstance(chip, ChipRef) and (record := _health_record(records)) is not None}
            for state in self._state.values():
                state.forget_before(started)
            self._state = {chip: state for chip, state in self._state.items() if not state.empty()}
            self._rebuild(set(self._state))
        self._publish(self._clock())  # a poll follows a helper start: its subscription shows at once

    def close(self) -> None:
        self._queue.put(_STOP)
        self._thread.join(timeout=2.0)

    # --- EventChips' sources (outside the lock)
    def _chip_ids(self) -> list[ChipIds]:
        """Each listed chip with its logical and physical id: the library's own list first, then the ChipRef's."""
        known = {(k.card_id, k.device_id): k for k in self.backend.known_chips()}
        out = []
        for chip in self._chips():
            ids = known.get((chip.npu, chip.chip))
            out.append(ChipIds(chip, ids.logic_id if ids is not None else chip.logic_id,
                               ids.phy_id if ids is not None and ids.phy_id is not None else chip.phy_id))
        return out

    def _codes_of(self, logic_id: int) -> list[str]:
        """The chip's error codes as the library lists them now (EventChips asks when an id names two chips)."""
        return [f"{code & 0xFFFFFFFF:08X}" for code in self.backend.client.call("error_codes", chip=logic_id)]

    # --- inside the lock
    def _rebuild(self, chips: set[ChipRef]) -> None:
        for _ in range(5):  # a poll stored between the read and the write: build again on top of it
            snap = self.store.get(HEALTH_SOURCE)
            if not chips or snap is None or self._rebuild_on(snap, chips):
                return
        log.warning("DCMI fault events: the health snapshot kept changing; the next poll will show them")

    def _judge_event(self, chip: ChipRef, received: float | None, now: float) -> None:
        """Judge the chip's codes as this event left them, at its receipt time (never after now, never before
        the chip's last event judged)."""
        if self._judge_at is None:
            return
        at = min(received if received is not None else now, now)
        at = max(at, self._judged_at.get(chip, at))
        self._judged_at[chip] = at
        snap = self.store.get(HEALTH_SOURCE)
        records = snap.records if snap is not None and isinstance(snap.records, dict) else {}
        record = self._record(chip, records)
        self._judge_at(chip, record.health, record.error_codes, at)

    def _record(self, chip: ChipRef, records: Any) -> HealthRecord:
        """The chip's last polled record with the events since applied on top."""
        polled = self._polled.get(chip) or _health_record(records.get(chip)) or HealthRecord()
        state = self._state.get(chip, _ChipEvents())
        codes = [code for code in polled.error_codes if code.upper() not in state.recovered]
        codes += [code for code in state.raised if code not in {c.upper() for c in codes}]
        return replace(polled, error_codes=tuple(codes))

    def _rebuild_on(self, snap: SourceSnapshot, chips: set[ChipRef]) -> bool:
        records = dict(snap.records) if isinstance(snap.records, dict) else {}
        rebuilt: list[Sample] = []
        context = self._context()
        for chip in chips:
            record = self._record(chip, records)
            records[chip] = [record]
            rebuilt += npu_smi_health.samples([record], chip, context)
        labels = {chip.labels() for chip in chips}
        kept = [sample for sample in snap.samples if sample.labels[:2] not in labels]
        return self.store.put_samples(snap, [*kept, *rebuilt], records)

    def samples(self) -> list[Sample]:
        """The ``dcmi_events`` job's samples."""
        return self.counts.samples()


def _health_record(records: Any) -> HealthRecord | None:
    if isinstance(records, HealthRecord):
        return records
    if isinstance(records, (list, tuple)) and records and isinstance(records[0], HealthRecord):
        return records[0]
    return None
