"""Test helpers: a demo-backed agent with its HTTP server on 127.0.0.1:0."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from agent.core.config import build_config
from agent.daemon.assemble import AgentBundle, build_agent
from tests.support.ports import free_port

FAST = {
    "web": {"listen_address": "127.0.0.1"},
    "collectors": {
        "npu_smi": {"timeout": "1s"},
        "hccn_tool": {"timeout": "1s"},
        "hccl_logs": {"enabled": False},
    },
    "probes": {"enabled": False},
}


def merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def fast_config(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """FAST plus a free port of its own (the config refuses port 0) plus ``extra``."""
    return merged(merged(FAST, {"web": {"port": free_port()}}), extra or {})


def demo_bundle(tmp_path: Path, extra: dict[str, Any] | None = None, chips: int = 8) -> AgentBundle:
    config = build_config(fast_config(extra))
    return build_agent(config, tmp_path / "demo", chips)


@dataclass
class ServedAgent:
    """What the ``demo_agent`` fixture (tests/conftest.py) yields: the agent and its HTTP server's base URL."""

    bundle: AgentBundle
    url: str


@contextmanager
def serving(bundle: AgentBundle) -> Iterator[str]:
    """Start HTTP only (no scheduler); yields the base URL."""
    from agent.web.server import make_server

    server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health, ready=bundle.agent.readiness,
                         page=bundle.agent.node_page)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
        bundle.agent.stop()


def get(url: str, headers: dict[str, str] | None = None, timeout: float = 5) -> tuple[int, bytes, float]:
    request = urllib.request.Request(url, headers=headers or {})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read(), time.perf_counter() - started
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), time.perf_counter() - started
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, b"", time.perf_counter() - started


def wait_for(predicate: Callable[[], bool], timeout: float = 10, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# ----------------------------------------------------------------------------- agents as processes


def dotted_to_nested(dotted: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}`` (config overrides as a config file section)."""
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def demo_agent_config(demo: Any, extra: dict[str, Any]) -> dict[str, Any]:
    """The config ``npuwatch run --demo --demo-dir DIR`` runs on ``demo`` (a DemoNode), ``extra`` on top.

    The demo's own overrides (agent.demo.node.demo_overrides: the fake tools, its log directory,
    state under DIR, probes on the CPU under the demo's probe interpreter) are written into the
    file, so ``npuwatch run --config FILE`` on it is the demo agent; unlike ``--demo``, keys set in
    ``extra`` win over the demo's (e.g. a faster probe schedule than its fixed 30 s / 2 min).
    """
    from agent.demo.node import demo_overrides

    overrides = demo_overrides(demo.directory, demo.bin_dir, build_config(extra))
    return merged(dotted_to_nested(overrides), extra)


class AgentProcess:
    """``python -m agent run --config FILE`` in its own process group, on a fixed port across restarts."""

    def __init__(self, name: str, workdir: Path, config: dict[str, Any], env: dict[str, str] | None = None) -> None:
        self.name = name
        self.workdir = workdir
        self.port = int(config["web"]["port"])
        self.config_path = workdir / "npuwatch.yml"
        self.log_path = workdir / "agent.log"
        self.env = {**os.environ, **(env or {})}
        self.popen: subprocess.Popen[bytes] | None = None
        self.starts = 0
        workdir.mkdir(parents=True, exist_ok=True)
        self.write_config(config)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def write_config(self, config: dict[str, Any]) -> None:
        if int(config["web"]["port"]) != self.port:
            raise ValueError("the port is fixed for the life of the agent (it is the scrape target)")
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        os.replace(tmp, self.config_path)

    def start(self) -> None:
        if self.running():
            raise RuntimeError(f"agent {self.name} is already running")
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts} at {time.time():.3f}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "agent", "run", "--config", str(self.config_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
                cwd=self.workdir, start_new_session=True,
            )

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def serving(self) -> bool:
        status, _body, _seconds = get(f"http://{self.target}/healthz", timeout=1)
        return status == 200

    def wait_serving(self, timeout: float = 30) -> None:
        if not wait_for(lambda: self.serving() or not self.running(), timeout, step=0.1) or not self.running():
            raise RuntimeError(f"agent {self.name} is not serving on {self.target}\n{self.log_tail()}")

    def signal(self, signum: int) -> None:
        if self.popen is not None:
            os.kill(self.popen.pid, signum)

    def kill(self) -> None:
        """SIGKILL the agent and everything it started (as systemd's default KillMode does)."""
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, grace: float = 10) -> None:
        """SIGTERM (a clean shutdown), then SIGKILL after ``grace`` seconds."""
        if self.popen is None or self.popen.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.kill()
        # Whatever it started and left behind (it kills its own tools and probes on a clean stop).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log_path.read_bytes()[-size:].decode(errors="replace")
        except OSError:
            return "(no log)"
