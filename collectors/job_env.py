"""Reads the job identity of the processes on the chips from their environment, cheaply and safely.

``JobEnvReader.identity(process, chip)`` is what ``collectors.job_info.job_samples`` asks. A pid's
environment is read once per process (the cache key is the pid and its start time, so a reused pid is
read again); each call otherwise costs one ``/proc/<pid>/stat`` read per listed pid. Pids no longer
listed leave the cache at ``prune``.

A process the agent may not read (another user's, without root or CAP_SYS_PTRACE), one gone between
npu-smi's table and the read, and a zombie give no identity: each is counted once per process in
``failures`` (``npuwatch_job_info_failures_total{reason}``) and the first of each kind is logged.
``RANK_TABLE_FILE`` is read through ``/proc/<pid>/root`` (the process's own file system, in a
container too), only when it is a regular file of at most ``MAX_RANK_TABLE_BYTES`` (opened without
blocking: a FIFO or a device is refused unread) that the process's user owns or anyone may read;
parsed tables are kept by path, inode, size and mtime.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from collectors.base import ChipRef, NoData, ParseError, Sample
from collectors.hccl import ranktable
from collectors.job_info import (
    JobIdentity,
    clean_text,
    identity_from_environ,
    job_samples,
    rank_in_table,
    rank_table_path,
)
from collectors.npu_smi_info_records import InfoTable, NpuProcess

__all__ = ["FAILURE_METRIC", "FAILURE_REASONS", "JOB_NAME", "MAX_RANK_TABLE_BYTES", "JobEnvReader",
           "JobInfoCollector", "local_names"]

log = logging.getLogger(__name__)

JOB_NAME = "npu_jobs"
FAILURE_METRIC = "npuwatch_job_info_failures_total"
FAILURE_REASONS = ("access_denied", "gone", "zombie", "rank_table")
MAX_RANK_TABLE_BYTES = 16 * 1024 * 1024  # a 10,000-rank table is about 2 MB
_KEPT_TABLES = 8
_NOT_STARTED = -1.0  # the cache's start time of a pid whose start time could not be read

Environ = Callable[[int], tuple[float, Mapping[str, str]]]


def _psutil_environ(pid: int) -> tuple[float, Mapping[str, str]]:
    process = psutil.Process(pid)
    return process.create_time(), process.environ()


def _psutil_started(pid: int) -> float:
    return float(psutil.Process(pid).create_time())


def local_names() -> set[str]:
    """This host's addresses and name, as a rank table's ``server_id`` / ``host_ip`` may give them."""
    names = {socket.gethostname()}
    try:
        for addresses in psutil.net_if_addrs().values():
            names.update(address.address.split("%", 1)[0] for address in addresses
                         if address.family in (socket.AF_INET, socket.AF_INET6))
    except (OSError, psutil.Error):
        pass
    return names


def _read_regular(path: Path, max_bytes: int, owner: int) -> bytes:
    """The file's bytes when it is a regular file of at most ``max_bytes`` that user ``owner`` (the process's)
    owns or anyone may read; opened without blocking. The agent may be root: a process must not have it
    read (and log parts of) a file its own user could not."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ParseError(f"{path}: not a regular file")
        if info.st_uid != owner and not info.st_mode & stat.S_IROTH:
            raise ParseError(f"{path}: neither the process's user's nor readable by all")
        if info.st_size > max_bytes:
            raise ParseError(f"{path}: larger than {max_bytes} bytes")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ParseError(f"{path}: larger than {max_bytes} bytes")
    return data


