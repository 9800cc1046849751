"""Synthetic CANN plog lines in the shapes real HCCL writes, for the demo's log faults.

A plog lives at ``<log root>/debug/plog/plog-<pid>_<YYYYmmddHHMMSSmmm>.log``; every line is
``[LEVEL] MODULE(<pid>,<process>):<YYYY-mm-dd-HH:MM:SS.mmm.uuu> [<file>:<line>] <text>`` in
local time. The blocks follow public HCCL fault-diagnosis examples:

- execution timeout (EI0002 on the screen): three ``[TaskExecStage][Timeout][Host]Task run
  failed`` lines with the base (tag = ``<op>_<group>``), groupRank (group, rankSize, rankId)
  and opData (issue time, deviceId) information, preceded by one heartbeat line per blamed peer
  (``Cluster Exception Location[IP/ID]:[ip/rank]``, ``Stuck Occurred`` or ``Heartbeat Lost
  Occurred``);
- RoCE error CQE (EI0013): the ROCE driver's ``error cqe status``, HCCP's ``failed CQE status``
  and HCCL's ``[ROCE CQE ERROR]cqe error status`` with local and remote device IPs.

The functions take every fact as a parameter, so several demo nodes can log one coordinated
incident (same group and time, each its own rank, device and peers).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "HcclTimeout",
    "RoceCqe",
    "append_job_log",
    "append_plog",
    "comm_init_line",
    "ei0002_screen_lines",
    "hccl_timeout_lines",
    "plog_timestamp",
    "roce_cqe_lines",
]

_REDUCING_OPS = ("AllReduce", "ReduceScatter", "Reduce")
# HCCL_EXEC_TIMEOUT's default: the task was issued this long before the timeout is reported
_EXEC_TIMEOUT_S = 1836.0


def plog_timestamp(at: float) -> str:
    """``2025-10-24-11:18:29.499.235`` (local time, milliseconds and microseconds apart)."""
    micros = round((at % 1) * 1_000_000) % 1_000_000
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(int(at))) + f".{micros // 1000:03d}.{micros % 1000:03d}"


def _line(module: str, at: float, where: str, text: str, *, pid: int, process: str) -> str:
    return f"[ERROR] {module}({pid},{process}):{plog_timestamp(at)} [{where}]{text}"


@dataclass(frozen=True)
class HcclTimeout:
    """One rank's view of a collective that timed out."""

    group: str
    rank: int
    rank_size: int
    device: int
    at: float
    pid: int
    local_ip: str
    peer_ips: Sequence[str] = ()
    peer_ranks: Sequence[int] = ()
    peer_state: str = "stuck"  # or "lost"
    op: str = "AllReduce"
    process: str = "python3"
    stream_id: int = 2
    task_id: int = 21
    count: int = 256
    buffers: tuple[int, int] = field(default=(0x12C0C0013000, 0x12C0C0014000))


def hccl_timeout_lines(event: HcclTimeout) -> list[str]:
    """The heartbeat lines naming each peer, then the three-line EI0002 task-exception block."""
    ranks = list(event.peer_ranks) or list(range(len(event.peer_ips)))
    if len(ranks) != len(event.peer_ips):
        raise ValueError(f"{len(event.peer_ips)} peer IPs but {len(ranks)} peer ranks")
    lines = []
    detected = event.at - 60.0  # the heartbeat notices the peer before the task times out
    for offset, peer_ip in enumerate(event.peer_ips):
        peer_rank = ranks[offset]
        arrival = time.asctime(time.localtime(detected - 2))
        if event.peer_state == "lost":
            text = (f"Cluster Exception Location[IP/ID]:[{peer_ip}/{peer_rank}], Arrival Time:[{arrival}], "
                    f"Discoverer:[{event.local_ip}/{event.rank}], ExceptionType:[Heartbeat Lost Occurred], "
                    "Possible Reason:1. Process has exited, 2. Network Disconnected")
        else:
            text = (f"Cluster Exception Location[IP/ID]:[{peer_ip}/{peer_rank}], Arrival Time:[{arrival}], "
                    "ExceptionType:[Stuck Occurred], Possible Reason:1.Host process is stuck, "
                    "2.Device task is stuck")
        lines.append(_line("HCCL", detected + offset * 1e-5, "task_exception_handler.cc:610",
                           f" [{event.pid}][TaskExecStage][HeartbeatAbnormal]{text}", pid=event.pid,
                           process=event.process))
    prefix = f" [{event.pid}][TaskExecStage][Timeout][Host]Task run failed, "
    src, dst = event.buffers
    reduce = "reduceType[sum], " if event.op in _REDUCING_OPS else ""
    issued = plog_timestamp(event.at - _EXEC_TIMEOUT_S)
    parts = [
        (0.0, "task_exception_handler.cc:908",
         f"base information is streamID:[{event.stream_id}], taskID[{event.task_id}], "
         f"tag[{event.op}_{event.group}], AlgType(level 0-1-2):[fullmesh-ring-NHR]."),
        (8e-6, "task_exception_handler.cc:771",
         f"groupRank information is group:[{event.group}], user define information[], "
         f"rankSize[{event.rank_size}], rankId[{event.rank}]."),
        (4.1e-5, "task_exception_handler.cc:704",
         f"opData information is timeStamp:[{issued}], deviceId[{event.device}], index[{event.task_id}], "
         f"count[{event.count}], {reduce}src[{src:#x}], dst[{dst:#x}], dataType[float32]."),
    ]
    lines += [_line("HCCL", event.at + delay, where, prefix + text, pid=event.pid, process=event.process)
              for delay, where, text in parts]
    return lines


