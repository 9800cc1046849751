"""An idle agent's threads sleep until there is work: no polling loop wakes them (each wake costs CPU,
~3 CPU-s/h for a 0.1 s poll). Read from the kernel's count of a thread's voluntary context switches."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from collectors.dcmi.serve import Server, encode, limit_of
from tests.support.agent_harness import wait_for
from tests.support.daemon import Daemon
from tests.support.web_harness import StartServer, serve

if TYPE_CHECKING:
    from collectors.dcmi.serve import Work

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


def test_the_dcmi_watchdog_sleeps_until_a_calls_deadline_and_still_answers_for_a_hang() -> None:
    release = threading.Event()
    answers: list[bytes] = []

    def plan(line: bytes) -> tuple[list[Work], list[dict[str, Any]]]:
        request = json.loads(line)
        return [(request["id"], None, request, limit_of(request))], []

    def run(request_id: Any, item: Any) -> dict[str, Any]:
        if item.get("call") == "hang":
            release.wait(10)
        return {"id": request_id, "ok": True, "value": item.get("call")}

    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stdin, os.fdopen(write_end, "wb", buffering=0) as requests:
        server = Server(stdin, answers.append, plan, run)
        serving = threading.Thread(target=server.serve, daemon=True)
        serving.start()
        assert wait_for(lambda: any(t.name == "dcmi-watchdog" for t in threading.enumerate()), timeout=5)
        [watchdog] = [t for t in threading.enumerate() if t.name == "dcmi-watchdog"]
        assert watchdog.native_id is not None
        requests.write(encode({"id": 1, "call": "quick", "limit": 2.0}))
        assert wait_for(lambda: b'"value":"quick"' in b"".join(answers), timeout=5)
        before = wakes(os.getpid(), watchdog.native_id)
        time.sleep(1.5)  # idle; the quick call's deadline passes: at most that one wake
        assert wakes(os.getpid(), watchdog.native_id) - before <= 2  # a 0.25 s tick: ~6
        started = time.monotonic()
        requests.write(encode({"id": 2, "call": "hang", "limit": 0.3}))
        assert wait_for(lambda: b'"kind":"timeout"' in b"".join(answers), timeout=5)
        assert 0.25 < time.monotonic() - started < 1.0  # answered for at its deadline
        requests.write(encode({"id": 3, "call": "after", "limit": 2.0}))  # a new serving thread goes on
        assert wait_for(lambda: b'"value":"after"' in b"".join(answers), timeout=5)
        release.set()
        requests.close()  # end of input: the server returns
        serving.join(5)
        assert not serving.is_alive()
