"""``npuwatch triage`` on the 950: a rank table of version 2.0 (``rank_list``, no device IPs) places the ranks,
and with no stuck detection (HCCL on the 950 never prints ``Stuck Occurred``) the culprit comes from the
heartbeat, EI and torch watchdog lines alone."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from agent.cli import build_parser
from agent.triage import command
from tests.support import paths

RANK_TABLE = paths.FIXTURES / "hccl_ranktable" / "v2.0_950_two_servers.json"  # ranks 0-3 node-a, 4-7 node-b
HUNG = 6  # node-b, device 2
GROUP = "10.0.0.1%enp_60000_0_1774357225000000"


def triage(tmp_path: Path) -> dict[str, Any]:
    args = build_parser().parse_args(["triage", "--json", "--jobs", "1", "--rank-table", str(RANK_TABLE),
                                      str(tmp_path / "node-a"), str(tmp_path / "node-b")])
    out = io.StringIO()
    command.main(args, out=out, err=io.StringIO())
    report: dict[str, Any] = json.loads(out.getvalue())
    return report


def job_logs(tmp_path: Path, lines_of: Any) -> None:
    for node, ranks in (("node-a", range(4)), ("node-b", range(4, 8))):
        (tmp_path / node / "job").mkdir(parents=True)
        lines = [line for rank in ranks if rank != HUNG for line in lines_of(rank)]
        (tmp_path / node / "job" / "train.log").write_text("\n".join(lines) + "\n")


def watchdog(rank: int) -> list[str]:
    # torch_npu's watchdog as a job log shows it (the shape of a real vllm-ascend capture)
    return [f"[rank{rank}]:[E324 13:00:25.{428029551 + rank} compiler_depend.ts:574] [Rank {rank}] Watchdog caught "
            "collective operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
            "1800185 milliseconds before timing out."]


def ei0002_heartbeat(rank: int) -> list[str]:
    # the EI0002 screen block torch_npu prints, the abnormal device found by the heartbeat (no stuck detection)
    return [f"[rank{rank}]:" + line for line in (
        f"EI0002: [PID: {4000 + rank}] 2026-03-24-13:00:25.{100 + rank:03d}.000 The wait execution of the Notify "
        f"register times out. Reason: The Notify register has not received the Notify record from remote rank "
        f"[{HUNG}].base information: [streamID:[2], taskID[5], tag[AllReduce_{GROUP}], "
        "AlgType(level 0-1-2):[fullmesh-ring-ring].] task information: [",
        "there are(is) 1 abnormal device(s):",
        f"    Cluster Exception Location[IP/ID]:[10.0.1.2/{HUNG}], Arrival Time:[Tue Mar 24 12:59:20 2026], "
        f"Discoverer:[10.0.{rank // 4}.{rank % 4}/{rank}], ExceptionType:[Heartbeat Lost Occurred], "
        "Possible Reason:1. Process has exited, 2. Network Disconnected",
        "]",
    )]


def culprit(report: dict[str, Any]) -> dict[str, Any]:
    [incident] = report["incidents"]
    assert incident["rank_size"] == 8
    assert incident["silent_ranks"] == [HUNG]
    top: dict[str, Any] = incident["culprits"][0]
    assert (top["node"], top["npu"], top["rank"]) == ("node-b", 2, HUNG)
    return top


def test_watchdog_lines_alone_name_the_rank_that_never_reported(tmp_path: Path) -> None:
    # a hung rank on the 950: no peer sees it stuck, every other rank's watchdog fires; the lines name no
    # communicator, so the rank table (the job's world) gives its size and the silent rank's place
    job_logs(tmp_path, watchdog)
    report = triage(tmp_path)
    top = culprit(report)
    assert top["cause"] == "process_hang"
    assert report["problems"] == []


def test_heartbeat_and_ei_lines_name_the_rank_that_died(tmp_path: Path) -> None:
    job_logs(tmp_path, ei0002_heartbeat)
    report = triage(tmp_path)
    top = culprit(report)
    assert top["cause"] == "process_exit"
    assert top["evidence"][0].startswith("7 peers lost its heartbeat (10.0.1.2)"), top["evidence"]
    assert "-> 7 ranks reported EI0002 at" in top["evidence"][0]
