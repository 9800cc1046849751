"""``npuwatch check``, ``diagnose`` and ``bundle`` reading the chips as the agent does: through the fake
libdcmi.so (tests/fixtures/dcmi/fake_dcmi.c) with no npu-smi and no hccn_tool on PATH (a container that
mounts only the driver library), and with a hanging library beside the demo's npu-smi, which then
serves every reading within the command's budget. No DCMI helper outlives a command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from agent.demo.node import DemoNode
from tests.support import fake_dcmi as fake
from tests.support.paths import REPO

FakeLibrary = Callable[[str], Path]
CHIPS = 8


def _helpers(library: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with_lib = str(library) in " ".join(proc.info["cmdline"] or ())
        if with_lib and "collectors.dcmi.worker" in " ".join(proc.info["cmdline"] or ()):
            found.append(proc)
    return found


Done = tuple[subprocess.CompletedProcess[str], float]


def _npuwatch(tmp_path: Path, library: Path, args: list[str], *, node: DemoNode | None = None,
              env: dict[str, str] | None = None, timeout: float = 120) -> Done:
    collectors: dict[str, Any] = {"dcmi": {"library": str(library), "lock_file": str(tmp_path / "dcmi.lock")},
                                  "hccl_logs": {"enabled": False}}
    base = {**os.environ, "FAKE_DCMI_CHIPS": str(CHIPS), "PYTHONPATH": str(REPO), **(env or {})}
    if node is None:
        bare = tmp_path / "bin"  # a PATH with no npu-smi and no hccn_tool
        bare.mkdir(exist_ok=True)
        base["PATH"] = str(bare)
    else:
        collectors["npu_smi"] = {"path": str(node.tool_path("npu-smi"))}
        collectors["hccn_tool"] = {"path": str(node.tool_path("hccn_tool"))}
        base.update(node.env())
    config = tmp_path / "npuwatch.yml"
    config.write_text(yaml.safe_dump({"state_dir": str(tmp_path / "state"), "collectors": collectors,
                                      "probes": {"enabled": False}}))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "agent", *args, "--config", str(config)], env=base, cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)
    elapsed = time.monotonic() - started
    assert not _helpers(library), "a DCMI helper outlived the command"
    return done, elapsed


def _check(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(check for check in report["checks"] if check["name"] == name)


def _fake_temperatures() -> dict[int, float]:
    return {chip["card_id"]: float(fake.expected_temperature(chip["logic_id"])) for chip in fake.chip_order(CHIPS)}


def test_check_quick_with_only_the_library_judges_the_fakes_chips(fake_dcmi: FakeLibrary, tmp_path: Path) -> None:
    done, _ = _npuwatch(tmp_path, fake_dcmi("full"), ["check", "--level", "quick", "--json"])
    report = json.loads(done.stdout)
    assert report["chips"] == CHIPS and report["model"] == "910B3", done.stderr
    temperature = _check(report, "temperature")
    assert temperature["status"] == "PASS"
    assert {r["npu"]: r["value"] for r in temperature["results"]} == _fake_temperatures()
    health = _check(report, "chip_health")
    # the fake's health is logic id % 4: 0 OK, 1 Warning, 2 Alarm, 3 Critical
    assert health["status"] == "FAIL" and "NPU 0: " in health["evidence"] and "Critical" in health["evidence"]
    tools = _check(report, "tools")
    assert tools["status"] != "FAIL"  # a missing npu-smi is no fault while DCMI answered
    assert any(r["evidence"].startswith("dcmi: ") for r in tools["results"])


def test_diagnose_with_only_the_library_reads_the_fakes_chips(fake_dcmi: FakeLibrary, tmp_path: Path) -> None:
    done, _ = _npuwatch(tmp_path, fake_dcmi("full"), ["diagnose", "--json", "--sample-gap", "0"])
    report = json.loads(done.stdout or "{}")
    assert "checks" in report, done.stderr
    checks = {check["name"]: check for check in report["checks"]}
    temperatures = {r["npu"]: r["value"] for r in checks["temperature"]["results"] if r.get("value") is not None}
    assert temperatures == _fake_temperatures()
    assert checks["chip_health"]["status"] == "FAIL"


@pytest.mark.parametrize("command", [["check", "--level", "quick", "--json"],
                                     ["diagnose", "--json", "--sample-gap", "0"]])
def test_a_hanging_library_leaves_npu_smi_serving_within_the_budget(
        fake_dcmi: FakeLibrary, tmp_path: Path, command: list[str]) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    done, elapsed = _npuwatch(tmp_path, fake_dcmi("full"), command, node=node,
                              env={"FAKE_DCMI_HANG": "dcmiv2_get_device_health"})
    report = json.loads(done.stdout or "{}")
    assert "checks" in report, done.stderr
    checks = {check["name"]: check for check in report["checks"]}
    temperatures = {r["npu"]: r["value"] for r in checks["temperature"]["results"] if r.get("value") is not None}
    assert len(temperatures) == CHIPS and temperatures != _fake_temperatures()  # the demo's npu-smi answered
    assert checks["chip_health"]["status"] == "PASS"  # the demo's chips are healthy; the fake's are not
    if command[0] == "check":
        assert checks["tools"]["status"] == "PASS"
        assert report["duration_s"] < report["budget_s"]  # one DCMI deadline (check.tool_timeout), then npu-smi
    else:
        assert elapsed < 60  # one DCMI deadline (collectors.dcmi.call_timeout, 5 s), then npu-smi


def test_bundle_with_only_the_library_saves_the_dcmi_records(fake_dcmi: FakeLibrary, tmp_path: Path) -> None:
    out = tmp_path / "bundle.tar.gz"
    done, _ = _npuwatch(tmp_path, fake_dcmi("full"), ["bundle", "--since", "10m", "-o", str(out)])
    assert done.returncode == 0, done.stderr
    with tarfile.open(out) as archive:
        members = {Path(*Path(m.name).parts[1:]).as_posix(): m for m in archive.getmembers()}
        table = json.loads(archive.extractfile(members["tools/dcmi/info.json"]).read())  # type: ignore[union-attr]
        health = json.loads(archive.extractfile(members["tools/dcmi/0-0/health.json"]).read())  # type: ignore[union-attr]
        chips = json.loads(archive.extractfile(members["tools/chips.json"]).read())  # type: ignore[union-attr]
    assert "tools/npu-smi/info.txt" not in members
    assert {row["npu"]: row["temperature_celsius"] for row in table[0]["chips"]} == _fake_temperatures()
    assert health[0]["health"] == "Critical"  # chip 0 is logic id 3
    assert len(chips) == CHIPS
    assert "tools/dcmi/0-0/ecc.json" in members and "tools/dcmi/info-m.json" in members


def test_in_process_the_commands_end_their_helper(fake_dcmi: FakeLibrary, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """As the agent's scheduled check runs them: in a process that lives on, each command ends the helper
    it started (a command run as its own process would also lose it at exit, when its input closes)."""
    from agent.check.runner import RunOptions, run_level
    from agent.core.config import build_config
    from agent.diagnose.engine import DiagnoseOptions, diagnose
    from agent.triage.bundle import BundleOptions, write_bundle

    monkeypatch.setenv("FAKE_DCMI_CHIPS", str(CHIPS))
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_DCMI_LOG", str(log))
    config = build_config({
        "state_dir": str(tmp_path / "state"),
        "collectors": {"dcmi": {"library": str(fake_dcmi("full")), "lock_file": str(tmp_path / "dcmi.lock")},
                       "npu_smi": {"path": str(tmp_path / "no-npu-smi")},
                       "hccn_tool": {"path": str(tmp_path / "no-hccn_tool")},
                       "hccl_logs": {"enabled": False}},
    })
    mine = psutil.Process()

    def helpers() -> list[psutil.Process]:
        return [p for p in mine.children(recursive=True)
                if p.status() != psutil.STATUS_ZOMBIE and "collectors.dcmi.worker" in " ".join(p.cmdline())]

    report = run_level(config, RunOptions(level="quick", only=("temperature",)))
    assert report.chips == CHIPS and not helpers()
    assert diagnose(config, DiagnoseOptions(sample_gap_s=0.0)).checks and not helpers()
    write_bundle(config, BundleOptions(output=tmp_path / "b.tar.gz", metrics=False, since_s=60))
    assert not helpers()
    assert log.read_text().count("dcmiv2_init") + log.read_text().count("dcmi_init") >= 3  # one helper each
