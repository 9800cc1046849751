"""Fault events in the helper: one ``dcmi_subscribe_fault_event`` for every chip, and the writer that
forwards each event to the agent as a line of its own (``collectors.dcmi.worker``'s protocol).

The handler runs on the driver's thread. It only copies the event out of the driver's memory and
queues it; a thread of the helper's writes the queued events, so the driver's thread never waits on
the pipe to the agent. An event line is ``{"event": {...}}``: the fields of ``struct
dcmi_dms_fault_event`` plus ``received``, the helper's wall clock when the handler ran.

Python 3.8+, the standard library only (the worker runs on the node's interpreter).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

from collectors.dcmi.api import EVENT_CALLBACK, Dcmi
from collectors.dcmi.errors import NOT_SUPPORTED_CODES, DcmiError
from collectors.dcmi.structs import EventFilter

__all__ = ["ALL_CARDS", "SUBSCRIBE", "EventStream"]

SUBSCRIBE = "dcmi_subscribe_fault_event"
ALL_CARDS = -1  # card_id -1: every chip of the node, as the device plugin subscribes
_MAX_BATCH = 512  # events written together when they queue up (a burst)


def _copy(pointer: Any) -> tuple[Any, ...]:
    event = pointer.contents.event_t.dms_event
    return (event.event_id, event.deviceid, event.node_type, event.node_id, event.sub_node_type,
            event.sub_node_id, event.severity, event.assertion, event.event_serial_num, event.notify_serial_num,
            event.alarm_raised_time, bytes(event.event_name), bytes(event.additional_info), time.time())


_FIELDS = ("event_id", "deviceid", "node_type", "node_id", "sub_node_type", "sub_node_id", "severity",
           "assertion", "event_serial_num", "notify_serial_num", "alarm_raised_time")


def as_message(copied: tuple[Any, ...]) -> dict[str, Any]:
    """The event line's object for one copied event."""
    fields = dict(zip(_FIELDS, copied))
    fields["event_name"] = copied[11].decode("utf-8", "replace")
    fields["additional_info"] = copied[12].decode("utf-8", "replace")
    fields["received"] = copied[13]
    return {"event": fields}


class EventStream:
    """The subscription and its writer; ``write`` sends one encoded line (it takes the protocol's lock)."""

    def __init__(self, write: Callable[[list[dict[str, Any]]], None]) -> None:
        self._write = write
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._handler = EVENT_CALLBACK(self._on_event)  # kept: the driver holds a pointer to it
        self._writer: threading.Thread | None = None
        self.status: dict[str, Any] = {"subscribed": False, "reason": "not_tried"}
        self.unreadable = 0

    def _on_event(self, pointer: Any) -> None:
        # Nothing may unwind into the driver's thread: a pointer that cannot be read is counted, not raised.
        try:
            if pointer:
                self._queue.put(_copy(pointer))
        except Exception:
            self.unreadable += 1

    def subscribe(self, dcmi: Dcmi) -> dict[str, Any]:
        """Subscribe once for every chip; the status the ready line carries (never raises for a refusal)."""
        function = dcmi.function(SUBSCRIBE)
        if function is None:
            self.status = {"subscribed": False, "reason": "missing", "message": f"the library has no {SUBSCRIBE}"}
            return self.status
        code = function(ALL_CARDS, ALL_CARDS, EventFilter(), self._handler)
        if code == 0:
            self.status = {"subscribed": True, "reason": None}
        else:
            error = DcmiError(code, SUBSCRIBE)
            reason = "not_supported" if code in NOT_SUPPORTED_CODES else "error"
            self.status = {"subscribed": False, "reason": reason, "code": code, "message": str(error)}
        return self.status

    def start_writer(self) -> None:
        """Start forwarding (after the ready line: events the handler queued before wait for it)."""
        if self._writer is None and self.status.get("subscribed"):
            self._writer = threading.Thread(target=self._forward, name="dcmi-events", daemon=True)
            self._writer.start()

    def _forward(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < _MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write([as_message(copied) for copied in batch])
            except OSError:  # the agent has gone: the main loop sees end of input and exits
                return

