"""The one intake of the files a command is pointed at: ``npuwatch scan-logs`` and ``npuwatch triage`` (its
directories, single files and bundle members) read every file through ``Intake``.

One policy for both:

- **The walk** of a directory is the agent's bounded log walk (``collectors.log_walk``: names in order, a
  directory's files before its subdirectories, symlinked directories not followed, each directory once, a
  depth and an entry budget), hidden names included. A symlinked file is read only when it resolves inside
  the directory walked; one that leads out is a problem (``symlink out of ROOT not followed``). A file named
  on the command line is read wherever it points.
- **gzip** is told by its first two bytes, not its name, and read decompressed. The limits count what a file
  holds, not its compressed size: a file is read up to ``Limits.member_bytes``, one input up to
  ``Limits.input_bytes``, so a gzip bomb stops there; what was cut is a problem. A corrupt gzip is a problem;
  what was read before the corruption is kept.
- **Binary** content (a NUL byte in its first 8 KiB, decompressed) is skipped: not a problem, and not a file
  read, so an input of binary files only has read nothing.
- A file or directory that cannot be opened or listed is a problem. A command whose problems leave nothing
  read says UNKNOWN (``agent.health.status``).

The agent, ``check`` and ``diagnose`` tail their configured log roots instead (``collectors.hccl.tail``,
over the same walk).
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from collectors.log_walk import walk_matches

__all__ = ["BINARY_PROBE", "BINARY_SKIPPED", "HEAD_BYTES", "Content", "Intake", "Limits", "LogFile", "is_binary"]

BINARY_PROBE = 8192  # the bytes looked at for a NUL
HEAD_BYTES = 65536  # the bytes at hand for telling what a file is
BINARY_SKIPPED = "binary file skipped"
_GZIP_MAGIC = b"\x1f\x8b"
_EVERYTHING = "**/*"


@dataclass(frozen=True)
class Limits:
    member_bytes: int = 8 << 30  # one file or bundle member, as it reads (decompressed)
    input_bytes: int = 64 << 30  # one input, decompressed
    small_bytes: int = 64 << 20  # a dump, rank table, tool output or manifest (read into memory)
    members: int = 500_000  # members of one bundle


def is_binary(head: bytes) -> bool:
    """Content that is not text: a NUL byte in its first ``BINARY_PROBE`` bytes."""
    return b"\0" in head[:BINARY_PROBE]


class Content:
    """One file's content as it reads: decompressed when it is gzip, at most ``limit`` bytes, its first
    ``HEAD_BYTES`` at hand in ``head``. ``read`` starts at the beginning (``head`` included) and never
    raises for corrupt data: it ends, and ``error`` says why."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.limit = max(0, limit)
        self.error: str | None = None
        self.cut = False  # the limit stopped it with more left
        raw = stream.read(min(HEAD_BYTES, self.limit))
        self.gzipped = raw.startswith(_GZIP_MAGIC)
        self._source: IO[bytes] = stream
        if self.gzipped:
            self._source = cast(IO[bytes], gzip.GzipFile(fileobj=cast(IO[bytes], _Rejoin(raw, stream)), mode="rb"))
            raw = self._pull(min(HEAD_BYTES, self.limit))
        self.head = raw
        self.pulled = len(raw)  # bytes taken off the content so far (the head included)
        self._pending = raw
        self._probed = False

    @property
    def binary(self) -> bool:
        return is_binary(self.head)

    def _pull(self, size: int) -> bytes:
        if size <= 0 or self.error is not None:
            return b""
        try:
            return self._source.read(size)
        except (OSError, EOFError, zlib.error) as exc:
            self.error = f"corrupt gzip: {exc}" if self.gzipped else (getattr(exc, "strerror", None) or str(exc))
            return b""

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            return b"".join(iter(lambda: self.read(HEAD_BYTES), b""))
        if self._pending:
            data, self._pending = self._pending[:size], self._pending[size:]
            return data
        left = self.limit - self.pulled
        if left <= 0:
            if not self._probed:  # one byte more tells a cut from a file that ends at the limit
                self._probed = True
                self.cut = bool(self._pull(1))
            return b""
        data = self._pull(min(size, left))
        self.pulled += len(data)
        return data

    def close(self) -> None:
        if self.gzipped:
            with contextlib.suppress(OSError, EOFError, zlib.error):
                self._source.close()


