"""Settings that would do nothing are named in words: a baseline the level does not use, a server that
cannot be reached, log paths and a kernel log that do not exist."""

from __future__ import annotations

import errno
import socket
import urllib.error
from pathlib import Path

import pytest

from agent.check.runner import RunOptions, resolve_baseline
from agent.cli import main
from agent.core.config import build_config
from agent.core.config_warnings import config_warnings
from agent.core.http_client import connection_problem


def test_a_baseline_given_to_the_quick_level_is_named_as_not_used(tmp_path: Path) -> None:
    config = build_config({})
    missing = str(tmp_path / "nonexistent.json")
    baseline, note = resolve_baseline(config, RunOptions(level="quick", baseline_file=missing), compared=False)
    assert baseline is None and note is not None
    assert f"--baseline {missing} is not used" in note and f"{missing} does not exist" in note
    _, note = resolve_baseline(config, RunOptions(level="quick", prometheus_url=["http://127.0.0.1:9"]),
                               compared=False)
    assert note is not None and "--prometheus http://127.0.0.1:9 is not used" in note
    assert resolve_baseline(config, RunOptions(level="quick"), compared=False) == (None, None)
    # a configured one is for the scheduled medium and long runs: no note on every quick run
    configured = build_config({"check": {"baseline_file": missing}})
    assert resolve_baseline(configured, RunOptions(level="quick"), compared=False) == (None, None)


@pytest.mark.parametrize(("error", "words"), [
    (urllib.error.URLError(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")),
     "connection refused (nothing listens there)"),
    (urllib.error.URLError(socket.timeout("timed out")), "timed out"),
    (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), "host name not found"),
    (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "connection reset by the server"),
    (urllib.error.HTTPError("http://p/api", 503, "Service Unavailable", {}, None),  # type: ignore[arg-type]
     "answered HTTP 503 Service Unavailable"),
    (ValueError("Expecting value: line 1 column 1 (char 0)"), "unreadable answer (Expecting value"),
])
def test_a_connection_problem_is_told_in_words(error: BaseException, words: str) -> None:
    told = connection_problem(error)
    assert told.startswith(words)
    assert "<urlopen error" not in told and "Errno" not in told


def test_check_baseline_says_an_unreachable_prometheus_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.ports import free_port

    assert main(["check-baseline", "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err
    assert "connection refused (nothing listens there)" in err and "urlopen" not in err


def test_check_config_warns_of_log_settings_that_read_nothing(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    config = build_config({"collectors": {"hccl_logs": {"paths": [str(logs)],
                                                        "kernel_log": str(tmp_path / "kern.log")}}})
    warnings = config_warnings(config)
    assert any(f"paths: {logs} does not exist" in line for line in warnings)
    assert any("HCCL log monitoring reads nothing" in line for line in warnings)
    assert any(f"kernel_log: {tmp_path / 'kern.log'} is not a file" in line for line in warnings)
    logs.mkdir()
    (tmp_path / "kern.log").write_text("")
    assert config_warnings(config) == []
    unset = build_config({"collectors": {"hccl_logs": {"paths": [str(logs)]}}})
    assert [line for line in config_warnings(unset) if "kernel_log is not set" in line]
    assert config_warnings(build_config({"collectors": {"hccl_logs": {"enabled": False}}})) == []


def test_check_config_prints_the_warnings_and_stays_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(f"collectors:\n  hccl_logs:\n    paths: [{tmp_path / 'none'}]\n")
    assert main(["check-config", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"warning: collectors.hccl_logs.paths: {tmp_path / 'none'} does not exist" in out
    assert out.rstrip().endswith("valid config (listen 0.0.0.0:9611)")


def test_check_baseline_names_a_report_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexistent.json"
    assert main(["check-baseline", str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"npuwatch check-baseline: {missing}: No such file or directory"
