"""Textfile mode: write the exposition for node_exporter's textfile collector.

For sites that run only node_exporter: on every cycle the current exposition is
written to ``<directory>/npuwatch.prom`` atomically (a temp file in the same
directory, fsync, rename), so node_exporter never reads a half-written file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from collectors.base import Sample

__all__ = ["TEXTFILE_NAME", "TextfileWriter"]

TEXTFILE_NAME = "npuwatch.prom"


class TextfileWriter:
    def __init__(self, directory: str | os.PathLike[str], render: Callable[[], bytes]) -> None:
        self._directory = Path(directory)
        self._render = render

    @property
    def path(self) -> Path:
        return self._directory / TEXTFILE_NAME

    def write(self) -> list[Sample]:
        """Write once; raises OSError (full disk, read-only) and leaves the previous file intact.

        Returns no samples: as an internal job its health shows in the collector self-metrics.
        """
        body = self._render()
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
        return []
