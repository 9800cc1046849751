"""The node page at ``/`` served for real: from a demo agent with faults, behind basic auth and TLS, from
``npuwatch run``. (What it writes is tests/unit/test_node_page.py's; the browser's view is
tests/e2e/test_node_page_browser.py's.)"""

from __future__ import annotations

from agent.web.config import build_web_config
from tests.support.agent_harness import ServedAgent, get, wait_for
from tests.support.daemon import Daemon
from tests.support.node_page_dom import parse
from tests.support.web_harness import (
    HASH,
    PASSWORD,
    USER,
    Certs,
    StartServer,
    basic,
    certs,
    client_context,
    serve,
    tls_config,
)
from tests.support.web_harness import get as fetch

__all__ = ["certs", "serve"]  # fixtures

HTML = "text/html; charset=utf-8"
PAGE = b"<!DOCTYPE html><html><body>node page of node-a</body></html>"


def test_the_demo_agents_page_names_each_fault_on_its_npu(demo_agent: ServedAgent) -> None:
    demo = demo_agent.bundle.demo
    demo.set_fault("hot", chip=4)
    demo.set_fault("link_down", chip=6)
    demo_agent.bundle.agent.collect_once()
    status, body, _seconds = get(demo_agent.url + "/")
    assert status == 200, body[:500]
    page = parse(body)
    assert set(page.rows) == {f"npu-{npu}-chip-0" for npu in range(8)}
    assert page.rows["npu-4-chip-0"]["data-status"] == "fail"
    assert page.rows["npu-4-chip-0"]["data-cause"] == "chip_too_hot"
    assert "chip too hot" in page.text["npu-4-chip-0"] and "97 °C" in page.text["npu-4-chip-0"]
    assert page.rows["npu-6-chip-0"]["data-status"] == "fail"
    assert page.rows["npu-6-chip-0"]["data-cause"] == "link_down"
    assert "RoCE link down" in page.text["npu-6-chip-0"] and "DOWN" in page.text["npu-6-chip-0"]
    for npu in (0, 1, 2, 3, 5, 7):
        assert page.rows[f"npu-{npu}-chip-0"]["data-status"] == "ok", page.text[f"npu-{npu}-chip-0"]
    kinds = {(row["data-kind"], row["data-npu"]) for row in page.findings}
    assert {("chip_too_hot", "4"), ("link_down", "6")} <= kinds
    # the lead is the agent's: what npu_node_status exports
    node_status = next(s for s in demo_agent.bundle.agent.store.get("verdict").samples if s.metric == "npu_node_status")
    labels = dict(node_status.labels)
    assert (page.verdict["data-status"], page.verdict["data-cause"], page.verdict["data-npu"]) == (
        labels["status"], labels["cause"], labels["npu"])
    # the rounds fed the history: each row has its four charts
    assert body.count(b"<svg") == 8 * 4
    assert demo_agent.bundle.agent.history.series(4, 0, now=demo_agent.bundle.agent.store.clock()) is not None


def test_a_reload_keeps_feeding_the_history(demo_agent: ServedAgent) -> None:
    agent = demo_agent.bundle.agent
    agent.collect_once()
    assert len(agent.history.chips()) == 8
    assert agent.reload(agent.config)  # the store's listeners are cleared and added again
    agent.history.clear()
    agent.collect_once()
    assert len(agent.history.chips()) == 8
    series = agent.history.series(0, 0, now=agent.store.clock())
    assert series is not None and series.temperature and series.link


def test_head_and_get_answer_html_with_no_script_allowed(demo_agent: ServedAgent) -> None:
    demo_agent.bundle.agent.collect_once()
    port = int(demo_agent.url.rsplit(":", 1)[1])
    status, body, response = fetch(port, "/")
    assert status == 200 and body.startswith(b"<!DOCTYPE html>")
    assert response.getheader("Content-Type") == HTML
    assert "default-src 'none'" in (response.getheader("Content-Security-Policy") or "")
    assert response.getheader("Cache-Control") == "no-store"
    status, body, response = fetch(port, "/", method="HEAD")
    assert (status, body) == (200, b"")
    assert response.getheader("Content-Type") == HTML
    assert int(response.getheader("Content-Length") or 0) > 1000


def test_basic_auth_guards_the_page(serve: StartServer) -> None:
    server = serve(build_web_config({"basic_auth_users": {USER: HASH}}), page=lambda: PAGE)
    status, body, response = fetch(server.port, "/")
    assert status == 401 and b"node-a" not in body
    assert response.getheader("WWW-Authenticate", "").startswith("Basic")
    assert fetch(server.port, "/", headers={"Authorization": basic(USER, "wrong")})[0] == 401
    status, body, response = fetch(server.port, "/", headers={"Authorization": basic(USER, PASSWORD)})
    assert (status, body) == (200, PAGE)
    assert response.getheader("Content-Type") == HTML


def test_the_page_over_tls_with_basic_auth(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs), page=lambda: PAGE)
    context = client_context(certs)
    assert fetch(server.port, "/", context=context)[0] == 401
    assert fetch(server.port, "/", context=context, headers={"Authorization": basic(USER, PASSWORD)})[:2] == (
        200, PAGE)


def test_a_page_that_fails_is_a_500_and_the_endpoints_keep_answering(serve: StartServer) -> None:
    def broken() -> bytes:
        raise RuntimeError("a bug in the page")

    server = serve(page=broken)
    status, body, _response = fetch(server.port, "/")
    assert status == 500 and b"a bug" not in body
    assert fetch(server.port, "/metrics")[0] == 200


def test_without_a_page_the_root_lists_the_endpoints(serve: StartServer) -> None:
    server = serve()
    status, body, response = fetch(server.port, "/")
    assert status == 200 and b'href="/metrics"' in body
    assert response.getheader("Content-Type") == HTML


def test_npuwatch_run_serves_the_node_page(daemon: Daemon) -> None:
    def judged() -> bool:
        status, body, _seconds = get(daemon.url + "/", timeout=2)
        return status == 200 and b"not judged yet" not in body and b'id="npu-3-chip-0"' in body

    assert wait_for(judged, timeout=30, step=0.5), daemon.log_text()
    status, body, _seconds = get(daemon.url + "/")
    page = parse(body)
    assert status == 200
    # judged (any verdict: on a loaded machine a fake tool may time out, and tool_hung is then the agent's lead)
    assert page.verdict["data-status"] in ("ok", "warn", "fail", "unknown")
    assert set(page.rows) == {f"npu-{npu}-chip-0" for npu in range(4)}
    assert b'id="node">before<' in body  # labels.node of the daemon's config
