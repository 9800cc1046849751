"""``npuwatch run`` as operators run it: a daemon in its own process and session, on a free port, in demo mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

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
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
