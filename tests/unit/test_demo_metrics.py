"""What the demo node exports agrees with the metric reference: one HCCS link numbering, and the chips it
expects."""

from __future__ import annotations

import time
from pathlib import Path

from agent.core.config import build_config
from agent.demo.node import DemoNode, demo_overrides
from agent.demo.render_npu_smi import render_kv_type
from agent.demo.state import load_state
from collectors import npu_smi_hccs, npu_smi_hccs_bw
from collectors.base import ChipRef


def test_hccs_bandwidth_errors_and_retries_number_the_links_alike(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=8)
    state, now, chip = load_state(node.directory), time.time(), ChipRef(3, 0)
    health = npu_smi_hccs.samples([npu_smi_hccs.parse(render_kv_type(state, "hccs", 3, 0, now))], chip)
    bandwidth = npu_smi_hccs_bw.samples([npu_smi_hccs_bw.parse(render_kv_type(state, "hccs-bw", 3, 0, now))], chip)

    def links(samples: list, metric: str) -> set[str]:
        return {dict(s.labels)["link"] for s in samples if s.metric == metric}

    counted = links(health, "npu_hccs_errors_total")
    assert counted == links(health, "npu_hccs_retries_total") == links(bandwidth,
                                                                       "npu_hccs_bandwidth_bytes_per_second")
    assert min(counted, key=int) == "0" and len(counted) == 7


def test_the_demo_expects_its_own_chips_unless_the_config_says(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=4)
    assert demo_overrides(node.directory, node.bin_dir, build_config({}), torch_found=True)["expected_chips"] == 4
    given = build_config({"expected_chips": 16})
    assert "expected_chips" not in demo_overrides(node.directory, node.bin_dir, given, torch_found=True)
