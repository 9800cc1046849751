"""Multi-node triage scenarios written as node directories in the real shapes of the corpus.

A ``Cluster`` is ``nodes`` x ``npus`` ranks of one communicator, rank = node * npus + npu, each
node a directory (its name is the node's) holding what ``npuwatch bundle`` would have found:

- ``log/run/plog/plog-<pid>_<ts>.log``: the rank's ``Entry-HcclCommInitRootInfoInner`` init line
  (corpus 34's shape) among INFO noise, and ``log/debug/plog/...`` where failures go (the demo's
  plog writer: the ``[TaskExecStage][Timeout][Host]Task run failed`` block after heartbeat lines,
  RoCE CQE sequences);
- ``hccn/hccn_tool_-i_<dev>_-<cmd>_-g.txt``: link, link_stat, net_health, optical, stat and ip
  outputs in the shapes of ``agent.demo.fake_hccn_tool`` and the corpus, healthy unless a
  scenario breaks one; ``etc/hccn.conf`` with every device address.

Device IPs are ``29.<node+1>.<npu>.<10+npu>``, host IPs ``10.0.0.<node+1>``. Times are local wall
times around ``T0``; everything is deterministic.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent.demo.plog import HcclTimeout, RoceCqe, hccl_timeout_lines, plog_timestamp, roce_cqe_lines

T0 = 1_761_300_000.0  # 2025-10-24 (local time), the incident
GROUP = "10.0.0.1%enp_60000_0_1761275812718970"
NOISE_LINES = 40


def _ctime(at: float) -> str:
    return time.asctime(time.localtime(at))


def _info(pid: int, at: float, text: str, where: str = "hccl_communicator.cc:100") -> str:
    return f"[INFO] HCCL({pid},python3):{plog_timestamp(at)} [{where}] [{pid}]{text}"


@dataclass
class Cluster:
    root: Path
    nodes: int = 3
    npus: int = 4
    group: str = GROUP
    start: float = T0 - 3600
    offset: int = 0  # a second cluster in the same root starts its node names and addresses after the first

    # -- names and addresses

    def name(self, node: int) -> str:
        return f"node-{chr(ord('a') + self.offset + node)}"

    def dir(self, node: int) -> Path:
        return self.root / self.name(node)

    def rank(self, node: int, npu: int) -> int:
        return node * self.npus + npu

    def place(self, rank: int) -> tuple[int, int]:
        return divmod(rank, self.npus)

    @property
    def size(self) -> int:
        return self.nodes * self.npus

    def device_ip(self, node: int, npu: int) -> str:
        return f"29.{self.offset + node + 1}.{npu}.{10 + npu}"

    def host_ip(self, node: int) -> str:
        return f"10.0.0.{self.offset + node + 1}"

    def pid(self, rank: int) -> int:
        return 40000 + 100 * self.offset + rank

    def paths(self, skip: Sequence[int] = ()) -> list[str]:
        return [str(self.dir(node)) for node in range(self.nodes) if node not in skip]

    # -- writing

    def write(self, group: str | None = None, size: int | None = None, start: float | None = None) -> Cluster:
        """Every node: init lines and noise per rank, healthy tool outputs, hccn.conf."""
        group = group or self.group
        start = self.start if start is None else start
        for node in range(self.nodes):
            conf = []
            for npu in range(self.npus):
                rank = self.rank(node, npu)
                self.init(rank, group, size or self.size, start)
                conf.append(f"address_{npu}={self.device_ip(node, npu)}\nnetmask_{npu}=255.255.0.0\n")
                self.healthy_tools(node, npu, T0 + 900)
            (self.dir(node) / "etc").mkdir(parents=True, exist_ok=True)
            (self.dir(node) / "etc" / "hccn.conf").write_text("".join(conf))
        return self

    def _append(self, path: Path, lines: Sequence[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in lines))

    def run_plog(self, rank: int) -> Path:
        node, _ = self.place(rank)
        return self.dir(node) / "log" / "run" / "plog" / f"plog-{self.pid(rank)}_20251024090000000.log"

    def debug_plog(self, rank: int) -> Path:
        node, _ = self.place(rank)
        return self.dir(node) / "log" / "debug" / "plog" / f"plog-{self.pid(rank)}_20251024090000000.log"

    def init(self, rank: int, group: str, size: int, at: float) -> None:
        npu = self.place(rank)[1]
        pid = self.pid(rank)
        lines = [_info(pid, at - 1, f"hcom init start, rank[{rank}]")]
        lines.append(_info(pid, at, f"Entry-HcclCommInitRootInfoInner:ranks[{size}], rank[{rank}], rootinfo: host "
                                    f"ip[{self.host_ip(0)}] port[60000] nicDeploy[1] identifier[{group}], "
                                    f"deviceLogicId[{npu}]", "op_base.cc:1292"))
        lines += [_info(pid, at + 10 * i, f"alloc workspace size[{4096 * i}] stream[{i % 8}] ok")
                  for i in range(NOISE_LINES)]
        self._append(self.run_plog(rank), lines)

    def noise(self, rank: int, until: float) -> None:
        """INFO lines up to ``until``: this rank's process went on logging."""
        pid = self.pid(rank)
        self._append(self.debug_plog(rank), [_info(pid, until - 60 + i, "task dispatch ok") for i in range(60)])

    def timeout(self, rank: int, at: float, *, peers: Sequence[tuple[str, int]] = (), state: str = "stuck",
                op: str = "AllReduce", group: str | None = None, size: int | None = None, task: int = 21) -> None:
        node, npu = self.place(rank)
        event = HcclTimeout(group=group or self.group, rank=rank, rank_size=size or self.size, device=npu, at=at,
                            pid=self.pid(rank), local_ip=self.device_ip(node, npu),
                            peer_ips=tuple(ip for ip, _ in peers), peer_ranks=tuple(r for _, r in peers),
                            peer_state=state, op=op, task_id=task)
        self._append(self.debug_plog(rank), hccl_timeout_lines(event))

    def timeouts(self, ranks: Sequence[int], at: float, **kwargs: object) -> None:
        for offset, rank in enumerate(ranks):
            self.timeout(rank, at + offset * 0.5, **kwargs)  # type: ignore[arg-type]

    def cqe(self, rank: int, at: float, peer_ip: str) -> None:
        node, npu = self.place(rank)
        self._append(self.debug_plog(rank), roce_cqe_lines(RoceCqe(npu, at, self.pid(rank),
                                                                    self.device_ip(node, npu), peer_ip)))

    # -- tool outputs

    def tool(self, node: int, npu: int, command: str, text: str) -> None:
        path = self.dir(node) / "hccn" / f"hccn_tool_-i_{npu}_-{command}_-g.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def link_stat(self, node: int, npu: int, now: float, changes: Sequence[tuple[float, str]]) -> None:
        prefix = f"[devid {npu}]"
        records = sorted([(self.start - 86400, "LINK UP"), *changes], reverse=True)
        ups = sum(1 for _, state in records if state == "LINK UP")
        text = (f"{prefix}current time        : {_ctime(now)}\n{prefix}link up count       : {ups}\n"
                f"{prefix}link change records :\n"
                + "".join(f"{prefix}    {_ctime(at)}    {state}\n" for at, state in records))
        self.tool(node, npu, "link_stat", text)

    def optical(self, node: int, npu: int, rx_mw: float = 0.8, los: int = 0) -> None:
        lanes = "".join(f"Tx Power{lane}            : 0.9000 mW\nRx Power{lane}            : {rx_mw:.4f} mW\n"
                        for lane in range(4))
        self.tool(node, npu, "optical", "optical info:\npresent              : present\ntemperature          : 45 C\n"
                  + lanes + "RxPower High Thres   : 3.5481 mW\nRxPower Low Thres    : 0.0500 mW\n"
                  f"Rx Los Flag          : {los:#x}\n")

    def healthy_tools(self, node: int, npu: int, now: float) -> None:
        self.tool(node, npu, "link", "link status: UP\n")
        self.link_stat(node, npu, now, [])
        self.tool(node, npu, "net_health", "net health status: Success\n")
        self.optical(node, npu)
        self.tool(node, npu, "stat", "packet statistics:\nroce_rx_err_pkt_num:0\nroce_tx_err_pkt_num:0\n"
                  "mac_rx_bad_pkt_num:0\nroce_rx_all_pkt_num:123456\n")
        self.tool(node, npu, "ip", f"ipaddr:{self.device_ip(node, npu)}\nnetmask:255.255.0.0\n")

    def link_down(self, node: int, npu: int, at: float) -> None:
        self.tool(node, npu, "link", "link status: DOWN\n")
        self.tool(node, npu, "net_health", "net health status: Fault\n")
        self.link_stat(node, npu, T0 + 900, [(at, "LINK DOWN")])

    # -- whole files

    def rank_table(self, path: Path) -> Path:
        servers = [{"server_id": self.host_ip(node), "host_nic_ip": "reserve",
                    "device": [{"device_id": str(npu), "device_ip": self.device_ip(node, npu),
                                "rank_id": str(self.rank(node, npu))} for npu in range(self.npus)]}
                   for node in range(self.nodes)]
        path.write_text(json.dumps({"version": "1.0", "status": "completed", "server_count": str(self.nodes),
                                    "server_list": servers}))
        return path

    def manifest(self, node: int) -> None:
        """An unpacked bundle's manifest: the node's name and host address."""
        (self.dir(node) / "manifest.json").write_text(json.dumps(
            {"npuwatch_version": "0.1.0", "node": self.name(node), "created": T0 + 900,
             "addresses": [self.host_ip(node)]}))
