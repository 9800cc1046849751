"""The shipped systemd unit: it verifies cleanly and its exposure score stays low."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from agent.core.config_schema import Config
from tests.support.paths import REPO

UNIT = REPO / "systemd" / "npuwatch.service"
MAX_EXPOSURE = 3.0


def _systemd_analyze() -> str:
    path = shutil.which("systemd-analyze")
    assert path, "systemd-analyze missing: install the Debian package systemd"
    return path


def test_unit_verifies(tmp_path: Path) -> None:
    # verify checks that ExecStart exists: point it at a stand-in for /opt/npuwatch/bin/npuwatch.
    fake = tmp_path / "npuwatch"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    unit = tmp_path / "npuwatch.service"
    unit.write_text(UNIT.read_text().replace("/opt/npuwatch/bin/npuwatch", str(fake)))
    result = subprocess.run([_systemd_analyze(), "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "npuwatch.service" not in result.stderr, result.stderr


def test_exposure_score_stays_at_or_below_target() -> None:
    result = subprocess.run(
        [_systemd_analyze(), "security", "--offline=yes", str(UNIT)],
        capture_output=True, text=True, timeout=60,
    )
    match = re.search(r"Overall exposure level for npuwatch\.service: ([0-9.]+)", result.stdout)
    assert match, result.stdout + result.stderr
    assert float(match.group(1)) <= MAX_EXPOSURE, result.stdout


def test_unit_keeps_the_devices_npu_smi_needs_and_the_contract_paths() -> None:
    text = UNIT.read_text()
    for line in ("DevicePolicy=closed", "DeviceAllow=/dev/davinci_manager rw", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "ProtectHome=read-only", "PrivateTmp=yes", "Restart=on-failure",
                 "ExecStart=/opt/npuwatch/bin/npuwatch run --config /etc/npuwatch/config.yaml"):
        assert line in text, line
    assert re.search(r"^CapabilityBoundingSet=\s*$", text, re.M)
    # ProtectSystem=strict: the default textfile directory must be writable, or textfile mode never works.
    default_dir = Config().textfile.directory
    assert re.search(rf"^ReadWritePaths=-?{re.escape(default_dir)}\s*$", text, re.M), default_dir
    assert re.search(r"^MemoryMax=", text, re.M) and re.search(r"^CPUQuota=", text, re.M)