class JobEnvReader:
    """Job identities of pids, from their environment, cached per (pid, start time); thread-safe."""

    def __init__(self, environ: Environ = _psutil_environ, started: Callable[[int], float] = _psutil_started,
                 proc_root: str = "/proc", names: Callable[[], set[str]] = local_names,
                 *, job_variables: Sequence[str] = (), owner: Callable[[int], int] | None = None) -> None:
        self.job_variables = tuple(job_variables)  # set again on a reload: identities are not cached, environments are
        self._environ = environ
        self._started = started
        self._proc_root = proc_root
        self._names = names
        self._owner = owner if owner is not None else lambda pid: os.stat(Path(proc_root, str(pid))).st_uid
        self._lock = threading.Lock()
        # pid -> (start time, environment) or None when unreadable; environments are small (a few KB each).
        self._envs: dict[int, tuple[float, Mapping[str, str] | None]] = {}
        self._tables: OrderedDict[tuple[str, int, int, int], ranktable.RankTable] = OrderedDict()
        self._failures = dict.fromkeys(FAILURE_REASONS, 0)
        self._logged: set[str] = set()
        self._table_failed: set[int] = set()
        self._local: set[str] | None = None
        self._node = clean_text(socket.gethostname())

    # --- the environment of a pid
    def _env(self, pid: int) -> Mapping[str, str] | None:
        try:
            started = self._started(pid)
        except psutil.ZombieProcess:
            return self._failed(pid, None, "zombie", f"pid {pid} is a zombie")
        except (psutil.NoSuchProcess, ProcessLookupError):
            return self._failed(pid, None, "gone", f"pid {pid} is not running here: it ended, or it runs in a PID "
                                                   "namespace the agent does not share (Kubernetes: hostPID)")
        except (psutil.AccessDenied, PermissionError):
            return self._failed(pid, None, "access_denied", f"pid {pid}: not allowed to read it")
        except (psutil.Error, OSError):
            return self._failed(pid, None, "gone", f"pid {pid} could not be read")
        with self._lock:
            cached = self._envs.get(pid)
        if cached is not None and cached[0] == started:
            return cached[1]
        try:
            started, environ = self._environ(pid)
        except psutil.ZombieProcess:
            return self._failed(pid, started, "zombie", f"pid {pid} is a zombie")
        except (psutil.NoSuchProcess, ProcessLookupError):
            return self._failed(pid, started, "gone", f"pid {pid} ended before its environment was read")
        except (psutil.AccessDenied, PermissionError):
            return self._failed(pid, started, "access_denied",
                                f"pid {pid}: not allowed to read its environment (the agent needs root or "
                                "CAP_SYS_PTRACE to read other users' processes)")
        except (psutil.Error, OSError) as exc:
            return self._failed(pid, started, "gone", f"pid {pid}: environment unreadable ({exc})")
        with self._lock:
            self._envs[pid] = (started, dict(environ))
        return environ

    def _failed(self, pid: int, started: float | None, reason: str, why: str) -> Mapping[str, str] | None:
        """Count and log (the first of its kind) a process whose environment cannot be read; None."""
        mark = _NOT_STARTED if started is None else started
        with self._lock:
            if self._envs.get(pid) == (mark, None):
                return None  # counted when it first failed
            self._envs[pid] = (mark, None)
            self._failures[reason] += 1
            first = reason not in self._logged
            self._logged.add(reason)
        log.log(logging.INFO if first else logging.DEBUG, "job info: %s", why)
        return None

    # --- the rank table a process points at
    def _table_rank(self, pid: int, path: str, chip: ChipRef | None) -> tuple[str, str]:
        device = None if chip is None else chip.phy_id if chip.phy_id is not None else chip.logic_id
        if device is None:
            return "", ""
        relative = path.lstrip("/") if path.startswith("/") else None
        where = Path(self._proc_root, str(pid), "root", relative) if relative is not None \
            else Path(self._proc_root, str(pid), "cwd", path)
        try:
            info = os.stat(where)
            key = (path, info.st_ino, info.st_size, info.st_mtime_ns)
            with self._lock:
                table = self._tables.get(key)
            if table is None:
                data = _read_regular(where, MAX_RANK_TABLE_BYTES, self._owner(pid))
                table = ranktable.parse(data, MAX_RANK_TABLE_BYTES)
                with self._lock:
                    self._tables[key] = table
                    while len(self._tables) > _KEPT_TABLES:
                        self._tables.popitem(last=False)
        except (OSError, ParseError, ValueError) as exc:
            # Retried every run (the operator may write the table after the job starts), counted once per pid.
            with self._lock:
                counted = pid in self._table_failed
                self._table_failed.add(pid)
                if not counted:
                    self._failures["rank_table"] += 1
                first = "rank_table" not in self._logged
                self._logged.add("rank_table")
            if not counted:
                log.log(logging.INFO if first else logging.DEBUG,
                        "job info: pid %d's RANK_TABLE_FILE %r unusable: %s", pid, path[:256], str(exc)[:256])
            return "", ""
        if self._local is None:
            self._local = self._names()
        return rank_in_table(table, device, self._local)

    # --- what job_samples asks
    def identity(self, process: NpuProcess, chip: ChipRef | None) -> JobIdentity | None:
        environ = self._env(process.pid)
        if environ is None:
            return None
        path = rank_table_path(environ)
        table_rank = (lambda: self._table_rank(process.pid, path, chip)) if path else None
        return identity_from_environ(environ, table_rank, self.job_variables, self._node)

    def prune(self, pids: set[int]) -> None:
        """Forget the pids no longer listed (their environments and failure marks)."""
        with self._lock:
            gone = [pid for pid in self._envs if pid not in pids]
            for pid in gone:
                del self._envs[pid]
            self._table_failed &= pids
            if gone:
                self._local = None  # a new job may follow; the host's addresses are asked again

    def failure_samples(self) -> list[Sample]:
        with self._lock:
            return [Sample(FAILURE_METRIC, (("reason", reason),), float(count))
                    for reason, count in self._failures.items()]


class JobInfoCollector:
    """The agent's ``npu_jobs`` job: the processes of the latest ``npu-smi info`` table (npu-smi's or DCMI's),
    each chip's job identity (``collectors.job_info``), and the reader's failure counts."""

    def __init__(self, table: Callable[[], Any], chips: Callable[[], Sequence[ChipRef]],
                 reader: JobEnvReader | None = None) -> None:
        self._table = table
        self._chips = chips
        self.reader = JobEnvReader() if reader is None else reader

    def collect(self) -> list[Sample]:
        records = self._table()
        table = records[0] if isinstance(records, (list, tuple)) and len(records) == 1 else records
        if not isinstance(table, InfoTable):
            raise NoData("no npu-smi info table yet (or it is stale)")
        if not table.process_section:
            raise NoData("this npu-smi prints no process table")
        self.reader.prune({process.pid for process in table.processes})
        samples = job_samples(table.processes, list(self._chips()), self.reader.identity)
        return [*samples, *self.reader.failure_samples()]
