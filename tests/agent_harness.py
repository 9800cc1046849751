"""Test helpers: a demo-backed agent with its HTTP server on 127.0.0.1:0."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent.core.config import build_config
from agent.daemon.assemble import AgentBundle, build_agent

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fast_config(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """FAST plus a free port of its own (the config refuses port 0) plus ``extra``."""
    return merged(merged(FAST, {"web": {"port": free_port()}}), extra or {})


def demo_bundle(tmp_path: Path, extra: dict[str, Any] | None = None, chips: int = 8) -> AgentBundle:
    config = build_config(fast_config(extra))
    return build_agent(config, tmp_path / "demo", chips)


@contextmanager
def serving(bundle: AgentBundle) -> Iterator[str]:
    """Start HTTP only (no scheduler); yields the base URL."""
    from agent.web.server import make_server

    server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health, ready=bundle.agent.readiness)
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
