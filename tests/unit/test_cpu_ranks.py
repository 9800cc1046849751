"""Fail-slow's cpu backend: /proc-shaped readings of rank processes -> the chips' series (collectors.cpu_ranks),
the reader over a /proc tree (collectors.cpu_ranks_reader), and the config that keeps it off NPU nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.core.config import ConfigError, build_config
from agent.probes.train_loop import WORKER, SlowDown, TrainLoop, rank_commands
from collectors.base import ParseError, Sample
from collectors.cpu_ranks import (
    RankDevice,
    RankReading,
    assign_devices,
    busy_fraction,
    parse_io_wchar,
    parse_schedstat,
    parse_stat,
    rank_samples,
)
from collectors.cpu_ranks_reader import CpuRanksCollector, parse_environ
from collectors.job_info import JobIdentity, identity_from_environ

# A stat line whose command holds a space and a ')': fields are counted after the last ')'.
STAT = ("4242 (python (x) y) S 4200 4242 4200 0 -1 4194560 2000 0 0 0 150 50 0 0 20 0 5 0 987654 "
        "1000000 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0")
IO = "rchar: 100\nwchar: 123456\nsyscr: 3\nsyscw: 4\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"


def job(rank: str, local_rank: str = "", name: str = "node/127.0.0.1:29500") -> JobIdentity:
    return JobIdentity(job=name, rank=rank, local_rank=local_rank, world_size="8", source="torchrun")


def reading(at: float, threads: dict[int, int], *, pid: int = 10, start: int = 1, cpu_s: float = 0.0,
            written: int | None = 0) -> RankReading:
    return RankReading(pid=pid, start_ticks=start, at=at, threads=threads, cpu_s=cpu_s, written_bytes=written)


def test_stat_gives_the_parent_cpu_ticks_and_start() -> None:
    fields = parse_stat(STAT)
    assert (fields.ppid, fields.cpu_ticks, fields.start_ticks) == (4200, 200, 987654)


@pytest.mark.parametrize("text", ["", "4242 (python) S 1 2", "4242 (python) S x 1 2 3 4 5 6 7 8 9 10 11 12 13 14 "
                                                              "15 16 17 18 19 20"])
def test_a_stat_line_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ParseError):
        parse_stat(text)


def test_schedstat_is_run_time_plus_run_queue_delay() -> None:
    assert parse_schedstat("519863143 452082 7\n") == 519863143 + 452082
    with pytest.raises(ParseError):
        parse_schedstat("garbage")


def test_io_gives_wchar() -> None:
    assert parse_io_wchar(IO) == 123456
    with pytest.raises(ParseError):
        parse_io_wchar("rchar: 1\n")


def test_environ_is_nul_separated() -> None:
    assert parse_environ(b"RANK=5\0LOCAL_RANK=5\0EMPTY=\0junk\0A=b=c\0") == {
        "RANK": "5", "LOCAL_RANK": "5", "EMPTY": "", "A": "b=c"}


def test_busy_is_the_busiest_threads_share_of_the_interval() -> None:
    before = reading(100.0, {1: 0, 2: 0, 3: 0})
    after = reading(105.0, {1: int(4e9), 2: int(1e9), 3: int(3e9), 4: int(5e9)})  # thread 4 is new: not compared
    assert busy_fraction(before, after) == pytest.approx(0.8)


def test_busy_is_none_across_a_restart_or_without_time() -> None:
    before = reading(100.0, {1: 0})
    assert busy_fraction(before, reading(105.0, {1: 10}, start=2)) is None  # another process with the pid
    assert busy_fraction(before, reading(100.0, {1: 10})) is None
    assert busy_fraction(before, reading(105.0, {9: 10})) is None  # no thread read twice


def test_without_schedstat_busy_is_cpu_time_at_most_one() -> None:
    assert busy_fraction(reading(0.0, {}, cpu_s=1.0), reading(5.0, {}, cpu_s=2.0)) == pytest.approx(0.2)
    assert busy_fraction(reading(0.0, {}, cpu_s=1.0), reading(5.0, {}, cpu_s=20.0)) == 1.0


def test_ranks_are_numbered_by_local_rank_and_a_forked_child_is_not_a_rank() -> None:
    processes = [(30, 1, job("1", "1")), (20, 1, job("0", "0")), (31, 30, job("1", "1")),  # 31: 30's data loader
                 (40, 1, JobIdentity(job="x"))]  # names a job, no rank
    assert assign_devices(processes) == [RankDevice(20, 0, job("0", "0")), RankDevice(30, 1, job("1", "1"))]


def test_without_distinct_local_ranks_ranks_are_numbered_in_job_and_rank_order() -> None:
    processes = [(50, 1, job("10", "0", "b")), (51, 1, job("2", "0", "b")), (52, 1, job("3", "", "a"))]
    assert [(device.pid, device.npu) for device in assign_devices(processes)] == [(52, 0), (51, 1), (50, 2)]


def test_samples_carry_the_chips_names_and_labels() -> None:
    devices = [RankDevice(10, 5, job("5", "5")), RankDevice(11, 6, job("6", "6"))]
    before = {10: reading(0.0, {1: 0}, pid=10)}
    after = {10: reading(5.0, {1: int(2.5e9)}, pid=10, written=4096),
             11: reading(5.0, {2: 7}, pid=11, written=None)}
    samples = rank_samples(devices, before, after)
    chip5 = (("npu", "5"), ("chip", "0"))
    assert Sample("npu_aicore_utilization_ratio", chip5, 0.5) in samples
    assert Sample("npu_roce_transmitted_bytes_total", chip5, 4096.0) in samples
    assert not [s for s in samples if s.metric != "npu_job_info" and ("npu", "6") in s.labels]  # first read, no io
    info = {dict(s.labels)["npu"]: dict(s.labels) for s in samples if s.metric == "npu_job_info"}
    assert info["5"] == {"npu": "5", "chip": "0", "training_job": "node/127.0.0.1:29500", "rank": "5",
                         "local_rank": "5", "world_size": "8", "source": "torchrun"}
    assert set(info) == {"5", "6"}


def _process(root: Path, pid: int, environ: bytes, threads: dict[int, str], wchar: int) -> None:
    base = root / str(pid)
    (base / "task").mkdir(parents=True)
    (base / "stat").write_text(STAT.replace("4200", "1", 1).replace("4242", str(pid), 1))
    (base / "environ").write_bytes(environ)
    (base / "io").write_text(IO.replace("123456", str(wchar)))
    for tid, text in threads.items():
        (base / "task" / str(tid)).mkdir()
        (base / "task" / str(tid) / "schedstat").write_text(text)


def test_the_reader_finds_the_ranks_in_proc_and_reads_them_between_runs(tmp_path: Path) -> None:
    env = b"MASTER_ADDR=127.0.0.1\0MASTER_PORT=29500\0WORLD_SIZE=2\0"
    _process(tmp_path, 100, env + b"RANK=0\0LOCAL_RANK=0\0", {100: "0 0 1", 101: "0 0 1"}, 10)
    _process(tmp_path, 200, env + b"RANK=1\0LOCAL_RANK=1\0", {200: "0 0 1"}, 20)
    _process(tmp_path, 300, b"HOME=/root\0", {300: "0 0 1"}, 30)  # not a rank
    (tmp_path / "self").mkdir()
    clock = iter([0.0, 0.0, 5.0, 5.0])
    reader = CpuRanksCollector(str(tmp_path), clock=lambda: next(clock), node="n1")
    first = reader.collect()
    assert not [s for s in first if s.metric == "npu_aicore_utilization_ratio"]
    (tmp_path / "100" / "task" / "100" / "schedstat").write_text("1000000000 500000000 9")
    (tmp_path / "200" / "task" / "200" / "schedstat").write_text("4000000000 0 9")
    busy = {dict(s.labels)["npu"]: s.value for s in reader.collect() if s.metric == "npu_aicore_utilization_ratio"}
    assert busy == {"0": pytest.approx(0.3), "1": pytest.approx(0.8)}
    info = [dict(s.labels) for s in first if s.metric == "npu_job_info"]
    assert [(i["rank"], i["training_job"]) for i in info] == [("0", "n1/127.0.0.1:29500"), ("1", "n1/127.0.0.1:29500")]


def _config(**collectors: dict[str, object]) -> dict[str, object]:
    return {"collectors": collectors}


def test_the_cpu_backend_is_off_by_default_and_refused_beside_the_npu_collectors() -> None:
    assert build_config({}).collectors.cpu_ranks.enabled is False
    with pytest.raises(ConfigError) as refused:
        build_config(_config(cpu_ranks={"enabled": True}))
    message = str(refused.value)
    assert "collectors.npu_smi.enabled, collectors.dcmi.enabled, collectors.hccn_tool.enabled" in message
    alone = build_config(_config(cpu_ranks={"enabled": True}, npu_smi={"enabled": False}, dcmi={"enabled": False},
                                 hccn_tool={"enabled": False}))
    assert alone.collectors.cpu_ranks.enabled and alone.collectors.cpu_ranks.interval == 5.0


def test_the_training_loops_ranks_carry_torchruns_rendezvous_which_names_their_job_and_rank() -> None:
    loop = TrainLoop(ranks=3, duration_s=9.0, slow=SlowDown(rank=2, at_s=4.0, factor=2.5), python="py")
    commands = rank_commands(loop, 29555, env={"PATH": "/bin"})
    argv = commands[0][0]
    assert argv[:2] == ["py", str(WORKER)]
    assert argv[argv.index("--slow-rank") + 1:argv.index("--slow-rank") + 6] == [
        "2", "--slow-at", "4.0", "--slow-factor", "2.5"]
    found = [identity_from_environ(env, node="n1") for _, env in commands]
    assert [(f.job, f.rank, f.local_rank, f.world_size, f.source) for f in found] == [
        ("n1/127.0.0.1:29555", str(rank), str(rank), "3", "torchrun") for rank in range(3)]
    assert all(env["OMP_NUM_THREADS"] == "1" and env["PATH"] == "/bin" for _, env in commands)
