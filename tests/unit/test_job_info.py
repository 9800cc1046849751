"""Job and rank of every chip: ``collectors.job_info`` (environment -> identity -> samples) and
``collectors.job_env`` (the cached environment reader, rank tables, failures), with injected readers."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from collectors.base import ChipRef, NoData, Sample
from collectors.catalogue import CATALOGUE
from collectors.hccl import ranktable
from collectors.job_env import FAILURE_METRIC, JobEnvReader, JobInfoCollector
from collectors.job_info import (
    MAX_JOB_CHARS,
    METRIC,
    JobIdentity,
    choose_process,
    identity_from_environ,
    job_samples,
    rank_in_table,
)
from collectors.npu_smi_info_records import InfoTable, NpuProcess

GIB = 1024.0**3

SLURM = {"SLURM_JOB_ID": "4711", "SLURM_PROCID": "12", "SLURM_LOCALID": "4", "SLURM_NTASKS": "64",
         "PATH": "/usr/bin"}
TORCHRUN = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "RANK": "9", "LOCAL_RANK": "1",
            "WORLD_SIZE": "16", "TORCHELASTIC_RUN_ID": "none"}


def _process(pid: int, npu: int = 0, chip: int = 0, memory_gib: float | None = 1.0) -> NpuProcess:
    return NpuProcess(npu=npu, chip=chip, pid=pid, name="python3",
                      memory_bytes=None if memory_gib is None else memory_gib * GIB, container_pid=None)


def _labels(sample: Sample) -> dict[str, str]:
    return dict(sample.labels)


class FakeProcs:
    """psutil's answers for a few pids: (start time, environment), or an exception to raise."""

    def __init__(self, table: Mapping[int, tuple[float, Mapping[str, str]] | BaseException]) -> None:
        self.table = dict(table)
        self.environ_calls: list[int] = []

    def _answer(self, pid: int) -> tuple[float, Mapping[str, str]]:
        answer = self.table.get(pid, psutil.NoSuchProcess(pid))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def started(self, pid: int) -> float:
        return self._answer(pid)[0]

    def environ(self, pid: int) -> tuple[float, Mapping[str, str]]:
        self.environ_calls.append(pid)
        return self._answer(pid)

    def reader(self, proc_root: Path | None = None, names: set[str] | None = None) -> JobEnvReader:
        return JobEnvReader(self.environ, self.started, str(proc_root or "/nonexistent-proc"),
                            lambda: set(names or {"10.0.0.1"}))


def _failures(reader: JobEnvReader) -> dict[str, float]:
    return {dict(s.labels)["reason"]: s.value for s in reader.failure_samples() if s.metric == FAILURE_METRIC}


# --- the environment


def test_slurm_environment_names_job_rank_local_rank_and_size() -> None:
    assert identity_from_environ(SLURM) == JobIdentity("4711", "12", "4", "64", "slurm")


def test_torchrun_without_slurm_is_named_by_its_rendezvous_address() -> None:
    assert identity_from_environ(TORCHRUN) == JobIdentity("10.0.0.1:29500", "9", "1", "16", "torchrun")
    with_id = identity_from_environ({**TORCHRUN, "TORCHELASTIC_RUN_ID": "run-42"})
    assert (with_id.job, with_id.source) == ("run-42", "torchrun")


def test_torchrun_under_slurm_takes_the_slurm_job_and_the_worker_rank() -> None:
    found = identity_from_environ({**SLURM, **TORCHRUN})
    assert found == JobIdentity("4711", "9", "1", "16", "slurm")


def test_hccl_job_id_and_rank_id() -> None:
    found = identity_from_environ({"JOB_ID": "10087", "RANK_ID": "3", "RANK_SIZE": "8"})
    assert found == JobIdentity("10087", "3", "", "8", "env")


def test_a_process_without_job_variables_names_nothing() -> None:
    found = identity_from_environ({"PATH": "/usr/bin", "MASTER_ADDR": "10.0.0.1"})  # no port: no rendezvous
    assert found == JobIdentity() and not found.named


