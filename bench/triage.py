"""Benchmark ``npuwatch triage`` over a fleet's bundles: seconds and peak memory.

    python bench/triage.py                 # 64 nodes x 8 ranks, 3 GB of logs (uncompressed) in all
    python bench/triage.py --quick         # 4 nodes, about 24 MB: a smoke test
    python bench/triage.py --nodes 16 --gb 1 --jobs 2 --keep

Generates one bundle per node under a temporary directory in ``--tmp`` (default /tmp), in the
layout ``npuwatch bundle`` writes: per rank a run plog (init line, INFO noise) and a debug plog
(INFO noise with 0.2 % WARNING lines, and the failure lines of its incidents), the node's hccn_tool
outputs and hccn.conf, and a manifest. Two incidents are planted: the world communicator (every
rank) times out after NPU 3's link goes down on node 17 of 64 (its peers lose its heartbeat), and
later node 40's 8-rank communicator times out around a hung rank (the same fractions of the fleet
for other sizes). Then it runs triage's reader and engine
as ``npuwatch triage --jobs N`` does (a process pool over bundles), checks the two culprits, and
prints wall seconds, peak RSS of the parent and of the largest worker, and the load average. The
data is deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.demo.plog import HcclTimeout, hccl_timeout_lines, plog_timestamp
from agent.triage.engine import analyze
from agent.triage.inputs import read_inputs
from bench._util import Table, verdict

T0 = 1_761_300_000.0
NPUS = 8
WORLD = "10.0.0.1%enp_60000_0_1761275812718970"
DEAD_NPU, HUNG_NPU = 3, 5
MB = 1 << 20
NOISE_TEXTS = (
    "alloc workspace size[{n}] stream[{s}] ok",
    "[AllReduce] op finished, tag[AllReduce_{g}], count[{n}], dataType[float16], stream[{s}]",
    "notify record success, notifyId[{n}], stream[{s}]",
    "HcclCommunicator: transport link established, localRank[{r}], remoteRank[{s}]",
    "memory pool reuse, size[{n}] bytes, timeout[1836]",
)


def node_name(node: int) -> str:
    return f"node-{node:03d}"


def device_ip(node: int, npu: int) -> str:
    return f"29.{node // 200 + 1}.{node % 200}.{10 + npu}"


def _noise_block(pid: int, rank: int, lines: int) -> bytes:
    out = []
    for i in range(lines):
        at = T0 - 3000 + i * 0.37
        level = "[WARNING]" if i % 500 == 499 else "[INFO]"
        text = NOISE_TEXTS[i % len(NOISE_TEXTS)].format(n=(i * 7919) % 100000, s=i % 8, g=WORLD, r=rank)
        out.append(f"{level} HCCL({pid},python3):{plog_timestamp(at)} [hccl_op.cc:{100 + i % 900}] [{pid + 7}]{text}\n")
    return "".join(out).encode()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(T0 + 900)
    tar.addfile(info, io.BytesIO(data))


@dataclass(frozen=True)
class Plan:
    nodes: int
    bytes_per_rank: int
    dead_node: int  # its NPU DEAD_NPU's link is down; the world communicator times out
    hung_node: int  # its rank on NPU HUNG_NPU hangs; its 8-rank communicator times out


def make_bundle(out: Path, node: int, plan: Plan) -> int:
    """Write node ``node``'s bundle; returns the log bytes in it."""
    nodes, bytes_per_rank = plan.nodes, plan.bytes_per_rank
    name = node_name(node)
    prefix = f"{name}-20251024-101500"
    total = 0
    world = nodes * NPUS
    with tarfile.open(out / f"{name}.tar.gz", "w:gz", compresslevel=1) as tar:
        conf = []
        for npu in range(NPUS):
            rank = node * NPUS + npu
            pid = 100000 + rank
            block = _noise_block(pid, rank, 2000)
            repeats = max(1, bytes_per_rank // len(block))
            init = (f"[INFO] HCCL({pid},python3):{plog_timestamp(T0 - 3500)} [op_base.cc:1292] [{pid}]"
                    f"Entry-HcclCommInitRootInfoInner:ranks[{world}], rank[{rank}], rootinfo: host ip[10.0.0.1] "
                    f"port[60000] nicDeploy[1] identifier[{WORLD}], deviceLogicId[{npu}]\n"
                    f"[INFO] HCCL({pid},python3):{plog_timestamp(T0 - 3499)} [op_base.cc:1292] [{pid}]"
                    f"Entry-HcclCommInitRootInfoInner:ranks[{NPUS}], rank[{npu}], rootinfo: host ip[10.0.{node}.1] "
                    f"port[60001] nicDeploy[1] identifier[tp-{name}], deviceLogicId[{npu}]\n").encode()
            run = init + block
            failures = b""
            dead = (node, npu) == (plan.dead_node, DEAD_NPU)
            if not dead:
                failures += "".join(line + "\n" for line in hccl_timeout_lines(HcclTimeout(
                    WORLD, rank, world, npu, T0 + rank * 0.01, pid, device_ip(node, npu),
                    peer_ips=(device_ip(plan.dead_node, DEAD_NPU),), peer_ranks=(plan.dead_node * NPUS + DEAD_NPU,),
                    peer_state="lost"))).encode()
            if node == plan.hung_node and npu != HUNG_NPU:
                failures += "".join(line + "\n" for line in hccl_timeout_lines(HcclTimeout(
                    f"tp-{name}", npu, NPUS, npu, T0 + 3600 + npu, pid, device_ip(node, npu),
                    peer_ips=(device_ip(node, HUNG_NPU),), peer_ranks=(HUNG_NPU,), peer_state="stuck",
                    task_id=99))).encode()
            debug = block * (repeats - 1) + failures + block
            _add(tar, f"{prefix}/logs/root/ascend/log/run/plog/plog-{pid}_20251024090000000.log", run)
            _add(tar, f"{prefix}/logs/root/ascend/log/debug/plog/plog-{pid}_20251024090000000.log", debug)
            total += len(run) + len(debug)
            link = "DOWN" if dead else "UP"
            stat = f"[devid {npu}]current time        : {time.asctime(time.localtime(T0 + 900))}\n" \
                   f"[devid {npu}]link up count       : 1\n[devid {npu}]link change records :\n"
            if dead:
                stat += f"[devid {npu}]    {time.asctime(time.localtime(T0 - 300))}    LINK DOWN\n"
            stat += f"[devid {npu}]    {time.asctime(time.localtime(T0 - 86400))}    LINK UP\n"
            tools = {"link": f"link status: {link}\n", "link_stat": stat,
                     "net_health": "net health status: " + ("Fault" if dead else "Success") + "\n",
                     "ip": f"ipaddr:{device_ip(node, npu)}\nnetmask:255.255.0.0\n"}
            for command, text in tools.items():
                _add(tar, f"{prefix}/tools/hccn_tool/{npu}/{command}.txt", text.encode())
            conf.append(f"address_{npu}={device_ip(node, npu)}\n")
        _add(tar, f"{prefix}/etc/hccn.conf", "".join(conf).encode())
        _add(tar, f"{prefix}/manifest.json", json.dumps(
            {"npuwatch_version": "bench", "node": name, "created": T0 + 900, "addresses": [f"10.0.{node}.1"]}
        ).encode())
    return total


def generate(out: Path, plan: Plan, jobs: int) -> int:
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        sizes = list(pool.map(make_bundle, [out] * plan.nodes, range(plan.nodes), [plan] * plan.nodes))
    return sum(sizes)


def measure(out: Path, jobs: int) -> dict[str, object]:
    """Triage every bundle in ``out`` as ``npuwatch triage --jobs N`` does; time, memory and culprits."""
    paths = sorted(str(path) for path in out.glob("*.tar.gz"))
    start = time.perf_counter()
    report = analyze(read_inputs(paths, jobs=jobs))
    seconds = time.perf_counter() - start
    culprits = [(i.culprits[0].node, i.culprits[0].npu, i.culprits[0].cause) for i in report.incidents if i.culprits]
    return {"seconds": seconds, "parent_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "worker_rss": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, "culprits": culprits}


def measure_in_child(out: Path, jobs: int) -> dict[str, Any]:
    """``measure`` in a fresh process, so the generator's memory is not counted."""
    done = subprocess.run([sys.executable, __file__, "--measure", str(out), "--jobs", str(jobs)],
                          capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    result["culprits"] = [tuple(c) for c in result["culprits"]]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--gb", type=float, default=3.0, help="log gigabytes (10^9 bytes, uncompressed) in all")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes for triage")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="where to generate the bundles")
    parser.add_argument("--keep", action="store_true", help="keep the generated bundles")
    parser.add_argument("--quick", action="store_true", help="4 nodes and 24 MB: a smoke test")
    parser.add_argument("--measure", metavar="DIR", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.jobs)))
        return 0
    nodes, total = (4, 24_000_000) if args.quick else (max(3, args.nodes), int(args.gb * 1e9))
    plan = Plan(nodes, total // (nodes * NPUS), dead_node=nodes * 17 // 64, hung_node=nodes * 40 // 64)
    out = Path(tempfile.mkdtemp(prefix="npuwatch-bench-triage-", dir=args.tmp))
    try:
        started = time.perf_counter()
        log_bytes = generate(out, plan, args.jobs)
        generated_s = time.perf_counter() - started
        compressed = sum(path.stat().st_size for path in out.glob("*.tar.gz"))
        load_before = os.getloadavg()
        result = measure_in_child(out, args.jobs)
        load_after = os.getloadavg()
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    seconds = float(result["seconds"])
    parent, worker = int(result["parent_rss"]), int(result["worker_rss"])
    found = result["culprits"]
    expected = [(node_name(plan.dead_node), DEAD_NPU, "link_down"),
                (node_name(plan.hung_node), HUNG_NPU, "process_hang")]
    quick = args.quick
    table = Table()
    table.add("bundles", f"{nodes} nodes x {NPUS} ranks, {log_bytes / 1e9:.2f} GB logs, "
                         f"{compressed / 1e6:.0f} MB compressed", "64 x 8, 3 GB", "-")
    table.add("triage wall time", f"{seconds:.1f} s with {args.jobs} workers", "< 60 s",
              verdict(None if quick else seconds < 60))
    table.add("throughput", f"{log_bytes / 1e6 / seconds:.0f} MB/s of logs", "-", "-")
    table.add("peak RSS, parent", f"{parent / MB:.0f} MB", "-", "-")
    table.add("peak RSS, largest worker", f"{worker / MB:.0f} MB", "-", "-")
    table.add("peak RSS, parent + workers (bound)", f"{(parent + worker * args.jobs) / MB:.0f} MB", "< 500 MB",
              verdict(None if quick else parent + worker * args.jobs < 500 * MB))
    table.add("culprits", "; ".join(f"{n} NPU {p} {c}" for n, p, c in found),
              "; ".join(f"{n} NPU {p} {c}" for n, p, c in expected), verdict(found == expected))
    table.add("load average (1 min) before / after", f"{load_before[0]:.2f} / {load_after[0]:.2f}", "-", "-")
    table.note(f"generated in {generated_s:.1f} s; {os.cpu_count()} CPUs")
    print(table.render())
    return 0 if found == expected else 1


if __name__ == "__main__":
    raise SystemExit(main())
