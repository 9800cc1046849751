"""Faults over several demo nodes at once: ``npuwatch demo fleet hccl-hang``.

``hccl_hang`` plays a cluster HCCL hang across demo nodes (one directory per node, each served by
its own ``npuwatch run --demo``): one job holds every NPU of every node in one communicator
(rank = the node's position times its chips, plus the NPU id). On the culprit node one NPU's RoCE
link goes down (the ``link_down`` chip fault) and its rank logs nothing more; every other rank
logs, at the same moment, an EI0002 ``Task run failed`` block in its plog after a heartbeat line
that names the culprit as ``<device IP>/<rank>`` (``Cluster Exception Location``, ``Heartbeat Lost
Occurred``), and prints the EI0002 error block (remote rank, abnormal device) to the job's stderr
log (``<log>/job/train.log``, read by the demo agent). An hour before, every rank (the culprit
too) logged its communicator init line in its run plog, as HCCL does when a job starts.

Nodes are named after their directories; when no directory is called ``--culprit``, ``node-K``
names the K-th directory. Each node gets its own RoCE subnet first (``29.<K>.<npu>.<10 + npu>``),
so a blamed device IP belongs to exactly one node, as on a real fleet.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.demo.node import DemoNode, NoDemoNode
from agent.demo.plog import (
    HcclTimeout,
    append_job_log,
    append_plog,
    comm_init_line,
    ei0002_screen_lines,
    hccl_timeout_lines,
)
from agent.demo.render_model import device_ip
from agent.demo.render_npu_smi import processes_of
from agent.demo.state import DemoState, demo_now

__all__ = ["SCENARIOS", "culprit_index", "hccl_hang"]

SCENARIOS = ("hccl-hang",)
JOB_STARTED_BEFORE_S = 3600.0  # the init lines: the job started an hour before it hung
_RANK_SKEW_S = 0.003  # ranks print their blocks a few milliseconds apart
LINK_DOWN_BEFORE_S = 62.0
_NODE_INDEX_RE = re.compile(r"node-(\d+)")


def culprit_index(directories: Sequence[Path], culprit: str) -> int:
    """The position of the culprit among ``directories`` (see the module docstring)."""
    names = [Path(directory).name for directory in directories]
    if culprit in names:
        return names.index(culprit)
    numbered = _NODE_INDEX_RE.fullmatch(culprit)
    if numbered is not None and 1 <= int(numbered.group(1)) <= len(directories):
        return int(numbered.group(1)) - 1
    raise ValueError(f"--culprit {culprit!r} is neither a directory name ({', '.join(names)}) "
                     f"nor node-1..node-{len(directories)}")


def _pid(state: DemoState, npu: int) -> int:
    listed = processes_of(state, npu)
    return listed[0][0] if listed else 3_325_900 + 17 * npu


def hccl_hang(directories: Sequence[Path], culprit: str, npu: int, *, at: float | None = None,
              peer_state: str = "lost") -> dict[str, Any]:
    """Write the hang onto the nodes in ``directories``; a summary of what was written (JSON-able).

    ValueError for fewer than two nodes, a directory without a demo node, an unknown culprit or
    a culprit NPU that node does not have.
    """
    if len(directories) < 2:
        raise ValueError("a fleet fault needs two demo directories or more")
    if peer_state not in ("lost", "stuck"):
        raise ValueError(f"peer state must be lost or stuck, got {peer_state!r}")
    nodes = [DemoNode(directory) for directory in directories]
    for node in nodes:
        if not node.has_state():
            raise NoDemoNode(f"no demo node at {node.directory} (start one with npuwatch run --demo "
                             f"--demo-dir {node.directory})")
    index = culprit_index(directories, culprit)
    culprit_chips = nodes[index].read().chips
    if not 0 <= npu < culprit_chips:
        raise ValueError(f"--npu {npu} is not a chip of {culprit} (0..{culprit_chips - 1})")
    for position, node in enumerate(nodes):
        node.set_subnet(position + 1)
    states = [node.read() for node in nodes]
    when = demo_now(states[0]) if at is None else float(at)
    first_rank = [sum(state.chips for state in states[:position]) for position in range(len(states))]
    rank_size = sum(state.chips for state in states)
    group = f"{device_ip(states[0], 0)}%enp_60000_0_{int((when - JOB_STARTED_BEFORE_S) * 1e6)}"
    culprit_rank = first_rank[index] + npu
    culprit_ip = device_ip(states[index], npu)
    summary_nodes = []
    for position, node in enumerate(nodes):
        state, ranks, screen = states[position], [], []
        for chip in range(state.chips):
            rank, pid = first_rank[position] + chip, _pid(state, chip)
            started = when - JOB_STARTED_BEFORE_S + rank * _RANK_SKEW_S
            append_plog(node.log_root, pid, started, [comm_init_line(
                group, rank=rank, rank_size=rank_size, device=chip, pid=pid, at=started,
                root_ip=device_ip(states[0], 0))], kind="run")
            if (position, chip) == (index, npu):
                continue  # the culprit: its link is down and it logs nothing more
            ranks.append(rank)
            timeout = HcclTimeout(
                group=group, rank=rank, rank_size=rank_size, device=chip, at=when + rank * _RANK_SKEW_S,
                pid=pid, local_ip=device_ip(state, chip), peer_ips=(culprit_ip,), peer_ranks=(culprit_rank,),
                peer_state=peer_state)
            append_plog(node.log_root, pid, when, hccl_timeout_lines(timeout))
            screen += ei0002_screen_lines(timeout)
        job_log = append_job_log(node.log_root, screen) if screen else None
        summary_nodes.append({"dir": str(node.directory), "node": Path(directories[position]).name,
                              "timed_out_ranks": ranks, "job_log": None if job_log is None else str(job_log)})
    # the link died just before the peers' heartbeats noticed (hccl_timeout_lines: 62 s before the timeout)
    nodes[index].set_fault("link_down", chip=npu, since=when - LINK_DOWN_BEFORE_S)
    return {
        "scenario": "hccl-hang",
        "comm": group,
        "rank_size": rank_size,
        "time": when,
        "culprit": {"dir": str(nodes[index].directory), "node": culprit, "npu": npu, "rank": culprit_rank,
                    "device_ip": culprit_ip, "fault": "link_down"},
        "nodes": summary_nodes,
    }
