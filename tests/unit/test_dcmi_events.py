"""Fault events in the agent, in process: reading the helper's event object, the stream's counts and
histogram, and ``FaultEvents`` applying raises, recoveries and one-offs to a health snapshot with the
poll as referee (tests/integration/test_dcmi_events.py runs the same through the real helper)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agent.core.snapshot import SnapshotStore
from agent.dcmi.backend import DcmiBackend
from agent.dcmi.client import DcmiClient
from agent.dcmi.event_counts import LATENCY_BUCKETS_S, EventCounts, parse_event
from agent.dcmi.events import HEALTH_SOURCE, FaultEvents
from collectors import npu_smi_health
from collectors.base import ChipRef, CollectContext
from collectors.fault_levels import default_table, judge_static
from collectors.npu_smi_health import HealthRecord

CHIP = ChipRef(0, 0, logic_id=3, phy_id=32)
OTHER = ChipRef(1, 0, logic_id=4, phy_id=33)
SEPARATE = "80818C00"
POLLED = "80E01801"


def _raw(code: str = SEPARATE, deviceid: int = 32, assertion: int = 1, raised_ms: int = 1_796_000_000_000,
         **more: Any) -> dict[str, Any]:
    return {"event_id": int(code, 16), "deviceid": deviceid, "severity": 3, "assertion": assertion,
            "alarm_raised_time": raised_ms, "event_serial_num": 1, "received": raised_ms / 1000, **more}


def test_an_event_object_is_read_with_its_code_as_npu_smi_prints_it_and_its_time_in_seconds() -> None:
    event = parse_event(_raw("80818c00", raised_ms=1_796_000_000_250))
    assert (event.code, event.deviceid, event.severity, event.assertion) == (SEPARATE, 32, 3, 1)
    assert event.raised_at == pytest.approx(1_796_000_000.25)
    assert parse_event(_raw(raised_ms=1_796_000_000)).raised_at == 1_796_000_000  # seconds, as the header says
    assert parse_event(_raw(raised_ms=0)).raised_at is None
    with pytest.raises(ValueError, match="deviceid"):
        parse_event({**_raw(), "deviceid": "32"})


def test_the_latency_histogram_is_cumulative_and_its_count_is_the_inf_bucket() -> None:
    counts = EventCounts(lambda: {"subscribed": True}, lambda: True)
    for latency in (0.001, 0.02, 0.02, 3.0, 120.0):
        counts.counted(CHIP, parse_event(_raw(raised_ms=1_000_000_000_000)), 1_000_000_000 + latency)
    samples = {(s.metric, s.labels): s.value for s in counts.samples()}
    bucket = {dict(labels)["le"]: value for (metric, labels), value in samples.items()
              if metric == "npuwatch_dcmi_event_latency_seconds_bucket"}
    assert bucket["0.005"] == 1 and bucket["0.025"] == 3 and bucket["5.0"] == 4 and bucket["60.0"] == 4
    assert bucket["+Inf"] == 5 and len(bucket) == len(LATENCY_BUCKETS_S) + 1
    assert samples[("npuwatch_dcmi_event_latency_seconds_count", ())] == 5
    assert samples[("npuwatch_dcmi_event_latency_seconds_sum", ())] == pytest.approx(123.041, abs=1e-3)
    assert samples[("npuwatch_dcmi_events_total", (("npu", "0"), ("chip", "0"), ("severity", "critical"),
                                                   ("assertion", "raised")))] == 5
    assert samples[("npuwatch_dcmi_subscription_up", ())] == 1
    assert samples[("npuwatch_dcmi_subscription_available", ())] == 1


@pytest.mark.parametrize(("status", "available"), [
    ({"subscribed": False, "reason": "missing"}, 0.0), ({"subscribed": False, "reason": "not_supported"}, 0.0),
    ({"subscribed": False, "reason": "error", "code": -8005}, 1.0), (None, None)])
def test_the_subscription_is_available_unless_the_library_lacks_it(status: Any, available: float | None) -> None:
    samples = {s.metric: s.value for s in EventCounts(lambda: status, lambda: False).samples()}
    assert samples["npuwatch_dcmi_subscription_up"] == 0
    assert samples.get("npuwatch_dcmi_subscription_available") == available


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def model() -> Iterator[tuple[FaultEvents, SnapshotStore, Clock]]:
    clock = Clock()
    store = SnapshotStore(clock)
    store.register(HEALTH_SOURCE, 60)
    backend = DcmiBackend(DcmiClient("/nonexistent/libdcmi.so"))  # no call is made: no helper starts
    context = CollectContext(fault_levels=lambda chip, health, codes: judge_static(default_table(), health, codes))
    events = FaultEvents(backend, store, lambda: context, lambda: [CHIP, OTHER], clock)
    store.add_listener(events.polled)
    yield events, store, clock
    events.close()


def _poll(store: SnapshotStore, clock: Clock, codes: tuple[str, ...], started: float) -> None:
    records = {CHIP: [HealthRecord("OK", codes)], OTHER: [HealthRecord("OK", ())]}
    samples = [s for chip, rec in records.items() for s in npu_smi_health.samples(rec, chip, None)]
    store.put_success(HEALTH_SOURCE, samples, records, started, clock.now - started)


def _active(store: SnapshotStore, chip: ChipRef = CHIP) -> dict[str, str]:
    snap = store.get(HEALTH_SOURCE)
    assert snap is not None
    return {dict(s.labels)["code"]: dict(s.labels)["handling"] for s in snap.samples
            if s.metric == "npu_error_code_active" and s.labels[:2] == chip.labels()}


def test_a_raise_joins_the_polled_codes_and_a_recovery_clears_a_polled_code(
        model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    _poll(store, clock, (POLLED,), clock.now)
    clock.now += 1
    events.apply([_raw(SEPARATE)])
    assert _active(store) == {POLLED: "RestartBusiness", SEPARATE: "SeparateNPU"}
    snap = store.get(HEALTH_SOURCE)
    assert snap is not None and snap.records[CHIP][0].error_codes == (POLLED, SEPARATE)
    assert {s.labels for s in snap.samples if s.metric == "npu_fault_handling"} >= {
        (*CHIP.labels(), ("handling", "SeparateNPU"))}
    events.apply([_raw(SEPARATE, assertion=0), _raw(POLLED, assertion=0)])
    assert _active(store) == {}
    assert _active(store, OTHER) == {}  # the other chip untouched


def test_a_batch_that_changed_codes_asks_the_agent_to_judge_again_once(
        model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    asked: list[int] = []
    events.changed = lambda: asked.append(1)
    _poll(store, clock, (), clock.now)
    events.apply([_raw(SEPARATE), _raw(POLLED, deviceid=4)])
    assert asked == [1]  # one batch, two chips: one judgement
    events.apply([_raw(SEPARATE, assertion=2), _raw(SEPARATE, deviceid=99)])  # a one-off, an unknown chip
    assert asked == [1]
    events.apply([_raw(SEPARATE, assertion=0)])
    assert asked == [1, 1]


def test_a_one_off_is_counted_never_active_and_an_unknown_chip_is_dropped(
        model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    _poll(store, clock, (), clock.now)
    events.apply([_raw(SEPARATE, assertion=2), _raw(SEPARATE, deviceid=99), {"event_id": "x"}])
    assert _active(store) == {}
    samples = {(s.metric, s.labels): s.value for s in events.samples()}
    assert samples[("npuwatch_dcmi_events_total", (*CHIP.labels(), ("severity", "critical"),
                                                   ("assertion", "once")))] == 1
    assert samples[("npuwatch_dcmi_events_dropped_total", (("reason", "unknown_chip"),))] == 1
    assert samples[("npuwatch_dcmi_events_dropped_total", (("reason", "unreadable"),))] == 1


def test_an_event_names_its_chip_by_logical_id_then_by_physical_id(
        model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    _poll(store, clock, (), clock.now)
    events.apply([_raw(SEPARATE, deviceid=4)])  # OTHER's logical id (CHIP's is 3)
    assert _active(store, OTHER) == {SEPARATE: "SeparateNPU"} and _active(store) == {}
    events.apply([_raw(POLLED, deviceid=32)])  # no logical id 32: CHIP's physical id
    assert _active(store) == {POLLED: "RestartBusiness"}


def test_a_recovery_is_not_a_latency_its_time_is_its_faults() -> None:
    counts = EventCounts(lambda: None, lambda: True)
    raised_ms = 1_000_000_000_000
    counts.counted(CHIP, parse_event(_raw(assertion=0, raised_ms=raised_ms, received=1_000_000_600.0)),
                   1_000_000_600.01)
    samples = {s.metric: s.value for s in counts.samples() if not s.labels}
    assert samples["npuwatch_dcmi_event_latency_seconds_count"] == 0
    assert samples["npuwatch_dcmi_last_event_timestamp_seconds"] == 1_000_000_600.0  # when it came


def test_the_next_poll_is_the_referee(model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    _poll(store, clock, (), clock.now)
    clock.now += 1
    events.apply([_raw(SEPARATE)])
    # a poll that began before the event and did not see the code: the event stays on top
    clock.now += 1
    _poll(store, clock, (), started=clock.now - 1.5)
    assert _active(store) == {SEPARATE: "SeparateNPU"}
    # a poll that began after it and does not see the code (the recovery event was lost): cleared
    clock.now += 1
    _poll(store, clock, (), started=clock.now - 0.1)
    assert _active(store) == {}
    # and a code both paths report is one series
    events.apply([_raw(POLLED)])
    clock.now += 1
    _poll(store, clock, (POLLED,), started=clock.now - 2)
    snap = store.get(HEALTH_SOURCE)
    assert snap is not None
    assert [s for s in snap.samples if s.metric == "npu_error_code_active" and s.labels[:2] == CHIP.labels()] \
        == [s for s in snap.samples if s.metric == "npu_error_code_active" and dict(s.labels)["code"] == POLLED]
    assert len(_active(store)) == 1


def test_samples_built_on_a_snapshot_a_poll_replaced_are_not_stored() -> None:
    clock = Clock()
    store = SnapshotStore(clock)
    store.register(HEALTH_SOURCE, 60)
    _poll(store, clock, (POLLED,), clock.now)
    before = store.get(HEALTH_SOURCE)
    assert before is not None
    _poll(store, clock, (SEPARATE,), clock.now)  # a poll lands between an event's read and its write
    assert store.put_samples(before, [], {}) is False
    now = store.get(HEALTH_SOURCE)
    assert now is not None and now.samples and store.put_samples(now, [], {}) is True
    after = store.get(HEALTH_SOURCE)
    assert after is not None and after.samples == () and after.last_success == now.last_success


def test_an_event_with_event_id_0_is_no_fault_code_and_is_dropped(
        model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    _poll(store, clock, (), clock.now)
    events.apply([_raw("00000000"), _raw("00000000", assertion=2)])
    assert _active(store) == {}
    samples = {(s.metric, s.labels): s.value for s in events.samples()}
    assert samples[("npuwatch_dcmi_events_dropped_total", (("reason", "no_code"),))] == 2
    assert not [key for key in samples if key[0] == "npuwatch_dcmi_events_total"]


def test_a_replayed_event_is_applied_once_and_a_gap_is_counted(
        model: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    events, store, clock = model
    _poll(store, clock, (), clock.now)
    first = [_raw(SEPARATE, assertion=2, event_serial_num=n, helper_start=1) for n in (1, 2, 3)]
    events.apply(first)
    events.apply([{**raw, "helper_start": 2} for raw in first])  # the new helper's replay
    events.apply([_raw(SEPARATE, assertion=2, event_serial_num=9, helper_start=2)])  # 4..8 never came
    samples = {(s.metric, s.labels): s.value for s in events.samples()}
    assert samples[("npuwatch_dcmi_events_total", (*CHIP.labels(), ("severity", "critical"),
                                                   ("assertion", "once")))] == 4
    assert samples[("npuwatch_dcmi_events_dropped_total", (("reason", "duplicate"),))] == 3
    assert samples[("npuwatch_dcmi_events_missed_total", ())] == 5


LINK_DOWN = "81078603"


def _judged(events: FaultEvents, store: SnapshotStore, chip: ChipRef = CHIP) -> str | None:
    snap = store.get(HEALTH_SOURCE)
    assert snap is not None
    levels = [dict(s.labels)["handling"] for s in snap.samples
              if s.metric == "npu_fault_handling" and s.labels[:2] == chip.labels()]
    return levels[0] if levels else None


@pytest.fixture
def wired() -> Iterator[tuple[FaultEvents, SnapshotStore, Clock]]:
    """FaultEvents wired as the agent wires it: its judge is the escalation history's (FaultLevels), each event
    judged at the time the helper received it. The link-down duration rule is the device plugin's test one
    (FaultTimeout 30 s, RecoverTimeout 60 s, PreSeparateNPU)."""
    from dataclasses import replace

    from agent.handling.history import FaultHistory
    from agent.handling.levels import FaultLevels
    from collectors.fault_levels import parse_escalation

    _, duration, _ = parse_escalation({"FaultDuration": [{"EventId": [LINK_DOWN], "FaultTimeout": 30,
                                                          "RecoverTimeout": 60, "FaultHandling": "PreSeparateNPU"}]})
    clock = Clock()
    store = SnapshotStore(clock)
    store.register(HEALTH_SOURCE, 60)
    levels = FaultLevels(replace(default_table(), frequency=(), duration=duration), FaultHistory(None), clock)
    context = CollectContext(fault_levels=levels)
    backend = DcmiBackend(DcmiClient("/nonexistent/libdcmi.so"))
    events = FaultEvents(backend, store, lambda: context, lambda: [CHIP, OTHER], clock,
                         judge_at=lambda chip, health, codes, at: levels(chip, health, codes, exact=True, at=at))
    store.add_listener(events.polled)
    _poll(store, clock, (), clock.now)
    yield events, store, clock
    events.close()


def _link(assertion: int, received: float, serial: int) -> dict[str, Any]:
    return _raw(LINK_DOWN, assertion=assertion, raised_ms=int(received * 1000), received=received,
                event_serial_num=serial)


def test_a_batch_of_events_is_judged_at_the_times_they_were_received(
        wired: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    # the device plugin's TestHandleFaultQueueCase01: down at 50 s, up at 81 s, down again at 82 s, all in one
    # batch: the first appearance lasted 31 s (> FaultTimeout 30 s) and the port was up 1 s (< RecoverTimeout 60 s)
    events, store, clock = wired
    t0 = clock.now
    clock.now = t0 + 90
    events.apply([_link(1, t0 + 50, 1), _link(0, t0 + 81, 2), _link(1, t0 + 82, 3)])
    assert _active(store) == {LINK_DOWN: "PreSeparateNPU"}
    assert _judged(events, store) == "PreSeparateNPU"


def test_a_released_duration_level_is_held_again_by_an_appearance_a_batch_reports_over(
        wired: tuple[FaultEvents, SnapshotStore, Clock]) -> None:
    # the device plugin's TestHandleFaultQueueCase06: held (down since 10 s), up at 50 s, down at 111 s (clear
    # 61 s > 60 s: released), up at 142 s (that appearance lasted 31 s): held again, through the recovery
    events, store, clock = wired
    t0 = clock.now
    clock.now = t0 + 10
    events.apply([_link(1, t0 + 10, 1)])
    clock.now = t0 + 150
    events.apply([_link(0, t0 + 50, 2), _link(1, t0 + 111, 3), _link(0, t0 + 142, 4)])
    assert _active(store) == {}
    assert _judged(events, store) == "PreSeparateNPU"
