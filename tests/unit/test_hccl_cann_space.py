"""The CANN error space beyond HCCL: the non-HCCL failures that stop a rank, the init wrappers, the envelope
codes, boilerplate that names no fault, and one count per incident (issue 31, section 1)."""

from __future__ import annotations

from datetime import datetime

import pytest

from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.codes import ENVELOPE_CODES, category_of_code, is_ascend_code
from collectors.hccl.rules import classify_line

REF = datetime(2025, 12, 31, 12, 0, 0).timestamp()


def plog(stamp: str, text: str, module: str = "HCCL") -> str:
    return f"[ERROR] {module}(4100,python3):{stamp} [x.cc:1][4100]{text}"


def categories(line: str) -> list[str]:
    result = classify_line(line, REF)
    return [] if result is None else [category for _, category in result.matches]


def scan(lines: list[str]) -> list[Event]:
    return StreamClassifier(ref_time=REF).feed_lines(lines)[0]


# (a line, the category it leads with); each has a near miss below that must not read the same
@pytest.mark.parametrize(("line", "code", "category"), [
    ("EL0004: [PID: 9] 2025-06-02-10:00:01.100.200 Memory_Allocation_Failure(EL0004): Failed to allocate memory.",
     "EL0004", "device_oom"),
    ("        alloc device memory failed, runtime result = 207001.[FUNC:ReportCallError]", "207001", "device_oom"),
    ("[rank3]: RuntimeError: NPU out of memory. Tried to allocate 1.50 GiB (NPU 3; 60.96 GiB total capacity)",
     "npu_oom", "device_oom"),
    ("        synchronize stream failed, runtime result = 507035[FUNC:ReportCallError]", "507035", "aicore"),
    ("rtStreamSynchronize execute failed, error code is 507015", "507015", "aicore"),
    ("rtStreamSynchronize execute failed, error code is 507014", "507014", "aicore"),
    ("EZ9999: [PID: 9] 2025-06-03-08:15:42.310.118 The error from device(chipId:5, dieId:0), serial number is 17, "
     "there is an aivec error exception, core id is 12", "aicore_exception", "aicore"),
    ("EZ9999: [PID: 9] 2025-06-03-08:15:42.310.118 there is an aicpu exception, task id 3", "aicore_exception",
     "aicore"),
    (plog("2025-06-03-09:40:00.004.511", "The aicore execution times out, stream_id=4", "RUNTIME"),
     "aicore_exception", "aicore"),
    ("EZ9999: [PID: 9] 2025-06-04-11:20:05.512.700 Parse dynamic kernel config fail.[THREAD:60330]",
     "operator_error", "operator"),
    ("EZ9999: [PID: 9] 2025-06-04-11:20:05.512.700 AclNN_Inner_Error(EZ9999): Tiling failed", "operator_error",
     "operator"),
    ("EE9999: [PID: 9] 2025-06-05-02:00:11.002.410 System DMA hardware execution error.", "sdma_error", "sdma"),
    ("        rtStreamSynchronize execute failed, runtime result = 507013.", "507013", "sdma"),
    ("        rtMemcpy execute failed, runtime result = 507001.", "507001", "sdma"),
    (plog("2025-06-05-03:30:40.118.002", "DeviceHeartbeatCheck:Device[2] lost heartbeat", "RUNTIME"),
     "device_lost", "device_lost"),
    ("        reason=[task scheduler loses the heartbeat], runtime result = 507010.", "507010", "device_lost"),
    ("EL0001: [PID: 9] 2025-06-05-04:00:02.610.114 The device (ID 2) is not found.", "EL0001", "device_lost"),
    (plog("2025-06-05-04:20:00.000.551", "GetDeviceCount: drvGetDevNum failed, ret = 87.", "ASCENDCL"),
     "device_lost", "device_lost"),
    ("        aclrtGetDeviceCount execute failed, runtime result = 507899.", "507899", "device_lost"),
    ("[rank5]:[E605 06:11:09.552000000 TCPStore.cpp:1303] [c10d] store->get('hccl_root_info_0') got error: "
     "Connection reset by peer", "tcp_store_error", "tcp_store"),
    ("[ERROR] 2025-06-06-07:00:01 (PID:81000, Device:0, RankID:0) ERR02200 DIST call hccl api failed.",
     "dist_hccl_api_failed", "init"),
    ("RuntimeError: create:ProcessGroupHCCL.cpp:291 HCCL function error: hcclCommInitRootInfoConfig(numRanks, "
     "&hcclId, rank, config, &(comm->hcclComm_)), error code is 7", "hccl_comm_init_failed", "init"),
    (plog("2025-06-06-07:30:12.114.200", "[Init][CommRootInfoConfig]errNo[0x0000000005000007] "
          "HcclCommInitRootInfo failed, rankNum[16], rank[3]."), "hccl_comm_init_failed", "init"),
    (plog("2025-06-06-08:00:40.330.001", "[Create][DestLink]Transport init error! Create Dest error! rank[3]"),
     "transport_create_failed", "init"),
    ("[Rank 2] HCCL watchdog thread terminated with exception: [Rank 2] Work failed: something broke",
     "watchdog_exception", "watchdog_exception"),
    # the packaged error table (issue 40): EH0001 is ACL's invalid parameter, a program error
    ("EH0001: [PID: 9] 2025-06-07-07:00:00.000.100 The value is invalid.", "EH0001", "program_error"),
    ("EZ1001: [PID: 9] 2025-06-07-07:00:00.000.100 AclNN_Parameter_Error(EZ1001): Tensor self not implemented "
     "for DT_BFLOAT16.", "EZ1001", "operator"),
    # a code no registry lists has its family's class: EZ is the operators'
    ("EZ4321: [PID: 9] 2025-06-07-07:00:00.000.100 Something unknown.", "EZ4321", "operator"),
    (plog("2025-06-05-04:20:00.000.551", "[drvGetDevNum] get device num failed, ret = 87", "DRV"),
     "device_lost", "device_lost"),
    ("[rank3]:[W605 06:11:09.552000000 socket.cpp:752] [c10d] The client socket has timed out after 1800s while "
     "trying to connect to (29.0.0.1, 29500).", "tcp_store_error", "tcp_store"),
    ("EL0009: [PID: 9] 2025-06-07-07:00:00.000.100 Something else.", "EL0009", "program_error"),
    ("error code is 507999", "507999", "other"),  # an unlisted 5xxxxx number: its band's class
    ("EX0001: a module character nobody listed", "EX0001", "other"),
])
def test_each_reading_leads_with_its_category(line: str, code: str, category: str) -> None:
    result = classify_line(line, REF)
    assert result is not None
    assert result.matches[0] == (code, category)
    assert len({c for _, c in result.matches}) == 1


