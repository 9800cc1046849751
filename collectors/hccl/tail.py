"""Incremental, restart-safe reading of CANN / HCCL log files (plogs, device logs, job logs).

Which files: each directory in ``paths`` combined with each relative pattern in ``globs``
(defaults: ``$ASCEND_PROCESS_LOG_PATH`` else ``~/ascend/log`` with ``debug/plog/*.log``,
``run/plog/*.log``, ``debug/device-*/*.log``); a file in ``paths`` is read as it is; an absolute
pattern in ``globs`` (an operator's job logs) is confined to its fixed leading directories; the
optional ``kernel_log`` file is read too. A file whose real path leaves its root (a symlink
pointing elsewhere) is skipped, and so is anything that is not a regular file. Files are only
ever opened read-only and never block (``tail_io``): a path swapped for a FIFO, a device or
another file between its stat and its open is refused and reported in ``read_errors`` for that
poll; a missing directory just yields nothing.

How: a file is identified by (st_dev, st_ino), so a renamed file keeps its offset and a new file at
the same path (rotation) starts at 0; a file smaller than its offset or than at the last poll was
truncated and restarts at 0; fingerprints of its first bytes and of the bytes just before its
offset catch inode reuse and a file truncated and rewritten in place between two polls, even with
the same first bytes (checked when a file has grown, and when a file that had gone missing is back:
a deleted file's inode reused by a new file of the same size would otherwise look unchanged). A new
file at another path holding the same bytes as a followed file up to its offset is a copy of it
(logrotate's ``copytruncate`` to a name the globs match) and continues from that offset. A file
seen for the first time starts at 0 when modified within ``first_start_window_s`` (default 1 h),
else at its end. Only complete lines are returned (a partial last line waits, unless the file has
been idle for ``idle_flush_s``); a line longer than ``max_line_bytes`` (64 KiB) is cut and the rest
skipped, so memory stays bounded by the chunk size whatever the file size. ``byte_budget`` (64 MiB)
caps what one ``poll()`` reads: each file with new data first gets an equal share, then the
leftover goes in order; the rest is read next cycle.

State (offsets, plus whatever the caller keeps in ``extra`` and ``file_meta``) is written by
``commit()`` as JSON through a temporary file and ``os.replace``, so a crash never leaves a torn
file and a restart resumes exactly where the last commit left off. If the state file cannot be
written (read-only, disk full) ``state_error`` says why and the tailer carries on in memory.
"""

from __future__ import annotations

import contextlib
import copy
import glob
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from collectors.hccl.tail_io import HEAD_BYTES, digest, open_regular, read_at
from collectors.log_walk import MAX_ENTRIES, WalkResult, walk_matches

__all__ = [
    "DEFAULT_GLOBS",
    "Chunk",
    "LogTailer",
    "StateFile",
    "default_log_root",
    "iter_line_batches",
    "split_complete_lines",
]

KIB = 1024
MIB = 1024 * KIB
DEFAULT_GLOBS: tuple[str, ...] = ("debug/plog/*.log", "run/plog/*.log", "debug/device-*/*.log")
DEFAULT_BYTE_BUDGET = 64 * MIB
DEFAULT_MAX_LINE = 64 * KIB
DEFAULT_CHUNK = 1 * MIB
MAX_TRACKED_FILES = 10_000
STATE_VERSION = 1


def default_log_root() -> Path:
    """Where CANN writes its logs: ``$ASCEND_PROCESS_LOG_PATH`` or ``~/ascend/log``."""
    env = os.environ.get("ASCEND_PROCESS_LOG_PATH")
    return Path(env) if env else Path.home() / "ascend" / "log"


def split_complete_lines(data: bytes, max_line: int) -> tuple[list[str], int]:
    """The complete lines in ``data`` (each cut to ``max_line`` chars) and the bytes they use."""
    end = data.rfind(b"\n")
    if end < 0:
        return [], 0
    lines = data[:end].decode("utf-8", "replace").split("\n")
    if max_line and any(len(line) > max_line for line in lines):
        lines = [line[:max_line] for line in lines]
    return lines, end + 1


def iter_line_batches(read: Callable[[int], bytes], max_line: int = DEFAULT_MAX_LINE,
                      chunk_bytes: int = DEFAULT_CHUNK) -> Iterator[list[str]]:
    """Every line from ``read`` (a binary stream's read) to its end, in batches; bounded memory."""
    carry = b""
    skipping = False
    while True:
        data = read(chunk_bytes)
        if not data:
            break
        buf = carry + data
        carry = b""
        if skipping:
            newline = buf.find(b"\n")
            if newline < 0:
                continue
            buf, skipping = buf[newline + 1:], False
        lines, used = split_complete_lines(buf, max_line)
        if lines:
            yield lines
        rest = buf[used:]
        if len(rest) >= max_line:
            yield [rest[:max_line].decode("utf-8", "replace")]
            skipping = True
        else:
            carry = rest
    if carry and not skipping:
        yield [carry.decode("utf-8", "replace")]


