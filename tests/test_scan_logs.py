"""``npuwatch scan-logs``: files and directories, gzip, text and JSON output, exit status."""

from __future__ import annotations

import gzip
import io
import json
import shutil
from pathlib import Path

import pytest

from agent.diagnose.scan_logs import EXIT_ERRORS, EXIT_OK, EXIT_UNREADABLE, main, scan_paths

FIXTURES = Path(__file__).parent / "fixtures" / "hccl_logs"


def run(paths: list[str], as_json: bool) -> tuple[int, str]:
    out = io.StringIO()
    code = main(paths, as_json, out=out)
    return code, out.getvalue()


def test_clean_file_exits_zero() -> None:
    code, text = run([str(FIXTURES / "clean.log")], False)
    assert code == EXIT_OK
    assert "no HCCL/CANN errors found" in text


def test_errors_found_exit_one_with_first_error_counts_and_hints() -> None:
    code, text = run([str(FIXTURES / "job_ei0002_block.log")], False)
    assert code == EXIT_ERRORS
    assert "first error:" in text
    assert "EI0002" in text.split("first error:")[1].splitlines()[0]  # earliest timestamped incident
    assert "exec_timeout" in text
    assert "exception_location" in text and "203.0.113.9/3" in text
    assert "time range:" in text


def test_json_shape(tmp_path: Path) -> None:
    code, text = run([str(FIXTURES)], True)
    assert code == EXIT_ERRORS
    data = json.loads(text)
    for key in ("counts_by_category", "counts_by_code", "first_error", "time_range", "hints", "files"):
        assert key in data
    assert data["counts_by_category"]["exec_timeout"] >= 3
    assert data["counts_by_code"]["EI0002"] == 1
    assert sum(data["counts_by_code"].values()) == data["events_total"]
    assert sum(data["counts_by_category"].values()) == data["events_total"]
    assert data["first_error"]["code"] == "EI0006"  # 2023-01-01, the oldest incident in the fixtures
    assert Path(data["first_error"]["source"]).name == "glued_and_misc.log"
    assert data["time_range"]["start"] <= data["time_range"]["end"]
    names = {Path(f["path"]).name for f in data["files"]}
    assert "device-1234_20250505.log" in names  # recursive
    assert {"kind": "remote_rank", "value": "5", "count": 2} in data["hints"]
    assert data["errors"] == []


def test_gzip_input_is_read(tmp_path: Path) -> None:
    gz = tmp_path / "plog.log.gz"
    with gzip.open(gz, "wb") as handle:
        handle.write((FIXTURES / "plog_connect_timeout.log").read_bytes())
    code, text = run([str(gz)], True)
    assert code == EXIT_ERRORS
    data = json.loads(text)
    assert data["counts_by_category"] == {"connect_timeout": 2}


def test_corrupt_gzip_and_missing_path_exit_two_but_still_report(tmp_path: Path) -> None:
    bad = tmp_path / "broken.log.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    good = tmp_path / "good.log"
    shutil.copy(FIXTURES / "job_sdma.log", good)
    code, text = run([str(bad), str(good), str(tmp_path / "missing")], True)
    assert code == EXIT_UNREADABLE
    data = json.loads(text)
    assert data["counts_by_code"] == {"EI0012": 1}
    assert len(data["errors"]) == 2


def test_binary_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(b"\0\1\2EI0002: [PID: 1] 2025-01-01-00:00:00.000.000 x\n")
    code, text = run([str(tmp_path)], True)
    assert code == EXIT_OK
    assert json.loads(text)["files"][0]["error"] == "binary file skipped"


def test_each_file_is_its_own_stream(tmp_path: Path) -> None:
    for name in ("a.log", "b.log"):
        shutil.copy(FIXTURES / "job_sdma.log", tmp_path / name)
    report = scan_paths([str(tmp_path)])
    assert report.by_code["EI0012"] == 2


def test_no_timestamps_first_error_is_first_read(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("This is an error in init_hcclComm.\n"
                   "[ 12.0] [ascend] [ERROR] Heartbeat lost! (device=2; a)\n")
    code, text = run([str(log)], True)
    data = json.loads(text)
    assert code == EXIT_ERRORS
    assert data["first_error"]["code"] == "comm_init_failed"
    assert data["time_range"] is None


@pytest.mark.parametrize("as_json", [False, True])
def test_empty_directory(tmp_path: Path, as_json: bool) -> None:
    code, text = run([str(tmp_path)], as_json)
    assert code == EXIT_OK
    assert text
