"""``<state_dir>/fault_history.json``: each chip's error-code history, kept across restarts.

The agent reads and rewrites it under an ``fcntl`` lock at every health poll, so ``npuwatch faults clear``
(another process) can change it while the agent runs. A file that cannot be read or written is
warned about once and the history is kept in memory.
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


class FaultHistory:
    """The chips' histories in ``path`` (None: in memory only)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self._memory: Chips = {}
        self._lock = threading.Lock()
        self._warned = False

    def read(self) -> Chips:
        """Every chip's history as the file holds it now."""
        if self.path is not None and not self.path.exists():
            return {}  # nothing recorded yet (and no lock file to leave behind)
        with self._lock, self._locked():
            return self._read()

    def update(self, change: Callable[[Chips], Chips]) -> Chips:
        """Apply ``change`` to the histories and write the result; returns it."""
        with self._lock, self._locked():
            before = self._read()
            after = {key: history for key, history in change(dict(before)).items() if not history.empty()}
            if after != before:
                self._write(after)
            self._memory = after
            return after

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
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self._warn(f"unreadable ({exc})")
            return dict(self._memory)
        try:
            if data.get("version") != _VERSION:
                return {}
            return {str(key): _decode(chip) for key, chip in data["chips"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._warn(f"malformed ({exc})")
            return dict(self._memory)

    def _write(self, chips: Chips) -> None:
        if self.path is None:
            return
        data = {"version": _VERSION, "chips": {key: _encode(history) for key, history in sorted(chips.items())}}
        try:
            fd, temp = tempfile.mkstemp(prefix=".fault_history.", suffix=".tmp", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, indent=1)
                os.replace(temp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
                raise
        except OSError as exc:
            self._warn(f"not written ({exc})")
            return
        self._warned = False

    def _warn(self, what: str) -> None:
        if not self._warned:
            log.warning("fault history %s %s; escalation history is kept in memory only", self.path, what)
            self._warned = True


def held_separations(path: str | os.PathLike[str]) -> dict[str, dict[str, float]]:
    """``{"npu:chip": {code: since}}``: the ManuallySeparateNPU levels the agent holds in ``path`` until
    ``npuwatch faults clear`` (empty when there is no file, or it cannot be read: that is warned about)."""
    return {key: {code: mark.since for code, mark in chip.held.items()}
            for key, chip in FaultHistory(path).read().items() if chip.held}
