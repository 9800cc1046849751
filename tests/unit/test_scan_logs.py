"""``npuwatch scan-logs``: files and directories, gzip, text and JSON output, exit status."""

from __future__ import annotations

import gzip
import io
import json
import shutil
from pathlib import Path

import pytest

from agent.diagnose.scan_logs import main, scan_paths
from agent.health.status import EXIT_CODES
from tests.support import paths

FIXTURES = paths.FIXTURES / "hccl_logs"


def run(paths: list[str], as_json: bool) -> tuple[int, str]:
    out = io.StringIO()
    code = main(paths, as_json, out=out)
    return code, out.getvalue()

EXIT_OK, EXIT_ERRORS, EXIT_FAIL, EXIT_UNREADABLE = (EXIT_CODES["nagios"][status]
                                                     for status in ("ok", "warn", "fail", "unknown"))


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
    assert code == EXIT_FAIL  # the fixtures hold an SDMA fault and a lost heartbeat
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


def test_corrupt_gzip_and_missing_path_exit_unknown_but_still_report(tmp_path: Path) -> None:
    bad = tmp_path / "broken.log.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    good = tmp_path / "good.log"
    shutil.copy(FIXTURES / "plog_connect_timeout.log", good)
    code, text = run([str(bad), str(good), str(tmp_path / "missing")], True)
    assert code == EXIT_UNREADABLE
    data = json.loads(text)
    assert data["counts_by_category"] == {"connect_timeout": 2}
    assert len(data["errors"]) == 2
    # a fault of the node the readable logs show outranks what could not be read (FAIL > UNKNOWN)
    shutil.copy(FIXTURES / "job_sdma.log", good)
    assert run([str(bad), str(good)], True)[0] == EXIT_FAIL


def test_binary_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(b"\0\1\2EI0002: [PID: 1] 2025-01-01-00:00:00.000.000 x\n")
    code, text = run([str(tmp_path)], True)
    assert code == EXIT_UNREADABLE  # nothing but a binary file: nothing read
    assert json.loads(text)["files"][0]["error"] == "binary file skipped"


def test_each_file_is_its_own_stream(tmp_path: Path) -> None:
    # another process's failure in another file is another incident, however alike (its copy is not: below)
    shutil.copy(FIXTURES / "job_sdma.log", tmp_path / "a.log")
    (tmp_path / "b.log").write_text((FIXTURES / "job_sdma.log").read_text().replace("2020", "2021"))
    report = scan_paths([str(tmp_path)])
    assert report.by_code["EI0012"] == 2
    assert report.copies == 0


def test_a_copy_of_a_failure_in_another_file_counts_once(tmp_path: Path) -> None:
    for name in ("a.log", "a.log.1"):  # a rotated copy, a job log beside its plog: one process's lines twice
        shutil.copy(FIXTURES / "job_sdma.log", tmp_path / name)
    report = scan_paths([str(tmp_path)])
    assert report.by_code["EI0012"] == 1
    assert report.copies >= 1
    assert report.events_total == sum(report.by_category.values())


