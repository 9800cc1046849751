"""Demo agents of one HCCL communicator, driven from one thread, and the coordinated hang that makes one
NPU the culprit: what tests/e2e/test_triage_online.py and tests/e2e/test_fleet_layouts.py share.

``npuwatch demo fleet hccl-hang --culprit node-3 --npu 1`` writes one coordinated hang over the demo
nodes (2 NPUs each, one communicator of all ranks): the culprit's NPU loses its RoCE link and goes
silent, every other rank logs EI0002 blocks naming its device IP and rank.
"""

from __future__ import annotations

import io
import json
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from agent.cli import main as npuwatch

NODES = [f"node-{index}" for index in range(1, 5)]
CULPRIT, CULPRIT_NPU, CULPRIT_RANK = "node-3", 1, 5
CHIPS = 2
LOG_SCAN_S = 1.0
TOOLS_S = 2.0

NPU_SMI_OFF = ["npu_smi_usages", "npu_smi_common", "npu_smi_ecc", "npu_smi_health", "npu_smi_memory",
               "npu_smi_board", "npu_smi_hccs", "npu_smi_hccs_bw"]
# link_stat stays on: its change records date the link-down for `npuwatch triage --prometheus`
HCCN_OFF = ["hccn_net_health", "hccn_optical", "hccn_stat", "hccn_speed"]


def node_config(name: str) -> dict[str, Any]:
    return {
        "labels": {"node": name},
        "collectors": {
            "npu_smi": {"interval": f"{TOOLS_S:g}s", "timeout": "3s", "disable": NPU_SMI_OFF},
            "hccn_tool": {"interval": f"{TOOLS_S:g}s", "timeout": "3s", "disable": HCCN_OFF},
            "hccl_logs": {"enabled": True, "interval": f"{LOG_SCAN_S:g}s"},
            "host": {"enabled": False},
        },
    }


class Driver:
    """One thread that runs every agent's log scan each second and its tool groups (then its judgement) every two;
    remembers when each full pass of log scans started and ended."""

    def __init__(self, agents: dict[str, Any]) -> None:
        self.agents = agents
        self.passes: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="triage-driver", daemon=True)

    def start(self) -> None:
        for agent in self.agents.values():
            agent.collect_once()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        tools_due = time.monotonic() + TOOLS_S
        while not self._stop.is_set():
            started = time.time()
            for agent in self.agents.values():
                agent.run_internal_by_name("hccl_logs")
            self.passes.append((started, time.time()))
            if time.monotonic() >= tools_due:
                tools_due = time.monotonic() + TOOLS_S
                for agent in self.agents.values():
                    agent.collect_group("info")
                    agent.collect_group("roce")
                    agent.run_internal_by_name("verdict")  # the node's judgement of the round, as the agent's own
            self._stop.wait(max(0.0, LOG_SCAN_S - (time.time() - started)))

    def first_pass_after(self, moment: float, timeout: float = 20.0) -> float:
        """The end of the first full pass of log scans that started after ``moment``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for started, ended in list(self.passes):
                if started >= moment:
                    return ended
            time.sleep(0.05)
        raise AssertionError(f"no log scan pass after {moment} within {timeout}s")


def run_fleet_fault(dirs: list[Path]) -> dict[str, Any]:
    """The coordinated hang over the demo nodes' directories; the demo's summary (comm, culprit)."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = npuwatch(["demo", "fleet", "hccl-hang", "--culprit", CULPRIT, "--npu", str(CULPRIT_NPU),
                         *map(str, dirs)])
    assert code == 0
    return dict(json.loads(out.getvalue()))


def triage_json(*argv: str) -> tuple[dict[str, Any], int]:
    """``npuwatch triage ARGV --json`` in this process: the report and the exit status."""
    out = io.StringIO()
    with redirect_stdout(out):
        code = npuwatch(["triage", *argv, "--json"])
    return dict(json.loads(out.getvalue())), code
