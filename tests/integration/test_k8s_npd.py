"""The node-problem-detector plugin: its config is one NPD can load, and each rule's command gives the
right exit code and message on a healthy demo node and under each demo fault.

NPD's custom plugin protocol: the command's exit status is 0 (OK: the condition is False), 1 (NonOK:
True) or anything else (Unknown); its output, cut to ``max_output_length``, is the condition's message.
The commands run here as NPD runs them (the rule's argv and timeout), with ``python -m agent`` standing
in for the image's ``/usr/local/bin/npuwatch``, the ConfigMap's config file for the pod's mount of it,
and the demo node's flags appended.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import parse_duration
from tests.support.paths import REPO

COMPONENT = REPO / "deploy" / "kubernetes" / "components" / "node-problem-detector"
MONITOR = json.loads((COMPONENT / "npuwatch-monitor.json").read_text(encoding="utf-8"))
POD_CONFIG = REPO / "deploy" / "kubernetes" / "base" / "config.yaml"
OK, NON_OK, UNKNOWN = 0, 1, 2
CONDITIONS = {"NPUUnhealthy": "NPUHealthy", "NPUNetworkUnhealthy": "NPUNetworkHealthy",
              "NPUMemoryUnhealthy": "NPUMemoryHealthy"}


def rule(condition: str) -> dict[str, Any]:
    return next(r for r in MONITOR["rules"] if r["condition"] == condition)


def run_rule(condition: str, demo_dir: Path) -> tuple[int, str]:
    entry = rule(condition)
    args = list(entry["args"])
    args[args.index("--config") + 1] = str(POD_CONFIG)
    argv = [sys.executable, "-m", "agent", *args, "--demo", "--demo-dir", str(demo_dir)]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=parse_duration(entry["timeout"]),
                            cwd=REPO, check=False)
    return result.returncode, result.stdout


def demo_node(tmp_path: Path, *faults: str) -> Path:
    from agent.demo.node import DemoNode

    directory = tmp_path / "demo"
    DemoNode(directory).open(chips=8)
    for fault in faults:
        subprocess.run([sys.executable, "-m", "agent", "demo", "--demo-dir", str(directory), "set", *fault.split()],
                       capture_output=True, text=True, timeout=60, cwd=REPO, check=True)
    return directory


# fault -> {condition: (exit status, message pattern)}; the conditions a fault does not concern stay OK.
SCENARIOS: dict[str, dict[str, tuple[int, str]]] = {
    "": {},
    "health --npu 5 --param state=Alarm --param codes=8C084E00": {
        # cut to 80 characters in the middle, so the handling level to act on is kept
        "NPUUnhealthy": (NON_OK, r"^FAIL chip_health: NPU 5: \.\.\. .*Alarm 8C084E00: 8C084E00 is FreeRestartNPU$")},
    "hccs_error --npu 2": {"NPUUnhealthy": (NON_OK, r"^FAIL hccs: NPU 2: npu-smi -t hccs: HCCS health NOK")},
    "link_down --npu 3": {"NPUNetworkUnhealthy": (NON_OK, r"^FAIL roce_link.*: NPU 3: hccn_tool -i 3 -link -g says DOWN"
                                                          )},
    "hbm_dbe --npu 1": {"NPUMemoryUnhealthy": (NON_OK, r"^FAIL hbm_ecc: NPU 1: npu-smi -t ecc: 1 HBM double-bit error,"
                                                       )},
    "hccn_tool_crash": {"NPUNetworkUnhealthy": (UNKNOWN, r"^UNKNOWN roce_link.*hccn_tool")},
}


@pytest.mark.parametrize("fault", list(SCENARIOS), ids=lambda f: f.split()[0] if f else "healthy")
def test_each_rule_gives_the_right_exit_status_and_message(tmp_path: Path, fault: str) -> None:
    directory = demo_node(tmp_path, *([fault] if fault else []))
    for condition in CONDITIONS:
        status, output = run_rule(condition, directory)
        lines = output.splitlines()
        assert len(lines) == 1 and len(lines[0]) <= MONITOR["pluginConfig"]["max_output_length"], output
        expected_status, pattern = SCENARIOS[fault].get(condition, (OK, r"^OK: [0-9]+ quick checks pass on 8 chips$"))
        assert status == expected_status, (condition, status, output)
        assert re.search(pattern, lines[0]), (condition, output)


def test_a_hung_npu_smi_is_a_problem_for_the_chips_and_unknown_for_the_memory(tmp_path: Path) -> None:
    directory = demo_node(tmp_path, "npu_smi_hang")
    status, output = run_rule("NPUUnhealthy", directory)
    assert (status, output.split(":")[0]) == (NON_OK, "FAIL tools"), output
    assert "npu-smi" in output
    status, output = run_rule("NPUMemoryUnhealthy", directory)
    assert status == UNKNOWN and output.startswith("UNKNOWN"), output
