"""Fail-slow's cpu backend, the reading: finds this host's training rank processes in /proc and reads them.

``CpuRanksCollector.collect`` is the agent's ``cpu_ranks`` job (``collectors.cpu_ranks.enabled``, off by
default; docs/failslow.md, "CPU ranks"). Each run lists /proc, reads every process's ``stat`` (its parent
and start), and the environment of a process not seen before (cached per pid and start time, so a reused
pid is read again); those whose environment names a rank are the ranks (``collectors.cpu_ranks``), whose
threads' ``schedstat`` and ``io`` are read. A process it may not read (another user's, without root) or
one gone meanwhile is left out, and asked again only once it restarts.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from collectors.base import ParseError, Sample
from collectors.cpu_ranks import (
    RankDevice,
    RankReading,
    assign_devices,
    parse_io_wchar,
    parse_schedstat,
    parse_stat,
    rank_samples,
)
from collectors.job_info import JobIdentity, clean_text, identity_from_environ

__all__ = ["JOB_NAME", "CpuRanksCollector", "parse_environ"]

JOB_NAME = "cpu_ranks"
_MAX_ENVIRON_BYTES = 1 << 20


def parse_environ(data: bytes) -> dict[str, str]:
    """``/proc/<pid>/environ``: NUL-separated ``NAME=value`` entries."""
    out: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.decode("utf-8", "replace").partition("=")
        if sep and name:
            out[name] = value
    return out


class CpuRanksCollector:
    """Reads the rank processes of this host each run; exports what ``collectors.cpu_ranks.rank_samples`` builds."""

    def __init__(self, proc_root: str = "/proc", clock: Callable[[], float] = time.monotonic,
                 job_variables: Sequence[str] = (), node: str | None = None) -> None:
        self.job_variables = tuple(job_variables)
        self._proc = Path(proc_root)
        self._clock = clock
        self._node = clean_text(socket.gethostname() if node is None else node)
        self._ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        # (pid, start ticks) -> the identity its environment gives (None: unreadable, or names no rank)
        self._identities: dict[tuple[int, int], JobIdentity | None] = {}
        self._before: dict[int, RankReading] = {}

    def _identity(self, pid: int, start: int) -> JobIdentity | None:
        key = (pid, start)
        if key not in self._identities:
            found: JobIdentity | None = None
            try:
                with open(self._proc / str(pid) / "environ", "rb") as handle:
                    environ = parse_environ(handle.read(_MAX_ENVIRON_BYTES))
                found = identity_from_environ(environ, None, self.job_variables, self._node)
            except OSError:
                pass
            self._identities[key] = found if found is not None and found.rank else None
        return self._identities[key]

    def _processes(self) -> list[tuple[int, int, JobIdentity]]:
        """(pid, ppid, identity) of every process whose environment names a rank; the cache keeps the live ones."""
        found: list[tuple[int, int, JobIdentity]] = []
        live: set[tuple[int, int]] = set()
        own = os.getpid()
        for entry in os.listdir(self._proc):
            if not entry.isdigit() or int(entry) == own:
                continue
            pid = int(entry)
            try:
                stat = parse_stat((self._proc / entry / "stat").read_text(errors="replace"))
            except (OSError, ParseError):
                continue
            live.add((pid, stat.start_ticks))
            identity = self._identity(pid, stat.start_ticks)
            if identity is not None:
                found.append((pid, stat.ppid, identity))
        for key in [key for key in self._identities if key not in live]:
            del self._identities[key]
        return found

    def _read(self, device: RankDevice) -> RankReading | None:
        base = self._proc / str(device.pid)
        try:
            at = self._clock()
            stat = parse_stat((base / "stat").read_text(errors="replace"))
            threads: dict[int, int] = {}
            try:
                for tid in os.listdir(base / "task"):
                    try:
                        threads[int(tid)] = parse_schedstat((base / "task" / tid / "schedstat").read_text())
                    except (OSError, ValueError, ParseError):
                        continue  # a thread that ended meanwhile
            except OSError:
                threads = {}
            try:
                written: int | None = parse_io_wchar((base / "io").read_text())
            except (OSError, ParseError):
                written = None
        except (OSError, ParseError):
            return None
        return RankReading(pid=device.pid, start_ticks=stat.start_ticks, at=at, threads=threads,
                           cpu_s=stat.cpu_ticks / self._ticks, written_bytes=written)

    def collect(self) -> list[Sample]:
        devices = assign_devices(self._processes())
        now: dict[int, RankReading] = {}
        for device in devices:
            reading = self._read(device)
            if reading is not None:
                now[device.pid] = reading
        samples = rank_samples(devices, self._before, now)
        self._before = now
        return samples