@dataclass
class Chunk:
    """Complete lines read from one file in one step."""

    key: str  # "dev:ino"
    path: str
    lines: list[str]
    ref_time: float  # the file's mtime (gives year-less timestamps their year)
    restarted: bool = False  # the file was rotated in place, truncated or replaced: a new stream


@dataclass
class _Pending:
    key: str
    real: str
    tracked: _Tracked
    size: int
    mtime: float


@dataclass
class _Tracked:
    path: str
    offset: int
    head: str
    head_len: int
    seen_at: float
    skip_long: bool = False
    restarted: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    missing: bool = False  # not found by the last poll (in memory only)
    tail: str = ""  # fingerprint of the tail_len bytes just before offset
    tail_len: int = 0
    size: int = 0  # the file's size at the last poll

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "offset": self.offset, "head": self.head, "head_len": self.head_len,
                "seen_at": self.seen_at, "skip_long": self.skip_long, "meta": self.meta,
                "tail": self.tail, "tail_len": self.tail_len, "size": self.size}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _Tracked:
        return cls(str(data["path"]), int(data["offset"]), str(data.get("head", "")),
                   int(data.get("head_len", 0)), float(data.get("seen_at", 0.0)),
                   bool(data.get("skip_long", False)), False, dict(data.get("meta") or {}), False,
                   str(data.get("tail", "")), int(data.get("tail_len", 0)), int(data.get("size", 0)))

    def set_tail(self, window: bytes) -> None:
        self.tail, self.tail_len = digest(window), len(window)

    def restart(self) -> None:
        self.offset, self.skip_long, self.restarted, self.meta = 0, False, True, {}
        self.tail, self.tail_len = "", 0


