"""``npuwatch top`` as a person uses it: in tmux against a running demo agent (rows appear, a fault set on the demo
shows within two refreshes of the agent having it, a resize to 80x24 and then to 60 columns redraws it for that
width, q quits 0), ``--once`` (at 60 columns a DOWN link stays and the codes go), and no agent to read."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon
from tests.support.ports import free_port

CHIPS = 8
REFRESH_S = 1.0
TMUX = shutil.which("tmux")


def npuwatch(*argv: str, timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", *argv], capture_output=True, text=True, timeout=timeout,
                          check=False, env={**os.environ, "LANG": "C.UTF-8", **(env or {})})


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Daemon]:
    daemon = Daemon(tmp_path, BASE_CONFIG, chips=CHIPS)
    try:
        assert wait_for(lambda: _value(daemon, "npu_temperature_celsius", "7") is not None, timeout=60), \
            daemon.log_text()
        yield daemon
    finally:
        daemon.stop()


def _value(daemon: Daemon, metric: str, npu: str) -> float | None:
    try:
        text = daemon.metrics()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric and sample.labels.get("npu") == npu:
                return float(sample.value)
    return None


def test_once_prints_every_npu_and_exits_0(agent: Daemon) -> None:
    run = npuwatch("top", "--once", "--url", agent.url)
    assert run.returncode == 0, run.stderr
    rows = [line for line in run.stdout.splitlines() if line[:5].strip().isdigit()]
    assert [int(line.split()[0]) for line in rows] == list(range(CHIPS))
    assert run.stdout.startswith("npuwatch top  before  data ")  # the agent's node label, not 127.0.0.1


def test_once_at_60_columns_keeps_the_down_link_and_drops_the_codes(agent: Daemon) -> None:
    demo = ("demo", "--demo-dir", str(agent.demo_dir), "set")
    assert npuwatch(*demo, "link_down", "--npu", "6").returncode == 0
    assert npuwatch(*demo, "health", "--npu", "2", "--param", "codes=80E18402").returncode == 0
    assert wait_for(lambda: _value(agent, "npu_roce_link_up", "6") == 0, timeout=90)
    assert wait_for(lambda: "80E18402" in npuwatch("top", "--once", "--url", agent.url).stdout, timeout=60)
    wide = npuwatch("top", "--once", "--url", agent.url, env={"COLUMNS": "120"})
    run = npuwatch("top", "--once", "--url", agent.url, env={"COLUMNS": "60"})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert all(len(line) <= 60 for line in lines), run.stdout
    title = next(line for line in lines if line.startswith("NPU"))
    assert "Link" in title and "Health" in title and "Codes" not in title, run.stdout
    assert " DOWN" in _row(run.stdout, 6) and " ok " not in _row(run.stdout, 2)  # the chip with a code
    assert "Codes" in next(line for line in wide.stdout.splitlines() if line.startswith("NPU"))


def test_without_an_agent_it_says_so_in_one_line_and_exits_2() -> None:
    run = npuwatch("top", "--once", "--url", f"http://127.0.0.1:{free_port()}")
    assert run.returncode == 2
    assert run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1
    assert run.stderr.startswith("npuwatch top: no agent to read at http://127.0.0.1:")


class Tmux:
    def __init__(self, tmp_path: Path) -> None:
        assert TMUX, "tmux missing (Debian package tmux; scripts/test installs it)"
        self.base = [TMUX, "-L", f"npuwatch-top-{os.getpid()}", "-f", os.devnull]
        self.rc = tmp_path / "top.rc"

    def run(self, *argv: str) -> str:
        return subprocess.run([*self.base, *argv], capture_output=True, text=True, timeout=30, check=True).stdout

    def start(self, command: str, width: int, height: int) -> None:
        # tmux runs the pane's command through the shell itself; the exit status is written for the test.
        self.run("new-session", "-d", "-s", "top", "-x", str(width), "-y", str(height),
                 f"env LANG=C.UTF-8 TERM=xterm-256color {command}; echo $? > {self.rc}")

    def screen(self) -> str:
        try:
            return self.run("capture-pane", "-p", "-t", "top")
        except subprocess.CalledProcessError:
            return ""

    def until(self, check: Callable[[str], bool], timeout: float) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.screen()
            if check(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"the screen never showed it in {timeout:.0f} s:\n{text}")

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True, timeout=30, check=False)


def _row(screen: str, npu: int) -> str:
    return next((line for line in screen.splitlines() if line[:5].strip() == str(npu)), "")


def test_top_in_tmux_shows_faults_within_two_refreshes_fits_80x24_and_quits(agent: Daemon, tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    command = f"{sys.executable} -m agent top --url {agent.url} --interval {REFRESH_S:g}s"
    try:
        tmux.start(command, 120, 40)
        tmux.until(lambda s: all(_row(s, npu) for npu in range(CHIPS)), timeout=30)

        assert npuwatch("demo", "--demo-dir", str(agent.demo_dir), "set", "hot", "--npu", "4").returncode == 0
        assert npuwatch("demo", "--demo-dir", str(agent.demo_dir), "set", "link_down", "--npu", "6").returncode == 0
        assert wait_for(lambda: (_value(agent, "npu_temperature_celsius", "4") or 0) >= 95, timeout=60)
        had_heat = time.monotonic()
        tmux.until(lambda s: "97°C" in _row(s, 4), timeout=2 * REFRESH_S + 1.5)
        assert time.monotonic() - had_heat <= 2 * REFRESH_S + 1.5
        assert wait_for(lambda: _value(agent, "npu_roce_link_up", "6") == 0, timeout=90)  # hccn_tool every 5 s
        had_link = time.monotonic()
        tmux.until(lambda s: " DOWN" in _row(s, 6), timeout=2 * REFRESH_S + 1.5)
        assert time.monotonic() - had_link <= 2 * REFRESH_S + 1.5

        wide = tmux.until(lambda s: "\nHistory " in s, timeout=5)  # 120x40: the history under the table
        assert "AI Core history" not in wide and all(len(line) <= 120 for line in wide.splitlines())

        tmux.run("resize-window", "-t", "top", "-x", "80", "-y", "24")
        small = tmux.until(lambda s: s.startswith("npuwatch top") and "DOWN" in _row(s, 6), timeout=10)
        lines = small.rstrip("\n").splitlines()
        assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
        assert all(_row(small, npu) for npu in range(CHIPS))
        assert "Processes none on the NPUs" in small  # the demo lists processes; it has none until `process`
        assert "HBM used" not in small and "driver" not in small.splitlines()[0]  # drawn for 80, not clipped

        tmux.run("resize-window", "-t", "top", "-x", "60", "-y", "24")
        narrow = tmux.until(lambda s: "Temp  Health   Link" in s and "DOWN" in _row(s, 6), timeout=10)
        assert all(len(line) <= 60 for line in narrow.splitlines())

        tmux.run("send-keys", "-t", "top", "q")
        assert wait_for(lambda: tmux.rc.exists() and tmux.rc.read_text().strip() != "", timeout=10)
        assert tmux.rc.read_text().strip() == "0"
    finally:
        tmux.kill()


class _Asks(http.server.BaseHTTPRequestHandler):
    """An agent whose web config asks for basic auth: 401 to every request."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="npuwatch"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def asks_for_a_password() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Asks)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_401_names_the_flags_that_give_a_password(asks_for_a_password: str, tmp_path: Path) -> None:
    run = npuwatch("top", "--once", "--url", asks_for_a_password)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip() == (f"npuwatch top: the agent at {asks_for_a_password}/metrics answered HTTP 401 "
                                  "Unauthorized: the agent asks for a password: give --user and --password-file "
                                  "(or $NPUWATCH_AGENT_PASSWORD)")
    secret = tmp_path / "password"
    secret.write_text("wrong\n")
    wrong = npuwatch("top", "--once", "--url", asks_for_a_password, "--user", "ops", "--password-file", str(secret))
    assert "the agent refused user 'ops' with that password: check --user and --password-file" in wrong.stderr


