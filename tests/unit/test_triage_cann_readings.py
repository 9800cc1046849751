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
