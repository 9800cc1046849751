"""Probe ranks as child processes: each in its own session, drained, watched and killed with its group.

The watchdog: a run past its deadline, or stalled in connect or exec past ``stall_s``, is
SIGTERMed then SIGKILLed by process group, so a rank and everything it started go together.
A run killed at the deadline still knows which stage hung, from the ``@npuwatch-stage``
lines the ranks write to stderr. Children are always reaped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.probes.records import EventHandler, RankReport

STAGE_ORDER = {"setup": 0, "connect": 1, "exec": 2, "done": 3}
_STAGE_PREFIX = "@npuwatch-stage "  # collectors/probes/_common.py writes these
_ABORT_GRACE_S = 2.0  # after one rank failed, how long the others get to report on their own
_POLL_S = 0.05
# --------------------------------------------------------------------------- child processes


class _Worker:
    """One rank: a child in its own session, with threads draining stdout and stderr."""

    def __init__(self, index: int, argv: list[str], env: Mapping[str, str],
                 on_event: EventHandler | None) -> None:
        self.report = RankReport(index=index, argv=argv, pid=0)
        self._stdout: deque[str] = deque(maxlen=200)
        self._stderr: deque[str] = deque(maxlen=40)
        self._on_event = on_event
        self.last_progress = time.monotonic()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env),
            start_new_session=True, text=True, encoding="utf-8", errors="replace")
        self.report.pid = self.proc.pid
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._drain, args=(self.proc.stdout, self._stdout.append), daemon=True),
            threading.Thread(target=self._drain, args=(self.proc.stderr, self._stderr_line), daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _drain(stream: Any, sink: Callable[[str], None]) -> None:
        with contextlib.suppress(ValueError, OSError):
            for line in stream:
                sink(line.rstrip("\n"))

    def _stderr_line(self, line: str) -> None:
        if line.startswith(_STAGE_PREFIX):
            try:
                payload = json.loads(line[len(_STAGE_PREFIX):])
            except ValueError:
                payload = None
            if isinstance(payload, dict) and payload.get("stage") in STAGE_ORDER:
                self.report.stage = str(payload["stage"])
                self.last_progress = time.monotonic()
                if self._on_event is not None:
                    self._on_event({"kind": "stage", "worker": self.report.index, **payload})
                return
        self._stderr.append(line)

    def exited(self) -> bool:
        """Has the child exited? Does not reap it, so its pid (= process group id) stays ours."""
        if self.proc.returncode is not None:
            return True
        try:
            info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        return info is not None

    def stalled_for(self, now: float) -> float:
        """Seconds spent in connect/exec since the last stage or progress report (0 elsewhere)."""
        if self.report.stage not in ("connect", "exec") or self.exited():
            return 0.0
        return now - self.last_progress

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def finish(self) -> RankReport:
        """Reap the child, wait for the pipes to drain, parse the result line."""
        self.report.returncode = self.proc.wait()
        for thread in self._threads:
            thread.join(timeout=2.0)
        self.report.stderr_tail = list(self._stderr)
        for line in reversed(self._stdout):
            try:
                payload = json.loads(line)
            except ValueError:
                continue
            if isinstance(payload, dict) and "probe" in payload:
                self.report.result = payload
                break
        return self.report


def run_workers(commands: Sequence[tuple[list[str], Mapping[str, str]]], deadline_s: float,
                 term_grace_s: float, on_event: EventHandler | None,
                 stall_s: float | None = None) -> tuple[list[RankReport], str | None]:
    """Run all ranks to completion or to a watchdog; returns (reports, why killed or None).

    If a rank exits non-zero, the others get a short grace to finish on their own (they
    are usually blocked on the failed peer) and are then killed.
    """
    start = time.monotonic()
    workers: list[_Worker] = []
    killed_because: str | None = None
    try:
        for index, (argv, env) in enumerate(commands):
            workers.append(_Worker(index, argv, env, on_event))
        if on_event is not None:
            on_event({"kind": "start", "workers": len(workers)})
        abort_at: float | None = None
        while True:
            now = time.monotonic()
            running = [w for w in workers if not w.exited()]
            if not running:
                break
            if now - start >= deadline_s:
                killed_because = f"killed at the {deadline_s:g} s deadline"
                break
            if stall_s is not None and max(w.stalled_for(now) for w in running) >= stall_s:
                killed_because = f"killed after {stall_s:g} s without progress"
                break
            if abort_at is None and any(w.exited() and w.proc.poll() not in (None, 0) for w in workers):
                abort_at = now + _ABORT_GRACE_S
            if abort_at is not None and now >= abort_at:
                break
            time.sleep(_POLL_S)
    finally:
        _stop(workers, term_grace_s)
    return [w.finish() for w in workers], killed_because


def _stop(workers: Sequence[_Worker], term_grace_s: float) -> None:
    """SIGTERM every group still alive, SIGKILL after the grace, then SIGKILL every group anyway
    (a rank that exited may have left helpers behind). Reaping happens in ``finish``."""
    alive = [w for w in workers if not w.exited()]
    for worker in alive:
        worker.report.killed = True
        worker.signal_group(signal.SIGTERM)
    grace_end = time.monotonic() + term_grace_s
    while alive and time.monotonic() < grace_end:
        alive = [w for w in alive if not w.exited()]
        time.sleep(_POLL_S)
    for worker in workers:
        worker.signal_group(signal.SIGKILL)