@pytest.mark.parametrize("web", ["nothing listens", "disabled"])
def test_with_no_agent_on_the_node_it_reads_the_tools_itself_and_says_so(tmp_path: Path, web: str) -> None:
    from agent.demo.node import DemoNode

    node = DemoNode(tmp_path / "demo").open(chips=4)
    node.set_fault("hot", chip=2)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "web": {"port": free_port()} if web == "nothing listens" else {"enabled": False},
        "collectors": {"npu_smi": {"path": str(node.bin_dir / "npu-smi")},
                       "hccn_tool": {"path": str(node.bin_dir / "hccn_tool"),
                                     "hccn_conf": str(node.directory / "hccn.conf")},
                       "hccl_logs": {"paths": [str(node.directory / "log")]}},
    }))
    before = set(Path(tempfile.gettempdir()).glob("npuwatch-top-*"))
    run = npuwatch("top", "--once", "--config", str(config), env=node.env())
    assert run.returncode == 0, run.stderr
    assert "reading the tools in this process" in run.stderr
    assert ("no agent answered at http://127.0.0.1:" if web == "nothing listens" else "serves nothing") in run.stderr
    lines = run.stdout.splitlines()
    assert lines[1] == "standalone: no agent answered, top reads the tools itself"
    assert [line.split()[0] for line in lines if line[:5].strip().isdigit()] == ["0", "1", "2", "3"]
    hot = _row(run.stdout, 2)
    assert "97°C" in hot and "too hot" in hot  # read from the tools and judged as check judges
    assert lines[3] == "FAIL: chip too hot on NPU 2"  # the verdict check's evaluation gives
    assert set(Path(tempfile.gettempdir()).glob("npuwatch-top-*")) == before  # its state went with it


