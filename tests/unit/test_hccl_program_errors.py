"""A program or configuration error in the job's logs is reported as such and never marks the node: the program
failed, the node is fine (issue 40). The node check (agent.health.checks_node.check_hccl_errors) reads the
classifier's events; the category's nature (collectors.hccl.codes) decides."""

from __future__ import annotations

from agent.health.checks_node import check_hccl_errors
from agent.health.readings import LogScan, NodeReadings, QuickReadings, Reading
from agent.health.settings import JudgeSettings
from agent.health.status import PASS, WARN
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.codes import CATEGORIES, HCCL_TIMEOUT_CATEGORIES, PROGRAM_CATEGORIES, TRIAGE_FAILURE_CATEGORIES

PROGRAM_LOG = [
    "EL0003: [PID: 4100] 2026-03-02-10:20:00.000.000 The argument is invalid.",
    "[ERROR] ASCENDCL(4100,python3):2026-03-02-10:30:00.000.000 [api.cpp:10]4100 aclrtMemcpy: call failed, "
    "runtime result = 107000.",
    "E13001: [PID: 4100] 2026-03-02-10:40:00.000.000 Failed to open file [/data/model.om].",
]
NODE_LOG = ["[ERROR] RUNTIME(4100,python3):2026-03-02-11:00:00.000.000 [stream.cc:1290]4100 GetError: UCE ERROR, "
            "runtime result = 507053."]


def _events(lines: list[str]) -> list[Event]:
    return StreamClassifier(source="plog-4100.log").feed_lines(lines)[0]


def _check(events: list[Event]):  # type: ignore[no-untyped-def]
    scan = LogScan(window_s=7200.0, roots=["/var/log/npu"], roots_exist=True, files=1, bytes_read=100, events=events)
    readings = QuickReadings(NodeReadings(table=Reading(error="npu-smi: not found"), logs=scan))
    return check_hccl_errors(readings, JudgeSettings())


def test_program_and_configuration_categories_page_nothing_and_open_no_incident() -> None:
    assert {"program_error", "config_error"} == PROGRAM_CATEGORIES
    assert not PROGRAM_CATEGORIES & (HCCL_TIMEOUT_CATEGORIES | TRIAGE_FAILURE_CATEGORIES)
    assert all(not c.pages and not c.diagnose for c in CATEGORIES if c.name in PROGRAM_CATEGORIES)


def test_a_program_error_alone_passes_and_says_the_program_failed() -> None:
    events = _events(PROGRAM_LOG)
    assert [(e.code, e.category) for e in events] == [
        ("EL0003", "program_error"), ("107000", "program_error"), ("E13001", "config_error")]
    check = _check(events)
    assert check.status == PASS
    assert check.evidence.startswith("the program failed, the node is fine: 3 incidents in the last 2 h: "
                                     "program_error x2, config_error x1 (codes EL0003, 107000, E13001")
    assert "nothing on the node needs doing" in check.hint


def test_a_program_error_beside_a_node_fault_leaves_the_fault_to_judge_the_node() -> None:
    check = _check(_events(PROGRAM_LOG + NODE_LOG))
    assert check.status != PASS
    assert "hbm_ecc x1 (code 507053)" in check.evidence and "program_error" not in check.evidence.split(";")[0]
    said = [r for r in check.results if r.status == PASS]
    assert len(said) == 1 and said[0].evidence.startswith("the program failed, the node is fine: 3 incidents")
    assert any(r.kind == "hbm_ecc_fault" for r in check.results)


def test_an_unclassified_error_still_warns() -> None:
    check = _check(_events(["EQ0001: [PID: 9] 2026-03-02-10:40:00.000.100 a module nobody listed"]))
    assert check.status == WARN


def test_a_stream_sync_failure_after_a_device_error_is_its_symptom() -> None:
    aicore = ("EZ9999: [PID: 1] 2026-03-02-10:40:00.100.000 The error from device(chipId:1, dieId:0), serial number "
              "is 3, there is an exception of fftsplus aicore error, core id is 7")
    sync = ("EE1002: [PID: 1] 2026-03-02-10:40:01.000.000 Stream synchronize timeout. stream_id=3, "
            "runtime result = 507046.")
    assert [(e.code, e.category) for e in _events([aicore, sync])] == [("fftsplus_aicore_error", "aicore")]
    # alone it is the host side of an exec timeout, as before
    assert [e.category for e in _events([sync])] == ["stream_sync_timeout"]
