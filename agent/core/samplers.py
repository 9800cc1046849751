"""The samplers' thread: each ``Sampler`` (agent.core.jobs) read on its own interval, in one thread of its own.

Why not the scheduler: a sampler runs every second (the busy fraction's reads of ``npu_fast``), and an
APScheduler run costs the agent about 0.4 ms of CPU in its own threads (the scheduler's loop, an executor
thread, the run's events) whatever the job does: at 16 chips that was a third of what the reads cost. This
thread sleeps until the next sampler is due (one wake-up a read) and runs it there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from agent.core.jobs import Sampler

__all__ = ["SamplerThread"]

log = logging.getLogger(__name__)
JOIN_S = 5.0


class SamplerThread:
    """Reads each sampler every ``interval_s``, the first ``first_s`` after ``start``; a read that raises is
    logged (once until one succeeds) and the loop goes on; a read that overruns its interval skips the reads
    it missed."""

    def __init__(self, samplers: Sequence[Sampler], first_s: Callable[[Sampler], float],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.samplers = list(samplers)
        self._first_s = first_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: set[str] = set()

    def start(self) -> None:
        if not self.samplers or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="samplers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_S)

    def _run(self) -> None:
        now = self._clock()
        due = {sampler.name: now + self._first_s(sampler) for sampler in self.samplers}
        while not self._stop.wait(max(0.0, min(due.values()) - self._clock())):
            for sampler in self.samplers:
                now = self._clock()
                if due[sampler.name] > now:
                    continue
                self._read(sampler)
                after = self._clock()
                while due[sampler.name] <= after:
                    due[sampler.name] += sampler.interval_s

    def _read(self, sampler: Sampler) -> None:
        try:
            sampler.read()
        except Exception:
            if sampler.name not in self._failing:
                log.exception("%s failed (logged once until it reads again)", sampler.name)
                self._failing.add(sampler.name)
            return
        self._failing.discard(sampler.name)
