"""``agent.daemon.debounce.Debounced``: a burst of asks runs the action once; an ask during a run runs it again."""

from __future__ import annotations

import threading
import time

from agent.daemon.debounce import Debounced


def _wait(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.005)


def test_a_burst_runs_once_after_the_delay() -> None:
    runs: list[float] = []
    soon = Debounced(lambda: runs.append(time.monotonic()), 0.05)
    asked = time.monotonic()
    for _ in range(20):
        soon()
    _wait(lambda: runs)
    time.sleep(0.15)
    assert len(runs) == 1 and runs[0] - asked >= 0.05
    soon()
    _wait(lambda: len(runs) == 2)
    assert len(runs) == 2


def test_an_ask_while_the_action_runs_runs_it_again() -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    def action() -> None:
        runs.append(1)
        started.set()
        release.wait(5)

    soon = Debounced(action, 0.01)
    soon()
    assert started.wait(5)
    soon()  # the readings changed after this run began
    release.set()
    _wait(lambda: len(runs) == 2)
    assert len(runs) == 2


def test_a_failing_action_is_logged_and_the_next_ask_runs_it() -> None:
    calls: list[int] = []

    def action() -> None:
        calls.append(1)
        raise RuntimeError("boom")

    soon = Debounced(action, 0.01)
    soon()
    _wait(lambda: calls)
    soon()
    _wait(lambda: len(calls) == 2)
    assert len(calls) == 2


def test_close_cancels_a_pending_run_and_refuses_more() -> None:
    runs: list[int] = []
    soon = Debounced(lambda: runs.append(1), 0.05)
    soon()
    soon.close()
    soon()
    time.sleep(0.15)
    assert runs == []
