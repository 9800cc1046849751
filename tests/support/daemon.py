"""``npuwatch run`` as operators run it: a daemon in its own process and session, on a free port, in demo mode."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import yaml

from tests.support.agent_harness import get
from tests.support.ports import free_port

BASE_CONFIG = {
    "web": {"listen_address": "127.0.0.1"},
    "labels": {"node": "before"},
    "collectors": {"npu_smi": {"interval": "1s", "usages_interval": "2s", "health_interval": "5s"},
                   "hccn_tool": {"interval": "5s"}},
    "probes": {"enabled": False},
}


class Daemon:
    def __init__(self, tmp_path: Path, config: dict, env: dict[str, str] | None = None, chips: int = 4) -> None:
        self.config_path = tmp_path / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.log = tmp_path / "agent.log"
        self.url = f"http://127.0.0.1:{self.port}"
        self.demo_dir = tmp_path / "demo"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "run", "--config", str(self.config_path), "--demo",
             "--demo-dir", str(tmp_path / "demo"), "--demo-chips", str(chips), "--web.port", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=self.log.open("wb"), env={**os.environ, **(env or {})},
            start_new_session=True,
        )

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        return get(self.url + "/metrics")[1].decode()

    def stop(self) -> None:
        """SIGTERM as systemd stops it (the agent kills its running tools), then whatever is left of the demo.

        A tool the demo hangs runs in its own session, outside the agent's process group: a bare SIGKILL of
        the group would leave it sleeping forever on the machine that ran the tests.
        """
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        kill_demo_tools(self.demo_dir)

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer ends it: nothing of its own shutdown runs."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        kill_demo_tools(self.demo_dir)


def kill_demo_tools(demo_dir: Path) -> int:
    """Kill every process running one of ``demo_dir``'s fake tools; how many there were."""
    tools = str(demo_dir / "bin")
    left = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(arg.startswith(tools) for arg in cmdline):
            left.append(proc)
    for proc in left:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(left, timeout=5)
    return len(left)
