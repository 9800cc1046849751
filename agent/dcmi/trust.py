"""The trust check: one chip read through DCMI and through npu-smi, shared fields compared
(``collectors.dcmi.compare``), at start and every ``collectors.dcmi.verify_interval``.

A field that disagrees beyond its tolerance hands its source back to npu-smi (``DcmiBackend.give_back``),
is exported (``npuwatch_dcmi_field_disagreements``) and logged in one line. With no npu-smi to compare
with (missing, failing), the DCMI data is unverified (``npuwatch_dcmi_unverified`` 1). ``npuwatch dcmi``
prints the same comparison side by side.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent.core.backend import Fallback
from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from agent.dcmi.backend import DcmiBackend
from collectors import npu_smi_common, npu_smi_health, npu_smi_info, npu_smi_memory, npu_smi_usages
from collectors.base import ChipRef, ParseError, Source
from collectors.dcmi.compare import FIELDS, Row, compare

__all__ = ["TrustCheck", "side_by_side"]

log = logging.getLogger(__name__)

SOURCES: dict[str, Source] = {source.name: source for source in (
    npu_smi_info.SOURCE, npu_smi_health.SOURCE, npu_smi_common.SOURCE, npu_smi_usages.SOURCE, npu_smi_memory.SOURCE)}


def side_by_side(backend: DcmiBackend, chip: ChipRef, npu_smi: Callable[[Source, ChipRef], Any]) -> list[Row]:
    """Every shared field of ``chip``: DCMI's value, npu-smi's, and whether they agree.

    ``npu_smi(source, chip)`` returns the source's records from npu-smi, or raises; a side that does
    not answer leaves its values None (agreement unknown)."""
    rows: list[Row] = []
    for name in FIELDS:
        source = SOURCES[name]
        try:
            dcmi: Any = backend.read_plan(name, chip)
        except Fallback:
            dcmi = None
        try:
            tool: Any = npu_smi(source, chip)
        except (ToolMissing, ToolFailed, ToolTimeout, ParseError):
            tool = None
        rows.extend(compare(name, dcmi, tool, chip))
    return rows


class TrustCheck:
    def __init__(self, backend: DcmiBackend, npu_smi_path: str | None, timeout_s: float, interval_s: float, *,
                 env: Mapping[str, str] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.npu_smi_path = npu_smi_path
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.env = dict(env) if env else None
        self._clock = clock
        self._next: float | None = None  # None: not run yet (due now)
        self._lock = threading.Lock()
        self.verified: bool | None = None  # None: not compared yet
        self.disagreements: dict[tuple[str, str], str] = {}
        self.last_rows: list[Row] = []

    def npu_smi(self, source: Source, chip: ChipRef) -> Any:
        path = resolve_tool("npu-smi", self.npu_smi_path)
        return source.parse(run_tool([path, *source.argv(chip)], self.timeout_s, env=self.env).stdout)

    def maybe(self, chips: Sequence[ChipRef]) -> None:
        """Run the check when it is due and a chip is known; never raises."""
        if not chips or not self._lock.acquire(blocking=False):
            return
        try:
            now = self._clock()
            if self._next is not None and now < self._next:
                return
            self._next = now + self.interval_s
            self.apply(side_by_side(self.backend, chips[0], self.npu_smi))
        except Exception:  # the check must never stop the dcmi job
            log.exception("DCMI trust check failed")
        finally:
            self._lock.release()

    def apply(self, rows: list[Row]) -> None:
        self.last_rows = rows
        self.verified = any(row.agree is not None for row in rows)
        if not self.verified:
            log.info("DCMI: no npu-smi reading to compare with; DCMI data is unverified")
        for row in rows:
            if row.agree is False and (row.source, row.field) not in self.disagreements:
                why = f"{row.field}: DCMI {row.dcmi!r}, npu-smi {row.tool!r}"
                self.disagreements[(row.source, row.field)] = why
                self.backend.give_back(row.source, f"DCMI disagreed with npu-smi ({why})")
                log.warning("DCMI disagrees with npu-smi on %s %s; npu-smi serves %s from now on",
                            row.source, why, row.source)
