"""Log content, file names, peer addresses and node names are data: scan-logs, diagnose and triage print
their control characters as visible escapes, so a log line cannot clear the screen or draw a fake verdict."""

from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path

import pytest

from agent.cli import build_parser
from agent.core.config import build_config
from agent.core.printable import printable, printable_lines
from agent.core.terminal import Style
from agent.diagnose import engine as diagnose
from agent.diagnose import scan_logs
from agent.diagnose.render import render_text as diagnose_text
from agent.triage import command as triage
from tests.support.diagnose_harness import GAP_S

ATTACK = "\x1b[2J\x1b[1;32mverdict: OK"
SHOWN = "\\x1b[2J\\x1b[1;32mverdict: OK"
_OURS = re.compile(r"\x1b\[[0-9;]*m")  # the colours a Style paints


def _stamp(offset_s: float = 0.0) -> str:
    when = time.time() - 60 + offset_s
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(when)) + ".000.000"


def _hostile_log(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "plog-1_1.log"
    log.write_text(
        f"EI0002: [PID: 1] {_stamp()} The wait execution of the Notify register times out. {ATTACK}\n"
        f"[ERROR] HCCL(1,python3):{_stamp(1)} [transport.cc:1] [1]connect failed remoteIpAddr[{ATTACK}]\n",
        encoding="utf-8")
    return log


def _only_our_escapes(text: str) -> None:
    assert "\x1b[2J" not in text
    assert "\x1b" not in _OURS.sub("", text)
    assert not any(0x80 <= ord(char) <= 0x9F or ord(char) == 0x7F for char in text)


@pytest.mark.parametrize(("text", "shown"), [
    (ATTACK, SHOWN),
    ("a\x00b\x07c\x08d\x7fe\x9bf", "a\\x00b\\x07c\\x08d\\x7fe\\x9bf"),
    ("name\nverdict: OK\r", "name\\x0averdict: OK\\x0d"),
    ("tab\there", "tab\\x09here"),
    ("abc\u202edcba\u2066", "abc\\u202edcba\\u2066"),
    ("29.1.0.10 ÄÖ 日本", "29.1.0.10 ÄÖ 日本"),
])
def test_printable_escapes_every_control_character(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(printable(text)) == printable(text)  # escaping twice changes nothing


def test_printable_lines_keeps_the_lines_and_tabs_of_our_own_text() -> None:
    assert printable_lines(f"one\t{ATTACK}\ntwo\x1b") == f"one\t{SHOWN}\ntwo\\x1b"


@pytest.mark.parametrize("color", ["never", "always"])
def test_scan_logs_prints_a_hostile_log_line_and_peer_as_text(tmp_path: Path, color: str) -> None:
    log = _hostile_log(tmp_path / "logs")
    out, err = io.StringIO(), io.StringIO()
    assert scan_logs.main([str(log.parent)], as_json=False, out=out, err=err, color=color) == 1
    text = out.getvalue()
    _only_our_escapes(text + err.getvalue())
    assert f"    EI0002: [PID: 1] {_stamp()} The wait execution of the Notify register times out. {SHOWN}\n" in text
    assert f"  peer  {SHOWN}  x1    {log}:2\n" in text
    if color == "never":
        assert "\x1b" not in text


def test_scan_logs_escapes_a_file_name_on_stdout_and_stderr(tmp_path: Path) -> None:
    hostile = tmp_path / f"plog{ATTACK}\nfirst error: none.log"
    hostile.write_text(f"EI0002: [PID: 1] {_stamp()} The wait execution of the Notify register times out.\n",
                       encoding="utf-8")
    missing = tmp_path / f"gone{ATTACK}"
    out, err = io.StringIO(), io.StringIO()
    scan_logs.main([str(hostile), str(missing)], as_json=False, out=out, err=err, color="never")
    _only_our_escapes(out.getvalue() + err.getvalue())
    assert f"plog{SHOWN}\\x0afirst error: none.log:1" in out.getvalue()
    assert not any(line.startswith("first error: none") for line in out.getvalue().splitlines())
    assert f"gone{SHOWN}" in err.getvalue()


@pytest.mark.parametrize("color", [False, True])
def test_diagnose_prints_hostile_log_evidence_as_text(tmp_path: Path, color: bool) -> None:
    _hostile_log(tmp_path / "log" / "debug" / "plog")
    config = build_config({"collectors": {"npu_smi": {"path": str(tmp_path / "no-such-npu-smi")},
                                          "dcmi": {"enabled": False},
                                          "hccl_logs": {"paths": [str(tmp_path / "log")]}}})
    report = diagnose.diagnose(config, diagnose.DiagnoseOptions(sample_gap_s=GAP_S))
    assert any(ATTACK in check.evidence for check in report.checks)  # the data keeps what the log said
    text = diagnose_text(report, Style(color))
    _only_our_escapes(text)
    assert SHOWN in text


def test_triage_prints_a_hostile_node_name_from_a_bundle_manifest_as_text(tmp_path: Path) -> None:
    bundle = tmp_path / "node-a"
    (bundle / "logs").mkdir(parents=True)
    (bundle / "manifest.json").write_text(json.dumps({"npuwatch_version": "1", "node": f"node-a{ATTACK}",
                                                      "addresses": [f"29.1.0.10{ATTACK}"]}), encoding="utf-8")
    _hostile_log(bundle / "logs")
    now = time.time()
    os.utime(bundle / "logs" / "plog-1_1.log", (now, now))
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["triage", str(bundle), f"{tmp_path / 'missing'}{ATTACK}"])
    triage.main(args, out=out, err=err)
    text = out.getvalue()
    _only_our_escapes(text + err.getvalue())
    assert "\x1b" not in text
    assert f"node-a{SHOWN}" in text
