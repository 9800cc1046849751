"""What the keys of ``npuwatch top`` change (the sort, the selection, the panel shown) and the row order it gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agent.top.model import NodeView, NpuRow

__all__ = ["SORT_KEYS", "TopState", "sorted_rows"]

SORT_KEYS: dict[str, Callable[[NpuRow], tuple[float, ...]]] = {
    "npu": lambda r: (r.npu, r.chip),
    "aicore": lambda r: (-(r.aicore if r.aicore is not None else -1.0), r.npu),
    "hbm": lambda r: (-((r.hbm_used or 0.0) / r.hbm_total if r.hbm_total else -1.0), r.npu),
    "temp": lambda r: (-(r.temperature if r.temperature is not None else -1e9), r.npu),
    "power": lambda r: (-(r.power if r.power is not None else -1e9), r.npu),
    "health": lambda r: (-r.rank, r.npu),  # the agent's status, worst first (FAIL > UNKNOWN > WARN > ok)
}


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
