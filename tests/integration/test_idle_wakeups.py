"""An idle agent's threads sleep until there is work: no polling loop wakes them (each wake costs CPU,
~3 CPU-s/h for a 0.1 s poll). Read from the kernel's count of a thread's voluntary context switches."""

from __future__ import annotations

import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.agent_harness import wait_for
from tests.support.daemon import Daemon
from tests.support.web_harness import StartServer, serve

__all__ = ["serve"]  # fixture

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


def wakes(pid: int, tid: int) -> int:
    """Voluntary context switches of thread ``tid`` of ``pid`` so far: one per sleep it woke from."""
    for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches line")


def test_the_accept_loop_sleeps_while_idle_and_stops_at_once(serve: StartServer) -> None:
    server = serve()
    url = f"http://127.0.0.1:{server.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert answer.status == 200
    [accept] = [thread for thread in threading.enumerate() if thread.name == "http"]
    assert accept.native_id is not None
    before = wakes(os.getpid(), accept.native_id)
    time.sleep(1.5)
    assert wakes(os.getpid(), accept.native_id) - before <= 2  # a 0.1 s poll: ~15
    with urllib.request.urlopen(url, timeout=5) as answer:  # and it still answers after sleeping
        assert answer.status == 200
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 1.0
    assert not accept.is_alive()
    server.stop()  # a second stop is harmless


def test_the_daemons_main_thread_sleeps_until_a_signal(daemon: Daemon) -> None:
    pid = daemon.proc.pid  # the main thread's id is the process's
    before = wakes(pid, pid)
    time.sleep(2)
    assert wakes(pid, pid) - before <= 2  # a 0.1 s sleep loop: ~20
    daemon.proc.send_signal(signal.SIGHUP)  # a signal still wakes it: the reload, then the stop
    assert wait_for(lambda: "SIGHUP: config reloaded" in daemon.log_text(), timeout=10), daemon.log_text()
    started = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(10) == 0
    assert time.monotonic() - started < 5
