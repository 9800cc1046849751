"""Fail-slow on a real job without an NPU: 8 gloo ranks of a synchronous training loop, the agent's cpu backend
(collectors.cpu_ranks) reading them every 5 s, a real Prometheus scraping it every 5 s with
alerts/failslow.rules.yml loaded as shipped. One rank starts computing 2.5 times as much per step part-way;
NPUJobStraggler{cause="compute"} names that rank (and the npu the agent gave it) within 60 s of the onset,
and nothing fires before it (docs/failslow.md, "CPU ranks")."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.probes.records import RankReport
from agent.probes.train_loop import SlowDown, TrainLoop, run_train_loop
from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, start_prometheus

pytestmark = pytest.mark.slow  # about 160 s: a healthy minute, the slowdown, the alert's 30 s

RULES = REPO / "alerts" / "failslow.rules.yml"
RANKS = 8  # each rank gets a quarter of this machine's 2 cores at most; the busy fraction counts waiting to run
SLOW_RANK = 5
SLOW_AT_S = 70.0  # after its first step: the rules judge a minute of healthy steps (the `for` is 30 s) first
SLOW_FACTOR = 2.5
WITHIN_S = 60.0
ALERT = 'ALERTS{alertname="NPUJobStraggler", alertstate="firing"}'
# The rules compare this job's ranks: all 8 in the 30 s means, and the job computing (its median over 0.1).
COMPARED = ('count by (training_job) (npuwatch:npu_aicore_utilization:avg30s_by_rank) >= 8 and on (training_job) '
            'npuwatch:npu_aicore_utilization:avg30s_job_median > 0.1')
CONFIG = {
    **BASE_CONFIG,
    "labels": {"node": "cpu-node"},
    "collectors": {"npu_smi": {"enabled": False}, "dcmi": {"enabled": False}, "hccn_tool": {"enabled": False},
                   "cpu_ranks": {"enabled": True, "interval": "5s"}},
}


class Job:
    """The training loop in a thread; the slowed rank's onset as it reports it."""

    def __init__(self, loop: TrainLoop, deadline_s: float) -> None:
        self.slowed_at: float | None = None
        self.reports: list[RankReport] = []
        self.killed: str | None = None
        self._thread = threading.Thread(target=self._run, args=(loop, deadline_s), daemon=True)
        self._thread.start()

    def _event(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "stage" and "slowed_at" in event:
            self.slowed_at = float(event["slowed_at"])

    def _run(self, loop: TrainLoop, deadline_s: float) -> None:
        reports, self.killed = run_train_loop(loop, deadline_s, self._event)
        self.reports = list(reports)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def running(self) -> bool:
        return self._thread.is_alive()


def _firing(prom: PromProcess) -> list[dict[str, str]]:
    return [item["metric"] for item in prom.query(ALERT)]


def test_the_slowed_cpu_rank_is_named_within_a_minute_and_nothing_fires_before(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path, CONFIG, chips=1)
    prom: PromProcess | None = None
    job: Job | None = None
    try:
        wait_for(lambda: "npuwatch_collector_up" in daemon.metrics(), timeout=60)
        prom = start_prometheus(tmp_path, [f"127.0.0.1:{daemon.port}"], [RULES], scrape_interval="5s",
                                evaluation_interval="5s")
        loop = TrainLoop(ranks=RANKS, duration_s=SLOW_AT_S + WITHIN_S + 20, matmuls=400, grad_bytes=256 << 10,
                         slow=SlowDown(SLOW_RANK, SLOW_AT_S, SLOW_FACTOR))
        job = Job(loop, deadline_s=SLOW_AT_S + WITHIN_S + 180)
        before: list[dict[str, str]] = []
        named: list[dict[str, str]] = []
        named_at = 0.0
        compared_since: float | None = None  # when the rules began comparing the job's ranks
        while job.running():
            firing = _firing(prom)
            now = time.time()
            if job.slowed_at is None or now < job.slowed_at:
                before += firing
                if compared_since is None and prom.query(COMPARED):
                    compared_since = now
            elif firing:
                named, named_at = firing, now
                break
            elif now > job.slowed_at + WITHIN_S + 15:
                break
            time.sleep(1.0)
        assert job.slowed_at is not None, f"rank {SLOW_RANK} never slowed: {job.killed} {job.reports}"
        assert not before, f"fired before the slowdown: {before}"
        assert compared_since is not None and job.slowed_at - compared_since >= 30, (
            f"the rules compared the healthy ranks for less than the alert's 30 s: since {compared_since}, "
            f"slowed at {job.slowed_at}")
        print(f"compared healthy for {job.slowed_at - compared_since:.0f} s")
        assert named, (f"nothing fired within {time.time() - job.slowed_at:.0f} s of the slowdown; busy fractions: "
                       f"{prom.query('npuwatch:npu_aicore_utilization:avg30s_by_rank')}")
        ttn = named_at - job.slowed_at
        print(f"time to name: {ttn:.1f} s")
        assert [(a["alertname"], a["cause"], a["rank"], a["node"]) for a in named] == [
            ("NPUJobStraggler", "compute", str(SLOW_RANK), "cpu-node")], named
        training_job = named[0]["training_job"]
        assert "/127.0.0.1:" in training_job, training_job  # torchrun's rendezvous, prefixed with the host
        npus = prom.values(f'npu_job_info{{training_job="{training_job}", rank="{SLOW_RANK}"}}', "npu")
        assert list(npus) == [named[0]["npu"]], (npus, named)
        assert ttn <= WITHIN_S, f"named after {ttn:.0f} s"
    finally:
        if job is not None:
            job.join(SLOW_AT_S + WITHIN_S + 200)
        if prom is not None:
            prom.stop()
        daemon.stop()