def _up(daemon: Daemon, collector: str) -> float | None:
    try:
        text = daemon.metrics()
    except OSError:
        return None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "npuwatch_collector_up" and sample.labels.get("collector") == collector:
                return float(sample.value)
    return None


def test_after_an_npu_smi_hang_top_marks_the_old_readings_stale(tmp_path: Path) -> None:
    # npu-smi every 5 s, killed after 2 s: the agent serves its last good readings for 15 s (3 intervals)
    npu_smi = {**BASE_CONFIG["collectors"]["npu_smi"], "interval": "5s", "timeout": "2s"}
    config = {**BASE_CONFIG, "collectors": {**BASE_CONFIG["collectors"], "npu_smi": npu_smi}}
    daemon = Daemon(tmp_path, config, chips=4)
    try:
        assert wait_for(lambda: _value(daemon, "npu_temperature_celsius", "3") is not None, timeout=60), \
            daemon.log_text()
        fresh = npuwatch("top", "--once", "--url", daemon.url)
        assert fresh.returncode == 0 and "°C?" not in fresh.stdout, fresh.stdout  # npu-smi's readings are current
        set_hang = npuwatch("demo", "--demo-dir", str(daemon.demo_dir), "set", "npu_smi_hang")
        assert set_hang.returncode == 0, set_hang.stderr
        assert wait_for(lambda: _up(daemon, "npu_smi_info") == 0, timeout=60), daemon.log_text()
        hung = npuwatch("top", "--once", "--url", daemon.url)
        assert hung.returncode == 0, hung.stderr
        rows = [_row(hung.stdout, npu) for npu in range(4)]
        assert all("°C?" in row for row in rows), hung.stdout  # the last good temperatures, marked
        said = " ".join(hung.stdout.split())
        assert ", ? stale" in hung.stdout.splitlines()[0] and "? marks a stale reading:" in said
        assert "npu_smi_info last read" in said and "now timeout" in said, said
    finally:
        daemon.stop()
