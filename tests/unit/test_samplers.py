"""The samplers' thread (agent/core/samplers.py): each sampler read on its interval, a failing read logged once
and the loop going on, a slow read skipping what it missed, nothing read after stop."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from agent.core.jobs import Sampler
from agent.core.samplers import SamplerThread


def _wait(condition: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_each_sampler_is_read_on_its_interval_and_never_after_stop() -> None:
    reads: dict[str, list[float]] = {"fast": [], "slow": []}
    thread = SamplerThread([Sampler("fast", 0.05, lambda: reads["fast"].append(time.monotonic())),
                            Sampler("slow", 0.2, lambda: reads["slow"].append(time.monotonic()))],
                           lambda sampler: sampler.interval_s / 2)
    thread.start()
    _wait(lambda: len(reads["slow"]) >= 3)
    thread.stop()
    count = len(reads["fast"])
    time.sleep(0.2)
    assert len(reads["fast"]) == count  # stopped
    assert count >= 6  # the fast one about 4 times as often as the slow one (3 reads)
    gaps = [b - a for a, b in zip(reads["slow"], reads["slow"][1:])]
    assert all(0.15 < gap < 1.0 for gap in gaps), gaps
    assert not any(t.name == "samplers" for t in threading.enumerate())


def test_a_failing_read_is_logged_once_and_the_reads_go_on(caplog: pytest.LogCaptureFixture) -> None:
    calls = []

    def read() -> None:
        calls.append(1)
        if len(calls) <= 3:
            raise RuntimeError("the library is gone")

    thread = SamplerThread([Sampler("flaky", 0.02, read)], lambda sampler: 0.0)
    with caplog.at_level(logging.ERROR, logger="agent.core.samplers"):
        thread.start()
        _wait(lambda: len(calls) >= 6)
        thread.stop()
    assert [r.message for r in caplog.records].count("flaky failed (logged once until it reads again)") == 1


def test_a_slow_read_skips_the_reads_it_missed() -> None:
    starts: list[float] = []

    def once_slow() -> None:
        starts.append(time.monotonic())
        if len(starts) == 1:
            time.sleep(0.5)  # five intervals: none of them is read late, back to back

    thread = SamplerThread([Sampler("slow", 0.1, once_slow)], lambda sampler: 0.0)
    thread.start()
    _wait(lambda: len(starts) >= 5)
    thread.stop()
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert gaps[0] >= 0.5 and all(gap > 0.05 for gap in gaps[1:]), gaps
