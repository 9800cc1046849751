"""hccn_tool -ip -g as a source: each RoCE port's device IP as npu_roce_ip_info, on the demo too."""

from __future__ import annotations

from pathlib import Path

from tests.support.agent_harness import demo_bundle


def test_the_demo_node_exports_each_port_address(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, chips=2)
    try:
        bundle.agent.collect_once()
        body = bundle.agent.cache.render().body.decode()
    finally:
        bundle.agent.stop()
    lines = sorted(line for line in body.splitlines() if line.startswith("npu_roce_ip_info{"))
    assert lines == [f'npu_roce_ip_info{{address="29.1.{n}.{10 + n}",chip="0",npu="{n}"}} 1.0' for n in (0, 1)]
