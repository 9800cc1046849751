"""What the keys of ``npuwatch top`` change (the sort, the selection, the panel shown) and the row order it gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.health.series import worst
from agent.health.status import FAIL
from agent.health.thresholds import fault_kind
from agent.top.model import NodeView, NpuRow

__all__ = ["SORT_KEYS", "TopState", "sorted_rows"]

_HEALTH_ORDER = {"critical": 0, "alarm": 1, "unknown": 2, "warning": 3, "ok": 4}
SORT_KEYS: dict[str, Callable[[NpuRow], tuple[float, ...]]] = {
    "npu": lambda r: (r.npu, r.chip),
    "aicore": lambda r: (-(r.aicore if r.aicore is not None else -1.0), r.npu),
    "hbm": lambda r: (-((r.hbm_used or 0.0) / r.hbm_total if r.hbm_total else -1.0), r.npu),
    "temp": lambda r: (-(r.temperature if r.temperature is not None else -1e9), r.npu),
    "power": lambda r: (-(r.power if r.power is not None else -1e9), r.npu),
    "health": lambda r: (_health_rank(r), r.npu),
}


def _health_rank(row: NpuRow) -> float:
    """Worst first: a failing finding, a warning, then npu-smi's word."""
    found = worst(row.findings())
    if found is not None and found.kind is not None:
        return -20.0 if fault_kind(found.kind).status == FAIL else -10.0
    return float(_HEALTH_ORDER.get(row.health or "unknown", 2))


@dataclass
class TopState:
    sort: str = "npu"
    reverse: bool = False
    selected: int = 0  # index into the sorted rows
    detail: bool = False
    help: bool = False
    ascii_only: bool = False


def sorted_rows(view: NodeView, state: TopState) -> list[NpuRow]:
    key = SORT_KEYS.get(state.sort, SORT_KEYS["npu"])
    return sorted(view.rows, key=key, reverse=state.reverse)