@pytest.mark.parametrize("line", [
    "The allocator freed 4 blocks of memory.",
    "error code is 5079990",  # seven digits: no ACL number
    "rtStreamSynchronize done, result = 107000",
    "[rank0]: store->get('hccl_root_info_0') returned 64 bytes",
    "the aicore finished in 12 ms",
    "EX00001: not a CANN code (five digits)",
    "HEX0001: inside a word",
])
def test_near_misses_raise_nothing(line: str) -> None:
    assert categories(line) == []


def test_the_families_and_the_envelopes_are_ascend_codes() -> None:
    for code in ("EH0001", "EL0004", "EZ9999", "EI0002", "EJ0001", "EE1002", "507035"):
        assert is_ascend_code(code)
    assert is_ascend_code("EX0001") and is_ascend_code("E39009") and is_ascend_code("ERR00100")
    assert not is_ascend_code("EX001") and not is_ascend_code("notify_wait")
    assert {category_of_code(code) for code in ENVELOPE_CODES} == {"other"}


# ---------------------------------------------------------------- boilerplate

EI0006_TLS = ("EI0006: [PID: 8] 2025-06-06-08:30:05.000.100 Getting socket times out. Reason: 1. The remote does "
              "not initiate a connect request. 2. The communication link is disconnected. (For example, the IP "
              "addresses are not on the same network segment or the TLS configurations are inconsistent.)")


def test_a_possible_cause_naming_tls_raises_no_desync() -> None:
    assert categories(EI0006_TLS) == ["connect_timeout"]
    assert categories("        Possible Cause: 1. The TLS configurations are inconsistent between ranks.") == []


def test_a_tls_status_that_differs_is_a_desync() -> None:
    line = plog("2025-06-06-08:30:05.000.100", "[Check][TlsStatus]Some ranks tlsStatus are inconsistent")
    assert categories(line) == ["desync"]


SDMA_CQE = plog("2025-06-05-02:00:11.002.300", "ProcessStarsSdmaErrorInfo:The SDMA task has an error, cqe "
                "status=0x8 (SMMU Terminate), sqe_type=11, dev_id=2", "RUNTIME")


def test_an_sdma_cqe_status_is_a_copy_fault_not_a_roce_cqe_error() -> None:
    assert categories(SDMA_CQE) == ["sdma"]
    roce = plog("2025-06-05-02:00:11.002.300", "[Heartbeat]cqe err status[12], qpn[33]", "HCCP")
    assert categories(roce) == ["roce_cqe"]


# ---------------------------------------------------------------- envelopes and wrappers


def test_an_envelope_never_leads_over_the_specific_reading_of_its_line() -> None:
    line = ("EI9999: [PID: 1] 2025-06-07-05:00:00.120.300 Inner Error! hccl fftsplus task timeout occurred, "
            "The 0 stuck notify wait context info:(context_id=3, notify_id=7).")
    result = classify_line(line, REF)
    assert result is not None and [c for _, c in result.matches] == ["exec_timeout"]
    assert not result.provisional


