"""What ``npuwatch top`` remembers between refreshes: a short history per NPU for the sparklines, and the first
HCCL error counts, so the errors logged while top runs can be shown. Link flaps are the agent's judgement
(``npu_fault_since_timestamp_seconds{kind="link_flap"}``), counted over the tool's own history, not here."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from agent.top.model import NodeView, Process

__all__ = ["SPARKS", "History", "sparkline"]

SPARKS = "▁▂▃▄▅▆▇█"
ASCII_SPARKS = "_.-~=+*#"
_PROCESS_SOURCE = "npu_smi_info"  # the collector whose rounds the per-process series come from


@dataclass
class History:
    length: int = 120
    aicore: dict[tuple[int, int], deque[float]] = field(default_factory=dict)
    temperature: dict[tuple[int, int], deque[float]] = field(default_factory=dict)
    first_hccl_errors: dict[str, float] | None = None
    cpu: dict[str, tuple[float, float]] = field(default_factory=dict)  # pid -> (when collected, CPU seconds)
    cpu_ratio: dict[str, float] = field(default_factory=dict)  # pid -> CPU used between the last two rounds

    def add(self, view: NodeView) -> None:
        self._add_cpu(view)
        for row in view.rows:
            key = (row.npu, row.chip)
            for series, value in ((self.aicore, row.aicore), (self.temperature, row.temperature)):
                if value is not None:
                    series.setdefault(key, deque(maxlen=self.length)).append(value)
        if self.first_hccl_errors is None:
            self.first_hccl_errors = dict(view.hccl_errors)

    def _add_cpu(self, view: NodeView) -> None:
        """Each process's CPU use between the agent's last two npu-smi rounds it was seen in."""
        at = next((c.last_success for c in view.collectors if c.name == _PROCESS_SOURCE), None)
        seen: set[str] = set()
        for row in view.rows:
            for pid, process in row.procs.items():
                if process.cpu_seconds is None or at is None or pid in seen:
                    continue
                seen.add(pid)
                before = self.cpu.get(pid)
                if before is not None and at > before[0]:
                    self.cpu_ratio[pid] = max(0.0, (process.cpu_seconds - before[1]) / (at - before[0]))
                if before is None or at > before[0]:
                    self.cpu[pid] = (at, process.cpu_seconds)
        for pid in set(self.cpu) - seen:  # gone: a new process may take its pid
            self.cpu.pop(pid, None)
            self.cpu_ratio.pop(pid, None)

    def cpu_of(self, process: Process) -> float | None:
        """The process's CPU use as a ratio of one core: between the last two rounds, else its average since it
        started (one round seen: ``--once``); None when the agent exports no CPU time for it."""
        if process.pid in self.cpu_ratio:
            return self.cpu_ratio[process.pid]
        seen = self.cpu.get(process.pid)
        if seen is None or process.started_at is None or seen[0] <= process.started_at:
            return None
        return seen[1] / (seen[0] - process.started_at)

    def new_hccl_errors(self, view: NodeView) -> dict[str, int]:
        first = self.first_hccl_errors or {}
        return {category: int(count - first.get(category, 0.0)) for category, count in sorted(view.hccl_errors.items())
                if count - first.get(category, 0.0) > 0}


def sparkline(values: deque[float] | list[float], width: int, low: float, high: float, ascii_only: bool = False) -> str:
    """The last ``width`` values as bars scaled from ``low`` to ``high``, right-aligned."""
    marks = ASCII_SPARKS if ascii_only else SPARKS
    recent = list(values)[-width:] if width > 0 else []
    span = max(high - low, 1e-9)
    text = "".join(marks[min(len(marks) - 1, max(0, int((v - low) / span * (len(marks) - 1) + 0.5)))] for v in recent)
    return text.rjust(width)
