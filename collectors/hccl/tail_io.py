"""Opening a watched log file without ever blocking, and the fingerprints the tailer keeps of it.

A log path is stat'ed, then opened: between the two a job can swap the file for a FIFO (whose open
blocks until a writer comes, which never does), a device, a directory or a symlink. So a file is
opened with ``O_NONBLOCK | O_NOFOLLOW`` (the tailer opens real paths, so a symlink there is a swap),
the opened descriptor is fstat'ed, and anything that is not a regular file, or not the file that
was stat'ed, is refused with ``NotRegular`` (an ``OSError``, so callers report it as unreadable).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

__all__ = ["HEAD_BYTES", "NotRegular", "digest", "open_regular", "read_at"]

HEAD_BYTES = 256
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegular(OSError):
    """The path no longer names the regular file that was found there."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str, identity: str | None = None) -> int:
    """A read-only descriptor of the regular file at ``path``; never blocks.

    ``identity`` ("dev:ino") is the file that was stat'ed before: another file there now means the
    path was swapped in between, and it is refused too (it is looked at again next time).
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if getattr(os, "O_NOFOLLOW", 0) and exc.errno == errno.ELOOP:  # a symlink was put there
            raise NotRegular(exc.errno, "replaced by a symlink while being read") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(f"{_kind(info.st_mode)} now, not a regular file: not read")
        if identity is not None and f"{info.st_dev}:{info.st_ino}" != identity:
            raise NotRegular("replaced by another file while being read: read next time")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes at ``offset`` (fewer at the end of the file)."""
    parts: list[bytes] = []
    while size > 0:
        data = os.pread(fd, size, offset)
        if not data:
            break
        parts.append(data)
        size -= len(data)
        offset += len(data)
    return b"".join(parts)


def digest(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()
