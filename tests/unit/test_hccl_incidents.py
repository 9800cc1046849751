"""Incidents the classifier must neither lose nor merge: unknown HCCL errors, blocks minutes apart.

The fixtures (tests/fixtures/hccl_incidents, README there) reproduce a fleet drill: an HCCL
``[ERROR]`` line in a phrasing no rule knew was reported as "no errors", and a second EI0002 /
507048 block six minutes after the first borrowed the first block's time and was counted as the
same incident, by the agent and by ``scan-logs``.
"""

from __future__ import annotations

import io
from collections import Counter
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.catalogue import HCCL_CATEGORIES
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.hints import Hint
from collectors.hccl.rules import classify_line
from collectors.hccl.tail import iter_line_batches
from tests.support import paths

FIXTURES = paths.FIXTURES / "hccl_incidents"


def local(*parts: int) -> float:
    return datetime(*parts).timestamp()  # type: ignore[arg-type]


def scan_file(name: str) -> tuple[list[Event], list[Hint]]:
    stream = StreamClassifier(source=name)
    return stream.feed_lines((FIXTURES / name).read_text(encoding="utf-8").splitlines())


def rows(events: list[Event]) -> list[tuple[int, str, str, float | None]]:
    """The events by line (an event dated by the next line comes back after that line's events)."""
    return sorted((e.line_no, e.code, e.category, None if e.timestamp is None else round(e.timestamp, 4))
                  for e in events)


