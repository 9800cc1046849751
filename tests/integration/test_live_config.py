"""The install's config writer against a real (demo) npu-smi: the chip count is learned, or left unknown."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.core.live_config import learn_chips, main
from agent.demo.node import DemoNode
from tests.support.paths import REPO


def test_the_chip_count_is_learned_from_npu_smi_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = DemoNode(tmp_path / "demo").open(chips=4)
    npu_smi = str(node.tool_path("npu-smi"))
    assert learn_chips(npu_smi) == (4, f"{npu_smi} info lists 4 chips")
    dest = tmp_path / "config.yaml"
    assert main([str(REPO / "systemd" / "config.example.yaml"), str(dest), "--npu-smi", npu_smi]) == 0
    assert yaml.safe_load(dest.read_text())["expected_chips"] == 4
    assert f"expected_chips: 4 ({npu_smi} info lists 4 chips): check it in {dest}" in capsys.readouterr().err
    with pytest.raises(FileExistsError):  # install.sh keeps an existing config; this never overwrites one
        main([str(REPO / "systemd" / "config.example.yaml"), str(dest), "--npu-smi", npu_smi])


def test_a_node_whose_npu_smi_does_not_answer_keeps_the_count_unknown(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    node = DemoNode(tmp_path / "demo").open(chips=4)
    node.set_fault("npu_smi_crash")
    dest = tmp_path / "config.yaml"
    assert main([str(REPO / "systemd" / "config.example.yaml"), str(dest), "--npu-smi",
                 str(node.tool_path("npu-smi"))]) == 0
    assert yaml.safe_load(dest.read_text())["expected_chips"] == 0
    assert "expected_chips left at 0, unknown (npu-smi exited 1" in capsys.readouterr().err