def test_an_envelope_never_leads_over_the_specific_reading_of_its_block() -> None:
    lines = ["EZ9999: Inner Error!",
             "EZ9999: [PID: 5] 2025-06-03-08:15:42.310.118 there is an aivec error exception, core id is 12"]
    assert [(e.code, e.category) for e in scan(lines)] == [("aicore_exception", "aicore")]
    later = ["EZ9999: [PID: 5] 2025-06-03-08:15:42.310.118 there is an aivec error exception, core id is 12",
             "EZ9999: [PID: 5] 2025-06-03-08:15:42.400.000 Inner Error, Please contact support engineer!"]
    assert [(e.code, e.category) for e in scan(later)] == [("aicore_exception", "aicore")]


def test_an_envelope_alone_counts_as_other() -> None:
    line = "EZ9999: [PID: 5] 2025-06-03-08:15:42.310.118 Inner Error, Please contact support engineer!"
    assert [(e.code, e.category) for e in scan([line])] == [("EZ9999", "other")]


def test_an_init_wrapper_alone_is_an_init_failure_and_gives_way_to_the_error_it_wraps() -> None:
    wrapper = "[ERROR] 2025-06-06-08:30:04 (PID:81000, Device:0, RankID:3) ERR02200 DIST call hccl api failed."
    assert [(e.code, e.category) for e in scan([wrapper])] == [("dist_hccl_api_failed", "init")]
    assert [(e.code, e.category) for e in scan([wrapper, EI0006_TLS])] == [("EI0006", "connect_timeout")]


def test_a_watchdog_dying_on_a_code_is_a_failed_collective() -> None:
    line = ("[rank2]:[E607 06:10:00.120000000 ProcessGroupHCCL.cpp:1320] [Rank 2] HCCL watchdog thread terminated "
            "with exception: [Rank 2] Work failed: EI0013: Some RDMA operations failed.")
    assert categories(line) == ["roce_cqe", "watchdog_exception"]
    timeout = ("[Rank 1] HCCL watchdog thread terminated with exception: [Rank 1] Watchdog caught collective "
               "operation timeout: WorkHCCL(SeqNum=77, OpType=ALLGATHER, Timeout(ms)=1800000) ran for 1800321 "
               "milliseconds before timing out.")
    assert categories(timeout) == ["watchdog_timeout"]


# ---------------------------------------------------------------- one incident, one count


def test_two_codes_of_one_failure_count_once() -> None:
    lines = ["W NPUStream.cpp:409] Warning: NPU warning, error code is 507046[Error]: ",
             "EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout.",
             "        wait for compute device to finish failed, runtime result = 507046."]
    assert [(e.code, e.category) for e in scan(lines)] == [("EE1002", "stream_sync_timeout")]


def test_the_same_category_after_the_window_counts_again() -> None:
    lines = ["EE1002: 2024-09-03-16:50:00.041.231 Stream synchronize timeout.",
             "W 2024-09-03-16:51:00.100.000 Warning: NPU warning, error code is 507046[Error]: "]
    assert [e.code for e in scan(lines)] == ["EE1002", "507046"]


def test_two_unknown_codes_near_each_other_are_two_unknowns() -> None:
    # EQ: a module character no registry lists, so each is its level's class, other
    lines = ["EQ0001: [PID: 9] 2025-06-07-07:00:00.000.100 One thing.",
             "EQ0002: [PID: 9] 2025-06-07-07:00:00.000.200 Another thing."]
    assert [e.code for e in scan(lines)] == ["EQ0001", "EQ0002"]


def test_create_dest_error_under_another_code_is_part_of_that_code() -> None:
    lines = ["EI0005: [PID: 7] 2025-06-10-09:10:00.000.100 The arguments for collective communication are "
             "inconsistent between ranks",
             "        Transport init error. Reason: [Create] [DestLink]Create Dest error! createLink para:rank[5]"]
    assert [(e.code, e.category) for e in scan(lines)] == [("EI0005", "desync")]
    assert [(e.code, e.category) for e in scan(lines[1:])] == [("transport_create_failed", "init")]


def test_an_envelope_line_first_gives_way_to_the_continuation_that_reads_it() -> None:
    lines = ["EI9999: [PID: 1] 2025-06-07-05:00:00.120.300 Inner Error, Please contact support engineer!",
             "        TraceBack (most recent call last):",
             "        hccl fftsplus task timeout occurred, The 0 stuck notify wait context info:(context_id=3)."]
    assert [(e.code, e.category) for e in scan(lines)] == [("fftsplus_timeout", "exec_timeout")]