def distinct(hints: list[Hint]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for hint in hints:
        if (hint.kind, hint.value) not in seen:
            seen.append((hint.kind, hint.value))
    return seen


FIRST, SECOND = local(2025, 5, 6, 10, 0, 0) + 0.1, local(2025, 5, 6, 10, 6, 0) + 0.2

# file -> every counted event (line, code, category, time) by line, and every distinct hint in order
EXPECTED: dict[str, tuple[list[tuple[int, str, str, float | None]], list[tuple[str, str]]]] = {
    "job_ei0002_twice_6min.log": (
        [(2, "507048", "stream_sync_timeout", round(FIRST, 4)), (5, "EI0002", "exec_timeout", round(FIRST, 4)),
         (21, "507048", "stream_sync_timeout", round(SECOND, 4)), (25, "EI0002", "exec_timeout", round(SECOND, 4))],
        [("remote_rank", "1"), ("remote_rank", "3")],
    ),
    "plog_unknown_roce_completion.log": (
        [(2, "hccl:transport_roce", "other", round(local(2025, 5, 7, 9, 0, 10) + 0.0002, 4))], []),
    "plog_unknown_error_block.log": (
        [(1, "hccl:link_fsm", "other", round(local(2025, 5, 7, 9, 1, 0), 4)),
         (42, "hccl:link_fsm", "other", round(local(2025, 5, 7, 9, 11, 0) + 0.0005, 4))], []),
    "plog_init_and_link_stage.log": (
        [(line, code, category, round(local(2025, 6, 10, hour, minute, 0) + 0.0001, 4))
         for line, code, category, hour, minute in (
             (1, "env_config_error", "init", 8, 0), (2, "ranktable_check_failed", "init", 8, 10),
             (3, "ranktable_ip_mismatch", "init", 8, 20), (4, "parameter_conflict", "desync", 8, 30),
             (6, "port_listen_failed", "init", 8, 40), (7, "topo_exchange_timeout", "rendezvous_timeout", 8, 50),
             (12, "version_conflict", "desync", 9, 0), (13, "EI0005", "desync", 9, 10),
             (16, "p2p_connect_timeout", "connect_timeout", 9, 20))],
        [("missing_rank", "4"), ("missing_rank", "9"), ("missing_rank", "13"), ("remote_rank", "7"),
         ("dst_rank", "6"), ("peer", "192.0.2.70"), ("remote_device", "6")],
    ),
}


def test_every_fixture_has_an_expectation() -> None:
    assert {p.name for p in FIXTURES.glob("*.log")} == set(EXPECTED)


def test_fixture_events_and_hints() -> None:
    for name, (events, hints) in EXPECTED.items():
        found_events, found_hints = scan_file(name)
        assert rows(found_events) == events, name
        assert distinct(found_hints) == hints, name
        assert {e.category for e in found_events} <= set(HCCL_CATEGORIES)


# ------------------------------------------------------------------ the 6-minute case


def scan_logs_like(data: bytes, head: int = 8192, chunk: int = 1 << 20, flush_each: bool = True) -> list[Event]:
    """Feed a file the way ``npuwatch scan-logs`` does: an 8 KiB probe first, then 1 MiB reads, one
    ``feed_lines`` per batch, through ``hccl_tail.iter_line_batches``."""
    stream = io.BytesIO(data)
    first = [stream.read(head)]

    def read(size: int) -> bytes:
        return first.pop() if first else stream.read(size)

    classifier = StreamClassifier(source="job.log")
    events: list[Event] = []
    for lines in iter_line_batches(read, chunk_bytes=chunk):
        events.extend(classifier.feed_lines(lines, flush=flush_each)[0])
    events.extend(classifier.flush())
    return events


def test_two_incidents_six_minutes_apart_count_twice() -> None:
    events, _ = scan_file("job_ei0002_twice_6min.log")
    assert Counter(e.code for e in events) == Counter({"EI0002": 2, "507048": 2})
    second_wrapper = [e for e in events if e.code == "507048"][1]
    assert second_wrapper.timestamp == SECOND  # its own block's time, not the first block's


def test_scan_logs_counts_the_six_minute_case_twice() -> None:
    data = (FIXTURES / "job_ei0002_twice_6min.log").read_bytes()
    assert Counter(e.code for e in scan_logs_like(data)) == Counter({"EI0002": 2, "507048": 2})


@settings(max_examples=60, deadline=None)
@given(head=st.integers(1, 4000), chunk=st.integers(1, 4000))
def test_a_stream_fed_in_pieces_counts_like_one_piece(head: int, chunk: int) -> None:
    """With ``flush=False`` between pieces, where a batch boundary falls changes nothing."""
    data = b"".join((FIXTURES / name).read_bytes() for name in sorted(EXPECTED))
    whole = StreamClassifier(source="job.log").feed_lines(data.decode().splitlines())[0]
    pieces = scan_logs_like(data, head, chunk, flush_each=False)
    assert [(e.line_no, e.code, e.timestamp) for e in pieces] == [(e.line_no, e.code, e.timestamp) for e in whole]


def test_the_agent_counts_both_incidents_when_the_second_arrives_in_a_later_poll() -> None:
    lines = (FIXTURES / "job_ei0002_twice_6min.log").read_text(encoding="utf-8").splitlines()
    stream = StreamClassifier(source="job.log")
    first = stream.feed_lines(lines[:15])[0]
    restored = StreamClassifier.from_state(stream.state(), source="job.log")
    second = restored.feed_lines(lines[15:])[0]
    assert [(e.line_no, e.code) for e in first] == [(5, "EI0002"), (2, "507048")]
    assert [(e.line_no, e.code) for e in second] == [(25, "EI0002"), (21, "507048")]


def test_the_line_that_carries_the_time_leads_its_block() -> None:
    """The wrapper printed before the EI0002 line takes that line's time and comes back after it, so
    a report of the first error names the EI0002 incident, not its wrapper."""
    events, _ = scan_file("job_ei0002_twice_6min.log")
    assert [(e.line_no, e.code) for e in events] == [(5, "EI0002"), (2, "507048"), (25, "EI0002"), (21, "507048")]


# ------------------------------------------------------------------ never silent


def test_an_unknown_hccl_error_line_is_other_with_a_code_from_its_source_file() -> None:
    result = classify_line("[ERROR] HCCL(9,python3):2025-05-07-09:00:10.000.200 [transport_roce.cc:412] "
                           "[3350][Poll][Completion]qp[0x1f] finished with vendor status[12]")
    assert result is not None
    assert result.matches == (("hccl:transport_roce", "other"),)
    assert result.provisional


def test_codes_of_unknown_lines_by_module_and_file() -> None:
    cases = {
        "[ERROR] HCCP(1,p):2025-01-01-00:00:00.000.000 [ra_peer.c:9]tid:1,ra_x : odd": "hccp:ra_peer",
        "[ERROR] ROCE(1,p):2025-01-01-00:00:00.000.000 [hns_roce_lite.c:9]odd": "roce:hns_roce_lite",
        "[ERROR]HCCL(1,p):2025-01-01-00:00:00.000.000[task_exception_handler.cc:908][1]odd": (
            "hccl:task_exception_handler"),
        "[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 no source file here": "hccl",
        "[ERROR] RUNTIME(1,p):2025-01-01-00:00:00.000.000 [stream.cc:9]1 hcom op HcclAllReduce aborted": (
            "runtime:stream"),
        "[ERROR] DEVICE(1,ffff,p):2025-01-01-00:00:00.000.000 [mindspore/ccsrc/a/hccl_adapter.cc:7] Hccl odd": (
            "device:hccl_adapter"),
        "[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 [graph/ge_hcom.cpp:7] HcomBroadcast odd": "ge:ge_hcom",
        "debug/plog/plog-1_2.log:[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [odd.cc:1] [1]odd": "hccl:odd",
    }
    for line, code in cases.items():
        result = classify_line(line)
        assert result is not None and result.matches == ((code, "other"),), line


def test_lines_that_do_not_count_as_hccl_errors() -> None:
    for line in (
        "[ERROR] RUNTIME(1,p):2025-01-01-00:00:00.000.000 [kernel_task.cc:77]1 aclnnMatmul launch failed",
        "[ERROR] ASCENDCL(1,p):2025-01-01-00:00:00.000.000 [tensor_data_transfer.cpp:899]1 acltdtSendTensor: "
        "[Push][Data]failed to send, tdt result = -1",
        "[WARNING] HCCL(1,p):2025-01-01-00:00:00.000.000 [x.cc:1] [1]retry after error",
        "[INFO] HCCL(1,p):2025-01-01-00:00:00.000.000 [x.cc:1] [1]error counters reset",
        "[ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00100 PTA call acl api failed",
    ):
        result = classify_line(line)
        assert result is None or not result.matches, line


def test_a_forty_line_unknown_block_counts_once() -> None:
    lines = [f"[ERROR] HCCL(1,p):2025-01-01-00:00:{i // 10:02d}.{i % 10:03d}.000 [f{i % 3}.cc:{i}] [1]odd {i}"
             for i in range(40)]
    events, _ = StreamClassifier().feed_lines(lines)
    assert [(e.line_no, e.code) for e in events] == [(1, "hccl:f0")]


def test_a_known_phrase_in_the_block_wins_over_the_unknown_lines_before_it() -> None:
    lines = [
        "[ERROR] HCCP(1,p):2025-01-01-00:00:00.000.000 [ra_hdc_rdma.c:1199]tid:1,ra_hdc_rdev_init(1199) : "
        "[init][ra_hdc_rdev]ra hdc message process failed ret(-67) phy_id(0)",
        "[ERROR] HCCP(1,p):2025-01-01-00:00:00.000.100 [ra_odd.c:1]tid:1,odd : unknown",
        "[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.200 [adapter_hccp.cc:647] [1][Init][RaRdma]rdma init fail.",
    ]
    assert [e.code for e in StreamClassifier().feed_lines(lines)[0]] == ["ra_init_failed"]
    unknown_first = [lines[1], lines[2]]
    assert [e.code for e in StreamClassifier().feed_lines(unknown_first)[0]] == ["rdma_init_failed"]


def test_socket_recv_timeout_is_a_rendezvous_when_the_topo_exchange_lines_follow() -> None:
    recv = ("[ERROR] HCCL(1,p):2024-03-28-10:25:50.589.610 [adapter_hccp.cc:872][1][Recv][RaSocket]errNo[0x05000013]"
            " Wait timeout for sockets recv, data[0x1], size[4], recvSize[0]")
    topo = ("[ERROR] HCCL(1,p):2024-03-28-10:25:50.589.711 [topoinfo_exchange_base.cc:104][1][Recv][ClusterInfoMsg]"
            "receive msg length from fdhandle failed, ret[9]")
    assert [(e.code, e.category) for e in StreamClassifier().feed_lines([recv, topo])[0]] == [
        ("topo_detect_failed", "rendezvous_timeout")]
    assert [(e.code, e.category) for e in StreamClassifier().feed_lines([recv])[0]] == [
        ("socket_timeout", "connect_timeout")]


def test_unknown_lines_are_never_lost_at_the_end_of_a_stream() -> None:
    stream = StreamClassifier()
    events, _ = stream.feed("[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [odd.cc:1] [1]odd")
    assert events == []  # held until its block is over ...
    assert [e.code for e in stream.flush()] == ["hccl:odd"]  # ... and counted at the end
