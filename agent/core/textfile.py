"""Textfile mode: write the exposition for node_exporter's textfile collector.

For sites that run only node_exporter: on every cycle the current exposition is
written to ``<directory>/npuwatch.prom`` atomically (a temp file in the same
directory, fsync, rename), so node_exporter never reads a half-written file.

A file that can no longer be refreshed must not go on being served: node_exporter
would show its last values (61 °C on a chip at 97 °C, ``npuwatch_collector_up 1``)
for as long as it stays. So a failed write empties the file in place (truncating
needs no free space; removing it is the fallback), once, and the agent's stop empties
it too. It is emptied rather than removed so that ``node_textfile_mtime_seconds``
stays exported and ages: the NPUWatchTextfileStale alert sees a writer that failed or
stopped, where a removed file would take the series, and any alert on it, away.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from collectors.base import Sample

__all__ = ["TEXTFILE_NAME", "TextfileError", "TextfileWriter"]

TEXTFILE_NAME = "npuwatch.prom"

log = logging.getLogger(__name__)


class TextfileError(OSError):
    """A write that failed; ``logged``: the writer has said so already (once per run of failures)."""

    logged = True


class TextfileWriter:
    def __init__(self, directory: str | os.PathLike[str], render: Callable[[], bytes]) -> None:
        self._directory = Path(directory)
        self._render = render
        self._lock = threading.Lock()
        self._closed = False
        self._failing = False

    @property
    def path(self) -> Path:
        return self._directory / TEXTFILE_NAME

    def write(self) -> list[Sample]:
        """Write once. On failure (full disk, read-only) the previous file is emptied, the first failure
        of a run is logged, and ``TextfileError`` is raised (the job's collector goes down).

        Returns no samples: as an internal job its health shows in the collector self-metrics.
        """
        with self._lock:
            if self._closed:
                return []  # the agent is stopping: the file stays empty
            try:
                self._write(self._render())
                if self._closed:  # stopped while this write was stuck: leave nothing behind
                    self._clear()
                    return []
            except Exception as exc:
                cleared = self._clear()
                message = f"cannot write {self.path}: {exc}; {cleared}"
                if not self._failing:
                    log.warning("%s", message)
                self._failing = True
                raise TextfileError(message) from exc
            if self._failing:
                log.info("%s is written again", self.path)
            self._failing = False
        return []

    def close(self) -> None:
        """The agent stops: empty the file (see the module docstring for why not remove it); no write after.

        A write stuck in the kernel (a hung disk) must not hold the shutdown: after a short wait the file is
        emptied anyway, and that write empties it again when it returns.
        """
        acquired = self._lock.acquire(timeout=2.0)
        try:
            self._closed = True
            outcome = self._clear()
        finally:
            if acquired:
                self._lock.release()
        log.info("textfile %s: %s", self.path, outcome)

    def _write(self, body: bytes) -> None:
        fd, temp = tempfile.mkstemp(prefix=".npuwatch.", suffix=".tmp", dir=self._directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, 0o644)
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def _clear(self) -> str:
        """Stop node_exporter serving values nobody refreshes: empty the file, else remove it."""
        try:
            if os.stat(self.path).st_size == 0:
                return "the file is empty, node_exporter serves no npuwatch values from it"
        except FileNotFoundError:
            return "there is no old file for node_exporter to serve"
        except OSError:
            pass
        try:
            os.truncate(self.path, 0)
            return "the old file was emptied, node_exporter serves no stale npuwatch values"
        except OSError as truncate_error:
            try:
                os.unlink(self.path)
                return "the old file was removed, node_exporter serves no stale npuwatch values"
            except FileNotFoundError:
                return "there is no old file for node_exporter to serve"
            except OSError as unlink_error:
                return (f"the old file could be neither emptied ({truncate_error.strerror}) nor removed "
                        f"({unlink_error.strerror}): node_exporter goes on serving its stale values")
