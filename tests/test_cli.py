"""The command line as operators type it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent import __version__
from agent.cli import main


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"npuwatch {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for command in ("run", "once", "check-config", "scan-logs", "diagnose", "probe", "demo"):
        assert command in text


def test_demo_faults_can_be_set_before_and_cleared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    demo = tmp_path / "demo"
    assert main(["demo", "--demo-dir", str(demo), "set", "link_down", "--npu", "3"]) == 0
    assert main(["demo", "--demo-dir", str(demo), "set", "health", "--npu", "5",
                 "--param", "state=Alarm", "--param", "codes=8C084E00"]) == 0
    capsys.readouterr()
    assert main(["demo", "--demo-dir", str(demo), "show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["chip_faults"]["3"]["link_down"] is not None
    assert shown["chip_faults"]["5"]["health"]["codes"] == ["8C084E00"]
    assert main(["demo", "--demo-dir", str(demo), "clear", "all"]) == 0
    assert json.loads(capsys.readouterr().out)["chip_faults"] == {}


def test_once_on_the_demo_prints_the_exposition(tmp_path: Path) -> None:
    demo = tmp_path / "demo"
    subprocess.run([sys.executable, "-m", "agent", "demo", "--demo-dir", str(demo), "set", "link_down",
                    "--npu", "1"], check=True, capture_output=True, timeout=60)
    result = subprocess.run([sys.executable, "-m", "agent", "once", "--demo", "--demo-dir", str(demo)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert 'npu_roce_link_up{chip="0",npu="1"} 0.0' in result.stdout
    assert 'npu_roce_link_up{chip="0",npu="0"} 1.0' in result.stdout
    assert "npu_chips 8.0" in result.stdout  # the demo node `demo set` created keeps its 8 chips