class StateFile:
    """A JSON file written atomically; failures are reported in ``error``, never raised."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self.error: str | None = None

    def load(self) -> dict[str, Any] | None:
        if self.path is None:
            return None
        try:
            with self.path.open(encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.error = f"state file {self.path} unreadable, starting afresh: {exc}"
            return None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            self.error = f"state file {self.path} has an unknown layout, starting afresh"
            return None
        return data

    def save(self, data: dict[str, Any]) -> bool:
        if self.path is None:
            return True
        tmp_name: str | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp_name = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp",
                                            dir=self.path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, separators=(",", ":"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, self.path)
            tmp_name = None
        except OSError as exc:
            self.error = f"cannot write state file {self.path}: {exc}"
            return False
        finally:
            if tmp_name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp_name)
        self.error = None
        return True


def _under(real: str, root: str) -> bool:
    try:
        return os.path.commonpath([real, root]) == root
    except ValueError:
        return False


def _static_prefix(pattern: str) -> str:
    """The leading directories of a glob pattern that hold no wildcard."""
    parts: list[str] = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        parts.append(part)
    return os.path.join(*parts) if parts else os.sep


class LogTailer:
    """Reads what was appended to the watched log files since the last committed poll."""

    def __init__(
        self,
        paths: Sequence[str | os.PathLike[str]] | None = None,
        globs: Sequence[str] | None = None,
        kernel_log: str | os.PathLike[str] | None = None,
        state_file: str | os.PathLike[str] | None = None,
        *,
        first_start_window_s: float = 3600.0,
        byte_budget: int = DEFAULT_BYTE_BUDGET,
        clock: Callable[[], float] = time.time,
        max_line_bytes: int = DEFAULT_MAX_LINE,
        chunk_bytes: int = DEFAULT_CHUNK,
        idle_flush_s: float = 300.0,
        forget_after_s: float = 7 * 86400.0,
        max_walk_entries: int = MAX_ENTRIES,
        carried: dict[str, Any] | None = None,
    ) -> None:
        """``carried``: the ``snapshot()`` of the tailer this one replaces (a reload), used instead of the state
        file, which is stale when it could not be written."""
        self.paths = [Path(p) for p in (paths if paths is not None else [default_log_root()])]
        self.globs = tuple(globs if globs is not None else DEFAULT_GLOBS)
        self.kernel_log = Path(kernel_log) if kernel_log is not None else None
        self.first_start_window_s = first_start_window_s
        self.byte_budget = max(1, int(byte_budget))
        self.clock = clock
        self.max_line_bytes = max(1, int(max_line_bytes))
        self.chunk_bytes = max(1, int(chunk_bytes))
        self.idle_flush_s = idle_flush_s
        self.forget_after_s = forget_after_s
        self.max_walk_entries = max_walk_entries
        self.read_errors: list[str] = []
        self.discovery_capped: str | None = None
        self.files_seen = 0
        self.budget_exhausted = False
        self._store = StateFile(state_file)
        state = self._store.load() if carried is None else carried
        self.first_start = state is None
        self._tracked: dict[str, _Tracked] = {}
        self.bytes_read_total = 0
        self.extra: dict[str, Any] = {}
        if state is not None:
            self._restore(state)

    # ------------------------------------------------------------ state

    @property
    def state_error(self) -> str | None:
        """Why the state file could not be read or written (None when all is well)."""
        return self._store.error

    @property
    def state_path(self) -> Path | None:
        return self._store.path

    def _restore(self, state: dict[str, Any]) -> None:
        try:
            files = {str(k): _Tracked.from_json(v) for k, v in dict(state.get("files", {})).items()}
            total = int(state.get("bytes_read_total", 0))
            extra = dict(state.get("extra") or {})
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            self._store.error = f"state file {self._store.path} is damaged, starting afresh: {exc}"
            self.first_start = True
            return
        self._tracked, self.bytes_read_total, self.extra = files, total, extra

    def file_meta(self, key: str) -> dict[str, Any]:
        """A per-file dict saved with the offsets (the caller's per-stream memory)."""
        tracked = self._tracked.get(key)
        return tracked.meta if tracked is not None else {}

    def tracked_keys(self) -> set[str]:
        """Keys ("dev:ino") of the files whose offsets are kept."""
        return set(self._tracked)

    def snapshot(self) -> dict[str, Any]:
        """Offsets and ``extra`` as the state file holds them (a copy: nothing in it is shared)."""
        data = {
            "version": STATE_VERSION,
            "bytes_read_total": self.bytes_read_total,
            "files": {key: tracked.to_json() for key, tracked in list(self._tracked.items())},
            "extra": self.extra,
        }
        copied: dict[str, Any] = json.loads(json.dumps(data))
        return copied

    def commit(self) -> bool:
        """Persist offsets and ``extra`` atomically; False (and ``state_error``) on failure."""
        return self._store.save(self.snapshot())

    # ------------------------------------------------------------ discovery

    def discover(self) -> list[tuple[str, str]]:
        """(path as found, real path) of every regular file inside its root, no duplicates.

        The walk is bounded (``log_walk``): symlinked directories are not followed under ``**``, and
        past ``max_walk_entries`` it stops and ``discovery_capped`` says so. Directories that cannot be
        listed go to ``read_errors``.
        """
        walk = WalkResult()
        candidates: list[tuple[str, str]] = []  # (file, root)
        for base in self.paths:
            base_str = os.fspath(base)
            if os.path.isfile(base_str):
                candidates.append((base_str, base_str))
            elif os.path.isdir(base_str):
                for pattern in self.globs:
                    if not os.path.isabs(pattern):
                        before = len(walk.files)
                        walk_matches(base_str, pattern, max_entries=self.max_walk_entries, result=walk)
                        candidates.extend((path, base_str) for path in walk.files[before:])
            elif os.path.lexists(base_str) and not os.access(base_str, os.R_OK):
                walk.unreadable.append(f"{base_str}: permission denied")
        for pattern in self.globs:
            if os.path.isabs(pattern):
                root = _static_prefix(pattern)
                before = len(walk.files)
                walk_matches(root, os.path.relpath(pattern, root), max_entries=self.max_walk_entries, result=walk)
                candidates.extend((path, root) for path in walk.files[before:])
        if self.kernel_log is not None:
            kernel = os.fspath(self.kernel_log)
            candidates.append((kernel, kernel))
        self.read_errors.extend(walk.unreadable)
        self.discovery_capped = walk.capped
        found: list[tuple[str, str]] = []
        seen: set[str] = set()
        for path, root in candidates:
            real = os.path.realpath(path)
            if real in seen or not _under(real, os.path.realpath(root)):
                continue
            try:
                if not stat.S_ISREG(os.stat(real).st_mode):
                    continue
            except OSError:
                continue
            seen.add(real)
            found.append((path, real))
        return found

    def roots_exist(self) -> bool:
        """True when at least one configured directory or file exists."""
        bases = [*self.paths, *(Path(_static_prefix(g)) for g in self.globs if os.path.isabs(g))]
        if self.kernel_log is not None:
            bases.append(self.kernel_log)
        return any(base.exists() for base in bases)

    # ------------------------------------------------------------ reading

    def poll(self) -> Iterator[Chunk]:
        """Yield new complete lines; the offset of a chunk moves once the consumer asks for more."""
        now = self.clock()
        self.read_errors = []
        self.budget_exhausted = False
        self.discovery_capped = None
        pending: list[_Pending] = []
        present: set[str] = set()
        files = self.discover()
        self.files_seen = len(files)
        found: list[tuple[str, str, os.stat_result, str]] = []
        for path, real in files:
            try:
                info = os.stat(real)
            except OSError as exc:
                self.read_errors.append(f"{path}: {exc}")
                continue
            found.append((path, real, info, f"{info.st_dev}:{info.st_ino}"))
        # What was read of each file before this poll moves anything: a new file may be a copy of one.
        marks: dict[tuple[int, str], list[_Tracked]] = {}  # by head: a new file is compared with few
        if any(key not in self._tracked for *_, key in found):
            for tracked_file in sorted(self._tracked.values(), key=lambda t: -t.offset):
                if tracked_file.offset > 0 and tracked_file.head_len:
                    marks.setdefault((tracked_file.head_len, tracked_file.head), []).append(replace(tracked_file))
        for path, real, info, key in found:
            present.add(key)
            try:
                tracked = self._track(key, path, real, info, now, marks=marks)
            except FileNotFoundError:  # gone since its stat: nothing left to read
                continue
            except OSError as exc:  # swapped for a FIFO, a device, another file: never blocks
                self.read_errors.append(f"{path}: {exc}")
                continue
            if info.st_size > tracked.offset or tracked.restarted:
                pending.append(_Pending(key, real, tracked, info.st_size, info.st_mtime))
        for key, tracked in self._tracked.items():
            if key not in present:
                tracked.missing = True
        self._forget(present, now)
        budget = self.byte_budget
        # Pass 1: an equal share for every file with new data; pass 2: the leftover, in order.
        share = max(1, budget // max(1, len(pending)))
        for limit_of in (lambda left: min(share, left), lambda left: left):
            for item in pending:
                if budget <= 0:
                    break
                used = 0
                for chunk, consumed, window in self._read(item, limit_of(budget), now):
                    if chunk is not None:
                        yield chunk
                    item.tracked.offset += consumed
                    item.tracked.set_tail(window)
                    self.bytes_read_total += consumed
                    used += consumed
                budget -= used
        # More unread data than budget left: the rest waits for the next cycle.
        self.budget_exhausted = any(p.size - p.tracked.offset > max(budget, 0) for p in pending)

    def _track(self, key: str, path: str, real: str, info: os.stat_result, now: float, *,
               marks: dict[tuple[int, str], list[_Tracked]]) -> _Tracked:
        """The tracked state of the file ``key``; OSError when it cannot be opened as that regular file."""
        tracked = self._tracked.get(key)
        if tracked is not None:
            tracked.path, tracked.seen_at = path, now
            # The fingerprints are only checked when there is something to read or the file was
            # gone (no I/O otherwise). A file smaller than at the last poll was truncated.
            grown = info.st_size > tracked.offset
            suspect = grown or tracked.missing
            tracked.missing = False
            shrunk = info.st_size < max(tracked.offset, tracked.size)
            if shrunk or (suspect and not self._unchanged(real, key, tracked)):
                tracked.restart()
                tracked.head, tracked.head_len = self._head(real, key)
            elif grown and tracked.head_len < HEAD_BYTES <= info.st_size:
                tracked.head, tracked.head_len = self._head(real, key)
            tracked.size = info.st_size
            return tracked
        fd = open_regular(real, key)
        try:
            head = read_at(fd, HEAD_BYTES, 0)
            origin = self._copied_from(fd, path, head, info.st_size, marks)
            recent = now - info.st_mtime <= self.first_start_window_s
            tracked = _Tracked(path, 0 if recent else info.st_size, digest(head), len(head), now, size=info.st_size)
            if origin is not None:  # a copy (copytruncate): what was read of the original is not read again
                tracked.offset, tracked.skip_long, tracked.meta = origin.offset, origin.skip_long, \
                    copy.deepcopy(origin.meta)
                tracked.tail, tracked.tail_len = origin.tail, origin.tail_len
            elif tracked.offset:
                tracked.set_tail(read_at(fd, min(HEAD_BYTES, tracked.offset), max(0, tracked.offset - HEAD_BYTES)))
        finally:
            os.close(fd)
        # A new file at a path we already followed is a rotation: a fresh stream.
        tracked.restarted = origin is None and any(t.path == path for t in self._tracked.values())
        self._tracked[key] = tracked
        return tracked

    @staticmethod
    def _copied_from(fd: int, path: str, head: bytes, size: int,
                     marks: dict[tuple[int, str], list[_Tracked]]) -> _Tracked | None:
        """The followed file this new one is a copy of: it holds the same bytes up to where that one was
        read (its head and the bytes just before its offset), at another path; None when there is none."""
        lengths = sorted({length for length, _ in marks if length <= len(head)}, reverse=True)
        candidates = [mark for length in lengths for mark in marks.get((length, digest(head[:length])), ())]
        for mark in sorted(candidates, key=lambda m: -m.offset):
            if mark.path == path or mark.offset > size:
                continue
            if mark.tail_len:
                if digest(read_at(fd, mark.tail_len, mark.offset - mark.tail_len)) == mark.tail:
                    return mark
            elif mark.offset <= mark.head_len:  # all that was read is in the head
                return mark
        return None

    def _forget(self, present: set[str], now: float) -> None:
        for key in [k for k, t in self._tracked.items()
                    if k not in present and now - t.seen_at > self.forget_after_s]:
            del self._tracked[key]
        if len(self._tracked) > MAX_TRACKED_FILES:
            oldest = sorted(self._tracked, key=lambda k: self._tracked[k].seen_at)
            for key in oldest[: len(self._tracked) - MAX_TRACKED_FILES]:
                del self._tracked[key]

    @staticmethod
    def _head(real: str, key: str) -> tuple[str, int]:
        fd = open_regular(real, key)
        try:
            data = read_at(fd, HEAD_BYTES, 0)
        finally:
            os.close(fd)
        return digest(data), len(data)

    @staticmethod
    def _unchanged(real: str, key: str, tracked: _Tracked) -> bool:
        """Whether the file still holds what was read: the same head and the same bytes just before the
        offset (a file truncated and rewritten with the same first bytes differs there)."""
        if tracked.head_len == 0 and tracked.tail_len == 0:
            return True
        fd = open_regular(real, key)
        try:
            if tracked.head_len and digest(read_at(fd, tracked.head_len, 0)) != tracked.head:
                return False
            start = tracked.offset - tracked.tail_len
            return not tracked.tail_len or digest(read_at(fd, tracked.tail_len, start)) == tracked.tail
        finally:
            os.close(fd)

    def _read(self, item: _Pending, limit: int, now: float) -> Iterable[tuple[Chunk | None, int, bytes]]:
        """(chunk or None, bytes consumed, the last HEAD_BYTES bytes up to there) steps, reading at most
        ``limit`` bytes."""
        key, tracked, size, mtime = item.key, item.tracked, item.size, item.mtime
        try:
            fd = open_regular(item.real, key)
        except OSError as exc:
            self.read_errors.append(f"{tracked.path}: {exc}")
            return
        try:
            offset = tracked.offset
            window = read_at(fd, min(HEAD_BYTES, offset), max(0, offset - HEAD_BYTES))
            left = limit
            while left > 0 and offset < size:
                data = read_at(fd, min(self.chunk_bytes, left, size - offset), offset)
                if not data:
                    break
                consumed, lines = self._take(tracked, data, at_eof=offset + len(data) >= size,
                                             idle=now - mtime >= self.idle_flush_s)
                if consumed == 0:
                    break
                chunk = None
                if lines:
                    chunk = Chunk(key, tracked.path, lines, mtime, tracked.restarted)
                    tracked.restarted = False
                window = (window + data[:consumed])[-HEAD_BYTES:]
                yield chunk, consumed, window
                offset += consumed
                left -= consumed
        except OSError as exc:
            self.read_errors.append(f"{tracked.path}: {exc}")
        finally:
            os.close(fd)

    def _take(self, tracked: _Tracked, data: bytes, *, at_eof: bool, idle: bool) -> tuple[int, list[str]]:
        """How many bytes of ``data`` to consume and the lines they hold."""
        skipped = 0
        if tracked.skip_long:
            newline = data.find(b"\n")
            if newline < 0:
                return len(data), []
            skipped = newline + 1
            data = data[skipped:]
            tracked.skip_long = False
        lines, used = split_complete_lines(data, self.max_line_bytes)
        if used:
            return skipped + used, lines
        if len(data) >= self.max_line_bytes:
            tracked.skip_long = True
            return skipped + len(data), [data[: self.max_line_bytes].decode("utf-8", "replace")]
        if at_eof and idle and data:
            return skipped + len(data), [data.decode("utf-8", "replace")]
        return skipped, []  # a partial line shorter than the cap waits for its newline