def test_rank_table_is_asked_only_when_no_variable_gives_the_rank() -> None:
    asked: list[bool] = []

    def table_rank() -> tuple[str, str]:
        asked.append(True)
        return "5", "32"

    assert identity_from_environ({"JOB_ID": "7"}, table_rank) == JobIdentity("7", "5", "", "32", "env")
    assert identity_from_environ({"JOB_ID": "7", "RANK": "1"}, table_rank).rank == "1"
    assert len(asked) == 1


@pytest.mark.parametrize("value", ["-1", "1e3", "0x10", "\u0663", "99999999999", " ", "1 2", "12345678"])
def test_a_rank_that_is_not_a_plain_small_integer_is_dropped(value: str) -> None:
    found = identity_from_environ({"SLURM_JOB_ID": "1", "RANK": value, "WORLD_SIZE": value})
    assert (found.rank, found.world_size) == ("", "")


def test_leading_zeros_and_blanks_are_normalised() -> None:
    assert identity_from_environ({"RANK": " 007 "}).rank == "7"


def test_hostile_job_loses_control_characters_and_is_cut() -> None:
    hostile = "job\n} 1\nnpu_fake_metric 1\x1b[31m\u2028" + "x" * 1000
    found = identity_from_environ({"SLURM_JOB_ID": hostile, "RANK": "0"})
    assert len(found.job) == MAX_JOB_CHARS
    assert not any(ord(char) < 0x20 or char == "\u2028" for char in found.job)
    assert found.job.startswith("job} 1npu_fake_metric 1[31m")
    # All controls: nothing left, so the next variable names the job.
    assert identity_from_environ({"SLURM_JOB_ID": "\n\t", "JOB_ID": "8"}).job == "8"


# --- one process per chip


def test_the_process_with_most_memory_stands_for_the_chip_then_the_lowest_pid() -> None:
    named = {pid: JobIdentity(job="j", rank=str(pid)) for pid in (10, 20, 30)}
    processes = [_process(30, memory_gib=2), _process(10, memory_gib=1), _process(20, memory_gib=2)]
    chosen = choose_process(processes, lambda process: named[process.pid])
    assert chosen is not None and chosen[0].pid == 20
    without_memory = [_process(30, memory_gib=None), _process(10, memory_gib=None)]
    chosen = choose_process(without_memory, lambda process: named[process.pid])
    assert chosen is not None and chosen[0].pid == 10


def test_rows_of_one_pid_are_summed_and_unnamed_or_unreadable_processes_are_passed_over() -> None:
    identities = {1: None, 2: JobIdentity(), 3: JobIdentity(job="j", rank="0")}
    processes = [_process(1, memory_gib=40), _process(2, memory_gib=30), _process(3, memory_gib=1),
                 _process(3, memory_gib=1)]
    chosen = choose_process(processes, lambda process: identities[process.pid])
    assert chosen is not None and chosen[0].pid == 3
    assert choose_process(processes[:2], lambda process: identities[process.pid]) is None


def test_one_series_per_chip_with_the_catalogue_labels() -> None:
    procs = FakeProcs({11: (1.0, {**SLURM, "SLURM_PROCID": "0"}), 12: (1.0, {**SLURM, "SLURM_PROCID": "1"}),
                       13: (1.0, {"PATH": "/bin"})})
    processes = [_process(11, npu=0, memory_gib=30), _process(12, npu=0, memory_gib=2),
                 _process(12, npu=1, memory_gib=30), _process(13, npu=2)]
    chips = [ChipRef(npu, 0) for npu in range(3)]
    out = job_samples(processes, chips, procs.reader().identity)
    assert [sample.metric for sample in out] == [METRIC, METRIC]
    assert [(_labels(s)["npu"], _labels(s)["rank"]) for s in out] == [("0", "0"), ("1", "1")]
    assert tuple(key for key, _ in out[0].labels) == CATALOGUE[METRIC].labels
    assert all(sample.value == 1.0 for sample in out)


def test_the_job_label_is_training_job_never_a_prometheus_target_label() -> None:
    # `job` and `instance` belong to the scrape: an exported `job` is renamed `exported_job` (honor_labels
    # false) or replaces the scrape's (true), and the series then escapes every job="npuwatch" selector.
    procs = FakeProcs({11: (1.0, SLURM)})
    out = job_samples([_process(11)], [ChipRef(0, 0)], procs.reader().identity)
    labels = _labels(out[0])
    assert tuple(labels) == ("npu", "chip", "training_job", "rank", "local_rank", "world_size", "source")
    assert labels["training_job"] == SLURM["SLURM_JOB_ID"]
    assert not {"job", "instance"} & set(CATALOGUE[METRIC].labels)


