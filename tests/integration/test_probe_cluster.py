"""Cluster-scope all-reduce on loopback: several "nodes" meet at rank 0's TCPStore (gloo, cpu)."""

from __future__ import annotations

import argparse
import importlib.util
import uuid
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from agent.probes import cli as probe_cli
from agent.probes.records import ProbeResult, ProbeSettings
from agent.probes.runner import run_allreduce
from tests.support.ports import free_port

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


def node_settings(tag: str, ranks_per_node: int, deadline_s: float = 60.0) -> ProbeSettings:
    return ProbeSettings(backend="cpu", use_lock=False, devices=tuple(range(ranks_per_node)),
                         allreduce_bytes=64 << 10, warmup=1, iterations=2, deadline_s=deadline_s,
                         term_grace_s=1.0, tag=tag, extra_env={"GLOO_SOCKET_IFNAME": "lo"})


def run_nodes(nnodes: int, ranks_per_node: int, started: int | None = None,
              deadline_s: float = 60.0) -> tuple[list[ProbeResult], str]:
    tag = f"npuwatch-cluster-test-{uuid.uuid4().hex}"
    master = f"127.0.0.1:{free_port()}"
    probe = node_settings(tag, ranks_per_node, deadline_s)
    with ThreadPoolExecutor(max_workers=nnodes) as pool:
        futures = [pool.submit(run_allreduce, probe, "cluster", nnodes=nnodes, node_rank=node, master=master)
                   for node in range(started if started is not None else nnodes)]
        return [f.result() for f in futures], tag


def leftovers(tag: str) -> list[int]:
    pids = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if tag in " ".join(proc.info["cmdline"] or []):
                pids.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return pids


@needs_torch
@pytest.mark.slow
def test_three_nodes_report_one_consistent_result() -> None:
    results, tag = run_nodes(nnodes=3, ranks_per_node=1)
    for result in results:
        assert result.outcome == "pass", result.message
        assert result.scope == "cluster"
    measurements = [r.allreduce for r in results]
    assert all(m is not None and m.correct and m.world_size == 3 for m in measurements)
    # rank 0's timing, everywhere: every node exports the same busbw
    assert len({m.busbw_bytes_per_second for m in measurements if m is not None}) == 1
    ranks = sorted(int(r.ranks[0].result["rank"]) for r in results if r.ranks[0].result)
    assert ranks == [0, 1, 2]
    assert not leftovers(tag)


@needs_torch
@pytest.mark.slow
def test_a_node_that_never_joins_is_a_connect_timeout() -> None:
    results, tag = run_nodes(nnodes=2, ranks_per_node=1, started=1, deadline_s=5.0)
    [result] = results
    assert result.outcome == "timeout"
    assert result.stage == "connect"  # the process group never formed
    assert "5 s deadline" in result.message
    assert result.ranks[0].killed
    assert not leftovers(tag)


def test_cli_passes_cluster_flags_through(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, object] = {}

    def fake_run(settings: ProbeSettings, scope: str = "node", **kwargs: object) -> ProbeResult:
        seen.update(kwargs, scope=scope, devices=settings.devices)
        return ProbeResult(probe="allreduce", outcome="pass", started_at=0.0, duration_s=1.0, scope=scope)

    monkeypatch.setattr(probe_cli, "run_allreduce", fake_run)
    parser = argparse.ArgumentParser()
    probe_cli.add_arguments(parser)
    args = parser.parse_args(["allreduce", "--scope", "cluster", "--nnodes", "4", "--node-rank", "2",
                              "--master", "10.0.0.1:29500", "--devices", "0,1", "--no-lock"])
    assert probe_cli.main(args) == 0
    assert seen["scope"] == "cluster"
    assert (seen["nnodes"], seen["node_rank"], seen["master"]) == (4, 2, "10.0.0.1:29500")
    assert seen["devices"] == (0, 1)


def test_bad_master_and_node_rank_are_errors() -> None:
    probe = ProbeSettings(backend="cpu", use_lock=False, devices=(0,))
    assert run_allreduce(probe, "cluster", nnodes=2, node_rank=0, master="nohostport").outcome == "error"
    assert run_allreduce(probe, "cluster", nnodes=2, node_rank=5, master="127.0.0.1:1").outcome == "error"
