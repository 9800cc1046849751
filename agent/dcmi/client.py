"""``DcmiClient``: the agent's end of the DCMI worker (``collectors.dcmi.worker``).

The library runs in a process of its own so that a call that hangs in the driver, or crashes,
costs one reading. The client:

- starts the worker on first use (argv list, a session of its own) and waits for its ready line;
- sends one call, or one batch of calls (``call_batch``: one round trip for a collection's calls of
  a chip, answered line by line), at a time (a lock in this process, ``NodeLock`` across the node)
  and waits for each answer until that call's deadline;
- on a deadline overrun, an end of file (the worker died, e.g. the library segfaulted), or an
  unreadable answer, kills the worker's whole process tree (the tool runner's ``kill_tree``) and
  raises ``DcmiWorkerError``; the next call starts a new worker, but not before an exponential
  backoff (``Backoff``) has passed since the last failure: until then calls fail at once with
  reason ``backoff``, so a caller falls back to npu-smi without waiting;
- turns the worker's error answers back into ``DcmiUnsupported``, ``DcmiError``, ``DcmiInvalid``
  and ``DcmiBadRequest`` (the worker stays up for those).

``close()`` ends the worker (end of input, then the kill) and leaves no process behind. The counts a
later slice exports as self-metrics are plain attributes (``starts``, ``restarts``, ``errors`` by
kind, ``calls``, ``call_seconds_total``), and ``observe`` is called with each call's name, latency
and error kind (None when it succeeded).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import selectors
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import collectors
from agent.core.tool_runner import RUN_ID_ENV, kill_tree
from agent.dcmi.hung import DEFAULT_HUNG_BACKOFF, Backoff, HungCalls, call_limit
from agent.dcmi.lock import NodeLock
from collectors.dcmi.errors import (
    DcmiBadRequest,
    DcmiCallHung,
    DcmiError,
    DcmiInvalid,
    DcmiUnsupported,
    DcmiWorkerError,
)

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "HELPER_KEY", "Answer", "Backoff", "DcmiClient"]

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT_S = 5.0
_STDERR_TAIL_BYTES = 4096
_MAX_ANSWER_BYTES = 16 << 20  # the largest answer (a chip's process list) is kilobytes
_REAP_S = 2.0
_CLOSE_GRACE_S = 1.0
_EVENT_PREFIX = b'{"event"'
HELPER_KEY = "helper_start"  # added to each event: the number of the helper start it came through
Observer = Callable[[str, float, "str | None"], None]
EventHandler = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Answer:
    """One call's outcome in a batch: its value, or the typed error the single call would have raised."""

    value: Any = None
    error: Exception | None = None

    def get(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


def _worker_env(extra: Mapping[str, str] | None, run_id: str) -> dict[str, str]:
    env = dict(os.environ)
    if extra:
        env.update(extra)
    # The worker imports collectors.dcmi from wherever this agent's copy lives.
    root = str(Path(next(iter(collectors.__path__))).parent)
    env["PYTHONPATH"] = os.pathsep.join(part for part in (root, env.get("PYTHONPATH", "")) if part)
    env[RUN_ID_ENV] = run_id
    return env


class _Worker:
    """One running worker process and what it has written so far.

    A thread of its own reads the worker's stdout and stderr for the worker's whole life: event lines
    (``{"event": ...}``) go to ``on_event`` as soon as they arrive, whether or not a call is waiting,
    and every other line to the caller of ``read_line``.
    """

    def __init__(self, proc: subprocess.Popen[bytes], run_id: str,
                 on_event: Callable[[bytes], None] | None = None) -> None:
        self.proc = proc
        self.run_id = run_id
        self.stderr_tail: deque[bytes] = deque()
        self.stderr_bytes = 0
        self.ready: dict[str, Any] = {}
        self._on_event = on_event
        self._lines: deque[bytes] = deque()
        self._more = threading.Condition()
        self._ended: BaseException | None = None  # EOFError: stdout closed; ValueError: an overlong line
        self._reader = threading.Thread(target=self._read_all, name=f"dcmi-reader-{proc.pid}", daemon=True)
        self._reader.start()

    def _read_all(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        buffer = bytearray()
        ended: BaseException = EOFError()
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self.proc.stdout, selectors.EVENT_READ, "out")
                selector.register(self.proc.stderr, selectors.EVENT_READ, "err")
                while True:
                    for key, _ in selector.select():
                        data = os.read(key.fd, 65536)
                        if key.data == "err":
                            if data:
                                self._keep_stderr(data)
                            else:
                                selector.unregister(key.fileobj)
                            continue
                        if not data:
                            return
                        buffer += data
                        self._split(buffer)
                        if len(buffer) > _MAX_ANSWER_BYTES:
                            ended = ValueError(f"an answer longer than {_MAX_ANSWER_BYTES} bytes")
                            return
        except (OSError, ValueError) as exc:  # its pipes closed under us (kill)
            ended = exc
        finally:
            with self._more:
                self._ended = ended
                self._more.notify_all()

    def _split(self, buffer: bytearray) -> None:
        answers = []
        start = 0
        while (newline := buffer.find(b"\n", start)) >= 0:
            line = bytes(buffer[start:newline])
            start = newline + 1
            if line.startswith(_EVENT_PREFIX):
                if self._on_event is not None:
                    try:
                        self._on_event(line)
                    except Exception:  # the agent's handler must not stop the answers
                        log.exception("DCMI fault event handler failed")
            else:
                answers.append(line)
        del buffer[:start]
        if answers:
            with self._more:
                self._lines.extend(answers)
                self._more.notify_all()

    def read_line(self, deadline: float) -> bytes | None:
        """The next line from stdout; None at the deadline. EOFError when stdout closed (the worker died)."""
        with self._more:
            while not self._lines:
                if self._ended is not None:
                    raise self._ended
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._more.wait(remaining)
            return self._lines.popleft()

    def _keep_stderr(self, data: bytes) -> None:
        self.stderr_tail.append(data)
        self.stderr_bytes += len(data)
        while self.stderr_bytes - len(self.stderr_tail[0]) >= _STDERR_TAIL_BYTES and len(self.stderr_tail) > 1:
            self.stderr_bytes -= len(self.stderr_tail.popleft())

    def stderr_text(self) -> str:
        text = b"".join(self.stderr_tail)[-_STDERR_TAIL_BYTES:].decode("utf-8", "replace").strip()
        return text.splitlines()[-1] if text else ""

    def kill(self) -> None:
        kill_tree(self.proc, self.run_id)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=_REAP_S)
        if self._reader is not threading.current_thread():
            self._reader.join(timeout=_REAP_S)  # the tree is gone: its pipes end
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class DcmiClient:
    """Calls into ``libdcmi.so`` through a worker process; safe to share between threads."""

    def __init__(
        self,
        library: str,
        *,
        call_timeout: float = DEFAULT_CALL_TIMEOUT_S,
        start_timeout: float | None = None,
        lock_file: str | os.PathLike[str] | None = None,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
        launch: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen,
        observe: Observer | None = None,
        on_event: EventHandler | None = None,
        hung_backoff: Backoff | None = None,
    ) -> None:
        self.library = library
        self.on_event = on_event  # set: each helper subscribes to the driver's fault events (docs/dcmi.md)
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout if start_timeout is not None else max(call_timeout, 10.0)
        self.python = python or sys.executable
        self.env = dict(env) if env else None
        self.backoff = backoff or Backoff()
        self.observe = observe
        self._clock = clock
        self._launch = launch
        self._node_lock = NodeLock(lock_file) if lock_file is not None else None
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._ids = 0
        self._failures = 0  # the worker's failures in a row; any answer resets it
        self._hung = HungCalls(hung_backoff or DEFAULT_HUNG_BACKOFF, clock)  # calls skipped after hanging
        self._retry_at: float | None = None
        self._closed = False
        # self-metrics
        self.starts = 0
        self.restarts = 0  # starts after a failure
        self.calls = 0
        self.call_seconds_total = 0.0
        self.errors: Counter[str] = Counter()  # by kind: unsupported, dcmi, invalid, bad_request, and the
        # worker's reasons: startup, timeout, died, protocol, backoff, busy, closed
        self.last_error: str | None = None
        # the last helper's subscription (its ready line's "events"); None before any helper answered
        self.subscription: dict[str, Any] | None = None
        self._events_suspect: str | None = None  # the last start with the subscription hung or died
        self._events_off: str | None = None  # why this client subscribes no more
        self.events_received = 0
        self.events_unreadable = 0

    # --- public

    @property
    def subscribed(self) -> bool:
        """A helper runs now and its subscription to fault events holds."""
        worker = self._worker
        return bool(worker is not None and worker.proc.poll() is None
                    and (worker.ready.get("events") or {}).get("subscribed") is True)

    @property
    def ready(self) -> dict[str, Any]:
        """The running worker's ready line (``apis``, ``version``); empty when none runs."""
        worker = self._worker
        return dict(worker.ready) if worker else {}

    @property
    def pid(self) -> int | None:
        worker = self._worker
        return worker.proc.pid if worker else None

    @property
    def failures(self) -> int:
        return self._failures

    def held(self) -> dict[str, float]:
        """The calls skipped after hanging: name -> seconds until one is tried again."""
        with self._lock:
            return self._hung.held()

    def retry_in(self) -> float:
        """Seconds until a failed worker may be started again (0 when it may now)."""
        if self._retry_at is None:
            return 0.0
        return max(0.0, self._retry_at - self._clock())

    def call(self, name: str, timeout: float | None = None, **args: Any) -> Any:
        """The value of one call (``chip`` is the logical id); raises the typed errors of ``collectors.dcmi.errors``."""
        deadline_s = self.call_timeout if timeout is None else timeout
        with self._lock:
            started = time.monotonic()
            kind: str | None = None
            try:
                self._hung.check(name)
                return self._call_locked(name, args, started + deadline_s)
            except Exception as exc:
                kind = _kind_of(exc)
                raise
            finally:
                self._count(name, time.monotonic() - started, kind)

    def call_batch(self, calls: Sequence[tuple[str, Mapping[str, Any]]], timeout: float | None = None) -> list[Answer]:
        """Each call's ``Answer``, in order, from one round trip; ``timeout`` (default ``call_timeout``) is each
        call's deadline, counted from the previous answer. A failure of the worker itself (deadline, death,
        backoff) raises ``DcmiWorkerError`` for the whole batch."""
        if not calls:
            return []
        deadline_s = self.call_timeout if timeout is None else timeout
        with self._lock:
            held: dict[int, Answer] = {}
            for index, (name, _) in enumerate(calls):
                try:
                    self._hung.check(name)
                except DcmiCallHung as exc:
                    held[index] = Answer(error=exc)
                    self._count(name, 0.0, exc.kind)
            sent = [call for index, call in enumerate(calls) if index not in held]
            if not sent:
                return [held[index] for index in range(len(calls))]
            pending: dict[str, Any] = {"name": sent[0][0], "since": time.monotonic()}  # the call waited for
            try:
                answers = iter(self._with_worker(pending["since"] + deadline_s,
                                                 lambda w: self._exchange_batch(w, sent, deadline_s, pending)))
            except Exception as exc:
                self._count(pending["name"], time.monotonic() - pending["since"], _kind_of(exc))
                raise
            return [held[index] if index in held else next(answers) for index in range(len(calls))]

    def close(self) -> None:
        """End the worker (end of input first, then the kill) and release the node lock file."""
        with self._lock:
            self._closed = True
            worker, self._worker = self._worker, None
            if worker is not None:
                if worker.proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        worker.proc.stdin.close()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    worker.proc.wait(timeout=_CLOSE_GRACE_S)
                worker.kill()  # also whatever it left behind
            if self._node_lock is not None:
                self._node_lock.close()

    def __enter__(self) -> DcmiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- inside the lock

    def _count(self, name: str, elapsed: float, kind: str | None) -> None:
        self.calls += 1
        self.call_seconds_total += elapsed
        if kind is not None:
            self.errors[kind] += 1
        if self.observe is not None:
            self.observe(name, elapsed, kind)

    def _call_locked(self, name: str, args: dict[str, Any], deadline: float) -> Any:
        return self._with_worker(deadline, lambda worker: self._exchange(worker, name, args, deadline))

    def _with_worker(self, deadline: float, exchange: Callable[[_Worker], Any]) -> Any:
        if self._closed:
            raise DcmiWorkerError("closed", "the DCMI client is closed")
        node_locked = False
        if self._node_lock is not None:
            if not self._node_lock.acquire(max(0.0, deadline - time.monotonic())):
                raise DcmiWorkerError("busy", f"another process holds {self._node_lock.path}")
            node_locked = True
        try:
            worker = self._worker or self._start(deadline)
            return exchange(worker)
        finally:
            if node_locked and self._node_lock is not None:
                self._node_lock.release()

    def _start(self, deadline: float) -> _Worker:
        if self._retry_at is not None and self._clock() < self._retry_at:
            raise DcmiWorkerError("backoff", f"the DCMI worker failed {self._failures} time(s) in a row; next start in "
                                             f"{self.retry_in():.1f}s (last: {self.last_error})")
        run_id = f"dcmi-{os.getpid()}-{secrets.token_hex(4)}"
        argv = [self.python, "-m", "collectors.dcmi.worker", "--library", self.library]
        # A start with the subscription that hung or died is tried once without it: a subscribe call that
        # hangs in the driver must not cost the readings too (the subscription then stays off, reported).
        with_events = self.on_event is not None and self._events_suspect is None and self._events_off is None
        if with_events:
            argv.append("--events")
        try:
            proc = self._launch(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=_worker_env(self.env, run_id), start_new_session=True, close_fds=True)
        except OSError as exc:
            raise self._failed("startup", f"cannot start the DCMI worker ({self.python}): {exc}") from exc
        if self.starts:
            self.restarts += 1
        self.starts += 1
        generation = self.starts  # which helper an event came through (agent/dcmi/event_serials.py)
        worker = _Worker(proc, run_id, (lambda line: self._event_line(line, generation))
                         if self.on_event is not None else None)
        self._worker = worker
        start_deadline = min(deadline, time.monotonic() + self.start_timeout)
        try:
            line = self._read(worker, start_deadline, "start")
        except DcmiWorkerError as exc:
            if with_events and exc.reason in ("timeout", "died"):
                self._events_suspect = f"a helper start with the subscription failed ({exc.reason})"
            elif self._events_suspect is not None:
                self._events_suspect = None  # it fails without the subscription too: not the subscription's fault
            raise
        try:
            ready = json.loads(line)
        except ValueError as exc:
            raise self._failed("protocol", f"the DCMI worker's first line is not JSON: {line[:80]!r}") from exc
        if not isinstance(ready, dict) or ready.get("ready") is not True:
            error = ready.get("error", {}) if isinstance(ready, dict) else {}
            message = error.get("message") if isinstance(error, dict) else None
            raise self._failed("startup", f"the DCMI worker did not start: {message or ready!r}",
                               code=error.get("code") if isinstance(error, dict) else None)
        worker.ready = ready
        if self.on_event is not None:
            if not with_events and self._events_suspect is not None:
                self._events_off, self._events_suspect = self._events_suspect, None
            events = ready.get("events") if with_events else {"subscribed": False, "reason": "error",
                                                              "message": f"{self._events_off}; not subscribed again"}
            subscription = dict(events) if isinstance(events, dict) else {"subscribed": False, "reason": "protocol"}
            if subscription != self.subscription and not subscription.get("subscribed"):
                # missing or not supported: polling alone, as before; anything else is a fault to look at
                level = logging.INFO if subscription.get("reason") in ("missing", "not_supported") else logging.WARNING
                log.log(level, "DCMI: no fault events (%s: %s); chip faults are seen at the health poll",
                        subscription.get("reason"), subscription.get("message", ""))
            self.subscription = subscription
        return worker

    def _event_line(self, line: bytes, generation: int) -> None:
        """On the reader thread: one event line, handed on at once, with the helper start it came through."""
        try:
            event = json.loads(line).get("event")
        except (ValueError, AttributeError):
            event = None
        if not isinstance(event, dict):
            self.events_unreadable += 1
            return
        self.events_received += 1
        event[HELPER_KEY] = generation
        if self.on_event is not None:
            self.on_event(event)

    def _read(self, worker: _Worker, deadline: float, what: str) -> bytes:
        try:
            line = worker.read_line(deadline)
        except EOFError:
            with contextlib.suppress(subprocess.TimeoutExpired):
                worker.proc.wait(timeout=_REAP_S)  # its stdout closed: it is exiting
            status = worker.proc.returncode
            how = f"exit status {status}" if status is None or status >= 0 else f"signal {-status}"
            tail = worker.stderr_text()
            raise self._failed("died", f"the DCMI worker died during {what} ({how})"
                                       + (f": {tail}" if tail else "")) from None
        except (ValueError, OSError) as exc:
            raise self._failed("protocol", f"the DCMI worker's answer to {what} is unreadable: {exc}") from exc
        if line is None:
            raise self._failed("timeout", f"the DCMI worker did not answer {what} in time (killed)")
        return line

    def _send(self, worker: _Worker, request: dict[str, Any], what: str) -> int:
        self._ids += 1
        request_id = self._ids
        line = json.dumps({"id": request_id, **request}, separators=(",", ":")).encode()
        assert worker.proc.stdin is not None
        try:
            worker.proc.stdin.write(line + b"\n")
            worker.proc.stdin.flush()
        except OSError as exc:  # BrokenPipeError: it died between calls
            raise self._failed("died", f"the DCMI worker is gone ({exc})") from exc
        return request_id

    def _answer(self, worker: _Worker, request_id: int, index: int | None, deadline: float, what: str) -> Answer:
        line = self._read(worker, deadline, what)
        try:
            answer = json.loads(line)
        except ValueError as exc:
            raise self._failed("protocol", f"the DCMI worker's answer to {what} is not JSON") from exc
        if not isinstance(answer, dict) or answer.get("id") != request_id:
            raise self._failed("protocol", f"the DCMI worker answered {what} out of turn: {line[:80]!r}")
        self._failures = 0
        self._retry_at = None
        if index is not None and answer.get("index") != index:
            if answer.get("ok") is False and "index" not in answer:  # the batch itself was refused
                raise _error_of(answer.get("error"))
            raise self._failed("protocol", f"the DCMI worker answered {what} out of order: {line[:80]!r}")
        if answer.get("ok") is True:
            self._hung.answered(what)
            return Answer(answer.get("value"))
        error = _error_of(answer.get("error"))
        if isinstance(error, DcmiCallHung):
            self._hung.hung(what, error)
        else:
            self._hung.answered(what)
        return Answer(error=error)


    def _exchange(self, worker: _Worker, name: str, args: dict[str, Any], deadline: float) -> Any:
        request_id = self._send(worker, {"call": name, "args": args,
                                         "limit": call_limit(deadline - time.monotonic())}, name)
        return self._answer(worker, request_id, None, deadline, name).get()

    def _exchange_batch(self, worker: _Worker, calls: Sequence[tuple[str, Mapping[str, Any]]],
                        deadline_s: float, pending: dict[str, Any]) -> list[Answer]:
        request_id = self._send(worker, {"batch": [{"call": name, "args": dict(args)} for name, args in calls],
                                          "limit": call_limit(deadline_s)}, "batch")
        answers = []
        for index, (name, _) in enumerate(calls):
            pending["name"], pending["since"] = name, time.monotonic()
            answer = self._answer(worker, request_id, index, pending["since"] + deadline_s, name)
            self._count(name, time.monotonic() - pending["since"],
                        None if answer.error is None else _kind_of(answer.error))
            answers.append(answer)
        return answers

    def _failed(self, reason: str, message: str, code: int | None = None) -> DcmiWorkerError:
        """Kill the worker, schedule the next start, and return the error to raise."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.kill()
        self._failures += 1
        self._retry_at = self._clock() + self.backoff.delay(self._failures)
        self.last_error = message
        return DcmiWorkerError(reason, message, code)


def _kind_of(exc: BaseException) -> str:
    """The ``errors`` kind an exception counts as."""
    if isinstance(exc, DcmiWorkerError):
        return exc.reason
    if isinstance(exc, DcmiCallHung):
        return exc.kind
    if isinstance(exc, DcmiUnsupported):
        return "unsupported"
    if isinstance(exc, DcmiError):
        return "dcmi"
    if isinstance(exc, DcmiInvalid):
        return "invalid"
    if isinstance(exc, DcmiBadRequest):
        return "bad_request"
    return "protocol"


def _error_of(error: Any) -> Exception:
    """The typed error of a worker's error answer."""
    if not isinstance(error, dict):
        return DcmiWorkerError("protocol", f"an error answer without an error: {error!r}")
    kind, message, code = error.get("kind"), str(error.get("message", "")), error.get("code")
    if kind == "dcmi" and isinstance(code, int):
        return DcmiError(code, str(error.get("function") or ""))
    if kind == "unsupported":
        return DcmiUnsupported(tuple(str(name) for name in error.get("functions") or ()))
    if kind == "invalid":
        return DcmiInvalid(message)
    if kind == "bad_request":
        return DcmiBadRequest(message)
    if kind == "timeout":  # the worker answered for a call that did not return, and runs on
        return DcmiCallHung(str(error.get("call") or ""), "timeout", message)
    return DcmiWorkerError("protocol", f"an error answer of unknown kind {kind!r}: {message}")
