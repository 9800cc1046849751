"""The helper process that owns ``libdcmi.so``: ``python -m collectors.dcmi.worker --library PATH``.

Why a process of its own: a library call that hangs in the driver, or crashes, must cost the agent
one reading, not its life. The agent (``agent.dcmi.client``) kills this process when a call
overruns its deadline or the process dies, and starts a new one later.

Protocol, one JSON object per line:

- at start, after loading the library and initialising it: ``{"ready": true, "apis": ["v2", "v1"],
  "version": "..."}``, or ``{"ready": false, "error": {"kind": "startup", "message": ...}}`` and exit 2;
- request ``{"id": 7, "call": "temperature", "args": {"chip": 3}}`` (``chip`` is the logical id);
- answer ``{"id": 7, "ok": true, "value": ...}`` or ``{"id": 7, "ok": false, "error": {"kind": K,
  "code": C, "message": M}}``, K one of ``unsupported`` (no such function in this library; they are
  listed in ``functions``), ``dcmi`` (a return code, in ``code``; the function in ``function``),
  ``invalid`` (an impossible answer), ``bad_request``;
- a batch ``{"id": 8, "batch": [{"call": ..., "args": ...}, ...]}`` runs its calls in order and
  answers each as soon as it returns, one line per call with its ``index`` added (``{"id": 8,
  "index": 0, "ok": true, ...}``), written out at the batch's end or once ``FLUSH_S`` has passed
  since the last write, so the agent keeps a deadline per call (its answer comes within the call's
  time plus ``FLUSH_S``) while waking once per batch, not once per reading; a batch that is not a
  list of calls is one error line without ``index``;
- ``utilizations`` (``{"chips": [logical ids], "input_type": T}``) reads ``utilization`` of every chip
  listed, in order, and answers them in one value, a list of ``{"ok": true, "value": V}`` or ``{"ok":
  false, "error": ...}``: one line for every chip (the fail-slow sampler's reads, every second). Its
  ``limit`` holds for the whole call.

With ``--events`` the worker also subscribes to the driver's fault events once, for every chip
(``collectors.dcmi.events``): the ready line says how that went (``"events": {"subscribed": true}``, or
``false`` with ``reason`` ``missing`` (no such symbol), ``not_supported`` or ``error`` and the ``code``;
calls are served either way), and each event is then a line of its own, ``{"event": {...}}``, written
as soon as it arrives, between answers (never inside one).

A request may carry ``"limit": S``, the seconds each of its calls may take: a call still in the library
past it is answered for with an error of kind ``timeout`` (``call`` names it) and left there; the worker
goes on with the rest of the batch and the next requests on a new thread, its subscription untouched
(``collectors.dcmi.serve``). Past ``--max-stuck`` threads left in the library it exits with status 3.

Calls run strictly one after another; end of input ends the process. The protocol owns the real
stdout: file descriptor 1 is pointed at stderr before the library is loaded, so whatever the library
prints cannot corrupt an answer. Python 3.8+ and the standard library only: nodes run workers on
the interpreter they have.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any, Callable

from collectors.dcmi.api import ECC_MEMORIES, FREQUENCY_TYPES, UTILIZATION_TYPES, Dcmi
from collectors.dcmi.errors import DcmiBadRequest, DcmiError, DcmiInvalid, DcmiUnsupported
from collectors.dcmi.events import EventStream
from collectors.dcmi.readings import to_json
from collectors.dcmi.serve import FLUSH_S, MAX_LINE_BYTES, Server, limit_of

if TYPE_CHECKING:
    from collectors.dcmi.serve import Work

__all__ = ["CALLS", "FLUSH_S", "MAX_LINE_BYTES", "answers", "handle", "main", "plan_request"]

MAX_BATCH = 4096


def _chip(args: dict[str, Any]) -> int:
    chip = args.get("chip")
    if not isinstance(chip, int) or isinstance(chip, bool) or chip < 0:
        raise DcmiBadRequest(f"args.chip must be a logical id (an integer >= 0), got {chip!r}")
    return chip


def _chips(args: dict[str, Any]) -> list[int]:
    chips = args.get("chips")
    if not isinstance(chips, list) or not chips or len(chips) > MAX_BATCH:
        raise DcmiBadRequest(f"args.chips must be a list of 1 to {MAX_BATCH} logical ids, got {chips!r}")
    return [_chip({"chip": chip}) for chip in chips]


def _utilizations(dcmi: Dcmi, args: dict[str, Any]) -> list[dict[str, Any]]:
    """One utilization rate of each chip of ``chips``, in order, each ``{"ok": true, "value": percent}`` or
    ``{"ok": false, "error": ...}``: the fail-slow sampler's reading of every chip, one answer line where a
    batch has one a chip (a second's reading costs the agent and this process a sixth as much)."""
    input_type = _choice(args, "input_type", UTILIZATION_TYPES)
    out: list[dict[str, Any]] = []
    for chip in _chips(args):
        answer = _run(dcmi, None, {"call": "utilization", "args": {"chip": chip, "input_type": input_type}})
        out.append({key: value for key, value in answer.items() if key != "id"})
    return out


def _choice(args: dict[str, Any], key: str, allowed: Any) -> Any:
    value = args.get(key)
    if isinstance(value, bool) or value not in allowed:
        raise DcmiBadRequest(f"args.{key} must be one of {sorted(allowed)}, got {value!r}")
    return value


# call name -> (the args it takes, how to run it)
CALLS: dict[str, tuple[tuple[str, ...], Callable[[Dcmi, dict[str, Any]], Any]]] = {
    "version": ((), lambda d, a: d.version()),
    "chips": ((), lambda d, a: d.chips()),
    "health": (("chip",), lambda d, a: d.health(_chip(a))),
    "error_codes": (("chip",), lambda d, a: d.error_codes(_chip(a))),
    "temperature": (("chip",), lambda d, a: d.temperature(_chip(a))),
    "power": (("chip",), lambda d, a: d.power(_chip(a))),
    "utilization": (("chip", "input_type"),
                    lambda d, a: d.utilization(_chip(a), _choice(a, "input_type", UTILIZATION_TYPES))),
    "utilizations": (("chips", "input_type"), _utilizations),
    "frequency": (("chip", "freq_type"),
                  lambda d, a: d.frequency(_chip(a), _choice(a, "freq_type", FREQUENCY_TYPES))),
    "hbm": (("chip",), lambda d, a: d.hbm(_chip(a))),
    "memory": (("chip",), lambda d, a: d.memory(_chip(a))),
    "ecc": (("chip", "memory"), lambda d, a: d.ecc(_chip(a), _choice(a, "memory", ECC_MEMORIES))),
    "board": (("chip",), lambda d, a: d.board(_chip(a))),
    "chip_info": (("chip",), lambda d, a: d.chip_info(_chip(a))),
    "pcie": (("chip",), lambda d, a: d.pcie(_chip(a))),
    "processes": (("chip",), lambda d, a: d.processes(_chip(a))),
    "network_health": (("chip",), lambda d, a: d.network_health(_chip(a))),
}


def _error(request_id: Any, kind: str, message: str, code: int | None = None, **more: Any) -> dict[str, Any]:
    return {"id": request_id, "ok": False, "error": {"kind": kind, "code": code, "message": message, **more}}


def handle(dcmi: Dcmi, line: bytes) -> dict[str, Any]:
    """The answer to one single-call request line (never raises for a bad request or a failed call)."""
    return next(iter(answers(dcmi, line)))


def answers(dcmi: Dcmi, line: bytes) -> Iterator[dict[str, Any]]:
    """The answer lines to one request line, each yielded when its call returns (no watchdog: see serve.py)."""
    work, errors = plan_request(line)
    yield from errors
    for request_id, index, item, _ in work:
        answer = _run(dcmi, request_id, item)
        yield answer if index is None else {**answer, "index": index}


def plan_request(line: bytes) -> tuple[list[Work], list[dict[str, Any]]]:
    """One request line as its calls (request id, batch index or None, the call, the limit), or the error
    answers it gets instead."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return [], [_error(None, "bad_request", f"not JSON: {exc}")]
    if not isinstance(request, dict):
        return [], [_error(None, "bad_request", "a request is a JSON object")]
    request_id = request.get("id")
    limit = limit_of(request)
    if "batch" not in request:
        return [(request_id, None, request, limit)], []
    batch = request["batch"]
    if not isinstance(batch, list) or not all(isinstance(item, dict) for item in batch):
        return [], [_error(request_id, "bad_request", "batch must be a list of calls")]
    if len(batch) > MAX_BATCH:
        return [], [_error(request_id, "bad_request", f"a batch holds at most {MAX_BATCH} calls, got {len(batch)}")]
    return [(request_id, index, item, limit) for index, item in enumerate(batch)], []


def _run(dcmi: Dcmi, request_id: Any, request: dict[str, Any]) -> dict[str, Any]:
    name = request.get("call")
    args = request.get("args", {})
    if name not in CALLS:
        return _error(request_id, "bad_request", f"unknown call {name!r}")
    if not isinstance(args, dict):
        return _error(request_id, "bad_request", "args must be an object")
    allowed, run = CALLS[name]
    extra = sorted(set(args) - set(allowed))
    if extra:
        return _error(request_id, "bad_request", f"{name} takes no {', '.join(extra)}")
    try:
        value = run(dcmi, args)
    except DcmiBadRequest as exc:
        return _error(request_id, "bad_request", str(exc))
    except DcmiUnsupported as exc:
        return _error(request_id, "unsupported", str(exc), functions=list(exc.functions))
    except DcmiError as exc:
        return _error(request_id, "dcmi", str(exc), exc.code, function=exc.function)
    except DcmiInvalid as exc:
        return _error(request_id, "invalid", str(exc))
    return {"id": request_id, "ok": True, "value": to_json(value)}


def _protocol_stream() -> IO[bytes]:
    """The real stdout for answers; fd 1 then points at stderr, so the library's prints go there."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    return out


def _encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class _Output:
    """The protocol stream, shared by the answers and the event writer: one whole write at a time."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        if data:
            with self._lock:
                self._stream.write(data)

    def messages(self, messages: list[dict[str, Any]]) -> None:
        self.write(b"".join(_encode(message) for message in messages))


def _write(out: _Output, message: dict[str, Any]) -> None:
    out.write(_encode(message))


def _start(library: str, events: EventStream | None) -> tuple[Dcmi, dict[str, Any]]:
    dcmi = Dcmi.open(library)
    apis = dcmi.init()
    try:
        version: str | None = dcmi.version()
    except (DcmiError, DcmiUnsupported):
        version = None
    ready: dict[str, Any] = {"ready": True, "apis": list(apis), "version": version}
    if events is not None:
        ready["events"] = events.subscribe(dcmi)
    return dcmi, ready


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m collectors.dcmi.worker", description=__doc__.split("\n")[0])
    parser.add_argument("--library", required=True, help="path of libdcmi.so (found and vetted by the agent)")
    parser.add_argument("--events", action="store_true", help="subscribe to the driver's fault events")
    parser.add_argument("--max-stuck", type=int, default=4,
                        help="threads left in calls that did not return before the worker exits (status 3)")
    options = parser.parse_args(argv)
    out = _Output(_protocol_stream())
    events = EventStream(out.messages) if options.events else None
    try:
        dcmi, ready = _start(options.library, events)
    except (OSError, DcmiError, DcmiUnsupported) as exc:
        _write(out, {"ready": False, "error": {"kind": "startup", "code": getattr(exc, "code", None),
                                                "message": f"{options.library}: {exc}"}})
        return 2
    _write(out, ready)
    if events is not None:
        events.start_writer()
    server = Server(sys.stdin.buffer, out.write, plan_request, lambda request_id, item: _run(dcmi, request_id, item),
                    max_stuck=options.max_stuck)
    return server.serve()

if __name__ == "__main__":
    sys.exit(main())
