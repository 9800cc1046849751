"""``npu_job_info`` through the agent's real path: the demo's fake npu-smi lists real child processes (started
here with a crafted environment) on its chips, the agent reads their environment, and /metrics names each
chip's job and rank."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.agent_harness import demo_bundle

SLURM = {"SLURM_JOB_ID": "4711", "SLURM_PROCID": "8", "SLURM_LOCALID": "0", "SLURM_NTASKS": "16"}
TORCHRUN = {"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29500", "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
            "TORCHELASTIC_RUN_ID": "none"}


@contextmanager
def _children(envs: list[Mapping[str, str]]) -> Iterator[list[subprocess.Popen[bytes]]]:
    """A ``sleep`` per environment, each in a session of its own, killed (whole group) and reaped after."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        for env in envs:
            started.append(subprocess.Popen(["sleep", "120"], env={"PATH": os.environ.get("PATH", ""), **env},
                                            start_new_session=True))
        yield started
    finally:
        for child in started:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(timeout=10)


def _series(body: bytes, name: str) -> list[dict[str, str]]:
    return [dict(sample.labels) for family in text_string_to_metric_families(body.decode())
            for sample in family.samples if sample.name == name]


def _values(body: bytes, name: str, key: str) -> dict[str, float]:
    return {sample.labels[key]: sample.value for family in text_string_to_metric_families(body.decode())
            for sample in family.samples if sample.name == name}


def test_each_chip_names_the_job_and_rank_of_its_process(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, chips=4)
    agent = bundle.agent
    assert bundle.demo is not None
    agent.collect_once()  # the chip list, with the ids the rank table is looked up by (physical, else logic)
    phy = {chip.npu: chip.phy_id if chip.phy_id is not None else chip.logic_id for chip in agent.chips()}
    assert phy[2] is not None
    table = tmp_path / "hccl.json"
    table.write_text(json.dumps({"version": "1.0", "status": "completed", "server_list": [
        {"server_id": "only-server", "device": [{"device_id": str(phy[2]), "rank_id": "5"},
                                                {"device_id": str(phy[2] + 100), "rank_id": "6"}]}]}))
    hostile = {"SLURM_JOB_ID": "evil\n} 1\nnpu_fake 1" + "x" * 300, "RANK": "-1"}
    envs = [SLURM, TORCHRUN, {"JOB_ID": "hccl-job", "RANK_TABLE_FILE": str(table)}, hostile]
    with _children(envs) as children:
        for npu, child in enumerate(children):
            bundle.demo.set_fault("process", chip=npu, pid=child.pid)
        agent.collect_once()
        body = agent.cache.render().body
        by_npu = {labels["npu"]: labels for labels in _series(body, "npu_job_info")}
        assert by_npu["0"] == {"npu": "0", "chip": "0", "training_job": "4711", "rank": "8", "local_rank": "0",
                               "world_size": "16", "source": "slurm"}
        assert by_npu["1"] == {"npu": "1", "chip": "0", "training_job": "10.1.2.3:29500", "rank": "3",
                               "local_rank": "1", "world_size": "8", "source": "torchrun"}
        assert (by_npu["2"]["training_job"], by_npu["2"]["rank"], by_npu["2"]["world_size"], by_npu["2"]["source"]) == (
            "hccl-job", "5", "2", "env")
        assert by_npu["3"]["training_job"] == ("evil} 1npu_fake 1" + "x" * 300)[:128] and by_npu["3"]["rank"] == ""
        assert len(by_npu) == 4 and len(_series(body, "npu_job_info")) == 4
        assert _values(body, "npuwatch_collector_up", "collector")["npu_jobs"] == 1.0

        # A process that ends: its chip loses its series, and the failure is counted once.
        children[0].kill()
        children[0].wait(timeout=10)
        for _ in range(2):
            agent.collect_once()
        body = agent.cache.render().body
        assert {labels["npu"] for labels in _series(body, "npu_job_info")} == {"1", "2", "3"}
        assert _values(body, "npuwatch_job_info_failures_total", "reason")["gone"] == 1.0
    agent.stop()


def test_job_info_can_be_switched_off(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"job_info": False}}}, chips=2)
    assert bundle.demo is not None
    with _children([SLURM]) as children:
        bundle.demo.set_fault("process", chip=0, pid=children[0].pid)
        bundle.agent.collect_once()
        body = bundle.agent.cache.render().body
        assert _series(body, "npu_job_info") == []
        assert "npu_jobs" not in _values(body, "npuwatch_collector_up", "collector")
    bundle.agent.stop()
