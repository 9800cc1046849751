"""What ``npuwatch top`` remembers between refreshes: a short history per NPU for the sparklines, and the first
HCCL error counts, so the errors logged while top runs can be shown. Link flaps are the agent's judgement
(``npu_fault_since_timestamp_seconds{kind="link_flap"}``), counted over the tool's own history, not here."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from agent.top.model import NodeView

__all__ = ["SPARKS", "History", "sparkline"]

SPARKS = "▁▂▃▄▅▆▇█"
ASCII_SPARKS = "_.-~=+*#"


@dataclass
class History:
    length: int = 120
    aicore: dict[tuple[int, int], deque[float]] = field(default_factory=dict)
    temperature: dict[tuple[int, int], deque[float]] = field(default_factory=dict)
    first_hccl_errors: dict[str, float] | None = None

    def add(self, view: NodeView) -> None:
        for row in view.rows:
            key = (row.npu, row.chip)
            for series, value in ((self.aicore, row.aicore), (self.temperature, row.temperature)):
                if value is not None:
                    series.setdefault(key, deque(maxlen=self.length)).append(value)
        if self.first_hccl_errors is None:
            self.first_hccl_errors = dict(view.hccl_errors)

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
