"""Triage on the readings users' incidents need (issue 31): the failures that stop a rank without HCCL weigh
on that rank, and the culprit lines of the incidents users post name the right rank."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from agent.cli import build_parser
from agent.demo.plog import plog_timestamp
from agent.triage import command
from agent.triage.engine import analyze
from agent.triage.evidence import Blame, Evidence, RankFailure
from agent.triage.logs import LogReader
from tests.support.triage_scenarios import T0, Cluster


def triage(*argv: str) -> dict[str, Any]:
    args = build_parser().parse_args(["triage", "--json", "--jobs", "1", *argv])
    out = io.StringIO()
    command.main(args, out=out, err=io.StringIO())
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def top(report: dict[str, Any]) -> dict[str, Any]:
    culprit: dict[str, Any] = report["incidents"][0]["culprits"][0]
    return culprit


@pytest.fixture
def cluster(tmp_path: Path) -> Cluster:
    return Cluster(tmp_path).write()


def _log(cluster: Cluster, rank: int, lines: list[str]) -> None:
    path = cluster.debug_plog(rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))


STOPPING = {
    "device_oom": ("process_exit", "device out of memory",
                   "EL0004: [PID: {pid}] {ts} Memory_Allocation_Failure(EL0004): Failed to allocate memory."),
    "aicore_fault": ("process_exit", "AI Core",
                     "EZ9999: [PID: {pid}] {ts} The error from device(chipId:1, dieId:0), there is an aivec error "
                     "exception, core id is 3"),
    "device_dropped": ("chip_fault", "dropped out",
                       "[ERROR] RUNTIME({pid},python3):{ts} [device_status_manage.cc:402]{pid} "
                       "DeviceHeartbeatCheck:Device[1] lost heartbeat"),
    # read through the packaged CANN error table (issue 40): each release's wording, and codes beyond E[IJEHLZ]
    "aicore_fault/910": ("process_exit", "AI Core",
                         "EE9999: [PID: {pid}] {ts} The error from device(1), serial number is 3, there is an error "
                         "of aicore, core id is 7"),
    "aicore_fault/aicpu": ("process_exit", "AI Core",
                           "[ERROR] RUNTIME({pid},python3):{ts} [device_error_proc.cc:812]{pid} ProcessStarsAicpuError"
                           "Info: an exception occurred during AICPU execution, stream_id=3, task_id=9, errcode:21, "
                           "msg:aicpu kernel execute failed"),
    "device_dropped/E39009": ("chip_fault", "dropped out",
                              "E39009: [PID: {pid}] {ts} Failed to connect the device."),
    "hbm_ecc_fault": ("hbm_ecc", "HBM memory error",
                      "[ERROR] RUNTIME({pid},python3):{ts} [stream.cc:1290]{pid} GetError: UCE ERROR, "
                      "runtime result = 507053."),
    # a program error stops the rank too: it is the culprit, and the words say the node is fine
    "program_error": ("process_exit", "the program failed (a program error; the node is fine)",
                      "EL0003: [PID: {pid}] {ts} The argument is invalid."),
    "link_fault": ("link_down", "link error",
                   "[ERROR] RUNTIME({pid},python3):{ts} [stream.cc:1290]{pid} GetError: HCCS LINK ERROR, "
                   "runtime result = 507056."),
}


@pytest.mark.parametrize("kind", sorted(STOPPING))
def test_a_rank_that_stopped_on_its_own_failure_is_the_culprit_with_that_cause(cluster: Cluster, kind: str) -> None:
    cause, words, line = STOPPING[kind]
    stopped = cluster.rank(1, 1)
    others = [rank for rank in range(cluster.size) if rank != stopped]
    cluster.timeouts(others, T0)
    cluster.noise(stopped, T0 + 1200)  # alive and logging: without its own failure it reads as a hang
    _log(cluster, stopped, [line.format(pid=cluster.pid(stopped), ts=plog_timestamp(T0 - 120))])
    culprit = top(triage(*cluster.paths()))
    assert (culprit["node"], culprit["npu"], culprit["rank"], culprit["cause"]) == ("node-b", 1, stopped, cause)
    assert any(words in line for line in culprit["evidence"])


def test_without_its_own_failure_the_same_rank_is_a_hang(cluster: Cluster) -> None:
    stopped = cluster.rank(1, 1)
    cluster.timeouts([rank for rank in range(cluster.size) if rank != stopped], T0)
    cluster.noise(stopped, T0 + 1200)
    assert top(triage(*cluster.paths()))["cause"] == "process_hang"


# ---------------------------------------------------------------- the culprit lines of posted incidents


def _reader_evidence(lines: list[str]) -> Evidence:
    reader = LogReader("node-x", "job.log", T0)
    for number, line in enumerate(lines, start=1):
        reader.feed(number, line)
    return reader.finish()


def test_a_watchdog_that_died_on_a_code_opens_an_incident() -> None:
    line = ("[rank2]:[E1024 08:00:00.120000000 ProcessGroupHCCL.cpp:1320] [Rank 2] HCCL watchdog thread terminated "
            "with exception: [Rank 2] Work failed: EI0013: Some RDMA operations failed.")
    evidence = _reader_evidence([line])
    assert [f.category for f in evidence.failures] == ["watchdog_exception"]
    assert len(analyze(evidence).incidents) == 1
    cqe_only = _reader_evidence(["EI0013: [PID: 5] 2025-10-24-08:00:00.000.100 Some RDMA operations failed."])
    assert not analyze(cqe_only).incidents


def test_the_unconnected_ranks_ei0015_lists_are_the_culprits(cluster: Cluster) -> None:
    root = cluster.rank(0, 0)
    _log(cluster, root, [f'EI0015: [PID: {cluster.pid(root)}] {plog_timestamp(T0)} Failed to exchange the rank '
                         'information in the cluster within the timeout interval. List of unconnected ranks: '
                         '"[5, 6, ...]".'])
    report = triage(*cluster.paths())
    culprits = report["incidents"][0]["culprits"]
    assert [c["rank"] for c in culprits] == [5, 6]
    assert all("never heard from it at the rendezvous" in c["evidence"][0] for c in culprits)


def test_a_stuck_location_names_a_device_and_a_lost_one_a_rank() -> None:
    def blamed(kind: str) -> tuple[int | None, str | None, int | None]:
        evidence = _reader_evidence([
            "[ERROR] HCCL(9,python):2025-10-24-08:00:00.000.100 [task_exception_handler.cc:610] [9][TaskExecStage]"
            f"[HeartbeatAbnormal]Cluster Exception Location[IP/ID]:[10.0.0.5/6], Arrival Time:[Fri Oct 24 08:00:00 "
            f"2025], ExceptionType:[{kind}], Possible Reason:1.Host process is stuck"])
        (blame,) = evidence.blames
        return blame.rank, blame.ip, blame.device

    assert blamed("Stuck Occurred") == (None, "10.0.0.5", 6)
    assert blamed("Heartbeat Lost Occurred") == (6, "10.0.0.5", None)


def test_a_culprit_never_names_a_rank_beyond_the_communicator() -> None:
    evidence = Evidence()
    evidence.failures.extend(RankFailure(f"node-{r}", T0, "EI0002", "exec_timeout", "g", r, 4) for r in range(4))
    evidence.blames.append(Blame("node-0", T0, "stuck", "g", 0, rank=6))
    evidence.blames.append(Blame("node-1", T0, "waited_on", "g", 1, rank=3))
    (incident,) = analyze(evidence).incidents
    assert {c.rank for c in incident.culprits} == {3}


def test_the_two_number_rank_id_keeps_the_reporting_rank() -> None:
    block = ["[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.000 [t.cc:9] [7][TaskExecStage][Timeout][Host]Task run "
             "failed, base information is streamID:[2], taskID[21], tag[AllReduce_G], AlgType(level 0-1-2):[x].",
             "[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.010 [t.cc:9] [7][TaskExecStage][Timeout][Host]Task run "
             "failed, groupRank information is group:[G], user define information[], rankSize[32], rankId[{}]."]
    for printed, rank in (("25 24", 25), ("3 4294967295", 3), ("7", 7)):
        evidence = _reader_evidence([block[0], block[1].format(printed)])
        assert [(f.comm, f.rank) for f in evidence.failures] == [("G", rank)]


def test_a_port_it_could_not_listen_on_weighs_on_the_rank(cluster: Cluster) -> None:
    late = cluster.rank(2, 3)
    others = [rank for rank in range(cluster.size) if rank != late]
    cluster.timeouts(others, T0)
    cluster.noise(late, T0 + 1200)
    _log(cluster, late, [f"[ERROR] HCCL({cluster.pid(late)},python3):{plog_timestamp(T0 - 300)} [hccl_socket.cc:100]"
                         f" [1][HcclSocket][Listen] socket type[1], listen on ip[{cluster.host_ip(2)}] and specific "
                         "port[16666] fail. Please check the port status"])
    culprit = top(triage(*cluster.paths()))
    assert (culprit["rank"], culprit["cause"]) == (late, "process_exit")
    assert any("could not listen" in line for line in culprit["evidence"])
