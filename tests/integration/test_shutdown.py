"""SIGTERM while a tool hangs: the agent kills the tool and exits within 5 s, leaving no process."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon


def _fakes(demo_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if "agent.demo.fake_npu_smi" in cmdline or str(demo_dir / "bin" / "npu-smi") in cmdline:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_sigterm_during_a_hung_tool_exits_within_five_seconds(tmp_path: Path) -> None:
    config = {**BASE_CONFIG, "collectors": {**BASE_CONFIG["collectors"], "npu_smi": {
        "interval": "1s", "usages_interval": "2s", "health_interval": "5s", "timeout": "15m"}}}
    daemon = Daemon(tmp_path, config)
    demo_dir = tmp_path / "demo"
    try:
        assert wait_for(lambda: (demo_dir / "state.json").exists(), timeout=30), daemon.log_text()
        subprocess.run([sys.executable, "-m", "agent", "demo", "--demo-dir", str(demo_dir), "set", "npu_smi_hang"],
                       check=True, capture_output=True, timeout=60)
        # A fake npu-smi that has been running for a while is hanging, not just starting.
        assert wait_for(lambda: any(time.time() - p.create_time() > 1.5 for p in _fakes(demo_dir)), timeout=20)
        started = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(10) == 0, daemon.log_text()
        assert time.monotonic() - started < 5, daemon.log_text()
        assert wait_for(lambda: not _fakes(demo_dir), timeout=3), _fakes(demo_dir)
    finally:
        daemon.stop()