# --- the reader: failures, cache


@pytest.mark.parametrize(("error", "reason"), [
    (psutil.AccessDenied(7), "access_denied"),
    (psutil.NoSuchProcess(7), "gone"),
    (psutil.ZombieProcess(7), "zombie"),
])
def test_an_unreadable_process_gives_no_series_and_is_counted_once(error: BaseException, reason: str) -> None:
    procs = FakeProcs({7: error, 8: (1.0, TORCHRUN)})
    reader = procs.reader()
    processes = [_process(7, npu=0), _process(8, npu=1)]
    for _ in range(3):
        out = job_samples(processes, [], reader.identity)
        assert [_labels(s)["npu"] for s in out] == ["1"]
    assert _failures(reader)[reason] == 1.0
    assert sum(_failures(reader).values()) == 1.0


def test_environ_denied_after_the_start_time_is_read_is_counted_once() -> None:
    procs = FakeProcs({7: (5.0, {})})

    def denied(pid: int) -> tuple[float, Mapping[str, str]]:
        raise psutil.AccessDenied(pid)

    reader = JobEnvReader(denied, procs.started, "/nonexistent-proc", set)
    for _ in range(3):
        assert job_samples([_process(7)], [], reader.identity) == []
    assert _failures(reader)["access_denied"] == 1.0


def test_a_process_that_vanishes_after_being_read_loses_its_series() -> None:
    procs = FakeProcs({7: (5.0, SLURM)})
    reader = procs.reader()
    assert len(job_samples([_process(7)], [], reader.identity)) == 1
    procs.table[7] = psutil.NoSuchProcess(7)
    assert job_samples([_process(7)], [], reader.identity) == []
    assert _failures(reader)["gone"] == 1.0


def test_environment_is_read_once_per_process_and_again_for_a_reused_pid() -> None:
    procs = FakeProcs({7: (5.0, SLURM)})
    reader = procs.reader()
    for _ in range(4):
        reader.prune({7})
        job_samples([_process(7)], [], reader.identity)
    assert procs.environ_calls == [7]
    procs.table[7] = (6.0, {**SLURM, "SLURM_JOB_ID": "4712"})  # the pid was reused by a new process
    out = job_samples([_process(7)], [], reader.identity)
    assert procs.environ_calls == [7, 7] and _labels(out[0])["training_job"] == "4712"
    reader.prune(set())
    job_samples([_process(7)], [], reader.identity)
    assert procs.environ_calls == [7, 7, 7]


# --- rank tables


def _table(servers: dict[str, list[tuple[int, int]]]) -> str:
    return json.dumps({"version": "1.0", "status": "completed", "server_count": str(len(servers)),
                       "server_list": [{"server_id": server, "device": [
                           {"device_id": str(device), "device_ip": f"192.168.{rank}.1", "rank_id": str(rank)}
                           for device, rank in devices]} for server, devices in servers.items()]})


def _plant(proc_root: Path, pid: int, path: str, text: str) -> None:
    target = proc_root / str(pid) / "root" / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


TWO_SERVERS = {"10.0.0.1": [(0, 0), (1, 1)], "10.0.0.2": [(0, 2), (1, 3)]}


def test_rank_in_table_finds_this_server_by_address_else_the_only_server() -> None:
    table = ranktable.parse(_table(TWO_SERVERS))
    assert rank_in_table(table, 1, {"10.0.0.2", "host"}) == ("3", "4")
    assert rank_in_table(table, 1, {"10.9.9.9"}) == ("", "")  # two servers, neither is this host
    single = ranktable.parse(_table({"node-a": [(0, 0), (5, 1)]}))
    assert rank_in_table(single, 5, {"10.9.9.9"}) == ("1", "2")
    assert rank_in_table(single, 3, {"10.9.9.9"}) == ("", "")


