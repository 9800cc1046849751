"""The HCCL/CANN line classifier: formats, categories, timestamps, hints and incident dedup."""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.catalogue import HCCL_CATEGORIES
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.codes import category_of_code
from collectors.hccl.lines import parse_timestamp
from collectors.hccl.rules import classify_line

FIXTURES = Path(__file__).parent / "fixtures" / "hccl_logs"
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
    "ray_stream_sync.log": ({"507046": 1, "EE1002": 1}, set()),
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
        "        wait for compute device to finish failed, runtime result = 507046.[FUNC:ReportCallError]",
    ]
    events, _ = scan(lines)
    assert [e.code for e in events] == ["EE1002", "507046"]
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
    stream = StreamClassifier(ref_time=ref_time)
    events, _ = stream.feed_lines(lines)
    for event in events:
        assert event.category in HCCL_CATEGORIES


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["EI0002: ", "[ERROR] HCCL(1,p):", "[rank0]:[E", "Heartbeat lost! (device=",
                        "Cluster Exception Location[IP/ID]:[", "2024-99-99-99:99:99.999.999 "]),
       st.text(max_size=120))
def test_near_miss_lines_never_raise(prefix: str, tail: str) -> None:
    StreamClassifier(ref_time=REF_2025).feed_lines([prefix + tail, tail, prefix])


def test_info_lines_are_cheap() -> None:
    line = ("[INFO] HCCL(1595259,alltoall_test):2026-01-06-15:38:29.881.877 [externalinput.cc:598] "
            "[1595259][HCCL_ENV] an ordinary message about op AllReduce count[1024] dataType[fp16]")
    stream = StreamClassifier()
    lines = [line] * 100_000
    start = time.perf_counter()
    stream.feed_lines(lines)
    rate = len(lines) / (time.perf_counter() - start)
    assert rate > 200_000  # ~2M lines/s measured on one core; generous for a busy CI box


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
        "        wait for compute device to finish failed, runtime result = 507046."]
    events, _ = scan(lines)
    assert events[-1].code == "507046"
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
