"""Shared helpers for the benchmarks in bench/: demo agents, in-process fake tools, scrapes, tables.

Also runnable, to serve a demo agent in its own process (used by the latency benchmarks so the
client and the server do not share a GIL, and as a fallback when ``python -m agent run`` fails):

    python -m bench._util serve --demo-dir DIR --chips 16 [--tools subprocess] [--render typical|all]

The agent's scheduler runs at the default intervals; ``/metrics`` is served without the per-IP
rate limit. It prints ``READY <port>`` on stdout once ``/metrics`` is up; stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib
import math
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agent.core.config import build_config  # noqa: E402
from agent.daemon.assemble import AgentBundle, build_agent  # noqa: E402

__all__ = [
    "ROOT",
    "InProcessTools",
    "Scrape",
    "Table",
    "as_shown_mib",
    "bench_config",
    "count_series",
    "demo_agent",
    "free_port",
    "percentile",
    "rss_bytes",
    "scrape",
    "start_server_process",
    "stop_process",
]

MB = 1 << 20

# Defaults everywhere except: loopback only, probes off (they run torch in a child every hour or
# so and would only add noise), and no per-IP rate limit problem (set by the caller of make_server).
BENCH_CONFIG: dict[str, Any] = {
    "web": {"listen_address": "127.0.0.1"},
    "probes": {"enabled": False},
}


def bench_config(extra: Mapping[str, Any] | None = None) -> Any:
    """A validated Config: defaults + ``BENCH_CONFIG`` + ``extra`` (nested dicts merge)."""
    with socket.socket() as sock:  # the config refuses port 0: take a free one
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return build_config(_merged(_merged(BENCH_CONFIG, {"web": {"port": port}}), dict(extra or {})))


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def demo_agent(demo_dir: Path, chips: int, extra: Mapping[str, Any] | None = None) -> AgentBundle:
    """A demo-backed agent (not started); a node already in ``demo_dir`` keeps its state (delay)."""
    return build_agent(bench_config(extra), demo_dir, chips)


# --- fake tools without a process per call
class InProcessTools:
    """Replace ``agent.core.collect.run_tool`` with the demo fakes' own ``render`` functions.

    Everything the agent does with a tool's output (parse, samples, store, render) still runs;
    what is skipped is fork/exec of a Python fake per call (~30-50 ms of CPU each on these
    machines), which would make thousands of cycles unaffordable. The state file is read once.
    """

    def __init__(self, demo_dir: Path) -> None:
        from agent.demo.node import TOOL_MODULES
        from agent.demo.state import load_state

        self._state = load_state(demo_dir)
        self._renderers: dict[str, Callable[..., Any]] = {
            tool: importlib.import_module(module).render for tool, module in TOOL_MODULES.items()
        }
        self.calls = 0
        self._saved: Any = None

    def run_tool(self, argv: Sequence[str], timeout_s: float, **_: Any) -> Any:
        from agent.core.tool_runner import RunResult, ToolFailed
        from agent.demo.state import demo_now

        self.calls += 1
        started = time.monotonic()
        output = self._renderers[Path(argv[0]).name](self._state, demo_now(self._state), list(argv[1:]))
        result = RunResult(tuple(argv), output.exit_code, output.stdout, output.stderr,
                           time.monotonic() - started, False)
        if output.exit_code != 0:
            raise ToolFailed(result)
        return result

    def __enter__(self) -> InProcessTools:
        import agent.core.collect

        self._saved = agent.core.collect.run_tool
        agent.core.collect.run_tool = self.run_tool  # type: ignore[assignment]
        return self

    def __exit__(self, *_: object) -> None:
        import agent.core.collect

        agent.core.collect.run_tool = self._saved


# --- measurements
def rss_bytes(pid: int | None = None) -> int:
    """Resident set size of ``pid`` (default: this process), from /proc."""
    where = "self" if pid is None else str(pid)
    with open(f"/proc/{where}/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sequence."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def count_series(body: bytes) -> int:
    """Samples in a text exposition (every non-comment, non-blank line)."""
    return sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))


@dataclass(frozen=True, slots=True)
class Scrape:
    status: int
    body: bytes
    seconds: float


def scrape(port: int, path: str = "/metrics", host: str = "127.0.0.1", gzip: bool = False,
           timeout_s: float = 10.0) -> Scrape:
    """One GET on a new connection that is closed afterwards (as a Prometheus scrape may be)."""
    headers = {"Connection": "close", "Accept": "text/plain;version=0.0.4"}
    if gzip:
        headers["Accept-Encoding"] = "gzip"
    started = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read()
        status = response.status
    finally:
        connection.close()
    return Scrape(status, body, time.perf_counter() - started)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return predicate()


def stop_process(proc: Any, grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; always reaped."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except Exception:
            proc.kill()
            proc.wait(timeout=grace_s)


def launch_until_answering(argv: Sequence[str], log_path: Path, port: int, *, cwd: Path = ROOT,
                           env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> Any:
    """Start ``argv`` (output to ``log_path``) and wait until /metrics on ``port`` answers or the process
    has exited; returns the Popen either way (the caller judges ``poll()``)."""
    import subprocess

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    def answering_or_gone() -> bool:
        if proc.poll() is not None:
            return True
        with contextlib.suppress(OSError):
            return scrape(port, timeout_s=2).status == 200
        return False

    wait_until(answering_or_gone, timeout_s, 0.1)
    return proc


def start_server_process(demo_dir: Path, chips: int, log_path: Path, *, tools: str = "inprocess",
                         render: str = "cached", timeout_s: float = 60.0) -> tuple[Any, int]:
    """``python -m bench._util serve`` in a child; returns (Popen, port) once it answers."""
    import subprocess

    argv = [sys.executable, "-m", "bench._util", "serve", "--demo-dir", str(demo_dir),
            "--chips", str(chips), "--tools", tools]
    argv += ["--render", render]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
    assert proc.stdout is not None
    ready: list[int] = []

    def read_ready() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode(errors="replace").split()
            if len(line) == 2 and line[0] == "READY":
                ready.append(int(line[1]))
                return

    reader = threading.Thread(target=read_ready, daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not ready:
        stop_process(proc)
        tail = log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"bench server did not start (exit {proc.returncode}):\n{tail}")
    return proc, ready[0]


# --- output
class Table:
    """A plain text table: ``metric | value | target | ok`` (or any columns)."""

    def __init__(self, columns: Sequence[str] = ("metric", "value", "target", "ok")) -> None:
        self.columns = tuple(columns)
        self.rows: list[tuple[str, ...]] = []
        self.notes: list[str] = []

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"expected {len(self.columns)} cells, got {len(cells)}")
        self.rows.append(tuple(str(cell) for cell in cells))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def render(self) -> str:
        widths = [max(len(row[i]) for row in (self.columns, *self.rows)) for i in range(len(self.columns))]

        def line(cells: Sequence[str]) -> str:
            return " | ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()

        out = [line(self.columns), "-|-".join("-" * width for width in widths)]
        out.extend(line(row) for row in self.rows)
        out.extend(f"note: {text}" for text in self.notes)
        return "\n".join(out)


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def mib(size: float) -> str:
    return f"{size / MB:.1f} MB"


def as_shown_mib(size: float) -> float:
    """``size`` as ``mib`` prints it, in bytes: a table judges the number it shows (0.996 MB is "1.0 MB", not < 1)."""
    return round(size / MB, 1) * MB


# --- `python -m bench._util serve`
class _RenderEveryTime:
    """Stands in for ``ExpositionCache``: re-stores sources first, so every scrape renders.

    ``max_interval_s`` None re-stores every source (the worst case); 15 re-stores the sources
    whose interval is at most 15 s, which are the ones certain to have changed between two
    scrapes at Prometheus's usual 15 s interval (the 30 s/60 s sources change on some only).
    """

    def __init__(self, agent: Any, max_interval_s: float | None) -> None:
        self._agent = agent
        self._max_interval_s = max_interval_s

    def render(self, openmetrics: bool = False, gzipped: bool = False) -> Any:
        store = self._agent.store
        limit = self._max_interval_s
        for snap in [s for s in store.all() if s.ok and (limit is None or s.interval_s <= limit)]:
            # Fresh sample tuples: nothing the renderer cached can be reused.
            store.put_success(snap.source, list(snap.samples), snap.records, snap.started_at or 0.0,
                              snap.duration_s or 0.0)
        return self._agent.cache.render(openmetrics=openmetrics, gzipped=gzipped)


def _serve(args: argparse.Namespace) -> int:
    from agent.web.server import ServerLimits, make_server

    demo_dir = Path(args.demo_dir or tempfile.mkdtemp(prefix="npuwatch-bench-"))
    agent = demo_agent(demo_dir, args.chips).agent
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tools = InProcessTools(demo_dir) if args.tools == "inprocess" else contextlib.nullcontext()
    with tools:
        if args.tools == "inprocess":
            agent.collect_once()  # READY means there is data to serve
        # The scheduler keeps the store current at the default intervals, as in production.
        agent.start(serve_http=False)
        # The benchmark client asks far faster than the default 20/s per IP would allow.
        limits = ServerLimits(rate_per_s=1e9, burst=1_000_000_000)
        cache = {"cached": agent.cache, "typical": _RenderEveryTime(agent, 15.0),
                 "all": _RenderEveryTime(agent, None)}[args.render]
        server = make_server("127.0.0.1", 0, cache, agent.health, limits=limits)  # type: ignore[arg-type]
        server.start()
        print(f"READY {server.port}", flush=True)
        try:
            stop.wait()
        finally:
            server.stop()
            agent.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench._util")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve a demo agent until SIGTERM")
    serve.add_argument("--demo-dir", type=Path)
    serve.add_argument("--chips", type=int, default=16)
    serve.add_argument("--tools", choices=("inprocess", "subprocess"), default="inprocess",
                       help="fakes rendered in this process (default) or run as processes, like the agent")
    serve.add_argument("--render", choices=("cached", "typical", "all"), default="cached",
                       help="cached (default); re-render per scrape after the sources of <= 15 s interval "
                            "changed (typical) or after every source changed (all)")
    args = parser.parse_args(argv)
    return _serve(args)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
