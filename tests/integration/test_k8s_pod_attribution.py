"""Pod attribution against a real gRPC server of the kubelet's pod-resources v1 API on a Unix socket.

Pods come and go, each device-plugin ID format maps to its chip, the socket vanishes and returns,
and a scrape during a 5 s-slow ``List`` answers in milliseconds (the call runs on the job's own
schedule, never on the scrape path).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import build_config
from agent.daemon.assemble import internal_jobs
from agent.k8s.attribution import JOB_NAME, PodAttribution, attribution_job, wanted
from agent.k8s.devices import ChipIndex, physical_id
from agent.k8s.podresources import PodResourcesClient, PodResourcesError
from collectors.base import ChipRef, NoData, Sample
from tests.support.k8s_podresources_server import FakeKubelet, FakePod

DEFAULT_RESOURCES = ("huawei.com/Ascend910*", "huawei.com/Ascend310P*", "huawei.com/npu")
# An 8 x 910B node as npu-smi info -m shows it: one chip per NPU, logic id = NPU id, no physical ids.
EIGHT = [ChipRef(npu, 0, logic_id=npu) for npu in range(8)]
# An A3 node with a newer driver: two chips (dies) per NPU, each with its physical id.
A3 = [ChipRef(npu, chip, logic_id=2 * npu + chip, phy_id=2 * npu + chip) for npu in range(4) for chip in (0, 1)]


def pod_info(samples: list[Sample]) -> set[tuple[str, ...]]:
    return {tuple(value for _, value in s.labels) for s in samples if s.metric == "npu_pod_info"}


def unmapped(samples: list[Sample]) -> float:
    return next(s.value for s in samples if s.metric == "npuwatch_pod_attribution_unmapped_devices")


def job(kubelet: FakeKubelet, chips: list[ChipRef] = EIGHT, resources: tuple[str, ...] = DEFAULT_RESOURCES,
        timeout_s: float = 2.0) -> PodAttribution:
    return PodAttribution(PodResourcesClient(kubelet.socket, timeout_s), lambda: chips, resources)


def train(name: str, *devices: tuple[str, list[str]], container: str = "worker", namespace: str = "train") -> FakePod:
    return FakePod(namespace, name, {container: list(devices)})


# --- device ID formats ------------------------------------------------------------------------------


@pytest.mark.parametrize(("device_id", "expected"), [
    ("Ascend910-3", 3), ("Ascend910-0", 0), ("Ascend310P-1", 1), ("Ascend910-2c-100-3", 3),
    ("Ascend310P-4c.3cpu-101-0", 0), ("npu-5", 5), ("7", 7), ("Ascend310P-IPro-6", 6),
    ("GPU-fef8089b-4820-abfc-e83e-94318197576e", None), ("Ascend910", None), ("", None), ("Ascend910-x", None),
    ("Ascend910-" + "9" * 80, None),
])
def test_a_device_id_names_the_physical_chip_it_ends_in(device_id: str, expected: int | None) -> None:
    assert physical_id(device_id) == expected


def test_chips_are_found_by_physical_id_when_npu_smi_prints_them_else_by_logic_id() -> None:
    assert ChipIndex.of(A3).basis == "phy_id"
    assert ChipIndex.of(A3).chip("Ascend910-5") == ChipRef(2, 1, logic_id=5, phy_id=5)
    assert ChipIndex.of(EIGHT).basis == "logic_id"
    assert ChipIndex.of(EIGHT).chip("Ascend910-5") == ChipRef(5, 0, logic_id=5)
    assert ChipIndex.of([ChipRef(0, 0)]).chip("Ascend910-0") is None


@pytest.mark.parametrize(("resource", "device_id", "chips", "chip"), [
    ("huawei.com/Ascend910", "Ascend910-3", EIGHT, ("3", "0")),
    ("huawei.com/Ascend910", "Ascend910-3", A3, ("1", "1")),
    ("huawei.com/Ascend310P", "Ascend310P-1", EIGHT, ("1", "0")),
    ("huawei.com/Ascend910-2c", "Ascend910-2c-100-3", EIGHT, ("3", "0")),
    ("huawei.com/Ascend310P-4c.3cpu", "Ascend310P-4c.3cpu-101-0", EIGHT, ("0", "0")),
    ("huawei.com/npu", "npu-5", EIGHT, ("5", "0")),
])
def test_each_resource_names_its_chip_through_a_real_kubelet(
        resource: str, device_id: str, chips: list[ChipRef], chip: tuple[str, str]) -> None:
    with FakeKubelet() as kubelet:
        kubelet.set_pods(train("llm-0", (resource, [device_id])))
        kubelet.allocatable = {resource: [device_id]}
        samples = job(kubelet, chips).collect()
    assert pod_info(samples) == {(*chip, "train", "llm-0", "worker")}
    assert unmapped(samples) == 0


def test_only_the_configured_resources_count_and_others_can_be_configured() -> None:
    with FakeKubelet() as kubelet:
        kubelet.set_pods(
            train("gpu-job", ("nvidia.com/gpu", ["GPU-fef8089b"])),
            train("other-plugin", ("example.com/ascend", ["6"])),
            train("cpu-only", ("example.com/none", [])),
        )
        assert pod_info(job(kubelet).collect()) == set()
        configured = job(kubelet, resources=(*DEFAULT_RESOURCES, "example.com/ascend")).collect()
    assert pod_info(configured) == {("6", "0", "train", "other-plugin", "worker")}


# --- pods come and go -------------------------------------------------------------------------------


def test_pods_come_and_go_and_a_chip_no_pod_holds_has_no_series() -> None:
    with FakeKubelet() as kubelet:
        attribution = job(kubelet)
        assert pod_info(attribution.collect()) == set()

        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"])))
        assert pod_info(attribution.collect()) == {("0", "0", "train", "llm-0", "worker"),
                                                  ("1", "0", "train", "llm-0", "worker")}

        kubelet.set_pods(
            train("llm-0", ("huawei.com/Ascend910", ["Ascend910-0", "Ascend910-1"])),
            FakePod("infer", "svc-7f9c", {"server": [("huawei.com/Ascend910", ["Ascend910-4"])],
                                          "sidecar": [("huawei.com/Ascend910", ["Ascend910-5"])]}),
        )
        assert pod_info(attribution.collect()) == {
            ("0", "0", "train", "llm-0", "worker"), ("1", "0", "train", "llm-0", "worker"),
            ("4", "0", "infer", "svc-7f9c", "server"), ("5", "0", "infer", "svc-7f9c", "sidecar")}

        kubelet.set_pods(FakePod("infer", "svc-7f9c", {"server": [("huawei.com/Ascend910", ["Ascend910-4"])]}))
        assert pod_info(attribution.collect()) == {("4", "0", "infer", "svc-7f9c", "server")}

        kubelet.set_pods()
        assert pod_info(attribution.collect()) == set()


def test_vnpus_of_one_chip_in_two_pods_give_one_series_per_pod() -> None:
    with FakeKubelet() as kubelet:
        kubelet.set_pods(
            train("a", ("huawei.com/Ascend910-2c", ["Ascend910-2c-100-3", "Ascend910-2c-101-3"])),
            train("b", ("huawei.com/Ascend910-4c", ["Ascend910-4c-102-3"])),
        )
        assert pod_info(job(kubelet).collect()) == {("3", "0", "train", "a", "worker"),
                                                   ("3", "0", "train", "b", "worker")}


def test_a_device_that_names_no_chip_is_counted_and_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    with FakeKubelet() as kubelet:
        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-1", "Ascend910-12"])))
        kubelet.allocatable = {"huawei.com/Ascend910": [f"Ascend910-{i}" for i in (*range(8), 12, 13)],
                               "nvidia.com/gpu": ["GPU-1"]}
        attribution = job(kubelet)
        with caplog.at_level(logging.WARNING, logger="agent.k8s.attribution"):
            first = attribution.collect()
            second = attribution.collect()
    assert pod_info(first) == pod_info(second) == {("1", "0", "train", "llm-0", "worker")}
    assert unmapped(first) == unmapped(second) == 2  # Ascend910-12 (held) and Ascend910-13 (free)
    warned = [r.getMessage() for r in caplog.records if "names no chip" in r.getMessage()]
    assert len(warned) == 2, warned
    assert any("'Ascend910-12'" in m and "held by pod train/llm-0" in m for m in warned)


def test_a_kubelet_without_get_allocatable_still_attributes_pods() -> None:
    with FakeKubelet() as kubelet:
        kubelet.allocatable_implemented = False
        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-2", "Ascend910-9"])))
        attribution = job(kubelet)
        samples = attribution.collect()
        again = attribution.collect()
    assert pod_info(samples) == pod_info(again) == {("2", "0", "train", "llm-0", "worker")}
    assert unmapped(samples) == 1


def test_no_chip_list_yet_is_no_data() -> None:
    with FakeKubelet() as kubelet:
        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-1"])))
        with pytest.raises(NoData, match="no chip list"):
            job(kubelet, chips=[]).collect()


# --- the socket vanishes and returns ------------------------------------------------------------------


def test_a_missing_socket_is_no_data_and_attribution_comes_back_with_the_kubelet() -> None:
    kubelet = FakeKubelet()
    attribution = job(kubelet)
    with pytest.raises(NoData, match="no pod-resources socket"):
        attribution.collect()
    with kubelet:
        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-6"])))
        assert pod_info(attribution.collect()) == {("6", "0", "train", "llm-0", "worker")}
        kubelet.stop()  # the kubelet restarts: its socket is gone for a while
        with pytest.raises(NoData):
            attribution.collect()
        kubelet.set_pods(train("llm-1", ("huawei.com/Ascend910", ["Ascend910-7"])))
        kubelet.start()
        assert pod_info(attribution.collect()) == {("7", "0", "train", "llm-1", "worker")}


def test_a_socket_nobody_serves_is_an_error_not_a_hang() -> None:
    import socket

    kubelet = FakeKubelet()
    with socket.socket(socket.AF_UNIX) as stale:  # a socket file left behind by a dead kubelet
        stale.bind(kubelet.socket)
        started = time.monotonic()
        with pytest.raises(PodResourcesError):
            job(kubelet, timeout_s=1.0).collect()
    assert time.monotonic() - started < 5


# --- in the agent: own schedule, never on the scrape path -------------------------------------------


def _agent(tmp_path: Path, kubelet: FakeKubelet, **kubernetes: Any) -> Any:
    from tests.support.agent_harness import demo_bundle

    settings = {"pod_attribution": True, "pod_resources_socket": kubelet.socket, **kubernetes}
    return demo_bundle(tmp_path, {"kubernetes": settings, "collectors": {"hccn_tool": {"enabled": False}}})


def test_a_scrape_during_a_five_second_list_answers_in_milliseconds(tmp_path: Path) -> None:
    from tests.support.agent_harness import get, serving

    with FakeKubelet() as kubelet:
        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-2"])))
        bundle = _agent(tmp_path, kubelet, timeout="20s")
        agent = bundle.agent
        agent.collect_once()
        with serving(bundle) as url:
            status, body, _ = get(url + "/metrics")
            assert status == 200
            assert b'npu_pod_info{chip="0",container="worker",namespace="train",npu="2",pod="llm-0"' in body

            kubelet.list_delay_s = 5.0
            kubelet.set_pods(train("llm-1", ("huawei.com/Ascend910", ["Ascend910-5"])))
            pod_job = agent.internal_job(JOB_NAME)
            assert pod_job is not None
            slow = threading.Thread(target=agent.run_internal, args=(pod_job,))
            calls = kubelet.list_calls
            started = time.monotonic()
            slow.start()
            while kubelet.list_calls == calls:  # the kubelet is now inside the slow List
                time.sleep(0.01)
            latencies = []
            for _ in range(20):
                status, body, seconds = get(url + "/metrics")
                assert status == 200
                latencies.append(seconds)
            assert slow.is_alive(), "the List call ended before the scrapes: the test proves nothing"
            # The scrape serves the last answer while the slow one is awaited.
            assert b'pod="llm-0"' in body and b'pod="llm-1"' not in body
            slow.join(15)
            assert time.monotonic() - started >= 5.0
            latencies.sort()
            # Waiting for the 5 s call would make every scrape take seconds; one slow scrape on a loaded
            # machine is not that (the speed target is bench/agent.py's).
            assert latencies[len(latencies) // 2] < 0.15, latencies
            _, body, _ = get(url + "/metrics")
            assert b'pod="llm-1"' in body and b'pod="llm-0"' not in body


def test_a_list_past_its_timeout_is_an_error_and_the_last_answer_is_kept(tmp_path: Path) -> None:
    with FakeKubelet() as kubelet:
        kubelet.set_pods(train("llm-0", ("huawei.com/Ascend910", ["Ascend910-2"])))
        agent = _agent(tmp_path, kubelet, timeout="500ms").agent
        try:
            agent.collect_once()
            kubelet.list_delay_s = 2.0
            pod_job = agent.internal_job(JOB_NAME)
            assert pod_job is not None
            started = time.monotonic()
            agent.run_internal(pod_job)
            assert time.monotonic() - started < 1.8
            snapshot = agent.store.get(JOB_NAME)
            assert snapshot is not None and not snapshot.ok and snapshot.error_reason == "exit"
            assert "within 0.5s" in (snapshot.error or "")
            body = agent.cache.render().body
            assert b'pod="llm-0"' in body  # served until it is three intervals old
        finally:
            agent.stop()


def test_the_agent_reports_a_missing_socket_as_no_data(tmp_path: Path) -> None:
    kubelet = FakeKubelet()  # never started: no socket
    agent = _agent(tmp_path, kubelet).agent
    try:
        agent.collect_once()
        snapshot = agent.store.get(JOB_NAME)
        assert snapshot is not None and snapshot.no_data and snapshot.error_reason is None
        body = agent.cache.render().body.decode()
        assert 'npuwatch_collector_down_reason{collector="pod_resources",reason="no_data"' in body
        assert "npu_pod_info{" not in body
    finally:
        agent.stop()


def test_attribution_is_off_outside_kubernetes_and_on_inside_by_default() -> None:
    config = build_config({})
    assert config.kubernetes.pod_attribution == "auto"
    assert not wanted("auto", {})
    assert wanted("auto", {"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert wanted(True, {}) and not wanted(False, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"})
    assert attribution_job(build_config({"kubernetes": {"pod_attribution": False}}), list) is None
    names = [j.name for j in internal_jobs(build_config({"kubernetes": {"pod_attribution": True}}))]
    assert JOB_NAME in names


def test_the_config_refuses_a_bad_attribution_setting() -> None:
    from agent.core.config import ConfigError

    with pytest.raises(ConfigError) as refused:
        build_config({"kubernetes": {"pod_attribution": "yes", "interval": "soon", "resources": "huawei.com/npu"}})
    text = str(refused.value)
    assert "kubernetes.pod_attribution: expected true, false or auto" in text
    assert "kubernetes.interval" in text and "kubernetes.resources" in text
