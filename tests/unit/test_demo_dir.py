"""Where a demo node lives: one directory per user, never another install's running node, and a directory
that cannot be used refused in one line (no traceback)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.cli import main
from agent.demo import discovery
from agent.demo.discovery import AGENT_FILE, default_demo_dir, ensure_demo_dir, this_install
from agent.demo.node import DemoNode
from agent.demo.state import DemoDirUnusable


def test_the_default_demo_directory_is_per_user() -> None:
    assert default_demo_dir({}) == Path(f"/tmp/npuwatch-demo-{os.getuid()}")
    assert default_demo_dir({"NPUWATCH_DEMO_DIR": "/srv/demo"}) == Path("/srv/demo")


def test_a_directory_that_cannot_be_made_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(DemoDirUnusable, match=r"^cannot use .*/afile/demo as a demo directory: Not a directory; "
                                              r"give --demo-dir DIR or set NPUWATCH_DEMO_DIR"):
        ensure_demo_dir(afile / "demo")
    assert main(["check", "--demo-dir", str(afile / "demo")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and err.startswith("npuwatch: cannot use ")


def test_the_default_directory_owned_by_another_user_is_refused(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = tmp_path / "npuwatch-demo-1000"
    theirs.mkdir()
    monkeypatch.setattr(discovery, "DEFAULT_DEMO_DIR", theirs)
    monkeypatch.setattr(discovery.os, "getuid", lambda: theirs.stat().st_uid + 1)
    with pytest.raises(DemoDirUnusable, match="belongs to another user"):
        ensure_demo_dir(theirs)


def test_a_new_demo_directory_is_private(tmp_path: Path) -> None:
    assert ensure_demo_dir(tmp_path / "new").stat().st_mode & 0o777 == 0o700


def test_a_node_served_by_another_installs_agent_is_left_as_it_is(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").open(chips=2)
    theirs = "#!/opt/other-install/venv/bin/python -IS\nprint('their fake')\n"
    node.tool_path("npu-smi").write_text(theirs)
    (node.directory / AGENT_FILE).write_text(json.dumps({"url": "http://127.0.0.1:1/metrics", "pid": os.getppid()}))
    with pytest.raises(DemoDirUnusable, match=rf"^{node.directory} is the demo node of a running agent "
                                              rf"\(pid {os.getppid()}\) of another npuwatch install"):
        node.open(chips=2)
    assert node.tool_path("npu-smi").read_text() == theirs


def test_the_agent_record_names_its_install(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").open(chips=2)
    record = {"url": "http://127.0.0.1:1/metrics", "pid": os.getppid()}
    # The same install started through another name of its interpreter (python3 for python): opened.
    (node.directory / AGENT_FILE).write_text(json.dumps({**record, "install": this_install()}))
    node.tool_path("npu-smi").write_text("#!/same/install/bin/python3 -IS\n")
    node.open(chips=2)
    (node.directory / AGENT_FILE).write_text(json.dumps({**record, "install": "/opt/other/bin/python /opt/other"}))
    with pytest.raises(DemoDirUnusable, match="of another npuwatch install"):
        node.open(chips=2)


def test_a_node_this_install_serves_or_nobody_serves_is_opened(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").open(chips=2)
    ours = node.tool_path("npu-smi").read_text()
    (node.directory / AGENT_FILE).write_text(json.dumps({"url": "http://127.0.0.1:1/metrics", "pid": os.getppid()}))
    before = node.tool_path("npu-smi").stat().st_mtime_ns
    node.open(chips=2)  # the same install: nothing to rewrite, nothing refused
    assert node.tool_path("npu-smi").stat().st_mtime_ns == before
    (node.directory / AGENT_FILE).unlink()
    node.tool_path("npu-smi").write_text("#!/gone/python -IS\n")
    node.open(chips=2)  # nobody serves it: this install takes it over
    assert node.tool_path("npu-smi").read_text() == ours


def test_faults_show_reads_the_demo_node_that_npuwatch_demo_dir_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from agent.handling.escalation import ChipHistory
    from agent.handling.history import FaultHistory

    (tmp_path / "demo" / "state").mkdir(parents=True)
    FaultHistory(tmp_path / "demo" / "state" / "fault_history.json").update(
        lambda chips: {"3:0": ChipHistory({"80E18402": 100.0}, {}, {})})
    monkeypatch.setenv("NPUWATCH_DEMO_DIR", str(tmp_path / "demo"))
    config = tmp_path / "config.yaml"
    config.write_text(f"state_dir: {tmp_path / 'node-state'}\n")
    assert main(["faults", "show", "--config", str(config)]) == 0
    assert "NPU 3 chip 0: 80E18402 active since" in capsys.readouterr().out
