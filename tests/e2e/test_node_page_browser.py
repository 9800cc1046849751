"""The node page in a real browser: headless Chromium (Debian's ``chromium``) loads it from a demo agent with
faults. It renders, each fault shows on its NPU, the console stays empty, and the browser asks the agent for
nothing but the page. The docs' screenshot command (tests/support/node_page_shots.py) works end to end.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.daemon.assemble import AgentBundle
from agent.web.config import build_web_config
from agent.web.server import AgentHTTPServer, make_server
from tests.support import browser
from tests.support.agent_harness import demo_bundle
from tests.support.node_page_dom import parse
from tests.support.node_page_shots import shoot
from tests.support.web_harness import HASH, PASSWORD, USER


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser; the test fails, not skips, without it (Debian: apt-get install chromium)."""
    found = browser.chromium()
    if found is None:
        pytest.fail("chromium not found on PATH: install it (Debian: apt-get install chromium)")
    return found


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[AgentBundle]:
    """A demo agent (8 chips) with NPU 4 hot and NPU 6's link down, two collection rounds done."""
    bundle = demo_bundle(tmp_path)
    assert bundle.demo is not None
    bundle.demo.set_fault("hot", chip=4)
    bundle.demo.set_fault("link_down", chip=6)
    for _ in range(2):
        bundle.agent.collect_once()
    try:
        yield bundle
    finally:
        bundle.agent.stop()


class Recorded:
    """The agent's HTTP server with every request path it answered written down."""

    def __init__(self, bundle: AgentBundle, **options: object) -> None:
        agent = bundle.agent
        self.paths: list[str] = []
        self.server: AgentHTTPServer = make_server("127.0.0.1", 0, agent.cache, agent.health, ready=agent.readiness,
                                                   page=agent.node_page, **options)  # type: ignore[arg-type]
        route = self.server._route

        def recording(request):  # type: ignore[no-untyped-def]
            self.paths.append(request.path)
            return route(request)

        self.server._route = recording  # type: ignore[method-assign]

    def __enter__(self) -> Recorded:
        self.server.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.stop()


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def check_faults_on_their_npus(dom: str) -> None:
    page = parse(dom)
    assert set(page.rows) == {f"npu-{npu}-chip-0" for npu in range(8)}, sorted(page.rows)
    hot, down = page.rows["npu-4-chip-0"], page.rows["npu-6-chip-0"]
    assert (hot["data-status"], hot["data-cause"]) == ("fail", "chip_too_hot")
    assert "chip too hot" in page.text["npu-4-chip-0"] and "97 °C" in page.text["npu-4-chip-0"]
    assert (down["data-status"], down["data-cause"]) == ("fail", "link_down")
    assert "RoCE link down" in page.text["npu-6-chip-0"] and "DOWN" in page.text["npu-6-chip-0"]
    assert all(page.rows[f"npu-{npu}-chip-0"]["data-status"] == "ok" for npu in (0, 1, 2, 3, 5, 7))
    assert page.verdict["data-status"] == "fail" and page.verdict["data-cause"] in ("link_down", "chip_too_hot")
    assert {("chip_too_hot", "4"), ("link_down", "6")} <= {(f["data-kind"], f["data-npu"]) for f in page.findings}
    assert page.scripts == 0
    assert page.collectors.get("npu_smi_info") == "up"


def test_chromium_renders_the_page_with_each_fault_on_its_npu(chromium: str, faulty: AgentBundle,
                                                              tmp_path: Path) -> None:
    with Recorded(faulty) as served:
        url = f"http://127.0.0.1:{served.server.port}/"
        run = browser.load(url)
        assert run.console == [], "\n".join(run.console)
        check_faults_on_their_npus(run.dom)
        assert run.dom.count("<svg") == 8 * 4  # four charts a row, drawn in the browser's DOM
        shot = tmp_path / "page.png"
        run = browser.load(url, screenshot=shot, window=(1200, 900))
        assert run.console == [], "\n".join(run.console)
        assert png_size(shot) == (1200, 900)
        assert shot.stat().st_size > 20_000  # a rendered page, not a blank window
    assert served.paths == ["/", "/"]  # one page per load: no favicon, no stylesheet, no script, no image


def test_chromium_behind_basic_auth(chromium: str, faulty: AgentBundle) -> None:
    with Recorded(faulty, web_config=build_web_config({"basic_auth_users": {USER: HASH}})) as served:
        port = served.server.port
        refused = browser.load(f"http://127.0.0.1:{port}/")
        assert 'id="verdict"' not in refused.dom
        run = browser.load(f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/")
        check_faults_on_their_npus(run.dom)
        assert run.console == [], "\n".join(run.console)


def test_the_screenshot_command_writes_the_docs_picture(chromium: str, tmp_path: Path) -> None:
    written = shoot(tmp_path / "images", minutes=3.0)
    assert [path.name for path in written] == ["node-page.png"]
    assert png_size(written[0]) == (1200, 900)
