"""Fault events by serial number (``agent.dcmi.event_serials``): a replayed copy is applied once, within a
bounded window, and the events a helper restart's gap cost are counted from the numbering."""

from __future__ import annotations

from agent.dcmi.event_counts import FaultEvent
from agent.dcmi.event_serials import EventSerials


def _event(serial: int, helper: int | None = 1, code: str = "80E18008", raised_at: float | None = 1000.0) -> FaultEvent:
    return FaultEvent(code=code, deviceid=3, severity=1, assertion=2, raised_at=raised_at, received_at=None,
                      serial=serial, helper=helper)


def test_a_replayed_event_is_a_duplicate_and_a_new_one_after_it_misses_nothing() -> None:
    serials = EventSerials()
    assert [serials.accept(_event(n)) for n in range(1, 6)] == [0] * 5
    # a new helper: the library replays 1..5, then sends 6
    assert [serials.accept(_event(n, helper=2)) for n in range(1, 6)] == [None] * 5
    assert serials.accept(_event(6, helper=2)) == 0


def test_the_events_numbered_during_a_restart_gap_are_counted_as_missed() -> None:
    serials = EventSerials()
    for n in range(1, 11):
        serials.accept(_event(n))
    assert serials.accept(_event(61, helper=2)) == 50  # 11..60 were raised while no helper listened
    assert serials.accept(_event(70, helper=2)) == 0  # a jump within one helper's life is not counted


def test_a_library_that_numbers_again_from_1_for_a_new_subscriber_is_followed_not_counted() -> None:
    serials = EventSerials()
    for n in range(1, 101):
        serials.accept(_event(n))
    # the same serial, another event (its code and time differ): not a duplicate
    assert serials.accept(_event(1, helper=2, code="80818C00", raised_at=2000.0)) == 0
    assert serials.accept(_event(2, helper=2, code="80818C00", raised_at=2001.0)) == 0
    assert serials.accept(_event(10, helper=3, raised_at=3000.0)) == 7  # and its numbers count from there


def test_the_window_is_bounded() -> None:
    serials = EventSerials(window=100)
    for n in range(1, 1001):
        serials.accept(_event(n))
    assert serials.accept(_event(1000)) is None  # recent: remembered
    assert serials.accept(_event(1)) == 0  # beyond the window: forgotten, applied again
    assert len(serials._seen) <= 101 and len(serials._order) <= 101
