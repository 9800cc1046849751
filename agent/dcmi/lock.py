"""The node-wide DCMI lock: one npuwatch process calls the library at a time.

No thread-safety is documented for ``libdcmi.so``, and the agent, ``npuwatch check`` and a second
agent may run side by side on a node. Each call (and each worker start, which initialises the
library) holds an ``fcntl.flock`` on one file; a process that cannot take it within the call's
deadline gives up (``busy``) and its caller falls back to npu-smi. The file is opened as the probe
lock opens its own (``agent.probes.lock``): read-only, created only when missing, so a lock file
root created can still be taken by the agent's user. The kernel drops a flock when its holder
dies: no stale lock survives a crash.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEFAULT_LOCK_PATH", "NodeLock"]

DEFAULT_LOCK_PATH = "/run/npuwatch/dcmi.lock"
_POLL_S = 0.01


class NodeLock:
    """``acquire(timeout_s)`` -> bool, ``release()``; the file stays open between calls."""

    def __init__(self, path: str | os.PathLike[str], *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._held = False
        self._sleep = sleep

    def _open(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return self._fd

    def acquire(self, timeout_s: float) -> bool:
        """Take the lock, waiting up to ``timeout_s``; False when another process holds it that long."""
        fd = self._open()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    return False
                self._sleep(_POLL_S)
                continue
            self._held = True
            return True

    def release(self) -> None:
        if self._held and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        self._held = False

    @property
    def held(self) -> bool:
        return self._held

    def close(self) -> None:
        self.release()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
