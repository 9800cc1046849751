"""``<state_dir>/fault_history.json``: each chip's error-code history, kept across restarts.

The agent reads and rewrites it under an ``fcntl`` lock at every health poll, so ``npuwatch faults clear``
(another process) can change it while the agent runs. A file that cannot be read or written is
warned about once and the history is kept in memory: while a write fails (a full or read-only state
directory) the memory holds what the file lacks, so it is the history the next poll builds on, not the
stale file; only a file another process has rewritten since (``faults clear``) is read again. Each
write goes to a temporary file that is fsynced before it is renamed into place, and the directory
after, so a power loss leaves the old file or the new one, never an empty one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agent.handling.escalation import ChipHistory, Held, Raised
from collectors.fault_levels import normalise

__all__ = ["STATE_FILE", "FaultHistory", "chip_key", "held_separations"]

log = logging.getLogger(__name__)

STATE_FILE = "fault_history.json"
_VERSION = 1

Chips = dict[str, ChipHistory]


def chip_key(npu: int | str, chip: int | str) -> str:
    return f"{npu}:{chip}"


def _encode(history: ChipHistory) -> dict[str, Any]:
    return {
        "active": dict(history.active),
        "seen": {code: list(times) for code, times in history.seen.items()},
        "held": {code: {"since": mark.since, "release_s": mark.release_s} for code, mark in history.held.items()},
        "raised": {code: {"level": mark.level, "since": mark.since, "release_s": mark.release_s}
                   for code, mark in history.raised.items()},
        "lasting": dict(history.lasting),
        "cleared": dict(history.cleared),
        "recovered": dict(history.recovered),
        "faults": list(history.faults),
    }


def _times(data: Any, key: str) -> dict[str, float]:
    return {normalise(str(code)): float(at) for code, at in data.get(key, {}).items()}


def _decode(data: Any) -> ChipHistory:
    return ChipHistory(
        _times(data, "active"),
        {normalise(str(code)): tuple(float(at) for at in times) for code, times in data.get("seen", {}).items()},
        {normalise(str(code)): Held(float(mark["since"]),
                                    None if mark.get("release_s") is None else float(mark["release_s"]))
         for code, mark in data.get("held", {}).items()},
        {normalise(str(code)): Raised(str(mark["level"]), float(mark["since"]), float(mark["release_s"]))
         for code, mark in data.get("raised", {}).items()},
        _times(data, "lasting"),
        _times(data, "cleared"),
        _times(data, "recovered"),
        tuple(float(at) for at in data.get("faults", [])),
    )


Signature = tuple[int, int, int, int]  # (device, inode, size, mtime in ns): has another process rewritten the file?


class FaultHistory:
    """The chips' histories in ``path`` (None: in memory only)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: Chips = {}
        self._lock = threading.Lock()
        self._warned = False
        self._unsaved = False  # the memory holds changes a write failed to put in the file
        self._seen: Signature | None = None  # the file as this process last read or wrote it

    @property
    def unsaved(self) -> bool:
        """True while the last change could not be written (the history is in memory only)."""
        return self._unsaved

    def read(self) -> Chips:
        """Every chip's history as the file holds it now (as the memory holds it while writes fail)."""
        if self._unsaved and self._signature() == self._seen:
            return dict(self._memory)
        if self.path is not None and not self.path.exists():
            return {}  # nothing recorded yet (and no lock file to leave behind)
        with self._lock, self._locked():
            return self._read()

    def update(self, change: Callable[[Chips], Chips], *, must_save: bool = False) -> Chips:
        """Apply ``change`` to the histories and write the result; returns it. ``must_save``: raise the
        ``OSError`` of a write that fails (the change then stays in memory only)."""
        with self._lock, self._locked():
            if self._unsaved and self._signature() == self._seen:
                before = dict(self._memory)  # the file is stale: the memory has what it lacks
            else:
                if self._unsaved:
                    log.warning("fault history %s was rewritten by another process while it could not be "
                                "written here; its content is used", self.path)
                before = self._read()
            after = {key: history for key, history in change(dict(before)).items() if not history.empty()}
            self._memory = after
            if after != before or self._unsaved:
                failed = self._write(after)
                if failed is not None and must_save:
                    raise failed
            return after

    def _signature(self) -> Signature | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        if self.path is None:
            yield
            return
        try:
            fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self._warn(f"not locked ({exc})")
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read(self) -> Chips:
        if self.path is None:
            return dict(self._memory)
        seen = self._signature()
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self._seen, self._unsaved = None, False
            return {}
        except (OSError, ValueError) as exc:
            self._warn(f"unreadable ({exc})")
            return dict(self._memory)
        try:
            if data.get("version") != _VERSION:
                return {}
            chips = {str(key): _decode(chip) for key, chip in data["chips"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._warn(f"malformed ({exc})")
            return dict(self._memory)
        self._seen, self._unsaved = seen, False
        return chips

    def _write(self, chips: Chips) -> OSError | None:
        """Write ``chips`` durably; the error of a write that failed (warned about once), else None."""
        if self.path is None:
            return None
        data = {"version": _VERSION, "chips": {key: _encode(history) for key, history in sorted(chips.items())}}
        try:
            _write_durably(self.path, json.dumps(data, indent=1))
        except OSError as exc:
            self._unsaved = True
            self._warn(f"not written ({exc})")
            return exc
        self._unsaved, self._seen = False, self._signature()
        if self._warned:
            log.info("fault history %s written again", self.path)
        self._warned = False
        return None

    def _warn(self, what: str) -> None:
        if not self._warned:
            log.warning("fault history %s %s; escalation history is kept in memory only", self.path, what)
            self._warned = True


def _write_durably(path: Path, text: str) -> None:
    """``text`` into ``path`` through a fsynced temporary file renamed into place, then the directory fsynced."""
    fd, temp = tempfile.mkstemp(prefix=".fault_history.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def held_separations(path: str | os.PathLike[str]) -> dict[str, dict[str, float]]:
    """``{"npu:chip": {code: since}}``: the ManuallySeparateNPU levels the agent holds in ``path`` until
    ``npuwatch faults clear`` (empty when there is no file, or it cannot be read: that is warned about)."""
    return {key: {code: mark.since for code, mark in chip.held.items()}
            for key, chip in FaultHistory(path).read().items() if chip.held}