@dataclass(frozen=True)
class RoceCqe:
    """An RDMA completion error on one device's RoCE port."""

    device: int
    at: float
    pid: int
    local_ip: str
    peer_ip: str
    peer_device: int = 1
    status: int = 12
    process: str = "python3"


def roce_cqe_lines(event: RoceCqe) -> list[str]:
    tid = event.pid + 424
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(event.at))) + f".{int((event.at % 1) * 1e6):06d}"
    who: dict[str, Any] = {"pid": event.pid, "process": event.process}
    return [
        _line("ROCE", event.at, "hns_roce_lite.c:630", "hns_roce_lite_handle_error_cqe(630) : error cqe status: 0x15",
              **who),
        _line("HCCP", event.at + 3.8e-5, "ra_hdc_lite.c:794",
              f"tid:{tid},ra_hdc_lite_period_poll_cqe : [create][ra_hdc_period_poll]failed CQE "
              f"status[{event.status}], wr[0]", **who),
        _line("HCCL", event.at + 0.83, "heartbeat.cc:1229",
              f" [{tid + 208}][TaskExecStage][HeartbeatAbnormal][ROCE CQE ERROR]cqe error status[{event.status}], "
              f"time:[{stamp}],localInfo{{server[{event.local_ip}],deviceId[{event.device}],"
              f"deviceIp[{event.local_ip}]}}, remoteIP{{server[{event.peer_ip}],deviceId[{event.peer_device}],"
              f"deviceIp[{event.peer_ip}]}}", **who),
    ]


def ei0002_screen_lines(event: HcclTimeout) -> list[str]:
    """What the rank's training process prints to stderr for the same timeout (torch_npu layout, each
    line with torchrun's ``[rankN]:`` prefix): the EI0002 block with the tag, the peer it waited for
    and the heartbeat's verdict on it."""
    ranks = list(event.peer_ranks) or list(range(len(event.peer_ips)))
    waited = str(ranks[0]) if ranks else "unknown"
    arrival = time.asctime(time.localtime(event.at - 62))
    exception = "Heartbeat Lost Occurred" if event.peer_state == "lost" else "Stuck Occurred"
    prefix = f"[rank{event.rank}]:"
    lines = [
        f"{prefix}EI0002: [PID: {event.pid}] {plog_timestamp(event.at)} The wait execution of the Notify register "
        f"times out. Reason: The Notify register has not received the Notify record from remote rank [{waited}]."
        f"base information: [streamID:[{event.stream_id}], taskID[{event.task_id}], tag[{event.op}_{event.group}], "
        "AlgType(level 0-1-2):[fullmesh-ring-NHR].] task information: [",
        f"{prefix}there are(is) {len(event.peer_ips)} abnormal device(s):",
    ]
    lines += [f"{prefix}    Cluster Exception Location[IP/ID]:[{ip}/{ranks[offset]}], Arrival Time:[{arrival}], "
              f"Discoverer:[{event.local_ip}/{event.rank}], ExceptionType:[{exception}], Possible Reason:1. Process "
              "has exited, 2. Network Disconnected" for offset, ip in enumerate(event.peer_ips)]
    lines += [f"{prefix}]",
              f"{prefix}        Possible Cause: 1. An exception occurs during the execution on some NPUs in the "
              "cluster. As a result, collective communication operation failed."]
    return lines


def append_job_log(log_root: Path, lines: Sequence[str], name: str = "train.log") -> Path:
    """Append ``lines`` to the training job's stderr log ``<log_root>/job/<name>`` (one write)."""
    job_dir = Path(log_root) / "job"
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / name
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
        handle.flush()
        os.fsync(handle.fileno())
    return path


def comm_init_line(group: str, *, rank: int, rank_size: int, device: int, pid: int, at: float, root_ip: str,
                   port: int = 60000, process: str = "python3") -> str:
    """The run-plog INFO line a rank prints when it joins a communicator (HcclCommInitRootInfo)."""
    return (f"[INFO] HCCL({pid},{process}):{plog_timestamp(at)} [op_base.cc:1292] [{pid}]"
            f"Entry-HcclCommInitRootInfoInner:ranks[{rank_size}], rank[{rank}], rootinfo: host ip[{root_ip}] "
            f"port[{port}] nicDeploy[1] identifier[{group}], deviceLogicId[{device}]")


def append_plog(log_root: Path, pid: int, at: float, lines: Sequence[str], kind: str = "debug") -> Path:
    """Append ``lines`` to process ``pid``'s plog under ``log_root`` (created at ``at`` if new);
    ``kind`` ``debug`` or ``run`` (INFO lines such as communicator init go to the run plog)."""
    if kind not in ("debug", "run"):
        raise ValueError(f"plog kind must be debug or run, got {kind!r}")
    plog_dir = Path(log_root) / kind / "plog"
    plog_dir.mkdir(parents=True, exist_ok=True)
    existing = sorted(plog_dir.glob(f"plog-{pid}_*.log"))
    if existing:
        path = existing[-1]
    else:
        created = time.strftime("%Y%m%d%H%M%S", time.localtime(int(at))) + f"{int((at % 1) * 1000):03d}"
        path = plog_dir / f"plog-{pid}_{created}.log"
    # One write of whole lines, so a tailer never sees half a line.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
        handle.flush()
        os.fsync(handle.fileno())
    return path