def test_the_rank_comes_from_the_rank_table_by_the_chips_physical_id(tmp_path: Path) -> None:
    _plant(tmp_path, 40, "/job/hccl.json", _table(TWO_SERVERS))
    env = {"JOB_ID": "99", "RANK_TABLE_FILE": "/job/hccl.json"}
    procs = FakeProcs({40: (1.0, env), 41: (1.0, env)})
    reader = procs.reader(tmp_path, {"10.0.0.2"})
    _plant(tmp_path, 41, "/job/hccl.json", _table(TWO_SERVERS))
    chips = [ChipRef(0, 0, phy_id=1), ChipRef(1, 0, logic_id=0)]
    out = job_samples([_process(40, npu=0), _process(41, npu=1)], chips, reader.identity)
    assert [(_labels(s)["rank"], _labels(s)["world_size"], _labels(s)["source"]) for s in out] == [
        ("3", "4", "env"), ("2", "4", "env")]


def test_a_rank_table_written_after_the_job_started_is_read_when_it_appears(tmp_path: Path) -> None:
    procs = FakeProcs({40: (1.0, {"JOB_ID": "99", "RANK_TABLE_FILE": "/job/hccl.json"})})
    reader = procs.reader(tmp_path, {"10.0.0.1"})
    chips = [ChipRef(0, 0, phy_id=1)]
    first = job_samples([_process(40)], chips, reader.identity)
    assert [_labels(s)["rank"] for s in first] == [""]
    assert job_samples([_process(40)], chips, reader.identity) == first
    assert _failures(reader)["rank_table"] == 1.0  # counted once per process, retried every run
    _plant(tmp_path, 40, "/job/hccl.json", _table(TWO_SERVERS))
    assert [_labels(s)["rank"] for s in job_samples([_process(40)], chips, reader.identity)] == ["1"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "invalid", "huge"])
