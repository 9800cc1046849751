"""May a probe run now? The exclusive probe lock and the idle gate.

Two probes must never overlap (they would measure each other), and a probe must never
steal devices from a training job. The lock is an ``fcntl.flock`` on a file that the
agent's scheduled probes and a manual ``npuwatch probe`` both take, non-blocking: a
probe that finds it held is *skipped*, not queued. The kernel drops a flock when its
holder dies, so a crashed probe never leaves a stale lock behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from collectors.base import Sample

__all__ = ["DEFAULT_LOCK_PATH", "ProbeBusy", "ProbeLock", "default_lock_path", "idle_check"]


def default_lock_path() -> Path:
    """``/run/lock`` (world-writable, shared by the agent's user and root) where it exists."""
    run_lock = Path("/run/lock")
    if run_lock.is_dir() and os.access(run_lock, os.W_OK | os.X_OK):
        return run_lock / "npuwatch-probe.lock"
    return Path(tempfile.gettempdir()) / "npuwatch-probe.lock"


DEFAULT_LOCK_PATH = default_lock_path()


class ProbeBusy(Exception):
    """Another probe holds the lock."""


class ProbeLock:
    """``with ProbeLock(path):`` holds the probe lock or raises ProbeBusy at once.

    The file is opened read-only (flock works on any open file), first without O_CREAT,
    so that a lock file created by root can still be taken by the agent's user and the
    kernel's protected_regular rule for sticky directories never bites.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else DEFAULT_LOCK_PATH
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ProbeBusy(f"another probe holds {self.path}") from exc
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> ProbeLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def idle_check(samples: Iterable[Sample], max_aicore_utilization: float = 0.05) -> str | None:
    """Why the NPUs are not idle, from the latest npu-smi samples; None when idle.

    Busy means any ``npu_processes`` above 0 or any ``npu_aicore_utilization_ratio``
    above ``max_aicore_utilization`` (a ratio, 0..1). No samples at all counts as idle:
    the caller decides whether a missing snapshot should hold probes back.
    """
    reasons: list[str] = []
    for sample in samples:
        labels = dict(sample.labels)
        where = f"npu {labels.get('npu', '?')} chip {labels.get('chip', '?')}"
        if sample.metric == "npu_processes" and sample.value > 0:
            reasons.append(f"{where}: {sample.value:g} process(es)")
        elif sample.metric == "npu_aicore_utilization_ratio" and sample.value > max_aicore_utilization:
            reasons.append(f"{where}: AI Core {sample.value:.0%} busy")
    if not reasons:
        return None
    return "devices busy: " + "; ".join(sorted(reasons))
