"""/healthz is liveness (the agent itself), /readyz is readiness (chip list read) plus every
collector; a hung npu-smi fails neither liveness nor, once the chip list was read, readiness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from agent.core.snapshot import SnapshotStore
from agent.daemon.assemble import AgentBundle
from agent.web.config import build_web_config
from agent.web.health import Heartbeat, liveness, readiness
from agent.web.server import make_server
from tests.support.agent_harness import demo_bundle, get, wait_for
from tests.support.web_harness import basic

FAST_HANG = {"collectors": {"npu_smi": {"interval": "1s", "timeout": "1s"}}}


def test_heartbeat_goes_stale_after_missed_beats() -> None:
    now = [100.0]
    beat = Heartbeat(interval_s=5.0, stale_after=3, clock=lambda: now[0])
    assert liveness(beat, scheduling=False, stopping=False) == (True, "ok (serving; no collection schedule running)")
    beat.reset()
    assert liveness(beat, scheduling=True, stopping=False) == (True, "ok")
    now[0] += 15.0
    assert liveness(beat, True, False)[0]  # exactly at the limit: still alive
    now[0] += 1.0
    alive, reason = liveness(beat, True, False)
    assert not alive and reason == "scheduler stalled: no heartbeat for 16s"
    beat.beat()
    assert liveness(beat, True, False) == (True, "ok")
    assert liveness(beat, True, stopping=True) == (False, "stopping")


def test_readiness_states_per_collector() -> None:
    now = [1000.0]
    store = SnapshotStore(clock=lambda: now[0])
    for name in ("npu_smi_info", "hccn_link", "host", "npu_smi_usages"):
        store.register(name, 10.0)
    ready, report = readiness(store, chip_list_collected=True)
    assert not ready and report["reason"] == "chip list not read yet (npu_smi_info: not run yet)"
    store.put_success("npu_smi_info", [], None, 990.0, 0.1)
    store.put_no_data("hccn_link", "hccn_tool not found", 990.0, 0.0)
    store.put_success("host", [], None, 990.0, 0.1)
    store.put_failure("host", "timeout", "host: timed out after 1s", 995.0, 1.0)
    now[0] += 20.0
    store.put_failure("npu_smi_info", "timeout", "npu-smi timed out after 10s", 1015.0, 10.0)
    ready, report = readiness(store, chip_list_collected=True)
    assert ready and report["reason"] == "chip list read 20s ago"  # read once since start: stays ready
    states = {entry["name"]: entry for entry in report["collectors"]}
    assert states["npu_smi_info"] == {"name": "npu_smi_info", "state": "degraded", "up": False,
                                      "reason": "npu-smi timed out after 10s", "last_success_age_seconds": 20.0}
    assert states["hccn_link"]["state"] == "no_data"
    assert states["host"]["state"] == "degraded"
    assert states["npu_smi_usages"] == {"name": "npu_smi_usages", "state": "pending", "up": False,
                                        "reason": "not run yet", "last_success_age_seconds": None}
    now[0] += 100.0  # past 3 intervals: nothing fresh left
    assert {entry["name"]: entry["state"] for entry in readiness(store, True)[1]["collectors"]}["host"] == "down"
    assert readiness(SnapshotStore(), chip_list_collected=False)[0]


@pytest.fixture
def hung(tmp_path: Path) -> Iterator[AgentBundle]:
    bundle = demo_bundle(tmp_path, FAST_HANG)
    assert bundle.demo is not None
    bundle.demo.set_fault("npu_smi_hang")
    yield bundle
    bundle.agent.stop()


def test_hung_npu_smi_is_not_a_liveness_failure(hung: AgentBundle) -> None:
    agent = hung.agent
    agent.start()
    url = f"http://127.0.0.1:{agent.http_port}"
    assert wait_for(lambda: (agent.store.get("npu_smi_info").errors["timeout"] > 0), timeout=15)  # type: ignore[union-attr]
    status, body, _ = get(url + "/healthz")
    assert (status, body) == (200, b"ok\n")
    status, body, _ = get(url + "/readyz")
    report = json.loads(body)
    assert status == 503 and report["ready"] is False
    assert "chip list not read yet" in report["reason"]
    info = next(entry for entry in report["collectors"] if entry["name"] == "npu_smi_info")
    assert info["state"] == "down" and "no answer within 1s" in info["reason"]

    assert hung.demo is not None
    hung.demo.clear_fault("npu_smi_hang")
    assert wait_for(lambda: get(url + "/readyz")[0] == 200, timeout=15)
    assert agent.heartbeat.age() is not None and agent.heartbeat.age() < 10  # type: ignore[operator]


def test_healthz_is_exempt_from_basic_auth_and_readyz_is_not(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(rounds=4)).decode()
    server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health, ready=bundle.agent.readiness,
                         web_config=build_web_config({"basic_auth_users": {"prometheus": hashed}}))
    server.start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        assert get(url + "/healthz")[:2] == (200, b"ok (serving; no collection schedule running)\n")
        assert get(url + "/readyz")[0] == 401
        assert get(url + "/metrics")[0] == 401
        bundle.agent.collect_group("info")
        status, body, _ = get(url + "/readyz", {"Authorization": basic("prometheus", "pw")})
        assert status == 200 and json.loads(body)["ready"] is True
    finally:
        server.stop()
        bundle.agent.stop()
