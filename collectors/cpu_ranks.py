"""Fail-slow's cpu backend, the pure part: training ranks on CPUs read as if each were a chip.

Where a node has no NPU, each local rank process of a training job (a process whose environment names
a rank, read as ``collectors.job_info`` reads it: ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` ...) is the
"device", so the job's ranks can be compared by the same rules (alerts/failslow.rules.yml) with the same
labels as on NPUs (docs/failslow.md, "CPU ranks"):

- ``npu_aicore_utilization_ratio{npu,chip}``: the share of the interval the rank's busiest thread was
  running or waiting in the run queue (``/proc/<pid>/task/<tid>/schedstat``: run time + run-queue
  delay). A rank that computes is busy, however little of a shared CPU it gets; one that waits for its
  peers in a collective sleeps. Without schedstat, the process's CPU time (all threads) over the interval,
  at most 1.
- ``npu_roce_transmitted_bytes_total{npu,chip}``: the bytes the process wrote (``/proc/<pid>/io``
  ``wchar``: sockets and files alike), as a counter.
- ``npu_job_info``: its job and rank, built by ``collectors.job_info.job_samples``.

A rank's ``npu`` is its ``LOCAL_RANK`` when every rank found has a distinct one, else its position in
(job, rank) order; ``chip`` is 0. A process whose parent has the same job and rank (a data-loader worker
the rank forked) is not a rank of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collectors.base import ParseError, Sample, label_pairs
from collectors.job_info import JobIdentity, job_samples
from collectors.npu_smi_info_records import NpuProcess

__all__ = ["BUSY_METRIC", "BYTES_METRIC", "RankDevice", "RankReading", "assign_devices", "busy_fraction",
           "parse_io_wchar", "parse_schedstat", "parse_stat", "rank_samples"]

BUSY_METRIC = "npu_aicore_utilization_ratio"
BYTES_METRIC = "npu_roce_transmitted_bytes_total"


@dataclass(frozen=True)
class StatFields:
    """What ``/proc/<pid>/stat`` says here: the parent, CPU time in clock ticks, the start in ticks after boot."""

    ppid: int
    cpu_ticks: int
    start_ticks: int


def parse_stat(text: str) -> StatFields:
    """``/proc/<pid>/stat``: the command sits in parentheses and may hold spaces and ')', so fields are
    counted after its last ')'."""
    _, sep, rest = text.rpartition(")")
    fields = rest.split()
    if not sep or len(fields) < 20:
        raise ParseError(f"not a /proc/<pid>/stat line: {text[:80]!r}")
    try:  # after the command: state(0) ppid(1) ... utime(11) stime(12) ... starttime(19)
        return StatFields(ppid=int(fields[1]), cpu_ticks=int(fields[11]) + int(fields[12]),
                          start_ticks=int(fields[19]))
    except ValueError as exc:
        raise ParseError(f"/proc/<pid>/stat: {exc}") from None


def parse_schedstat(text: str) -> int:
    """``/proc/<pid>/task/<tid>/schedstat`` (run ns, run-queue delay ns, timeslices): run + delay in ns."""
    fields = text.split()
    if len(fields) < 2 or not all(field.isdigit() for field in fields[:2]):
        raise ParseError(f"not a schedstat line: {text[:80]!r}")
    return int(fields[0]) + int(fields[1])


def parse_io_wchar(text: str) -> int:
    """``/proc/<pid>/io``'s ``wchar``: bytes the process passed to write calls (files and sockets)."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "wchar" and value.strip().isdigit():
            return int(value.strip())
    raise ParseError("no wchar line in /proc/<pid>/io")


@dataclass(frozen=True)
class RankReading:
    """One read of a rank process at ``at`` (monotonic seconds). ``threads``: each thread's run + run-queue
    delay in ns (empty without schedstat); ``cpu_s``: the process's CPU seconds, all threads; ``written_bytes``:
    its ``wchar``."""

    pid: int
    start_ticks: int
    at: float
    threads: Mapping[int, int]
    cpu_s: float
    written_bytes: int | None  # None: /proc/<pid>/io not readable


def busy_fraction(before: RankReading, after: RankReading) -> float | None:
    """The share of the interval the rank's busiest thread ran or waited to run, 0..1; None when the two
    reads are not of one process or no time passed. Without schedstat: CPU time over the interval, at most 1."""
    wall = after.at - before.at
    if wall <= 0 or (before.pid, before.start_ticks) != (after.pid, after.start_ticks):
        return None
    shared = [tid for tid in after.threads if tid in before.threads]
    if shared:
        busiest = max(after.threads[tid] - before.threads[tid] for tid in shared) / 1e9
    elif after.threads or before.threads:
        return None  # every thread is new: nothing to compare yet
    else:
        busiest = after.cpu_s - before.cpu_s
    return min(1.0, max(0.0, busiest / wall))


@dataclass(frozen=True)
class RankDevice:
    """A rank process standing for a chip: ``npu`` as exported, ``chip`` 0."""

    pid: int
    npu: int
    identity: JobIdentity


def assign_devices(processes: Sequence[tuple[int, int, JobIdentity]]) -> list[RankDevice]:
    """The ranks among ``(pid, ppid, identity)``: processes whose identity names a rank, less those whose
    parent has the same job and rank; numbered by ``LOCAL_RANK`` when distinct, else in (job, rank) order."""
    ranked = {pid: (ppid, found) for pid, ppid, found in processes if found.rank}
    ranks = [(pid, found) for pid, (ppid, found) in ranked.items()
             if not (ppid in ranked and (ranked[ppid][1].job, ranked[ppid][1].rank) == (found.job, found.rank))]
    ranks.sort(key=lambda item: (item[1].job, int(item[1].rank), item[0]))
    local = [found.local_rank for _, found in ranks]
    distinct = all(local) and len(set(local)) == len(local)
    return [RankDevice(pid, int(found.local_rank) if distinct else index, found)
            for index, (pid, found) in enumerate(ranks)]


def rank_samples(devices: Sequence[RankDevice], before: Mapping[int, RankReading],
                 after: Mapping[int, RankReading]) -> list[Sample]:
    """The series of each rank read now (``after``, by pid): its busy fraction (when ``before`` has the same
    process), its written bytes, and its ``npu_job_info``."""
    out: list[Sample] = []
    for device in devices:
        now = after.get(device.pid)
        if now is None:
            continue
        labels = label_pairs(npu=device.npu, chip=0)
        earlier = before.get(device.pid)
        busy = None if earlier is None else busy_fraction(earlier, now)
        if busy is not None:
            out.append(Sample(BUSY_METRIC, labels, busy))
        if now.written_bytes is not None:
            out.append(Sample(BYTES_METRIC, labels, float(now.written_bytes)))
    read = [device for device in devices if device.pid in after]
    identities = {device.pid: device.identity for device in read}
    processes = [NpuProcess(npu=device.npu, chip=0, pid=device.pid, name="", memory_bytes=None, container_pid=None)
                 for device in read]
    out += job_samples(processes, (), lambda process, _chip: identities.get(process.pid))
    return out
