"""Communicator facts (``collectors.hccl.comm``) from synthetic plogs, device logs and job output."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.hccl.comm import CommFactParser, parse_line, parse_lines, split_tag
from collectors.hccl.facts import (
    CollectiveFailure,
    CollectiveOp,
    Communicator,
    Fact,
    InitTimeout,
    RankIdentity,
    RootInfoCreated,
    WatchdogTimeout,
)
from collectors.hccl.rendezvous import RendezvousLine, parse_rendezvous
from tests.support import paths

FIXTURES = paths.FIXTURES / "hccl_comm"
REF_2025 = datetime(2025, 12, 31, 12, 0, 0).timestamp()  # dates year-less glog times


def at(*parts: int) -> float:
    """Local epoch of (y, m, d, h, mi, s[, microseconds])."""
    *clock, micros = parts if len(parts) == 7 else (*parts, 0)
    return datetime(*clock).timestamp() + micros / 1e6  # type: ignore[arg-type, misc]


def facts_of(name: str) -> list[Fact]:
    return parse_lines((FIXTURES / name).read_text(encoding="utf-8").splitlines(), REF_2025)


G5, G7 = "group_name_5", "group_name_7"

EXPECTED: dict[str, list[Fact]] = {
    "run_plog_root_rank0.log": [
        RootInfoCreated(6100, 0, at(2025, 8, 1, 9, 0, 1), 2),
        RankIdentity(G5, 0, 16, 0, 6100, root="198.51.100.10:60000", timestamp=at(2025, 8, 1, 9, 0, 1, 100000),
                     shape="comm_init", line_no=3),
        Communicator(G5, 16, 2, 6100, at(2025, 8, 1, 9, 0, 3), 4),
        RankIdentity(G5, 0, 16, None, 6100, "198.51.100.10", 0, "192.0.2.100", timestamp=at(2025, 8, 1, 9, 0, 3, 7),
                     shape="local_rank_key_info", line_no=5),
        CollectiveOp("AllReduce", G5, "AllReduce_group_name_5", 0, 531260224, "float32", "sum", 5, "0x331c9c00", 0,
                     6100, at(2025, 8, 1, 9, 0, 4), 6),
        CollectiveOp("Broadcast", None, "HcomBroadcast_7712_0", 0, 16, "int32", None, 2, "0x331c9c00", 0, 6100,
                     at(2025, 8, 1, 9, 0, 4, 100000), 7),
        RankIdentity(None, 76, 128, 4, 6100, "198.51.100.30", timestamp=at(2025, 8, 1, 9, 10, 0), shape="comm_init",
                     line_no=9),
        RankIdentity("sub_group_3", 2, 8, 4, 6100, "198.51.100.30", timestamp=at(2025, 8, 1, 9, 10, 1),
                     shape="comm_init", line_no=10),
    ],
    "debug_plog_rank9_exec_timeout.log": [
        RankIdentity(G5, 9, 16, 1, 6200, root="198.51.100.10:60000", timestamp=at(2025, 8, 1, 9, 0, 1, 300000),
                     shape="comm_init", line_no=1),
        CollectiveFailure(G5, "AllReduce", 9, at(2025, 8, 1, 9, 40, 36, 500120), stream=5, task=812, index=3071,
                          device=1, tag="AllReduce_group_name_5", rank_size=16, remote_rank=8,
                          issued_at=at(2025, 8, 1, 9, 10, 0, 250000), count=531260224, data_type="float32", pid=6200,
                          line_no=3),
        RankIdentity(G5, 9, 16, 1, 6200, timestamp=at(2025, 8, 1, 9, 40, 36, 500120), shape="task_failure", line_no=3),
    ],
    "debug_plog_root_init_timeout.log": [
        RankIdentity(G7, 0, 16, 0, 6300, root="198.51.100.10:60010", timestamp=at(2025, 8, 2, 11, 0, 0),
                     shape="comm_init", line_no=1),
        InitTimeout("root", G7, 16, (0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 14, 15), (4, 9, 13), None, 600.0, 6300,
                    at(2025, 8, 2, 11, 10, 0, 100000), 2),
        RankIdentity(G7, 0, 16, None, 6300, "198.51.100.10", timestamp=at(2025, 8, 2, 11, 10, 0, 160000),
                     shape="init_failed", line_no=7),
    ],
    "debug_plog_agent_init_timeout.log": [
        RankIdentity(G7, 4, 16, 4, 6400, root="198.51.100.10:60010", timestamp=at(2025, 8, 2, 11, 0, 2),
                     shape="comm_init", line_no=1),
        InitTimeout("agent", G7, 16, None, None, "198.51.100.10:60010", 600.0, 6400, at(2025, 8, 2, 11, 10, 2), 2),
        RankIdentity(G7, 4, 16, None, 6400, "198.51.100.11", timestamp=at(2025, 8, 2, 11, 10, 2, 300),
                     shape="init_failed", line_no=4),
    ],
    "device_log_aicpu_allgather.log": [
        CollectiveFailure("group_name_9", "AllGather", 3, at(2025, 8, 3, 7, 5, 0, 200), stream=38, task=881, index=57,
                          tag="AllGather_group_name_9_device", remote_rank=2, task_type="NOTIFY WAIT", count=4096,
                          data_type="4", pid=7100, line_no=3),
        RankIdentity("group_name_9", 3, None, None, 7100, timestamp=at(2025, 8, 3, 7, 5, 0, 200), shape="task_failure",
                     line_no=3),
    ],
    "job_screen_errors.log": [
        CollectiveFailure("198.51.100.60%eth0_60000_0_1754300000000001", "ReduceScatter", 2,
                          at(2025, 8, 4, 15, 30, 0, 500), stream=11, task=45,
                          tag="ReduceScatter_198.51.100.60%eth0_60000_0_1754300000000001", rank_size=8, remote_rank=6,
                          pid=7301, line_no=2),
        RankIdentity("198.51.100.60%eth0_60000_0_1754300000000001", 2, 8, None, 7301,
                     timestamp=at(2025, 8, 4, 15, 30, 0, 500), shape="task_failure", line_no=2),
        WatchdogTimeout(3, 901, "REDUCE_SCATTER", 1800.0, 1800.412, at(2025, 8, 4, 15, 31, 0, 100000), 4),
    ],
}


def test_every_fixture_has_an_expectation() -> None:
    assert {p.name for p in FIXTURES.glob("*.log")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_facts(name: str) -> None:
    assert facts_of(name) == EXPECTED[name]


def test_ranks_of_one_communicator_join_across_processes() -> None:
    identities = [f for name in EXPECTED for f in facts_of(name) if isinstance(f, RankIdentity) and f.group == G5]
    assert {(f.rank, f.pid) for f in identities} == {(0, 6100), (9, 6200)}


# ------------------------------------------------------------------ single lines


def test_split_tag() -> None:
    assert split_tag("AllReduce_127.10.0.1%enp_60000_0_1761275812718970") == (
        "AllReduce", "127.10.0.1%enp_60000_0_1761275812718970")
    assert split_tag("HcomAllReduce_6629421139219749105_0") == ("AllReduce", None)
    assert split_tag("AllGather") == ("AllGather", None)
    assert split_tag("") == (None, None)
    assert split_tag("_x") == (None, None)


def test_setup_agent_line() -> None:
    line = ("[INFO] HCCL(123,python):2024-03-28-10:23:50.588.335 [topoinfo_detect.cc:208][123][HCCL_TRACE]SetupAgent "
            "rankNum[8], rank[6], rootInfo identifier[g%eth0_60004_4_1], server[192.0.2.41%enp189s0f0], logicDevId[2], "
            "phydevId[6], deviceIp[192.0.2.203]")
    assert parse_line(line) == [RankIdentity("g%eth0_60004_4_1", 6, 8, 2, 123, "192.0.2.41", 6, "192.0.2.203",
                                             timestamp=at(2024, 3, 28, 10, 23, 50, 588335), shape="setup_agent",
                                             line_no=1)]


@pytest.mark.parametrize("line", [
    "[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [op_base.cc:1] [1][Init][CommClusterInfo]HcclCommInitClusterInfo "
    "failed, rankNum[128], rank[76], server[192.0.2.30],device[4], return[0x0000000005000004]",
    "[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [hcom.cc:1] [1][Init][Result]hcom init failed, rankNum[128], "
    "rank[76], server[192.0.2.30], device[4], return[0x0000000005000004]",
])
def test_rank_table_init_failures(line: str) -> None:
    assert parse_line(line) == [RankIdentity(None, 76, 128, 4, 1, "192.0.2.30", timestamp=at(2025, 1, 1, 0, 0, 0),
                                             shape="init_failed", line_no=1)]


def test_grep_prefixed_plog_line_keeps_its_pid_and_time() -> None:
    line = ("run/plog/plog-77_20251024111652406.log:[INFO] HCCL(77,t):2025-10-24-11:16:52.724.374 [op_base.cc:1292] "
            "[77]Entry-HcclCommInitRootInfoInner:ranks[4], rank[2], rootinfo: host ip[192.0.2.1] port[60000] "
            "nicDeploy[1] identifier[g1], deviceLogicId[2]")
    (identity,) = parse_line(line)
    assert isinstance(identity, RankIdentity)
    assert (identity.pid, identity.timestamp, identity.root) == (77, at(2025, 10, 24, 11, 16, 52, 724374),
                                                                 "192.0.2.1:60000")


def test_agent_missing_list_with_the_rank_count_gives_the_connected_ranks() -> None:
    lines = [
        "[ERROR] HCCL(5,t):2025-11-21-01:20:01.630.122 [topoinfo_exchange_base.cc:145] [5][InitGroupStage]"
        "[RanktableDetect] TopoDetect ERROR occur !!! fault_type[1], fault_info[\"Failed to connect agent[0,15,]\"]",
        "[ERROR] HCCL(5,t):2025-11-21-01:20:01.630.557 [topoinfo_exchange_agent.cc:552] [5][InitGroupStage]"
        "[RanktableDetect]rank num[16]is different with rank list size[14] in total topo rank info.",
    ]
    (timeout,) = parse_lines(lines)
    assert timeout == InitTimeout("agent", None, 16, tuple(range(1, 15)), (0, 15), None, None, 5,
                                  at(2025, 11, 21, 1, 20, 1, 630122), 1)


def test_a_root_without_the_rank_count_lists_only_who_connected() -> None:
    lines = [
        "[ERROR] HCCL(8,p):2024-03-28-10:25:48.427.201 [topoinfo_exchange_server.cc:91][8][Get][Connection]topo "
        "exchange server get socket timeout! timeout[120 s]",
        "[ERROR] HCCL(8,p):2024-03-28-10:25:48.427.248 [topoinfo_exchange_server.cc:161][8][TopoInfoExchangeServer]"
        "[DisplayConnectionedRank]total connected num is [2],line num is [1]",
        "[ERROR] HCCL(8,p):2024-03-28-10:25:48.427.268 [topoinfo_exchange_server.cc:174][8][TopoInfoExchangeServer]"
        "[DisplayConnectionedRank]connected rankinfo[LINE 0]: [0000000000000000],[0000000000000003];",
    ]
    (timeout,) = parse_lines(lines)
    assert isinstance(timeout, InitTimeout)
    assert (timeout.role, timeout.expected, timeout.connected, timeout.missing) == ("root", None, (0, 3), None)


def test_blocks_of_one_process_that_go_quiet_are_finished_after_64_lines() -> None:
    parser = CommFactParser()
    block = (FIXTURES / "debug_plog_rank9_exec_timeout.log").read_text(encoding="utf-8").splitlines()
    assert [type(f) for f in parser.feed_lines(block)] == [RankIdentity]  # the failure block is still open
    noise = "[INFO] HCCL(6200,train):2025-08-01-09:40:37.000.000 [x.cc:1] [6210]Entry-HcclCommDestroy: begin"
    assert parser.feed_lines([noise] * 64) == []
    done = parser.feed(noise)
    assert [type(f) for f in done] == [CollectiveFailure, RankIdentity]
    assert parser.finish() == []


def test_a_new_task_of_the_same_process_starts_a_new_failure() -> None:
    lines = (FIXTURES / "debug_plog_rank9_exec_timeout.log").read_text(encoding="utf-8").splitlines()[2:]
    second = [line.replace("taskID[812]", "taskID[813]") for line in lines]
    failures = [f for f in parse_lines(lines + second) if isinstance(f, CollectiveFailure)]
    assert [f.task for f in failures] == [812, 813]


def test_lines_without_facts() -> None:
    for line in (
        "[INFO] HCCL(1,p):2026-01-06-15:38:29.881.877 [externalinput.cc:598] [1][HCCL_ENV] HCCL_CONNECT_TIMEOUT set",
        "[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [transport_manager.cc:1214] [1][TransportManager]"
        "[PrintErrorInfo]local rank information: nicType[VNIC_TYPE], logicSuperPodId is not set",
        "[PID: 1] 2025-12-24-14:10:31.094.189 Execution_Error_SDMA(EI0012): SDMA memory copy task exception occurred. "
        "Remote rank: [4800]. Base information: [streamID:[351], taskID[5], taskType[Memcpy], tag[], AlgType(level "
        "0-1-2):[null-null-null].]. Task information: [src:[0x1], remote rank:[0]]. Communicator information: "
        "[group:[], user define information[], rankSize[0], rankId[0]].",
        "epoch 3 step 1200/5000 loss=2.34",
        "",
    ):
        assert parse_line(line) == [], line


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=12))
def test_arbitrary_lines_never_raise(lines: list[str]) -> None:
    """No exception, and every fact names a line of the input, in input order."""
    facts = parse_lines(lines, REF_2025)
    assert [fact.line_no for fact in facts] == sorted(fact.line_no for fact in facts)
    assert all(1 <= fact.line_no <= len(lines) for fact in facts)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["base information is ", "groupRank information is group:[", "opData information is ",
                        "Entry-HcclAllReduce: tag[", "rankNum[", "connected rankinfo[LINE 0]: ",
                        "total connected num is [", "Failed to connect agent[", "[LocalRank Key Info]",
                        "[Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum="]),
       st.text(max_size=120))
def test_near_miss_lines_never_raise(prefix: str, tail: str) -> None:
    parse_lines(["[ERROR] HCCL(1,p):2025-01-01-00:00:00.000.000 [x.cc:1] " + prefix + tail, prefix + tail, tail])


def test_info_noise_states_no_fact() -> None:
    """An op-finished INFO line passes the substring pre-filter but states nothing (its speed: bench/hot_paths.py)."""
    line = ("[INFO] HCCL(1595259,alltoall_test):2026-01-06-15:38:29.881.877 [hccl_op.cc:598] "
            "[1595259][AllReduce] op finished, tag[AllReduce_198.51.100.1%eth0_60000_0_17], count[1024], stream[4]")
    parser = CommFactParser()
    assert parser.feed_lines([line] * 1000) == []
    assert parser.finish() == []


@pytest.mark.parametrize(("text", "expected"), [
    ("[TopoInfoExchangeServer]total connected num is [4],line num is [1]", RendezvousLine(connected_total=4,
                                                                                        list_lines=1)),
    ("[Get][Connection]topo exchange agent get socket timeout! timeout[120 s]", RendezvousLine(timeout_s=120.0)),
    ("task exec timeout[1836], stream 3", RendezvousLine()),  # not a socket timeout: no rendezvous timeout
])
def test_parse_rendezvous_reads_only_what_the_line_says(text: str, expected: RendezvousLine) -> None:
    assert parse_rendezvous(text) == expected