def test_no_timestamps_first_error_is_first_read(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("This is an error in init_hcclComm.\n"
                   "[ 12.0] [ascend] [ERROR] Heartbeat lost! (device=2; a)\n")
    code, text = run([str(log)], True)
    data = json.loads(text)
    assert code == EXIT_FAIL  # the device's lost heartbeat fails, as check's hccl_errors fails it
    assert data["first_error"]["code"] == "comm_init_failed"
    assert data["time_range"] is None


@pytest.mark.parametrize("as_json", [False, True])
def test_empty_directory(tmp_path: Path, as_json: bool) -> None:
    code, text = run([str(tmp_path)], as_json)
    assert code == EXIT_UNREADABLE  # nothing read is UNKNOWN, never ok
    assert text


# ----------------------------------------------------------------------------- what a person reads


def run_text(paths: list[str], color: str = "never") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(paths, False, out=out, err=err, color=color)
    return code, out.getvalue(), err.getvalue()


def test_each_culprit_hint_names_the_file_and_line_it_came_from(tmp_path: Path) -> None:
    for name in ("job_ei0002_block.log", "job_roce_cqe.log"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    code, text, _ = run_text([str(tmp_path)])
    assert code == EXIT_ERRORS
    hints = text.split("culprit hints (what the logs blame, and where):\n")[1].split("\n\n")[0].splitlines()
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in hints}
    assert rows[("exception_location", "203.0.113.9/3")] == ["x1", f"{tmp_path}/job_ei0002_block.log:8"]
    assert rows[("remote_rank", "3")] == ["x1", f"{tmp_path}/job_ei0002_block.log:5"]
    # one hint read twice in one file: the file once, both lines
    assert rows[("peer", "192.0.2.106")] == ["x2", f"{tmp_path}/job_roce_cqe.log:1,6"]
    lines = (FIXTURES / "job_ei0002_block.log").read_text().splitlines()
    assert "203.0.113.9" in lines[8 - 1] and "[3]" in lines[5 - 1]


def test_a_verdict_and_the_next_step_end_the_text() -> None:
    code, text, _ = run_text([str(FIXTURES / "job_ei0002_block.log")])
    assert code == EXIT_ERRORS
    verdict = text.split("\n\n")[-1].splitlines()
    assert verdict[0].startswith("WARN: 3 HCCL/CANN error incidents in 1 of 1 file; the first: ")
    assert any(line.startswith("  next     ") for line in verdict)
    assert verdict[-1] == "  runbook  https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/HCCLTimeout.md"
    _, clean, _ = run_text([str(FIXTURES / "clean.log")])
    assert clean.splitlines()[-1] == "ok: no HCCL/CANN errors found in 1 file (8 lines)"


@pytest.mark.parametrize("content", [None, b"\0\1binary"], ids=["empty", "binary-only"])
def test_a_scan_that_read_nothing_is_unknown(tmp_path: Path, content: bytes | None) -> None:
    if content is not None:
        (tmp_path / "core").write_bytes(content)
    code, text, err = run_text([str(tmp_path)])
    assert code == EXIT_UNREADABLE  # nothing read is UNKNOWN, never ok
    what = "only binary files" if content else "no files"
    assert f"UNKNOWN: nothing read: {what} under {tmp_path}" in text
    assert err == ""


def test_unreadable_inputs_are_named_on_stderr_not_stdout(tmp_path: Path) -> None:
    bad = tmp_path / "broken.log.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00garbage")
    code, text, err = run_text([str(FIXTURES / "plog_connect_timeout.log"), str(bad), str(tmp_path / "missing")])
    assert code == EXIT_UNREADABLE
    assert not any(line.startswith("error") or str(bad) in line for line in text.splitlines())
    assert err.splitlines()[0].startswith(f"npuwatch scan-logs: cannot read {bad}: ")
    assert err.splitlines()[1] == f"npuwatch scan-logs: cannot read {tmp_path / 'missing'}: no such file or directory"
    assert "2 inputs could not be read (named on stderr), so the scan is incomplete" in " ".join(text.split())
    # --json still carries them in "errors" and names them on stderr too
    out, err_json = io.StringIO(), io.StringIO()
    assert main([str(tmp_path / "missing")], True, out=out, err=err_json) == EXIT_UNREADABLE
    assert json.loads(out.getvalue())["errors"] == [f"{tmp_path / 'missing'}: no such file or directory"]
    assert "cannot read" in err_json.getvalue()


def test_only_unreadable_inputs_are_unknown(tmp_path: Path) -> None:
    code, text, _ = run_text([str(tmp_path / "missing")])
    assert code == EXIT_UNREADABLE
    assert "UNKNOWN: nothing read: 1 input could not be read (named on stderr)" in text


