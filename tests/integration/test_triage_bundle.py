"""``npuwatch bundle`` on demo nodes, and reading bundles back safely.

The round trip runs the real commands: three demo nodes log one coordinated HCCL incident (the
demo's ``hccl_timeout`` log fault, same group and time, each chip its own rank) while node-c's
NPU 1 link is down; ``npuwatch bundle --demo`` on each, ``npuwatch triage`` on the bundles.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.core.config import build_config
from agent.demo.node import DemoNode
from agent.triage.bundle import BundleOptions, write_bundle
from agent.triage.inputs import Limits, read_input
from tests.support.paths import REPO

GROUP = "29.1.0.10%enp_60000_0_1761275812718970"


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "agent", *argv], cwd=REPO, env=environment, capture_output=True,
                          text=True, timeout=120, check=False)


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isreg()}


def manifest(bundle: Path) -> dict[str, Any]:
    return json.loads(members(bundle)["manifest.json"])


def config_for(tmp_path: Path, **collectors: Any) -> Any:
    raw = {"collectors": {"hccn_tool": {"hccn_conf": str(tmp_path / "hccn.conf")}, **collectors},
           "web": {"port": 1}}
    return build_config(raw)


def test_round_trip_on_demo_nodes(tmp_path: Path) -> None:
    incident = time.time() - 600
    nodes = {}
    for index, name in enumerate(("node-a", "node-b", "node-c")):
        nodes[name] = DemoNode(tmp_path / name).create(chips=4, seed=index)
    nodes["node-c"].set_fault("link_down", chip=1, since=incident - 330)
    dead = 9
    for index, node in enumerate(nodes.values()):
        for chip in range(4):
            rank = index * 4 + chip
            if rank != dead:
                node.set_fault("hccl_timeout", chip=chip, group=GROUP, rank=rank, rank_size=12, time=incident + rank,
                               peer_ips=["29.3.1.11"], peer_ranks=[dead], peer_state="lost")
    out = tmp_path / "bundles"
    for name in nodes:
        done = cli("bundle", "--demo", "--demo-dir", str(tmp_path / name), "-o", str(out / f"{name}.tar.gz"))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(out / f"{name}.tar.gz")
        assert "bundle:" not in done.stderr  # progress only on a terminal
    files = members(out / "node-c.tar.gz")
    assert "tools/hccn_tool/1/link.txt" in files and files["tools/hccn_tool/1/link.txt"] == b"link status: DOWN\n"
    assert any(name.startswith("logs/") and "/debug/plog/plog-" in name for name in files)
    info = manifest(out / "node-c.tar.gz")
    assert info["node"] == "node-c"
    assert info["window"]["until"] - info["window"]["since"] == pytest.approx(7200)
    assert any("metrics" in failure for failure in info["failed"])  # no agent running: absent is fine
    done = cli("triage", "--json", *(str(out / f"{name}.tar.gz") for name in nodes))
    assert done.returncode == 2, done.stdout + done.stderr
    report = json.loads(done.stdout)
    (found,) = report["incidents"]
    assert found["comm"] == GROUP
    assert found["silent_ranks"] == [dead]
    culprit = found["culprits"][0]
    assert (culprit["node"], culprit["npu"], culprit["rank"], culprit["cause"]) == ("node-c", 1, dead, "link_down")
    lead = report["verdict"]  # check's verdict object, led by the named culprit
    assert (lead["status"], lead["cause"], lead["npu"], lead["node"], report["outcome"]) == (
        "fail", "link_down", 1, "node-c", "culprit")
    assert json.loads(files["config.json"])["npuwatch_config"]["labels"] is not None  # the node's config rides along
    text = cli("triage", *(str(out / f"{name}.tar.gz") for name in nodes))
    assert text.returncode == 2
    assert text.stdout.splitlines()[-2].startswith("verdict: FAIL node-c NPU 1 (rank 9): RoCE link down")


def test_logs_newest_first_up_to_the_cap(tmp_path: Path) -> None:
    logs = tmp_path / "logs" / "debug" / "plog"
    logs.mkdir(parents=True)
    now = time.time()
    for index in range(4):
        path = logs / f"plog-{index}_1.log"
        path.write_bytes(b"".join(b"[INFO] HCCL(1,p):2025-10-24-10:00:00.000.000 [a.cc:1] line %d\n" % i
                                  for i in range(30000)))  # about 1.7 MB each
        os.utime(path, (now - 100 * index, now - 100 * index))
    old = logs / "plog-old_1.log"
    old.write_text("[INFO] old\n")
    os.utime(old, (now - 86400, now - 86400))
    config = config_for(tmp_path, hccl_logs={"paths": [str(tmp_path / "logs")]})
    bundle = write_bundle(config, BundleOptions(output=tmp_path / "b.tar.gz", node="n1", max_log_bytes=3 << 20,
                                                metrics=False, environ={}))
    files = members(bundle)
    kept = sorted(name for name in files if name.startswith("logs/"))
    assert [name.rsplit("/", 1)[1] for name in kept] == ["plog-0_1.log", "plog-1_1.log"]
    info = manifest(bundle)
    newest = files[next(name for name in kept if name.endswith("plog-0_1.log"))]
    partial = files[next(name for name in kept if name.endswith("plog-1_1.log"))]
    assert len(newest) + len(partial) == 3 << 20
    assert partial.split(b"\n", 1)[0].strip() == b""  # the cut line is blanked, the rest are whole lines
    assert partial.split(b"\n")[1].startswith(b"[INFO] HCCL(1,p)")
    assert any("plog-1_1.log: kept the newest" in cut for cut in info["cut"])
    assert any("plog-2_1.log: left out" in cut for cut in info["cut"])
    assert not any("plog-old" in name for name in files)


def test_no_symlink_out_of_a_log_root(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    (root / "debug" / "plog").mkdir(parents=True)
    secret = tmp_path / "secret.log"
    secret.write_text("[ERROR] secret\n")
    (root / "debug" / "plog" / "plog-9_1.log").symlink_to(secret)
    (root / "debug" / "plog" / "plog-1_1.log").write_text("[ERROR] HCCL(1,p):2025-10-24-10:00:00.000.000 x\n")
    config = config_for(tmp_path, hccl_logs={"paths": [str(root)]})
    files = members(write_bundle(config, BundleOptions(output=tmp_path / "b.tar.gz", node="n", metrics=False,
                                                       environ={})))
    names = [name for name in files if name.startswith("logs/")]
    assert [name.rsplit("/", 1)[1] for name in names] == ["plog-1_1.log"]
    assert b"secret" not in b"".join(files.values())


def test_flight_recorder_dumps_and_rank_table(tmp_path: Path) -> None:
    dumps = tmp_path / "fr"
    dumps.mkdir()
    for rank in range(2):
        (dumps / f"trace_{rank}").write_bytes(b"\x80\x04}\x94.")
    stale = dumps / "trace_9"
    stale.write_bytes(b"\x80\x04}\x94.")
    os.utime(stale, (time.time() - 86400, time.time() - 86400))
    (dumps / "trace_link").symlink_to(dumps / "trace_0")
    extra = tmp_path / "more"
    extra.mkdir()
    (extra / "hccl_trace_rank_5").write_bytes(b"{}")
    table = tmp_path / "hccl.json"
    table.write_text('{"version": "1.0", "server_list": []}')
    config = config_for(tmp_path)
    environ = {"TORCH_FR_DUMP_TEMP_FILE": str(dumps / "trace_"), "RANK_TABLE_FILE": str(table)}
    bundle = write_bundle(config, BundleOptions(output=tmp_path / "b.tar.gz", node="n", metrics=False,
                                                environ=environ, dump_paths=[str(extra)]))
    files = members(bundle)
    dumped = sorted(name.rsplit("/", 1)[1] for name in files if name.startswith("fr/"))
    assert dumped == ["hccl_trace_rank_5", "trace_0", "trace_1"]
    assert files["ranktable/hccl.json"] == table.read_bytes()
    assert manifest(bundle)["env"]["TORCH_FR_DUMP_TEMP_FILE"] == str(dumps / "trace_")


class _Metrics(http.server.BaseHTTPRequestHandler):
    # NPU 3's link is down, as the agent judged it (its finding); NPU 4's raw reading alone is judged by no one
    body = (b"# HELP npu_roce_link_up x\n# TYPE npu_roce_link_up gauge\n"
            b'npu_roce_link_up{npu="3",chip="0",node="n"} 0\nnpu_roce_link_up{npu="2",chip="0",node="n"} 1\n'
            b'npu_roce_link_up{npu="4",chip="0",node="n"} 0\n'
            b"# HELP npu_fault_since_timestamp_seconds x\n# TYPE npu_fault_since_timestamp_seconds gauge\n"
            b'npu_fault_since_timestamp_seconds{npu="3",chip="0",kind="link_down",status="fail",node="n"} 1.7e+09\n')

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def agent_port() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_the_agents_metrics_are_bundled_and_read(tmp_path: Path, agent_port: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://192.0.2.1:9")  # the local agent is asked directly, never via a proxy
    config = build_config({"web": {"port": agent_port, "listen_address": "127.0.0.1"},
                           "collectors": {"hccn_tool": {"hccn_conf": str(tmp_path / "none")}}})
    bundle = write_bundle(config, BundleOptions(output=tmp_path / "b.tar.gz", node="n", environ={}))
    assert members(bundle)["metrics.prom"] == _Metrics.body
    evidence = read_input(str(bundle))
    faults = [(f.node, f.npu, f.kind) for f in evidence.faults]
    assert ("n", 3, "link_down") in faults and ("n", 2, "link_down") not in faults
    assert ("n", 4, "link_down") not in faults  # triage reads the node's judgement, it does not judge a reading


def _tar(path: Path, entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple[tarfile.TarInfo,
                                                                                                    bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data if kind == tarfile.REGTYPE else None


def test_unsafe_members_are_refused(tmp_path: Path) -> None:
    plog = b"[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.000 [t.cc:1] [7]Task run failed, groupRank information is " \
           b"group:[G], user define information[], rankSize[2], rankId[1].\n"
    bundle = _tar(tmp_path / "evil.tar.gz", [
        _member("x/manifest.json", json.dumps({"npuwatch_version": "0", "node": "evil"}).encode()),
        _member("../../escape.log", plog),
        _member("/abs/path.log", plog),
        _member("x/logs/link.log", kind=tarfile.SYMTYPE, link="/etc/passwd"),
        _member("x/logs/hard.log", kind=tarfile.LNKTYPE, link="x/manifest.json"),
        _member("x/logs/fifo", kind=tarfile.FIFOTYPE),
        _member("x/logs/ok.log", plog),
    ])
    evidence = read_input(str(bundle))
    problems = evidence.nodes["evil"].problems
    assert any("'../../escape.log': unsafe member name" in p for p in problems)
    assert any("'/abs/path.log': unsafe member name" in p for p in problems)
    assert any("'x/logs/link.log': link refused" in p for p in problems)
    assert any("'x/logs/hard.log': link refused" in p for p in problems)
    assert any("'x/logs/fifo': not a regular file" in p for p in problems)
    assert [(f.node, f.comm, f.rank) for f in evidence.failures] == [("evil", "G", 1)]


def test_size_caps_stop_a_gzip_bomb(tmp_path: Path) -> None:
    big = b"[INFO] noise line that compresses very well\n" * 200_000  # 9 MB, a few kB compressed
    bundle = _tar(tmp_path / "bomb.tar.gz", [_member(f"x/logs/{i}.log", big) for i in range(4)])
    assert bundle.stat().st_size < 200_000
    evidence = read_input(str(bundle), Limits(member_bytes=4 << 20, input_bytes=10 << 20))
    coverage = evidence.nodes["bomb"]
    assert coverage.bytes <= 10 << 20
    assert any("only the first" in p for p in coverage.problems)
    assert any("byte limit" in p or "stopped after" in p for p in coverage.problems)


def test_node_and_cluster_verdicts_agree(tmp_path: Path) -> None:
    """diagnose on a node and triage on its bundle put the same fault first (one scoring)."""
    node = DemoNode(tmp_path / "node-a").create(chips=4, seed=0)
    now = time.time()
    node.set_fault("health", chip=1, state="Alarm", codes=["80E18005"])
    node.set_fault("hbm_dbe", chip=0)
    node.set_fault("link_down", chip=3, since=now - 900)
    for chip in (0, 2):
        node.set_fault("hccl_timeout", chip=chip, group=GROUP, rank=chip, rank_size=4, time=now - 600 + chip)
    diagnosed = cli("diagnose", "--demo", "--demo-dir", str(tmp_path / "node-a"), "--json",
                    env={"NPUWATCH_DIAGNOSE_SAMPLE_GAP": "0.2"})
    verdict = json.loads(diagnosed.stdout)["verdict"]
    assert (verdict["cause"], verdict["npu"]) == ("link_down", 3)
    bundled = cli("bundle", "--demo", "--demo-dir", str(tmp_path / "node-a"), "-o", str(tmp_path / "a.tar.gz"))
    assert bundled.returncode == 0, bundled.stderr
    done = cli("triage", "--json", str(tmp_path / "a.tar.gz"))
    culprits = json.loads(done.stdout)["incidents"][0]["culprits"]
    assert (culprits[0]["node"], culprits[0]["npu"], culprits[0]["cause"]) == ("node-a", 3, "link_down")
    order = [(c["npu"], c["cause"]) for c in culprits]
    assert order.index((0, "hbm_ecc")) > 0 and order.index((1, "chip_fault")) > 0


def test_a_directory_is_read_without_leaving_it(tmp_path: Path) -> None:
    import gzip

    block = (b"[ERROR] HCCL(7,p):2025-10-24-10:00:00.000.000 [t.cc:1] [7]Task run failed, groupRank information is "
             b"group:[G], user define information[], rankSize[2], rankId[%d].\n")
    node = tmp_path / "node-q"
    (node / "logs").mkdir(parents=True)
    (node / "logs" / "rotated.log.gz").write_bytes(gzip.compress(block % 0))
    (node / "logs" / "inside.log").write_bytes(block % 1)
    (node / "logs" / "alias.log").symlink_to(node / "logs" / "inside.log")
    outside = tmp_path / "outside.log"
    outside.write_bytes(block % 7)
    (node / "logs" / "escape.log").symlink_to(outside)
    (node / "logs" / "core").write_bytes(b"\x7fELF\x00\x00binary")
    evidence = read_input(str(node))
    assert sorted(f.rank for f in evidence.failures) == [0, 1, 1]  # the alias inside the root is read too
    assert any("escape.log: symlink out of" in p for p in evidence.nodes["node-q"].problems)
