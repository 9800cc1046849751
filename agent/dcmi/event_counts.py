"""What the fault-event stream exports (the ``dcmi_events`` job, docs/metrics.md): events by chip, severity
and assertion, the last event's time, the latency from the driver's ``alarm_raised_time`` to the agent's
update (a histogram), whether the subscription holds, and events that could not be used."""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.base import ChipRef, Sample

__all__ = ["ASSERTIONS", "LATENCY_BUCKETS_S", "NO_CODE", "SEVERITIES", "EventCounts", "FaultEvent", "parse_event"]

SEVERITIES = {0: "warning", 1: "minor", 2: "major", 3: "critical"}
ASSERTIONS = {0: "recovery", 1: "raised", 2: "once"}
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
DROP_REASONS = ("unreadable", "unknown_chip", "no_code", "duplicate")
NO_CODE = "00000000"  # event id 0: no fault code (a malformed event, never made active)
RECOVERY = 0
# alarm_raised_time is milliseconds since the epoch (the DCMI manual); the reference header's comment says
# seconds. Below this it can only be seconds (1e11 ms is 1973; 1e11 s is far in the future).
_SECONDS_BELOW = 1e11


@dataclass(frozen=True)
class FaultEvent:
    """One event as the helper copied it: the code as npu-smi prints it, and when the driver raised it."""

    code: str
    deviceid: int
    severity: int
    assertion: int
    raised_at: float | None  # seconds since the epoch; None when the driver left it 0
    received_at: float | None  # the helper's clock when the handler ran
    serial: int
    helper: int | None = None  # the helper start it came through (the client's count)


def _int(event: dict[str, Any], key: str) -> int:
    value = event.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key} is not an integer: {value!r}")
    return value


def parse_event(event: dict[str, Any]) -> FaultEvent:
    """The helper's event object as a FaultEvent; ValueError for one that is not."""
    raised_raw = _int(event, "alarm_raised_time")
    raised = None if raised_raw <= 0 else raised_raw if raised_raw < _SECONDS_BELOW else raised_raw / 1000.0
    received = event.get("received")
    return FaultEvent(
        code=f"{_int(event, 'event_id') & 0xFFFFFFFF:08X}",
        deviceid=_int(event, "deviceid"),
        severity=_int(event, "severity"),
        assertion=_int(event, "assertion"),
        raised_at=float(raised) if raised is not None else None,
        received_at=float(received) if isinstance(received, (int, float)) else None,
        serial=_int(event, "event_serial_num"),
        helper=helper if isinstance(helper := event.get("helper_start"), int) else None,
    )


class EventCounts:
    """The stream's counters; thread-safe. ``subscription`` says what the last helper's subscription did."""

    def __init__(self, subscription: Callable[[], dict[str, Any] | None], up: Callable[[], bool]) -> None:
        self._subscription = subscription
        self._up = up
        self._lock = threading.Lock()
        self._events: Counter[tuple[str, str, str, str]] = Counter()
        self._dropped: Counter[str] = Counter()
        self._missed = 0
        self._buckets = [0] * len(LATENCY_BUCKETS_S)
        self._latency_count = 0
        self._latency_sum = 0.0
        self._last_event: float | None = None

    def counted(self, chip: ChipRef, event: FaultEvent, updated_at: float) -> None:
        severity = SEVERITIES.get(event.severity, "unknown")
        assertion = ASSERTIONS.get(event.assertion, "unknown")
        with self._lock:
            self._events[(str(chip.npu), str(chip.chip), severity, assertion)] += 1
            at = event.received_at if event.received_at is not None else event.raised_at
            if at is not None:
                self._last_event = at if self._last_event is None else max(self._last_event, at)
            # A recovery carries the time its fault was raised, not its own (the device plugin stamps
            # events with the host's clock for that reason): its latency would be the fault's duration.
            if event.raised_at is not None and event.assertion != RECOVERY:
                latency = max(0.0, updated_at - event.raised_at)
                index = bisect.bisect_left(LATENCY_BUCKETS_S, latency)
                if index < len(self._buckets):
                    self._buckets[index] += 1
                self._latency_count += 1
                self._latency_sum += latency

    def dropped(self, reason: str) -> None:
        with self._lock:
            self._dropped[reason] += 1

    def missed(self, count: int) -> None:
        """Events the driver numbered during a helper restart's gap that never arrived (event_serials)."""
        with self._lock:
            self._missed += count

    def total(self) -> int:
        with self._lock:
            return sum(self._events.values())

    def samples(self) -> list[Sample]:
        subscription = self._subscription()
        with self._lock:
            out = [Sample("npuwatch_dcmi_events_total",
                          (("npu", npu), ("chip", chip), ("severity", severity), ("assertion", assertion)),
                          float(count))
                   for (npu, chip, severity, assertion), count in sorted(self._events.items())]
            out += [Sample("npuwatch_dcmi_events_dropped_total", (("reason", reason),),
                           float(self._dropped.get(reason, 0))) for reason in DROP_REASONS]
            out.append(Sample("npuwatch_dcmi_events_missed_total", (), float(self._missed)))
            if self._last_event is not None:
                out.append(Sample("npuwatch_dcmi_last_event_timestamp_seconds", (), self._last_event))
            running = 0
            for bound, count in zip(LATENCY_BUCKETS_S, self._buckets):
                running += count
                out.append(Sample("npuwatch_dcmi_event_latency_seconds_bucket", (("le", _le(bound)),),
                                  float(running)))
            out.append(Sample("npuwatch_dcmi_event_latency_seconds_bucket", (("le", "+Inf"),),
                              float(self._latency_count)))
            out.append(Sample("npuwatch_dcmi_event_latency_seconds_sum", (), self._latency_sum))
            out.append(Sample("npuwatch_dcmi_event_latency_seconds_count", (), float(self._latency_count)))
        out.append(Sample("npuwatch_dcmi_subscription_up", (), 1.0 if self._up() else 0.0))
        if subscription is not None:  # known once a helper has answered
            available = subscription.get("subscribed") is True or subscription.get("reason") == "error"
            out.append(Sample("npuwatch_dcmi_subscription_available", (), 1.0 if available else 0.0))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))