def test_sizes_and_counts_read_as_a_person_writes_them(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    log.write_text("step 1 loss 0.5\n" * 2000)
    _, text, _ = run_text([str(log)])
    assert text.splitlines()[0] == "scanned 1 file, 2,000 lines, 31.2 KiB"
    assert text.splitlines()[-1] == "ok: no HCCL/CANN errors found in 1 file (2,000 lines)"


@pytest.mark.parametrize(("color", "coloured"), [("always", True), ("never", False), ("auto", False)])
def test_colour(color: str, coloured: bool) -> None:
    _, text, _ = run_text([str(FIXTURES / "plog_connect_timeout.log")], color=color)
    assert ("\x1b[1;33mWARN\x1b[0m: " in text) is coloured
    assert ("\x1b" in text) is coloured


def test_help_documents_the_exit_codes() -> None:
    from agent.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices["scan-logs"]
    text = sub.format_help()
    assert "exit status (" in text
    for code, meaning in (("0", "ok"), ("1", "warn"), ("2", "fail"), ("3", "unknown")):
        assert f"  {code}  {meaning}: " in text
    assert "scan-logs" in text and "nothing read or checked" in text
    assert "--color {auto,always,never}" in text


def test_progress_goes_to_a_terminals_stderr_only() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out, err = io.StringIO(), Tty()
    assert main([str(FIXTURES)], True, out=out, err=err) == EXIT_FAIL
    json.loads(out.getvalue())
    assert "| scan-logs" in err.getvalue() and err.getvalue().endswith("\r\x1b[K")


def test_one_sdma_line_is_the_sdma_fault_check_and_diagnose_name(tmp_path: Path) -> None:
    """scan-logs leads as ``check`` and ``diagnose`` do: the hccl_errors check's local fault, FAIL, exit 2."""
    from agent.health.checks_node import check_hccl_errors
    from agent.health.readings import LogScan, NodeReadings, QuickReadings, Reading
    from agent.health.settings import JudgeSettings
    from agent.health.verdict import lead

    code, text = run([str(FIXTURES / "job_sdma.log")], True)
    report = scan_paths([str(FIXTURES / "job_sdma.log")])
    scan = LogScan(window_s=3600.0, roots=[], roots_exist=True, files=1, events=list(report.kept))
    checked = lead([check_hccl_errors(QuickReadings(NodeReadings(table=Reading(error="-"), logs=scan)),
                                      JudgeSettings())])
    verdict = json.loads(text)["verdict"]
    assert (verdict["status"], verdict["cause"], code) == (checked.status, checked.cause, checked.exit_code())
    assert (verdict["status"], verdict["cause"], code) == ("fail", "sdma_fault", EXIT_FAIL)


PROGRAM_LINES = [
    "EL0003: [PID: 4100] 2026-03-02-10:20:00.000.000 The argument is invalid.",
    "E13001: [PID: 4100] 2026-03-02-10:30:00.000.000 Failed to open file [/data/model.om].",
]


def test_a_program_error_alone_is_no_fault_of_the_node(tmp_path: Path) -> None:
    (tmp_path / "job.log").write_text("\n".join(PROGRAM_LINES) + "\n", encoding="utf-8")
    code, text = run([str(tmp_path)], True)
    verdict = json.loads(text)["verdict"]
    assert code == EXIT_OK
    assert verdict["status"] == "ok" and verdict["cause"] == "program_error"
    assert verdict["summary"].startswith("the program failed, the node is fine: 2 HCCL/CANN error incidents")
    assert "nothing on the node needs doing" in verdict["action"]


def test_a_fault_beside_a_program_error_leads_as_check_leads_it(tmp_path: Path) -> None:
    fault = ("[ERROR] RUNTIME(4100,python3):2026-03-02-10:40:00.000.000 [stream.cc:1290]4100 GetError: UCE ERROR, "
             "runtime result = 507053.")
    (tmp_path / "job.log").write_text("\n".join([*PROGRAM_LINES, fault]) + "\n", encoding="utf-8")
    code, text = run([str(tmp_path)], True)
    verdict = json.loads(text)["verdict"]
    assert code == EXIT_FAIL  # an uncorrectable HBM error is a fault of the node, as hccl_errors judges it
    assert verdict["cause"] == "hbm_ecc_fault"
    assert verdict["summary"].endswith("; 2 incidents where the program failed (program_error, config_error)")
