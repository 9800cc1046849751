"""The HCCL/CANN line classifier: formats, categories, timestamps, hints and incident dedup."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.catalogue import HCCL_CATEGORIES
from collectors.hccl.classify import Event, StreamClassifier, _RootConnections
from collectors.hccl.codes import category_of_code
from collectors.hccl.hints import Hint
from collectors.hccl.lines import parse_timestamp
from collectors.hccl.rendezvous import MAX_RANKS
from collectors.hccl.rules import classify_line
from tests.support import paths

FIXTURES = paths.FIXTURES / "hccl_logs"
# A reference mtime in 2025 for year-less (glog, syslog) timestamps.
REF_2025 = datetime(2025, 12, 31, 12, 0, 0).timestamp()


def local(*parts: int) -> float:
    return datetime(*parts).timestamp()  # type: ignore[arg-type]


def scan(lines: list[str], **kwargs: object) -> tuple[list[Event], StreamClassifier]:
    stream = StreamClassifier(**kwargs)  # type: ignore[arg-type]
    events, _ = stream.feed_lines(lines)
    return events, stream


def scan_file(name: str) -> tuple[list[Event], set[tuple[str, str]]]:
    stream = StreamClassifier(source=name, ref_time=REF_2025)
    text = (FIXTURES / name).read_text(encoding="utf-8")
    events, hints = stream.feed_lines(text.splitlines())
    return events, {(h.kind, h.value) for h in hints}


# file -> (codes counted with their counts, hints that must be present)
FIXTURE_EXPECTATIONS: dict[str, tuple[dict[str, int], set[tuple[str, str]]]] = {
    "clean.log": ({}, set()),
    "plog_exec_timeout.log": ({"task_exec_timeout": 2}, {("remote_rank", "5")}),
    "job_ei0002_block.log": (
        {"507048": 1, "EI0002": 1, "heartbeat_lost": 1},
        {("exception_location", "203.0.113.9/3"), ("remote_rank", "3")},
    ),
    "plog_connect_timeout.log": (
        {"socket_timeout": 1, "p2p_connect_timeout": 1},
        {("dst_rank", "198.51.100.12/5"), ("link_peer", "198.51.100.12/5"), ("remote_rank", "5"),
         ("peer", "198.51.100.12/5")},
    ),
    "plog_rendezvous.log": ({"topo_exchange_timeout": 1, "EI0015": 1}, set()),
    "job_roce_cqe.log": ({"EI0013": 1}, {("peer", "192.0.2.2/6"), ("peer", "192.0.2.106")}),
    "job_sdma.log": ({"EI0012": 1}, {("remote_rank", "7")}),
    "plog_dispatch.log": ({"task_dispatch_failed": 1, "rdma_wqe_send_failed": 1, "ffts_dispatch_failed": 1}, set()),
    "watchdog_torchrun.log": ({"watchdog": 1}, set()),
    # 507046 and EE1002 are one stream synchronize timeout printed twice: one count
    "ray_stream_sync.log": ({"EE1002": 1}, set()),
    "dmesg_heartbeat.log": ({"device_heartbeat_lost": 1}, {("device", "3")}),
    "plog_heartbeat.log": (
        {"heartbeat_lost": 1, "rank_stuck": 1},
        {("crimer_rank", "192.0.2.7/7"), ("exception_location", "192.0.2.7/7"),
         ("exception_location", "192.0.2.8/8")},
    ),
    "init_failures.log": (
        {"EJ0001": 1, "port_listen_failed": 1, "rdma_init_failed": 1, "EJ0002": 1, "EI0009": 1}, set()),
    "desync.log": ({"EI0005": 1, "tls_inconsistent": 1, "EI0008": 1}, set()),
    "other_codes.log": ({"EI9999": 1, "EI0004": 1}, set()),
    "device-0/device-1234_20250505.log": ({"notify_wait": 1}, {("remote_rank", "6")}),
    "glued_and_misc.log": ({"EI0006": 1, "dispatch_timeout": 1}, set()),
    # The non-HCCL failures that stop a rank (reconstructions, README.md): a phrasing and the code printed
    # after it count apart (like "Task run failed" and EI0002), a second phrasing of the category does not.
    "oom_el0004.log": ({"EL0004": 1}, set()),
    "oom_torch.log": ({"npu_oom": 1}, set()),
    "aicore_exception.log": ({"aicore_exception": 1, "507035": 1, "507014": 1}, set()),
    "operator_kernel.log": ({"operator_error": 1}, set()),
    # 507899 (the driver's internal error) is a symptom: the device_lost reading beside it leads
    "sdma_and_device_lost.log": (
        {"sdma_error": 1, "507013": 1, "device_lost": 2, "507010": 1, "EL0001": 1}, set()),
    "tcp_store.log": ({"tcp_store_error": 1}, set()),
    "init_wrappers.log": ({"dist_hccl_api_failed": 1, "hccl_comm_init_failed": 1, "transport_create_failed": 1,
                           "EI0006": 1}, set()),
    # The packaged error table (collectors/fault_data/cann_errors.json): link and HBM faults, a program and a
    # configuration error, a device the AI CPU could not reach (E39009), an AI CPU exception with an errcode no
    # registry lists (its family's class), an AI Core exception in the 910's wording under the EE9999 envelope;
    # the ERR00100 wrapper and the E39999 envelope of the AI CPU failure count nothing of their own.
    "reference_classes.log": ({"507056": 1, "507053": 1, "EL0003": 1, "E13001": 1, "E39009": 1,
                               "aicpu_exception": 1, "aicore_phrase": 1}, set()),
    "envelopes.log": ({"fftsplus_timeout": 1, "EI0013": 1, "watchdog_exception": 1, "EH0001": 1}, set()),
}


def test_every_fixture_has_an_expectation() -> None:
    on_disk = {str(p.relative_to(FIXTURES)) for p in FIXTURES.rglob("*.log")}
    assert on_disk == set(FIXTURE_EXPECTATIONS)


@pytest.mark.parametrize("name", sorted(FIXTURE_EXPECTATIONS))
def test_fixture_codes_and_hints(name: str) -> None:
    codes, hints = FIXTURE_EXPECTATIONS[name]
    events, found_hints = scan_file(name)
    assert Counter(e.code for e in events) == Counter(codes)
    assert hints <= found_hints
    for event in events:
        assert event.category in HCCL_CATEGORIES
        assert event.source == name


def test_fixture_categories_cover_the_contract() -> None:
    seen = set()
    for name in FIXTURE_EXPECTATIONS:
        seen |= {e.category for e in scan_file(name)[0]}
    assert seen == set(HCCL_CATEGORIES)


# ------------------------------------------------------------------ line formats


@pytest.mark.parametrize(
    ("line", "code", "category"),
    [
        ("[ERROR] HCCL(1,python):2024-03-28-10:25:50.589.610 [adapter_hccp.cc:872][1][Recv][RaSocket]"
         "errNo[0x0000000005000013] Wait timeout for sockets recv, data[0x1]", "socket_timeout",
         "connect_timeout"),
        ("[ERROR]HCCL(1,all_reduce_test):2025-10-23-17:28:06.049.385[task_exception_handler.cc:610][1]"
         "[TaskExecStage][Timeout][Host]Task run failed", "task_exec_timeout", "exec_timeout"),
        ("[ERROR] HCCL(12,python):2021-04-05-11:22:33.444.555 [status:init] [hccl_comm.cc:12][12]"
         "wait socket establish timeout, role[1] rank[3] timeout[120]", "socket_timeout", "connect_timeout"),
        ("EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 The wait execution of the Notify register "
         "times out.", "EI0002", "exec_timeout"),
        ("EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out.", "EI0006", "connect_timeout"),
        ("[PID: 3] 2025-12-04-21:59:08.232.310 Execution Error ROCE CQE(EI0013): An error CQE occurred",
         "EI0013", "roce_cqe"),
        ("RunGraph] failed. Ascend Error Message:EI0002: The wait execution of the Notify register "
         "times out.", "EI0002", "exec_timeout"),
        ("[W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]: ", "507048",
         "stream_sync_timeout"),
        ("[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught collective "
         "operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=3600000) ran for 3600185 "
         "milliseconds before timing out.", "watchdog", "watchdog_timeout"),
        ("(RayWorker pid=123) EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout.", "EE1002",
         "stream_sync_timeout"),
        ("[default0]:EI0015: [PID: 1] 2025-01-01-00:00:00.000.000 topo exchange failed", "EI0015",
         "rendezvous_timeout"),
        ("Aug  1 08:38:31 host kernel: [ 1197.584409] [ascend] [ERROR] [drv_soft_fault] "
         "[heart_beat_judge 318] <kworker/5:1H:39365> Heartbeat lost! (device=1; old_count=1104)",
         "device_heartbeat_lost", "heartbeat"),
        ("[INFO] HCCL(686,python):2025-10-23-07:52:59.191.363 [heartbeat.cc:951] [8970][TaskExecStage]"
         "[HeartbeatAbnormal]local rank [a/1]: crimer rank [b/2] status[LOST] by informer rank [c/3]",
         "heartbeat_lost", "heartbeat"),
        ("[ERROR] HCCL(9,p):2025-05-12-20:55:44.705.025 [task_info.cc:1170]9 fftsplus task execute failed, "
         "err_type=4[fftsplus sdma error]", "sdma_error", "sdma"),
        ("EJ0003: [PID: 1] 2025-01-01-00:00:00.000.000 Failed to bind the IP port.", "EJ0003", "init"),
        ("EI0005: [PID: 1] 2025-01-01-00:00:00.000.000 parameters inconsistent", "EI0005", "desync"),
        ("EI1234: [PID: 1] 2025-01-01-00:00:00.000.000 something else", "EI1234", "other"),
    ],
)
def test_line_formats(line: str, code: str, category: str) -> None:
    result = classify_line(line, REF_2025)
    assert result is not None
    assert (code, category) in result.matches


@pytest.mark.parametrize(
    "line",
    [
        "[INFO] HCCL(1,python):2026-01-06-15:38:29.881.877 [externalinput.cc:598] [1][HCCL_ENV] "
        "HCCL_CONNECT_TIMEOUT set by default to [120]s",
        "        Possible Cause: 1. Check the plog(grep -rn 'error cqe'). EI0002: HCCL_EXEC_TIMEOUT",
        "        Solution: 1. If this error is reported on part of these ranks (timeout)",
        "epoch 3 step 1200/5000 loss=2.34 lr=1e-4",
        "",
        "npu-smi: event state=Heartbeat Lost.",
        "[ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00100 PTA call acl api failed",
    ],
)
def test_lines_that_are_not_errors(line: str) -> None:
    result = classify_line(line, REF_2025)
    assert result is None or not result.matches


def test_rendezvous_socket_timeout_is_not_also_a_connect_timeout() -> None:
    result = classify_line("[ERROR] HCCL(1,p):2024-03-28-10:25:48.427.201 [topoinfo_exchange_server.cc:91]"
                           "[2][Get][Connection]topo exchange server get socket timeout! timeout[120 s]")
    assert result is not None
    assert result.matches == (("topo_exchange_timeout", "rendezvous_timeout"),)


def test_code_categories() -> None:
    assert category_of_code("EI0002") == "exec_timeout"
    assert category_of_code("EJ0002") == "init"
    assert category_of_code("EI9999") == "other"
    assert category_of_code("EE9999") == "other"


# ------------------------------------------------------------------ timestamps


def test_plog_timestamp_with_micro_seconds() -> None:
    ts = parse_timestamp("[ERROR] HCCL(1,p):2024-03-28-10:25:50.589.610 [a.cc:1] x timeStamp:[2020-01-01-"
                         "00:00:00.000.000]")
    assert ts == pytest.approx(local(2024, 3, 28, 10, 25, 50) + 0.589610)


def test_pid_block_and_pta_timestamps() -> None:
    assert parse_timestamp("EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 The wait") == pytest.approx(
        local(2024, 11, 28, 11, 59, 30) + 0.645648)
    assert parse_timestamp("[ERROR] 2025-06-25-10:45:23 (PID:1) ERR00100") == local(2025, 6, 25, 10, 45, 23)


def test_glog_timestamp_takes_the_year_of_the_reference() -> None:
    ts = parse_timestamp("[E324 13:00:25.428029551 compiler_depend.ts:574] x", REF_2025)
    assert ts == pytest.approx(local(2025, 3, 24, 13, 0, 25) + 0.428029551)
    assert parse_timestamp("E1105 22:10:05.5 file.cc:1] x", REF_2025) == pytest.approx(
        local(2025, 11, 5, 22, 10, 5) + 0.5)
    assert parse_timestamp("[E324 13:00:25.4 x.ts:1] y", None) is None


def test_glog_december_line_in_a_january_file_is_last_year() -> None:
    january = local(2026, 1, 2, 0, 0, 0)
    assert parse_timestamp("E1231 23:59:00.0 x.cc:1] y", january) == local(2025, 12, 31, 23, 59, 0)


def test_syslog_and_dmesg_timestamps() -> None:
    syslog = "Aug  1 08:38:31 host kernel: [ 1197.58] x"
    assert parse_timestamp(syslog, REF_2025) == local(2025, 8, 1, 8, 38, 31)
    assert parse_timestamp("[Fri Aug  1 08:38:31 2025] [ascend] x") == local(2025, 8, 1, 8, 38, 31)
    assert parse_timestamp("[ 1197.584409] [ascend] [ERROR] Heartbeat lost!", REF_2025) is None


def test_impossible_dates_give_none() -> None:
    assert parse_timestamp("2024-13-45-25:61:61.000.000 x") is None


# ------------------------------------------------------------------ dedup


def plog(ts: str, message: str) -> str:
    return f"[ERROR] HCCL(1,python):{ts} [x.cc:1] [1]{message}"


def test_same_code_within_the_window_counts_once_and_after_it_again() -> None:
    lines = [
        "EI0002: [PID: 1] 2025-01-01-00:00:00.000.000 The wait execution of the Notify register times out.",
        "EI0002: [PID: 1] 2025-01-01-00:00:30.000.000 The wait execution of the Notify register times out.",
        "EI0002: [PID: 1] 2025-01-01-00:01:00.000.000 The wait execution of the Notify register times out.",
        "EI0002: [PID: 1] 2025-01-01-00:01:01.000.000 The wait execution of the Notify register times out.",
    ]
    events, stream = scan(lines)
    assert [e.line_no for e in events] == [1, 4]
    assert stream.duplicates == 2


def test_window_is_configurable() -> None:
    lines = [plog("2025-01-01-00:00:00.000.000", "[TaskExecStage][Timeout][Host]Task run failed"),
             plog("2025-01-01-00:00:10.000.000", "[TaskExecStage][Timeout][Host]Task run failed")]
    assert len(scan(lines, window_s=5)[0]) == 2
    assert len(scan(lines, window_s=60)[0]) == 1


def test_block_then_plog_lines_then_wrapper_counts_each_code_once() -> None:
    lines = [
        "EI0002: [PID: 1] 2025-01-01-00:00:00.000.000 The wait execution of the Notify register times out. "
        "Reason: remote rank [2].",
        "        TraceBack (most recent call last):",
        "        Notify wait execute failed, device_id=0, stream_id=1",
        plog("2025-01-01-00:00:00.500.000", "[TaskExecStage][Timeout][Host]Task run failed, base info"),
        plog("2025-01-01-00:00:00.500.100", "[TaskExecStage][Timeout][Host]Task run failed, groupRank info"),
        plog("2025-01-01-00:00:00.500.200", "Task run failed, base information is taskType[Notify Wait]"),
        "RuntimeError: NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048",
        "[W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]: ",
    ]
    events, _ = scan(lines)
    assert Counter(e.code for e in events) == Counter({"EI0002": 1, "507048": 1})


def test_different_synthetic_phrasings_of_one_incident_count_once() -> None:
    lines = [
        plog("2025-01-01-00:00:00.000.000", "[Wait][LinkEstablish]wait socket establish timeout, role[1]"),
        plog("2025-01-01-00:00:00.000.100", "   _________________________LINK_ERROR_INFO________"),
        plog("2025-01-01-00:00:40.000.000", "[InitChannelStage][Timeout]Transport init error! remoteRank[0]"),
    ]
    events, _ = scan(lines)
    assert [(e.code, e.category) for e in events] == [("socket_timeout", "connect_timeout")]


def test_untimestamped_lines_dedup_by_block_distance() -> None:
    line = "hccl interface return err ./common/src/hccl_test_common.cc:538, retcode: 7 "
    error = "This is an error in init_hcclComm."
    events, _ = scan([line, error, line, error] + ["filler"] * 70 + [error])
    assert [e.line_no for e in events] == [2, 75]
    assert all(e.timestamp is None for e in events)


def test_continuation_lines_inherit_the_block_timestamp() -> None:
    lines = [
        "EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout.",
        "        TraceBack (most recent call last):",
        "        launch of the next kernel failed, runtime result = 507015.[FUNC:ReportCallError]",
    ]
    events, _ = scan(lines)
    assert [e.code for e in events] == ["EE1002", "507015"]
    expected = local(2024, 9, 3, 16, 50, 0) + 0.041231
    assert events[1].timestamp == events[0].timestamp == pytest.approx(expected)


def test_inheritance_stops_beyond_the_block() -> None:
    lines = ["EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout."] + ["x"] * 100 + [
        "W NPUStream.cpp:409] Warning: NPU warning, error code is 507046[Error]: "]
    events, _ = scan(lines)
    assert events[-1].code == "507046"
    assert events[-1].timestamp is None


def test_state_round_trip_keeps_dedup_across_restarts() -> None:
    first = [plog("2025-01-01-00:00:00.000.000", "[TaskExecStage][Timeout][Host]Task run failed")]
    again = [plog("2025-01-01-00:00:20.000.000", "[TaskExecStage][Timeout][Host]Task run failed")]
    _, stream = scan(first)
    restored = StreamClassifier.from_state(stream.state())
    assert restored.feed_lines(again)[0] == []
    assert restored.line_no == 2
    assert len(StreamClassifier().feed_lines(again)[0]) == 1


@pytest.mark.parametrize("state", [None, {}, {"counted": "junk"}, {"line_no": "x"}, {"counted": {"a": [1]}}])
def test_bad_state_gives_a_fresh_classifier(state: object) -> None:
    stream = StreamClassifier.from_state(state, source="s")  # type: ignore[arg-type]
    assert stream.source == "s"
    assert stream.feed("EI0002: 2025-01-01-00:00:00.000.000 x")[0]


def test_event_to_dict_is_json_ready() -> None:
    events, _ = scan(["[rank1]: EI0006: [PID: 1] 2025-04-08-18:07:20.444.436 Getting socket times out. "
                      "remote rank:[4]"], source="job.log")
    data = events[0].to_dict()
    assert data["code"] == "EI0006"
    assert data["source"] == "job.log"
    assert data["hints"] == [{"kind": "remote_rank", "value": "4"}]
    assert not data["text"].startswith("[rank1]")


# ------------------------------------------------------------------ robustness and speed


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=20), st.none() | st.floats(0, 4e9))
def test_arbitrary_lines_never_raise(lines: list[str], ref_time: float | None) -> None:
    """No exception, and every event is one input line's: at most one per line, numbered in the input's range,
    its text taken from that line, in input order."""
    stream = StreamClassifier(ref_time=ref_time)
    events, _ = stream.feed_lines(lines)
    assert len(events) <= len(lines)
    assert [event.line_no for event in events] == sorted({event.line_no for event in events})
    for event in events:
        assert event.category in HCCL_CATEGORIES
        assert 1 <= event.line_no <= len(lines)
        assert event.text.strip() in lines[event.line_no - 1]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["EI0002: ", "[ERROR] HCCL(1,p):", "[rank0]:[E", "Heartbeat lost! (device=",
                        "Cluster Exception Location[IP/ID]:[", "2024-99-99-99:99:99.999.999 "]),
       st.text(max_size=120))
def test_near_miss_lines_never_raise(prefix: str, tail: str) -> None:
    StreamClassifier(ref_time=REF_2025).feed_lines([prefix + tail, tail, prefix])


def test_info_lines_are_not_incidents() -> None:
    """Most of a plog is INFO noise: none of it is an incident or a hint (its speed: bench/hot_paths.py)."""
    line = ("[INFO] HCCL(1595259,alltoall_test):2026-01-06-15:38:29.881.877 [externalinput.cc:598] "
            "[1595259][HCCL_ENV] an ordinary message about op AllReduce count[1024] dataType[fp16]")
    stream = StreamClassifier()
    assert stream.feed_lines([line] * 1000) == ([], [])


# ------------------------------------------------------------------ dedup boundaries
# Each pair sits just inside and just outside a limit, on both sides in time, so that a change of
# the window, of a comparison or of the abs() around a time difference fails a test.

T0 = "2025-01-01-00:10:00.000.000"


def ei0002(ts: str) -> str:
    return f"EI0002: [PID: 1] {ts} The wait execution of the Notify register times out."


def at(offset_s: float) -> str:
    """The plog time ``offset_s`` seconds (millisecond steps) after ``T0``."""
    base = datetime(2025, 1, 1, 0, 10, 0).timestamp() + offset_s
    whole = int(base // 1)
    millis = round((base - whole) * 1000)
    return datetime.fromtimestamp(whole).strftime("%Y-%m-%d-%H:%M:%S") + f".{millis:03d}.000"


@pytest.mark.parametrize(("offset_s", "counted"), [
    (60.0, 1), (60.001, 2),    # later: the window is inclusive
    (-60.0, 1), (-60.001, 2),  # earlier (interleaved ranks): the same window, by absolute difference
    (0.0, 1),
])
def test_same_code_window_on_both_sides(offset_s: float, counted: int) -> None:
    events, _ = scan([ei0002(T0), ei0002(at(offset_s))])
    assert len(events) == counted
    assert events[0].line_no == 1


@pytest.mark.parametrize(("offset_s", "codes"), [
    (60.0, ["EI0002"]), (60.001, ["EI0002", "task_exec_timeout"]),
    (-60.0, ["EI0002"]), (-60.001, ["EI0002", "task_exec_timeout"]),
])
def test_synthetic_after_an_ascend_code_window(offset_s: float, codes: list[str]) -> None:
    lines = [ei0002(T0), plog(at(offset_s), "[TaskExecStage][Timeout][Host]Task run failed")]
    assert [e.code for e in scan(lines)[0]] == codes


@pytest.mark.parametrize(("gap_lines", "counted"), [(63, 1), (64, 1), (65, 2)])
def test_untimed_events_dedup_within_block_lines(gap_lines: int, counted: int) -> None:
    error = "This is an error in init_hcclComm."
    events, _ = scan([error] + ["filler"] * (gap_lines - 1) + [error])
    assert [e.line_no for e in events] == [1, gap_lines + 1][:counted]
    assert all(e.timestamp is None for e in events)


def test_line_distance_only_looks_back() -> None:
    """A counted line number ahead of the current line (a restored state) is not "near"."""
    stream = StreamClassifier.from_state({"line_no": 0, "counted": {"~init": [None, 50]}})
    events, _ = stream.feed_lines(["This is an error in init_hcclComm."])
    assert [e.code for e in events] == ["comm_init_failed"]


@pytest.mark.parametrize(("distance", "inherits"), [(63, True), (64, True), (65, False)])
def test_timestampless_line_inherits_only_within_block_lines(distance: int, inherits: bool) -> None:
    lines = ["EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout."] + ["x"] * (distance - 1) + [
        "        launch of the next kernel failed, runtime result = 507015."]
    events, _ = scan(lines)
    assert events[-1].code == "507015"
    assert (events[-1].timestamp == events[0].timestamp) is inherits
    assert inherits or events[-1].timestamp is None


WRAPPER = "[W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]: "


def wrapper_between(first_s: float, second_s: float, before: int = 5, after: int = 2) -> list[Event]:
    """A 507048 wrapper ``before`` lines after one timestamped line and ``after`` lines before the next."""
    lines = ([plog(at(first_s), "[TaskExecStage][Timeout][Host]Task run failed")] + ["x"] * (before - 1)
             + [WRAPPER] + ["x"] * (after - 1) + [plog(at(second_s), "[TaskExecStage][Timeout][Host]Task run failed")])
    return [e for e in scan(lines)[0] if e.code == "507048"]


@pytest.mark.parametrize(("second_s", "belongs_to_second"), [
    (60.0, False), (60.001, True),      # no gap: one block, the earlier time; a gap: the nearer line
    (-60.0, False), (-60.001, True),    # the next line printed an earlier time (interleaved): a gap too
])
def test_wrapper_takes_the_time_of_its_own_block(second_s: float, belongs_to_second: bool) -> None:
    (wrapper,) = wrapper_between(0.0, second_s)
    expected = datetime(2025, 1, 1, 0, 10, 0).timestamp() + (second_s if belongs_to_second else 0.0)
    assert wrapper.timestamp == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize(("before", "after", "belongs_to_second"), [(3, 2, True), (2, 3, False), (3, 3, False)])
def test_in_a_gap_the_nearer_block_wins_and_a_tie_stays_with_the_earlier(
        before: int, after: int, belongs_to_second: bool) -> None:
    (wrapper,) = wrapper_between(0.0, 360.0, before, after)
    assert (wrapper.timestamp == datetime(2025, 1, 1, 0, 16, 0).timestamp()) is belongs_to_second


def test_in_a_gap_an_indented_continuation_stays_with_its_block() -> None:
    lines = [ei0002(T0), "        TraceBack (most recent call last):",
             "        wait for compute device to finish failed, runtime result = 507046.",
             ei0002(at(360.0))]
    events, _ = scan(lines)
    assert [(e.code, e.timestamp) for e in events] == [
        ("EI0002", datetime(2025, 1, 1, 0, 10, 0).timestamp()), ("507046", datetime(2025, 1, 1, 0, 10, 0).timestamp()),
        ("EI0002", datetime(2025, 1, 1, 0, 16, 0).timestamp())]


@pytest.mark.parametrize(("after", "belongs_to_second"), [(64, True), (65, False)])
def test_the_next_timestamp_counts_only_within_block_lines(after: int, belongs_to_second: bool) -> None:
    (wrapper,) = wrapper_between(0.0, 360.0, before=70, after=after)
    assert (wrapper.timestamp is not None) is belongs_to_second


# ------------------------------------------------------------------ provisional (fallback) boundaries

UNKNOWN = "[link_fsm.cc:1] [2]unexpected state[3]"


def hccl_error(ts: str, message: str) -> str:
    return f"[ERROR] HCCL(1,python):{ts} {message}"


@pytest.mark.parametrize(("offset_s", "codes"), [
    (60.0, ["task_exec_timeout"]), (60.001, ["hccl:link_fsm", "task_exec_timeout"]),
    (-60.0, ["task_exec_timeout"]), (-60.001, ["hccl:link_fsm", "task_exec_timeout"]),
])
def test_a_recognised_incident_after_an_unknown_line_absorbs_it_within_the_window(
        offset_s: float, codes: list[str]) -> None:
    lines = [hccl_error(T0, UNKNOWN), plog(at(offset_s), "[TaskExecStage][Timeout][Host]Task run failed")]
    assert sorted(e.code for e in scan(lines)[0]) == sorted(codes)


@pytest.mark.parametrize(("offset_s", "codes"), [
    (60.0, ["task_exec_timeout"]), (60.001, ["task_exec_timeout", "hccl:link_fsm"]),
    (-60.0, ["task_exec_timeout"]), (-60.001, ["task_exec_timeout", "hccl:link_fsm"]),
])
def test_an_unknown_line_after_a_recognised_incident_within_the_window_is_part_of_it(
        offset_s: float, codes: list[str]) -> None:
    lines = [plog(T0, "[TaskExecStage][Timeout][Host]Task run failed"), hccl_error(at(offset_s), UNKNOWN)]
    assert [e.code for e in scan(lines)[0]] == codes


@pytest.mark.parametrize(("gap_lines", "codes"), [
    (64, ["task_exec_timeout"]), (65, ["hccl:link_fsm", "task_exec_timeout"])])
def test_a_provisional_block_ends_after_block_lines(gap_lines: int, codes: list[str]) -> None:
    lines = ([hccl_error(T0, UNKNOWN)] + ["x"] * (gap_lines - 1)
             + [plog(at(1.0), "[TaskExecStage][Timeout][Host]Task run failed")])
    assert [e.code for e in scan(lines)[0]] == codes


@pytest.mark.parametrize(("offset_s", "codes"), [
    (-60.0, ["task_exec_timeout"]), (-60.001, ["hccl:link_fsm", "task_exec_timeout"])])
def test_a_provisional_block_ends_at_a_line_outside_the_window_earlier_or_later(
        offset_s: float, codes: list[str]) -> None:
    """A timestamped line more than the window away closes the block before the next line is read."""
    lines = [hccl_error(T0, UNKNOWN), f"[WARNING] HCCL(1,python):{at(offset_s)} [x.cc:1] retry after error",
             plog(at(30.0), "[TaskExecStage][Timeout][Host]Task run failed")]
    assert [e.code for e in scan(lines)[0]] == codes


@pytest.mark.parametrize(("offset_s", "counted"), [(60.0, 1), (60.001, 2), (-60.001, 2)])
def test_unknown_lines_near_each_other_count_once(offset_s: float, counted: int) -> None:
    lines = [hccl_error(T0, UNKNOWN), hccl_error(at(offset_s), "[other_file.cc:9] [2]another unknown thing")]
    assert len(scan(lines)[0]) == counted


def test_an_untimed_unknown_line_is_absorbed_by_an_untimed_incident_after_it() -> None:
    """Without any time near, nearness is by lines, in both directions."""
    lines = ["[ERROR] HCCL(1,python):2025-13-45-00:00:00.000.000 [link_fsm.cc:1] [2]unexpected state[3]",
             "x", "This is an error in init_hcclComm."]
    assert [(e.code, e.timestamp) for e in scan(lines)[0]] == [("comm_init_failed", None)]


def local_epoch(*fields: int) -> float:
    """Epoch seconds of local_epoch (year, month, day, hour, minute, second)."""
    return time.mktime((*fields, 0, 0, -1))


def test_hint_and_event_dictionaries() -> None:
    hint = Hint("remote_rank", "4", 12.5, "job.log")
    assert hint.to_dict() == {"kind": "remote_rank", "value": "4", "timestamp": 12.5, "source": "job.log"}
    event = Event("EI0006", "socket_timeout", 10.0, "text", "job.log", 7, (hint,))
    assert event.to_dict() == {"code": "EI0006", "category": "socket_timeout", "timestamp": 10.0, "text": "text",
                               "source": "job.log", "line_no": 7,
                               "hints": [{"kind": "remote_rank", "value": "4"}]}


@pytest.mark.parametrize(("stamp", "valid"), [
    ("2024-12-31-23:59:59", True), ("2024-01-01-00:00:00", True), ("2024-12-31-23:59:61", True),
    ("2024-13-01-00:00:00", False), ("2024-00-01-00:00:00", False), ("2024-01-32-00:00:00", False),
    ("2024-01-00-00:00:00", False), ("2024-01-01-24:00:00", False), ("2024-01-01-00:60:00", False),
    ("2024-01-01-00:00:62", False),
])
def test_plog_timestamp_field_ranges(stamp: str, valid: bool) -> None:
    assert (parse_timestamp(f"[ERROR] HCCL(1,python):{stamp}.000.000 x") is not None) is valid


def test_plog_timestamp_fraction_and_seconds() -> None:
    expected = local_epoch(2024, 3, 28, 10, 25, 50) + 589 / 1e3 + 610 / 1e6
    assert parse_timestamp("2024-03-28-10:25:50.589.610") == expected
    assert parse_timestamp("2024-03-28-10:25:50") == local_epoch(2024, 3, 28, 10, 25, 50)


def test_glog_fraction_is_added() -> None:
    ref = local_epoch(2024, 3, 30, 0, 0, 0)
    assert parse_timestamp("E0324 13:00:25.428 x", ref) == pytest.approx(local_epoch(2024, 3, 24, 13, 0, 25) + 0.428,
                                                                      abs=1e-6)


def test_year_rollover_threshold_is_two_days_after_the_reference() -> None:
    ref = local_epoch(2024, 6, 10, 12, 0, 0)
    inside = "E0612 11:59:59 x"  # 1 day 23:59:59 after the reference: this year
    assert parse_timestamp(inside, ref) == local_epoch(2024, 6, 12, 11, 59, 59)
    edge = "E0612 12:00:00 x"  # exactly 2 days after: still this year
    assert parse_timestamp(edge, ref) == local_epoch(2024, 6, 12, 12, 0, 0)
    beyond = "E0612 12:00:01 x"  # more than 2 days after: last year's line
    assert parse_timestamp(beyond, ref) == local_epoch(2023, 6, 12, 12, 0, 1)
    assert parse_timestamp("E0609 12:00:00 x", ref) == local_epoch(2024, 6, 9, 12, 0, 0)


def test_syslog_takes_the_reference_year() -> None:
    ref = local_epoch(2023, 8, 2, 0, 0, 0)
    assert parse_timestamp("Aug  1 08:38:31 host kernel: x", ref) == local_epoch(2023, 8, 1, 8, 38, 31)


def test_failed_agents_become_missing_rank_hints_once_each() -> None:
    result = classify_line("[ERROR] HCCL(1,python):2024-03-28-10:25:50.589.610 [a.cc:1] "
                           "Failed to connect agent[3, 5,,3 ,7] timeout")
    assert result is not None
    assert [h for h in result.hints if h[0] == "missing_rank"] == [
        ("missing_rank", "3"), ("missing_rank", "5"), ("missing_rank", "7")]
    listed = classify_line("[ERROR] HCCL(1,x):2024-03-28-10:25:50 connectFailedAgentIdList[9] failed")
    assert listed is not None and ("missing_rank", "9") in listed.hints
    unlisted = classify_line("[ERROR] HCCL(1,x):2024-03-28-10:25:50 connect agent failed")
    assert unlisted is None or not any(kind == "missing_rank" for kind, _ in unlisted.hints)


def test_a_link_error_row_blames_its_first_peer_only() -> None:
    result = classify_line("EI0012: | 10.0.0.1(3) | x | 10.0.0.2(4) | link error timeout")
    assert result is not None
    assert [h for h in result.hints if h[0] == "link_peer"] == [("link_peer", "10.0.0.1/3")]


def test_hints_skip_placeholder_values_and_duplicates() -> None:
    result = classify_line("EI0006: Getting socket times out. remote rank:[4] remoteRank[4] remote rank:[-1]")
    assert result is not None
    assert [h for h in result.hints if h[0] == "remote_rank"] == [("remote_rank", "4")]


def test_root_server_hint_joins_host_and_port() -> None:
    result = classify_line("EI0015: timeout connect server[ 10.0.0.9 : 60000 ] failed")
    assert result is not None
    assert ("root_server", "10.0.0.9:60000") in result.hints


@pytest.mark.parametrize("advice", ["Possible Cause: the peer died. EI0006 timeout",
                                    "Solution: check EI0006 timeout",
                                    "(Please search EI0006: for help) socket times out"])
def test_advice_lines_are_not_incidents(advice: str) -> None:
    assert classify_line(advice) is None


def test_prefixes_are_stripped_up_to_three_deep_and_indentation_is_kept() -> None:
    line = "(RayWorker pid=1) [rank2]: [default0]: EI0006: [PID: 1] 2024-01-01-00:00:00 socket times out"
    result = classify_line(line)
    assert result is not None and result.text.startswith("EI0006:")
    indented = classify_line("[rank2]:     EI0006: 2024-01-01-00:00:00 socket times out")
    assert indented is not None and indented.indented is True
    flush = classify_line("[rank2]: EI0006: 2024-01-01-00:00:00 socket times out")
    assert flush is not None and flush.indented is False
    four = classify_line("(a pid=1) (b pid=2) (c pid=3) (d pid=4) EI0006: x times out")
    assert four is not None and four.text.startswith("(d pid=4)")
    bare = classify_line("  EI0006: socket times out  ")
    assert bare is not None and bare.indented is True and bare.text == "EI0006: socket times out"


def test_classify_line_uses_the_reference_time_and_keeps_hint_only_lines() -> None:
    ref = local_epoch(2024, 3, 30, 0, 0, 0)
    result = classify_line("E0324 13:00:25 EI0006: socket times out", ref)
    assert result is not None and result.timestamp == local_epoch(2024, 3, 24, 13, 0, 25)
    hint_only = classify_line("[INFO] HCCL(1,x): crimer rank [12] is the one")
    assert hint_only is not None and hint_only.matches == () and ("crimer_rank", "12") in hint_only.hints


# --------------------------------------------------------------------------- StreamClassifier

ERR = "[ERROR] HCCL(1,python):2024-01-01-00:00:00.000.000 [topo.cc:1] "


def test_state_round_trip_is_exact_and_defaults_fill_gaps() -> None:
    stream = StreamClassifier(source="s")
    stream.feed("EI0006: 2024-01-01-00:00:00 socket times out")
    stream.feed("untimed EI0002: notify times out")
    stream.flush()
    state = stream.state()
    assert set(state) == {"line_no", "last_ts", "last_ts_line", "counted"}
    assert state["line_no"] == 2 and state["last_ts_line"] == 1
    assert state["last_ts"] == local_epoch(2024, 1, 1, 0, 0, 0)
    assert state["counted"]["EI0006"] == [local_epoch(2024, 1, 1, 0, 0, 0), 1]
    again = StreamClassifier.from_state(json.loads(json.dumps(state)), source="t")
    assert again.state() == state
    assert again.source == "t"
    partial = StreamClassifier.from_state({"counted": {"EI0006": [None, "3"]}})
    assert partial.state() == {"line_no": 0, "last_ts": None, "last_ts_line": -(10**9),
                               "counted": {"EI0006": [None, 3]}}
    assert StreamClassifier.from_state({"line_no": "x"}, source="u").state()["line_no"] == 0
    assert StreamClassifier.from_state({"line_no": 5}).state()["line_no"] == 5
    assert StreamClassifier.from_state({"counted": {"k": [1.0]}}).state()["counted"] == {}
    assert StreamClassifier.from_state(None, block_lines=7).block_lines == 7
    assert StreamClassifier.from_state({"line_no": "bad"}, block_lines=7).block_lines == 7


def test_a_wrapped_exception_location_is_joined_within_the_pending_lines() -> None:
    stream = StreamClassifier(source="s")
    _, first = stream.feed("2024-01-01-00:00:00 EI0006: socket times out. Cluster Exception Location[IP/ID]:[10.0.")
    _, second = stream.feed("0.7/3]")
    assert [(h.kind, h.value, h.source) for h in first + second if h.kind == "exception_location"] == [
        ("exception_location", "10.0.0.7/3", "s")]
    assert [h.timestamp for h in second] == [local_epoch(2024, 1, 1, 0, 0, 0)]


def test_an_unfinished_exception_location_is_dropped_after_the_pending_lines() -> None:
    stream = StreamClassifier()
    stream.feed("EI0006: x times out. Cluster Exception Location[IP/ID]:[10.0.")
    hints = [h for _ in range(10) for h in stream.feed("0")[1]]
    assert hints == []
    assert stream._pending == "" and stream._pending_lines == 0


def test_root_side_connected_lists_name_the_missing_ranks() -> None:
    stream = StreamClassifier(source="root.log")
    lines = [f"{ERR}EI0015: topo exchange timeout, total connected num is [2],line num is [1]",
             f"{ERR}need connect rankNum is [4]",
             f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],[0000000000000002],"]
    hints = [h for line in lines for h in stream.feed(line)[1]]
    assert [(h.kind, h.value, h.source) for h in hints if h.kind == "missing_rank"] == [
        ("missing_rank", "1", "root.log"), ("missing_rank", "3", "root.log")]
    assert stream._root is None


def test_root_side_lists_too_far_apart_start_over() -> None:
    stream = StreamClassifier(block_lines=2)
    stream.feed(f"{ERR}total connected num is [1],line num is [1]")
    stream.feed(f"{ERR}need connect rankNum is [2]")
    _, hints = stream.feed(f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],")
    assert [h.value for h in hints if h.kind == "missing_rank"] == ["1"]  # 2 lines on: still one block
    stream.feed(f"{ERR}total connected num is [1],line num is [1]")
    stream.feed(f"{ERR}need connect rankNum is [2]")
    stream.feed("filler")
    stream.feed("filler")
    _, late = stream.feed(f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],")
    assert [h for h in late if h.kind == "missing_rank"] == []


def test_untimed_lines_inherit_the_last_time_within_block_lines_only() -> None:
    stream = StreamClassifier(block_lines=2)
    stream.feed("2024-01-01-00:00:00 EI0006: socket times out")
    _, near = stream.feed("remote rank:[3] crimer")
    stream.feed("x")
    _, far = stream.feed("remote rank:[5] crimer")
    assert [h.timestamp for h in near] == [local_epoch(2024, 1, 1, 0, 0, 0)]
    assert [h.timestamp for h in far] == [None]


@pytest.mark.parametrize(("gap", "expired_at"), [(3, None), (4, 5)])
def test_an_untimed_event_is_final_once_block_lines_have_passed(gap: int, expired_at: int | None) -> None:
    stream = StreamClassifier(block_lines=3)
    finals = [stream.feed("EI0002: notify times out")[0]]
    finals += [stream.feed("remote rank:[3] crimer")[0] for _ in range(gap)]
    settled = [(line, [(e.code, e.line_no) for e in events]) for line, events in enumerate(finals, 1) if events]
    assert settled == ([] if expired_at is None else [(expired_at, [("EI0002", 1)])])


def test_duplicates_are_counted_per_absorbed_line() -> None:
    stream = StreamClassifier()
    events, _ = stream.feed_lines([f"{ERR}something odd", "EI0006: 2024-01-01-00:00:10 socket times out"])
    assert [(e.code, e.line_no) for e in events] == [("EI0006", 2)]
    assert stream.duplicates == 1
    timed = StreamClassifier()
    events, _ = timed.feed_lines(["EI0006: 2024-01-01-00:00:00 socket times out",
                                  "EI0006: 2024-01-01-00:01:00 socket times out",
                                  "EI0006: 2024-01-01-00:01:01 socket times out"])
    assert [(e.code, e.line_no) for e in events] == [("EI0006", 1), ("EI0006", 3)]
    assert timed.duplicates == 1
    untimed = StreamClassifier(block_lines=2)
    events, _ = untimed.feed_lines(["EI0002: notify times out", "remote rank:[1] crimer", "EI0002: notify times out",
                                    "remote rank:[1] crimer", "remote rank:[1] crimer", "EI0002: notify times out"])
    assert [(e.code, e.line_no) for e in events] == [("EI0002", 1), ("EI0002", 6)]
    assert untimed.duplicates == 1


def test_inheritance_reaches_exactly_block_lines() -> None:
    stream = StreamClassifier(block_lines=2)
    stream.feed("2024-01-01-00:00:00 EI0006: socket times out")
    stream.feed("x")
    _, edge = stream.feed("remote rank:[3] crimer")
    assert [h.timestamp for h in edge] == [local_epoch(2024, 1, 1, 0, 0, 0)]


def test_fallback_code_names_the_file_after_the_header_cut_to_48_characters() -> None:
    result = classify_line(f"[foo.cc:1] {ERR.replace('topo', 'bar')}something odd")
    assert result is not None and result.matches == (("hccl:bar", "other"),)
    long_name = "a" * 60
    cut = classify_line(f"[ERROR] HCCL(1,x):2024-01-01-00:00:00.000.000 [{long_name}.cc:2] something odd")
    assert cut is not None and cut.matches == ((f"hccl:{'a' * 48}", "other"),)


def test_the_stream_dates_year_less_lines_with_its_reference_time() -> None:
    stream = StreamClassifier(ref_time=local_epoch(2023, 3, 30, 0, 0, 0), source="f")
    events, _ = stream.feed_lines(["E0324 13:00:25 EI0006: socket times out"])
    assert [(e.timestamp, e.source) for e in events] == [(local_epoch(2023, 3, 24, 13, 0, 25), "f")]


def test_a_complete_location_is_not_held_for_the_next_line() -> None:
    stream = StreamClassifier()
    _, first = stream.feed("EI0006: x times out. Cluster Exception Location[IP/ID]:[10.0.0.7/3]")
    _, second = stream.feed("Cluster Exception Location[IP/ID]:[10.0.0.8/4]")
    assert [h.value for h in first + second if h.kind == "exception_location"] == ["10.0.0.7/3", "10.0.0.8/4"]
    assert stream._pending == ""


def test_indentation_is_one_blank_and_an_empty_rest_is_nothing() -> None:
    single = classify_line(" EI0006: socket times out")
    assert single is not None and single.indented is True
    under = classify_line("[rank2]:  EI0006: socket times out")
    assert under is not None and under.indented is True and under.text == "EI0006: socket times out"
    assert classify_line("(EI pid=1)") is None


# --------------------------------------------------------------------------- survivors of bench/mutation.py

T0_E = local_epoch(2024, 1, 1, 0, 0, 0)
UNTIMED_OTHER = "[ERROR] HCCL(1,python): [topo.cc:1] something odd"  # provisional: only the fallback code


def _events(events: list[Event]) -> list[tuple[str, float | None, int]]:
    return [(e.code, e.timestamp, e.line_no) for e in events]


def _fed(stream: StreamClassifier, lines: list[str]) -> dict[int, list[tuple[str, float | None, int]]]:
    """The events each line made final, by the number of the line fed (0: the flush), lines without any left out."""
    out = {number: _events(stream.feed(line)[0]) for number, line in enumerate(lines, 1)}
    out[0] = _events(stream.flush())
    return {number: events for number, events in out.items() if events}


def test_a_rendezvous_line_keeps_an_ascend_connect_code_but_not_a_phrased_one() -> None:
    coded = classify_line("EI0015: topo exchange timeout; EI0006: socket times out")
    assert coded is not None
    assert coded.matches == (("EI0015", "rendezvous_timeout"), ("EI0006", "connect_timeout"))
    phrased = classify_line("EI0015: topo exchange timeout; get socket timeout")
    assert phrased is not None and phrased.matches == (("EI0015", "rendezvous_timeout"),)


def test_a_line_carrying_every_hint_trigger_still_yields_its_hints() -> None:
    line = ("remote rank:[3] crimer Cluster Exception dstRank dst_rank | Peer information serverId[ (device= "
            "connect server[")
    result = classify_line(line)
    assert result is not None and result.hints == (("remote_rank", "3"),)


def test_plog_microseconds_are_millionths_of_a_second() -> None:
    # Near the epoch a float resolves nanoseconds; at today's times it could not tell 1/1e6 from 1/1000001.
    assert parse_timestamp("1970-01-02-00:00:00.000.999") == local_epoch(1970, 1, 2, 0, 0, 0) + (0 / 1e3 + 999 / 1e6)


def test_an_untimed_line_midway_between_two_distant_times_takes_the_earlier_and_comes_first() -> None:
    stream = StreamClassifier()
    lines = ["2024-01-01-00:00:00 EI0006: socket times out", "EI0002: notify times out",
             "2024-01-01-00:02:00 EI0006: socket times out"]
    assert _fed(stream, lines) == {1: [("EI0006", T0_E, 1)], 3: [("EI0002", T0_E, 2), ("EI0006", T0_E + 120, 3)]}
    closer_to_next = StreamClassifier()
    lines = ["2024-01-01-00:00:00 EI0006: socket times out", "x", "EI0002: notify times out",
             "2024-01-01-00:02:00 EI0006: socket times out"]
    assert _fed(closer_to_next, lines) == {1: [("EI0006", T0_E, 1)],
                                           4: [("EI0006", T0_E + 120, 4), ("EI0002", T0_E + 120, 3)]}


def test_provisional_events_close_by_line_distance_whatever_their_order() -> None:
    # The untimed line 1 is dated by line 2 and settled after it: the provisional list holds line 2, then line 1.
    stream = StreamClassifier(block_lines=2)
    lines = [UNTIMED_OTHER, f"{ERR}other odd", "remote rank:[3] crimer", "remote rank:[3] crimer"]
    assert _fed(stream, lines) == {4: [("hccl:topo", T0_E, 1)]}
    assert stream.duplicates == 1  # line 2, at the flush: the same incident as line 1


def test_a_provisional_event_stays_open_over_untimed_lines_within_the_block() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = [f"{ERR}something odd", "remote rank:[3] crimer", "2024-01-01-00:00:00 EI0006: socket times out"]
    assert _fed(stream, lines) == {3: [("EI0006", T0_E, 3)]}
    assert stream.duplicates == 1


def test_untimed_events_expire_one_by_one_dated_by_the_time_before_them() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = ["2024-01-01-00:00:00 remote rank:[3] crimer", "EI0002: notify times out", "EI0013: cqe error",
             "remote rank:[4] crimer", "remote rank:[4] crimer", "remote rank:[4] crimer"]
    assert _fed(stream, lines) == {5: [("EI0002", T0_E, 2)], 6: [("EI0013", T0_E, 3)]}
    assert stream.duplicates == 0


def test_an_untimed_repeat_beyond_the_block_of_a_timed_event_counts_again() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = ["2024-01-01-00:00:00 EI0006: socket times out", "x", "x", "EI0006: socket times out"]
    assert _fed(stream, lines) == {1: [("EI0006", T0_E, 1)], 0: [("EI0006", None, 4)]}


def test_an_untimed_phrasing_after_its_ascend_code_is_a_duplicate() -> None:
    stream = StreamClassifier()
    assert _fed(stream, ["EI0006: socket times out", "get socket timeout"]) == {0: [("EI0006", None, 1)]}
    assert stream.duplicates == 1


def test_codes_without_an_ascend_number_are_remembered_by_category() -> None:
    stream = StreamClassifier()
    stream.feed_lines([f"{ERR}something odd"])
    assert stream.state()["counted"] == {"~other": [T0_E, 1]}


def test_an_untimed_provisional_line_after_an_untimed_event_is_its_duplicate() -> None:
    stream = StreamClassifier()
    assert _fed(stream, ["EI0002: notify times out", UNTIMED_OTHER]) == {0: [("EI0002", None, 1)]}
    assert stream.duplicates == 1


def test_a_provisional_line_is_a_duplicate_of_an_untimed_event_just_after_it() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = ["2024-01-01-00:00:00 remote rank:[3] crimer", "x", UNTIMED_OTHER, "EI0002: notify times out"]
    assert _fed(stream, lines) == {0: [("EI0002", None, 4)]}
    assert stream.duplicates == 1


def test_a_provisional_line_two_minutes_after_an_event_is_its_own_incident() -> None:
    # Line 6 (indented) takes the time before it, line 5 the time after it: two minutes apart.
    stream = StreamClassifier()
    lines = ["2024-01-01-00:00:00 remote rank:[3] crimer", "x", "x", "x", UNTIMED_OTHER,
             "    EI0002: notify times out", "2024-01-01-00:02:00 remote rank:[4] crimer"]
    assert _fed(stream, lines) == {7: [("EI0002", T0_E, 6)], 0: [("hccl:topo", T0_E + 120, 5)]}
    assert stream.duplicates == 0


def test_every_absorbed_provisional_line_is_one_duplicate() -> None:
    settled = StreamClassifier()
    settled.feed_lines(["2024-01-01-00:00:00 EI0006: socket times out", f"{ERR}something odd", f"{ERR}other odd"])
    assert settled.duplicates == 2
    closed = StreamClassifier()
    events, _ = closed.feed_lines([f"{ERR}something odd", f"{ERR}other odd",
                                   "2024-01-01-00:00:10 EI0006: socket times out"])
    assert _events(events) == [("EI0006", T0_E + 10, 3)]
    assert closed.duplicates == 2


@pytest.mark.parametrize(("pieces", "found"), [(8, True), (9, False)])
def test_a_wrapped_location_is_joined_over_at_most_eight_lines(pieces: int, found: bool) -> None:
    stream = StreamClassifier(source="s")
    stream.feed("EI0006: x times out. Cluster Exception Location[IP/ID]:[10.0.0.7/")
    digits = "".join(str(n) for n in range(1, pieces))
    hints = [h for piece in [*digits, "]"] for h in stream.feed(piece)[1]]
    assert [(h.kind, h.value) for h in hints] == ([("exception_location", f"10.0.0.7/{digits}")] if found else [])


def test_root_side_without_a_total_line_expects_one_list_line_and_dates_its_hints() -> None:
    stream = StreamClassifier(source="root.log")
    lines = [f"{ERR}need connect rankNum is [3]",
             f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],[0000000000000002],"]
    hints = [h for line in lines for h in stream.feed(line)[1]]
    assert hints == [Hint("missing_rank", "1", T0_E, "root.log")]


def test_line_hints_carry_the_stream_source() -> None:
    stream = StreamClassifier(source="s")
    assert stream.feed("2024-01-01-00:00:00 remote rank:[3] crimer")[1] == [Hint("remote_rank", "3", T0_E, "s")]


def test_the_root_side_block_starts_at_its_first_rendezvous_line() -> None:
    stream = StreamClassifier(block_lines=2)
    lines = [f"{ERR}EI0006: socket times out", f"{ERR}total connected num is [1],line num is [1]",
             f"{ERR}need connect rankNum is [2]", f"{ERR}connected rankinfo[LINE 0]: [0000000000000000],"]
    hints = [h for line in lines for h in stream.feed(line)[1]]
    assert [(h.kind, h.value) for h in hints] == [("missing_rank", "1")]


def test_missing_ranks_are_listed_up_to_the_rank_cap() -> None:
    at_cap = _RootConnections(1, 1, need=MAX_RANKS, lines_seen=1, connected={0})
    missing = at_cap.missing()
    assert missing is not None and (len(missing), missing[0], missing[-1]) == (MAX_RANKS - 1, 1, MAX_RANKS - 1)
    assert _RootConnections(1, 1, need=MAX_RANKS + 1, lines_seen=1).missing() is None
