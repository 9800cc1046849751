"""Pod attribution end to end: a fake kubelet, a demo agent, a real Prometheus, the node dashboard's queries
(the promtool checks of the same joins: tests/integration/test_k8s_join.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dashboards.node_detail import chip, sick_chip_pods_query
from dashboards.queries import substitute
from tests.support.paths import REPO
from tests.support.prom_harness import StartPrometheus


def test_the_panels_name_the_pod_in_a_real_prometheus_scraping_a_demo_agent(
        tmp_path: Path, prometheus: StartPrometheus) -> None:
    """End to end: kubelet -> agent job -> /metrics -> Prometheus -> the node dashboard's queries."""
    import sys

    from tests.support.agent_harness import demo_bundle, serving
    from tests.support.k8s_podresources_server import FakeKubelet, FakePod

    with FakeKubelet() as kubelet:
        kubelet.set_pods(FakePod("train", "llm-0", {"worker": [("huawei.com/Ascend910", ["Ascend910-1",
                                                                                         "Ascend910-2"])]}),
                         FakePod("infer", "svc-a", {"server": [("huawei.com/Ascend910", ["Ascend910-4"])]}))
        bundle = demo_bundle(tmp_path, {"kubernetes": {"pod_attribution": True, "pod_resources_socket": kubelet.socket},
                                        "collectors": {"hccn_tool": {"enabled": False}}})
        subprocess.run([sys.executable, "-m", "agent", "demo", "--demo-dir", str(tmp_path / "demo"), "set", "health",
                        "--npu", "1", "--param", "state=Alarm", "--param", "codes=8C084E00"],
                       capture_output=True, text=True, timeout=60, cwd=REPO, check=True)
        bundle.agent.collect_once()
        with serving(bundle) as url:
            target = url.removeprefix("http://")
            prom = prometheus([target], target_labels={target: {"node": "npu-node-07"}})
            variables = {"node": "npu-node-07", "npu": ".*"}
            sick = prom.wait_for(substitute(sick_chip_pods_query(), variables))
            assert [(r["metric"]["npu"], r["metric"]["namespace"], r["metric"]["pod"], r["metric"]["container"])
                    for r in sick] == [("1", "train", "llm-0", "worker")]
            held = prom.wait_for(substitute(chip("npu_pod_info"), variables))
            assert sorted((r["metric"]["npu"], r["metric"]["pod"]) for r in held) == [
                ("1", "llm-0"), ("2", "llm-0"), ("4", "svc-a")]
