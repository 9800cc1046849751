"""``npuwatch run`` on a node with only the driver's library: the fake libdcmi.so, no npu-smi, no hccn_tool
on PATH, fault events asked of the fake through a directory (``FAKE_DCMI_EVENTS``). Used by
tests/integration/test_dcmi_events.py and bench/dcmi_events.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import yaml

from tests.support import fake_dcmi
from tests.support.agent_harness import get, merged, wait_for
from tests.support.paths import REPO
from tests.support.ports import free_port

__all__ = ["LibraryAgent", "chip_labels", "parse_metrics"]

CONFIG: dict[str, Any] = {
    "web": {"listen_address": "127.0.0.1"},
    "collectors": {"npu_smi": {"interval": "1s", "usages_interval": "30s", "health_interval": "60s"},
                   "hccn_tool": {"interval": "60s"}, "hccl_logs": {"enabled": False}},
    "probes": {"enabled": False},
}


def parse_metrics(text: str) -> dict[str, float]:
    """Every series of an exposition: ``name{labels}`` (as printed) -> value."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


class LibraryAgent:
    """The agent in its own process and session; ``events`` is the fake's request directory."""

    def __init__(self, tmp_path: Path, library: Path, config: dict[str, Any] | None = None,
                 env: dict[str, str] | None = None, chips: int = 8) -> None:
        self.events = tmp_path / "events"
        self.events.mkdir(parents=True, exist_ok=True)
        self.chips = chips
        bare = tmp_path / "bin"
        bare.mkdir(exist_ok=True)
        settings = merged(CONFIG, {"state_dir": str(tmp_path / "state"),
                                   "collectors": {"dcmi": {"library": str(library),
                                                           "lock_file": str(tmp_path / "dcmi.lock")}}})
        path = tmp_path / "npuwatch.yml"
        path.write_text(yaml.safe_dump(merged(settings, config or {})))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "agent.log"
        full_env = {**os.environ, "PATH": str(bare), "PYTHONPATH": str(REPO), "FAKE_DCMI_EVENTS": str(self.events),
                    "FAKE_DCMI_CHIPS": str(chips), **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "run", "--config", str(path), "--web.port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=self.log.open("wb"), env=full_env, cwd=tmp_path,
            start_new_session=True)

    def metrics(self) -> dict[str, float]:
        status, body, _ = get(self.url + "/metrics", timeout=5)
        return parse_metrics(body.decode()) if status == 200 else {}

    def wait(self, predicate: Callable[[dict[str, float]], bool], timeout: float = 10.0,
             step: float = 0.01) -> dict[str, float] | None:
        """The first /metrics for which ``predicate`` holds, or None at the timeout."""
        found: list[dict[str, float]] = []

        def check() -> bool:
            series = self.metrics()
            if series and predicate(series):
                found.append(series)
                return True
            return False

        return found[0] if wait_for(check, timeout=timeout, step=step) else None

    def ready(self, timeout: float = 60.0) -> dict[str, float]:
        """/metrics once the health poll has run through DCMI."""
        series = self.wait(lambda s: s.get('npuwatch_collector_up{collector="npu_smi_health"}') == 1
                           and s.get("npu_chips") == self.chips, timeout=timeout, step=0.1)
        assert series is not None, self.log_text()[-3000:]
        return series

    def send(self, *lines: str) -> float:
        """Ask the fake for events; when the request was handed over (time.time())."""
        fake_dcmi.send_events(self.events, *lines)
        return time.time()

    def helpers(self) -> list[psutil.Process]:
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [p for p in children if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                and "collectors.dcmi.worker" in " ".join(p.cmdline())]

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def chip_labels(logic: int, chips: int) -> str:
    """The ``chip="..",npu=".."`` of the fake's chip with logical id ``logic`` (one device per card)."""
    card = next(c["card_id"] for c in fake_dcmi.chip_order(chips) if c["logic_id"] == logic)
    return f'chip="0",npu="{card}"'
