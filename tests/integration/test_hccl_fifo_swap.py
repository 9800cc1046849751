"""The HCCL log scanner of a running agent while a job swaps a log file for a FIFO and back as fast as
it can (issue 41, item 3): every scan returns, the scanner stays up, SIGTERM still stops the agent."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from pathlib import Path

from collectors.hccl.tail import LogTailer
from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon

SWAP_SECONDS = 6.0


def _last_success(metrics: str) -> float:
    found = re.search(r'npuwatch_collector_last_success_timestamp_seconds\{collector="hccl_logs"[^}]*\} (\S+)',
                      metrics)
    return float(found.group(1)) if found else 0.0


def _swap_until(log: Path, stop: threading.Event) -> int:
    swaps = 0
    while not stop.is_set():
        tmp = log.with_name(log.name + ".swap")
        if swaps % 2:
            tmp.write_text(f"line {swaps}\n")
        else:
            os.mkfifo(tmp)
        os.replace(tmp, log)
        swaps += 1
    return swaps


def test_a_log_swapped_with_a_fifo_in_a_loop_never_wedges_the_scanner(tmp_path: Path) -> None:
    root = tmp_path / "ascend" / "log"
    (root / "debug" / "plog").mkdir(parents=True)
    log = root / "debug" / "plog" / "plog-1.log"
    log.write_text("start\n")
    config = {**BASE_CONFIG, "collectors": {**BASE_CONFIG["collectors"],
                                            "hccl_logs": {"interval": "1s", "paths": [str(root)]}}}
    daemon = Daemon(tmp_path, config)
    try:
        assert wait_for(lambda: _last_success(daemon.metrics()) > 0, timeout=30), daemon.log_text()
        stop = threading.Event()
        swapper = threading.Thread(target=_swap_until, args=(log, stop), daemon=True)
        swapper.start()
        time.sleep(SWAP_SECONDS)
        stop.set()
        swapper.join(5)
        log.unlink()
        log.write_text("after the swaps\n")
        swapped_at = time.time()
        # Scans still run and succeed after the race: none of them is stuck on a FIFO.
        assert wait_for(lambda: _last_success(daemon.metrics()) > swapped_at, timeout=20), daemon.log_text()
        assert 'npuwatch_collector_up{collector="hccl_logs"' in daemon.metrics()
        assert "maximum number of running instances" not in daemon.log_text()
        started = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(10) == 0
        assert time.monotonic() - started < 5
    finally:
        daemon.stop()


def test_polls_racing_a_fifo_swap_loop_all_return(tmp_path: Path) -> None:
    """The tailer itself, polled back to back while the files under it flip: the stat/open window is
    hit many times over in a few seconds (a blocking open would hang here)."""
    root = tmp_path / "ascend" / "log"
    (root / "debug" / "plog").mkdir(parents=True)
    logs = [root / "debug" / "plog" / f"plog-{n}.log" for n in range(4)]
    for log in logs:
        log.write_text("start\n")
    tailer = LogTailer([root])
    stop = threading.Event()
    swappers = [threading.Thread(target=_swap_until, args=(log, stop), daemon=True) for log in logs]
    polls = []
    problems: list[str] = []

    def poll_loop() -> None:
        deadline = time.monotonic() + SWAP_SECONDS
        while time.monotonic() < deadline:
            for _chunk in tailer.poll():
                pass
            problems.extend(tailer.read_errors)
            polls.append(1)

    poller = threading.Thread(target=poll_loop, daemon=True)
    for thread in swappers:
        thread.start()
    poller.start()
    poller.join(SWAP_SECONDS + 10)
    stop.set()
    wedged = poller.is_alive()
    for log in logs:  # release a poll stuck on a FIFO (the bug) so the test ends
        with contextlib.suppress(OSError):
            os.close(os.open(log, os.O_WRONLY | os.O_NONBLOCK))
    for thread in swappers:
        thread.join(5)
    assert not wedged, f"a poll blocked on a FIFO after {len(polls)} polls"
    assert len(polls) > 100
    for log in logs:
        log.unlink()
        log.write_text("after the swaps\n")
    assert [line for chunk in tailer.poll() for line in chunk.lines] == ["after the swaps"] * 4
    assert tailer.read_errors == []