class _Rejoin:
    """A read() that first returns the bytes already taken for telling gzip apart."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self._head = head
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._stream.read(size)
        if 0 <= size < len(self._head):
            data, self._head = self._head[:size], self._head[size:]
            return data
        data, self._head = self._head, b""
        return data + self._stream.read(-1 if size < 0 else size - len(data))


@dataclass
class LogFile:
    """One file of a walk: ``path`` as found (its root joined), ``name`` relative to the root walked (the file's
    own name when it was named itself), its modification time and size, and its ``content`` (read it before
    the next file: it is closed then)."""

    path: str
    name: str
    mtime: float
    size: int
    content: Content


class Intake:
    """Reads the files of one input in turn, against one byte budget; every problem goes to ``problem``."""

    def __init__(self, limits: Limits, problem: Callable[[str], None]) -> None:
        self.limits = limits
        self.problem = problem
        self.read_bytes = 0

    def budget(self) -> int:
        return max(0, self.limits.input_bytes - self.read_bytes)

    def spent(self) -> bool:
        return self.budget() <= 0

    @contextlib.contextmanager
    def content(self, shown: str, stream: IO[bytes], size: int) -> Iterator[Content | None]:
        """``stream``'s content within the limits (None: the input's budget is spent); ``shown`` names it in
        problems. What it read counts against the budget when the block ends."""
        limit = min(self.limits.member_bytes, self.budget())
        if limit <= 0 and size != 0:
            self.problem(f"{shown}: not read, the input's byte limit is spent")
            yield None
            return
        if size > self.limits.member_bytes:
            self.problem(f"{shown}: only the first {self.limits.member_bytes} of {size} bytes read")
        content = Content(stream, limit)
        try:
            yield content
        finally:
            content.close()
            self.read_bytes += content.pulled
            if content.error is not None:
                self.problem(f"{shown}: {content.error}")
            elif content.cut and size <= self.limits.member_bytes:
                self.problem(f"{shown}: only the first {content.pulled} bytes of its content read"
                             + (" (a gzip holds more)" if content.gzipped else ""))

    def open(self, path: str, name: str) -> Iterator[LogFile]:
        """The one regular file at ``path`` (zero items when it cannot be opened or is none: a problem)."""
        try:
            # non-blocking: a FIFO named on the command line must not hang the command
            handle = open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb")  # noqa: SIM115 - closed below
        except OSError as exc:
            self.problem(f"{path}: {exc.strerror or exc}")
            return
        with handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                self.problem(f"{path}: not a regular file")
                return
            with self.content(path, handle, info.st_size) as content:
                if content is not None:
                    yield LogFile(path, name, info.st_mtime, info.st_size, content)

    def walk(self, root: str, skip: Callable[[str], bool] = lambda name: False) -> Iterator[LogFile]:
        """Every file under the directory ``root`` (``skip`` leaves out names the caller reads otherwise)."""
        for path in self.paths_under(root):
            if skip(os.path.basename(path)):
                continue
            if self.spent():
                self.problem(f"stopped after {self.limits.input_bytes} bytes")
                return
            yield from self.open(path, Path(os.path.relpath(path, root)).as_posix())

    def paths_under(self, root: str) -> list[str]:
        """The files of the walk of ``root``; a symlink out of it, a directory that cannot be listed and a
        walk cut short are problems."""
        walk = walk_matches(root, _EVERYTHING, hidden=True)
        for unreadable in walk.unreadable:
            self.problem(unreadable)
        if walk.capped:
            self.problem(walk.capped)
        real_root = os.path.realpath(root)
        inside = []
        for path in walk.files:
            if os.path.islink(path) and os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
                self.problem(f"{path}: symlink out of {root} not followed")
                continue
            inside.append(path)
        return inside

    def each(self, paths: Sequence[str]) -> Iterator[LogFile]:
        """The files of several paths, each a file or a directory; a path that is neither is a problem."""
        for raw in paths:
            if os.path.isdir(raw):
                yield from self.walk(raw)
            elif os.path.exists(raw):
                yield from self.open(raw, os.path.basename(raw))
            else:
                self.problem(f"{raw}: no such file or directory")
