"""The worker's request loop, with a watchdog for a library call that does not return.

A request may carry ``limit``: the seconds each of its calls may take (the agent sends a little less
than its own deadline). A call still in the library past its limit is answered for by the watchdog
(an error of kind ``timeout`` naming the call) and left where it is: the serving thread stuck in it is
abandoned (its answer, should it ever come, is thrown away) and a new serving thread goes on with the
rest of the batch and the next requests. So one reading that hangs in the driver costs that reading,
not the helper: the process, its event subscription and every other reading stay up. A thread stuck in
the library cannot be freed; past ``max_stuck`` of them the worker exits (status 3) so that the agent
starts a clean one.

Python 3.8+, the standard library only (the worker runs on the node's interpreter).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from typing import IO, TYPE_CHECKING, Any, Callable

__all__ = ["EXIT_STUCK", "FLUSH_S", "MAX_LINE_BYTES", "Server", "encode", "limit_of"]

MAX_LINE_BYTES = 1 << 20  # a call is tens of bytes; the largest batch (the table of 16 chips) about 10 KiB
FLUSH_S = 0.25  # well under the agent's per-call deadline (collectors.dcmi.call_timeout, 5 s by default)
EXIT_STUCK = 3
MIN_LIMIT_S = 0.05

if TYPE_CHECKING:  # only in annotations: the worker's floor (3.8) cannot subscript tuple at run time
    # one call of a request: (request id, index in the batch or None, the call's object, its limit or None)
    from typing import Optional

    Work = tuple[Any, Optional[int], Any, Optional[float]]  # an alias: 3.9 syntax (mypy)
    Plan = Callable[[bytes], tuple[list[Work], list[dict[str, Any]]]]  # a line -> its calls, or error answers
    Run = Callable[[Any, Any], dict[str, Any]]  # (request id, call object) -> its answer


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class Server:
    """Reads requests from ``stdin``, runs their calls with ``run``, writes answers with ``write``."""

    def __init__(self, stdin: IO[bytes], write: Callable[[bytes], None], plan: Plan, run: Run,
                 max_stuck: int = 4) -> None:
        self._stdin = stdin
        self._write = write
        self._plan = plan
        self._run = run
        self._max_stuck = max_stuck
        self._cond = threading.Condition()
        self._generation = 0  # bumped when the serving thread is abandoned in a call
        self._work: deque[Work] = deque()
        # When the watchdog wakes next (monotonic; inf: not until a call starts). It sleeps until the running
        # call's deadline, not on a tick (4 wake-ups a second were ~2.4 CPU-s/h of an idle helper).
        self._watch_until = math.inf
        self._current: tuple[int, Work, float] | None = None  # (generation, the call, when it began)
        self._pending: list[bytes] = []
        self._flushed = time.monotonic()
        self._exit: int | None = None
        self.stuck = 0

    def serve(self) -> int:
        """Serve until end of input (0), a request line too long (2) or too many stuck threads (3)."""
        self._spawn(0)
        threading.Thread(target=self._watch, name="dcmi-watchdog", daemon=True).start()
        with self._cond:
            while self._exit is None:
                self._cond.wait()
            return self._exit

    def _spawn(self, generation: int) -> None:
        threading.Thread(target=self._serve, args=(generation,), name=f"dcmi-serve-{generation}", daemon=True).start()

    def _finish(self, code: int) -> None:
        with self._cond:
            if self._exit is None:
                self._exit = code
            self._cond.notify_all()

    # --- a serving thread
    def _serve(self, generation: int) -> None:
        while True:
            with self._cond:
                if generation != self._generation:
                    return
                work = self._work.popleft() if self._work else None
                if work is not None:
                    began = time.monotonic()
                    self._current = (generation, work, began)
                    limit = work[3]
                    if limit is not None and began + limit < self._watch_until:
                        self._cond.notify_all()  # the watchdog sleeps past this call's deadline
            if work is None:
                if not self._read_request(generation):
                    return
                continue
            request_id, index, item, _ = work
            answer = self._run(request_id, item)
            if index is not None:
                answer = dict(answer, index=index)
            with self._cond:
                if generation != self._generation:
                    return  # the watchdog answered for this call already
                self._current = None
                self._pending.append(encode(answer))
                if not self._work or time.monotonic() - self._flushed >= FLUSH_S:
                    self._flush_locked()

    def _read_request(self, generation: int) -> bool:
        line = self._stdin.readline(MAX_LINE_BYTES + 1)
        if not line:
            self._finish(0)
            return False
        if len(line) > MAX_LINE_BYTES:
            self._write(encode({"id": None, "ok": False, "error": {
                "kind": "bad_request", "code": None, "message": f"request longer than {MAX_LINE_BYTES} bytes"}}))
            self._finish(2)  # the rest of that line would be read as further requests
            return False
        if not line.strip():
            return True
        work, errors = self._plan(line)
        if errors:
            self._write(b"".join(encode(error) for error in errors))
        with self._cond:
            if generation != self._generation:
                return False
            self._work.extend(work)
        return True

    def _flush_locked(self) -> None:
        if self._pending:
            data, self._pending = b"".join(self._pending), []
            self._write(data)
        self._flushed = time.monotonic()

    # --- the watchdog
    def _watch(self) -> None:
        """Sleeps until the running call's deadline (or, with none running, until a call starts: the serving
        thread wakes it when a call's deadline comes before the watchdog's next wake) and answers for a call
        still running at its deadline."""
        with self._cond:
            while self._exit is None:
                current = self._current
                limit = current[1][3] if current is not None and current[0] == self._generation else None
                if current is None or limit is None:
                    self._watch_until = math.inf
                    self._cond.wait()
                    continue
                _, (request_id, index, item, _), began = current
                deadline = began + limit
                left = deadline - time.monotonic()
                if left >= 0:
                    self._watch_until = deadline
                    self._cond.wait(left)
                    continue
                self._abandon_locked(request_id, index, item, limit)

    def _abandon_locked(self, request_id: Any, index: int | None, item: Any, limit: float) -> None:
        name = item.get("call") if isinstance(item, dict) else None
        answer = {"id": request_id, "ok": False, "error": {
            "kind": "timeout", "code": None, "call": name,
            "message": f"{name} did not return within {limit:g}s; the thread is left in the library"}}
        if index is not None:
            answer["index"] = index
        self._generation += 1
        self._current = None
        self.stuck += 1
        self._pending.append(encode(answer))
        self._flush_locked()
        if self.stuck > self._max_stuck:
            self._exit = EXIT_STUCK
            self._cond.notify_all()
            return
        self._spawn(self._generation)


def limit_of(request: Any) -> float | None:
    """A request's ``limit`` in seconds, or None (no limit, or not a number)."""
    limit = request.get("limit") if isinstance(request, dict) else None
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or math.isnan(limit):
        return None
    return max(MIN_LIMIT_S, float(limit))