def test_a_rank_table_that_is_no_file_or_no_table_is_refused_unread(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "40" / "root" / "job" / "hccl.json"
    target.parent.mkdir(parents=True)
    if kind == "fifo":
        os.mkfifo(target)  # opening it for reading would block a plain open()
    elif kind == "directory":
        target.mkdir()
    elif kind == "invalid":
        target.write_text('{"version": "1.0", // a comment\n}')
    else:
        with target.open("wb") as handle:
            handle.truncate(17 * 1024 * 1024)
    procs = FakeProcs({40: (1.0, {"RANK_TABLE_FILE": "/job/hccl.json", "JOB_ID": "5"})})
    reader = procs.reader(tmp_path, {"10.0.0.1"})
    out = job_samples([_process(40)], [ChipRef(0, 0, phy_id=0)], reader.identity)
    assert [(_labels(s)["training_job"], _labels(s)["rank"]) for s in out] == [("5", "")]
    assert _failures(reader)["rank_table"] == 1.0


def test_a_rank_table_the_processs_user_could_not_read_is_refused(tmp_path: Path) -> None:
    _plant(tmp_path, 40, "/job/hccl.json", _table({"10.0.0.1": [(0, 3)]}))
    target = tmp_path / "40" / "root" / "job" / "hccl.json"
    env = {"RANK_TABLE_FILE": "/job/hccl.json", "JOB_ID": "5"}
    chips = [ChipRef(0, 0, phy_id=0)]
    for mode, owner, rank in ((0o600, os.getuid() + 1, ""), (0o644, os.getuid() + 1, "3"), (0o600, os.getuid(), "3")):
        target.chmod(mode)
        reader = JobEnvReader(FakeProcs({40: (1.0, env)}).environ, lambda _pid: 1.0, str(tmp_path),
                              lambda: {"10.0.0.1"}, owner=lambda _pid, uid=owner: uid)  # type: ignore[misc]
        out = job_samples([_process(40)], chips, reader.identity)
        assert [_labels(s)["rank"] for s in out] == [rank], (oct(mode), owner)
        assert _failures(reader)["rank_table"] == (0.0 if rank else 1.0)


def test_a_relative_rank_table_path_is_read_from_the_process_directory(tmp_path: Path) -> None:
    target = tmp_path / "40" / "cwd" / "hccl.json"
    target.parent.mkdir(parents=True)
    target.write_text(_table({"10.0.0.1": [(2, 6)]}))
    procs = FakeProcs({40: (1.0, {"RANK_TABLE_FILE": "hccl.json"})})
    out = job_samples([_process(40)], [ChipRef(0, 0, phy_id=2)], procs.reader(tmp_path).identity)
    assert [(_labels(s)["training_job"], _labels(s)["rank"], _labels(s)["source"]) for s in out] == [("", "6", "none")]


# --- the agent's job


def _info(processes: list[NpuProcess], process_section: bool = True) -> tuple[InfoTable]:
    return (InfoTable(version="25.0", chips=(), processes=tuple(processes), process_section=process_section),)


def test_the_job_is_no_data_without_a_fresh_table_or_process_box() -> None:
    procs = FakeProcs({})
    with pytest.raises(NoData):
        JobInfoCollector(lambda: None, list, procs.reader()).collect()
    with pytest.raises(NoData):
        JobInfoCollector(lambda: _info([], process_section=False), list, procs.reader()).collect()


def test_the_job_exports_the_chips_and_the_failure_counts() -> None:
    procs = FakeProcs({7: (1.0, SLURM), 8: psutil.AccessDenied(8)})
    job = JobInfoCollector(lambda: _info([_process(7), _process(8, npu=1)]), list, procs.reader())
    out = job.collect()
    assert [s.metric for s in out].count(METRIC) == 1
    failures = {dict(s.labels)["reason"]: s.value for s in out if s.metric == FAILURE_METRIC}
    assert failures == {"access_denied": 1.0, "gone": 0.0, "zombie": 0.0, "rank_table": 0.0}
    assert CATALOGUE[FAILURE_METRIC].type == "counter"


@pytest.mark.parametrize(("env", "job", "source"), [
    ({"PBS_JOBID": "123.pbs01", "RANK": "0"}, "123.pbs01", "pbs"),
    ({"LSB_JOBID": "77", "RANK": "0"}, "77", "lsf"),
    ({"MS_SCHED_HOST": "10.0.0.9", "MS_SCHED_PORT": "8118", "MS_WORKER_NUM": "32"}, "10.0.0.9:8118", "mindspore"),
    ({"TEAM_JOB": "llm-pretrain", **SLURM}, "llm-pretrain", "env"),
])
def test_other_schedulers_and_the_operators_own_variable(env: dict[str, str], job: str, source: str) -> None:
    found = identity_from_environ(env, job_variables=("TEAM_JOB", "UNSET_JOB"))
    assert (found.job, found.source) == (job, source)
    assert identity_from_environ({"MS_SCHED_HOST": "h", "MS_SCHED_PORT": "1", "MS_WORKER_NUM": "32"}).world_size == "32"


@pytest.mark.parametrize("address", ["localhost", "127.0.0.1", "::1"])
def test_a_loopback_rendezvous_is_named_by_its_node(address: str) -> None:
    env = {"MASTER_ADDR": address, "MASTER_PORT": "29500", "RANK": "0"}
    assert identity_from_environ(env, node="node-7").job == f"node-7/{address}:29500"
    assert identity_from_environ({**env, "MASTER_ADDR": "10.0.0.1"}, node="node-7").job == "10.0.0.1:29500"


def test_the_config_switches_the_job_and_a_reload_keeps_its_counts_and_takes_new_variables() -> None:
    from agent.core.config import build_config
    from agent.daemon.assemble import internal_jobs
    from collectors.job_env import JOB_NAME

    def config(**npu_smi: object) -> Any:
        # Only the jobs that touch nothing: no log scanner (its state directory), no host readings.
        return build_config({"collectors": {"npu_smi": npu_smi, "hccl_logs": {"enabled": False},
                                            "host": {"enabled": False}},
                             "kubernetes": {"pod_attribution": False}})

    kept: dict[str, object] = {}
    first = internal_jobs(config(), kept=kept)
    assert [job.name for job in first] == [JOB_NAME] and first[0].interval_s == config().collectors.npu_smi.interval
    collector = kept[JOB_NAME]
    assert isinstance(collector, JobInfoCollector) and collector.reader.job_variables == ()
    internal_jobs(config(job_variables=["TEAM_JOB"]), kept=kept)
    assert kept[JOB_NAME] is collector and collector.reader.job_variables == ("TEAM_JOB",)
    assert internal_jobs(config(job_info=False)) == []
