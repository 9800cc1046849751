"""The one node reading of ``npuwatch check`` and ``npuwatch diagnose``: the chips and their RoCE ports
(``agent.health.node``), the cards' versions and HCCS state (through the same reader), the recent logs, and
(check only) the local agent.

Nothing here judges: the one check set (``agent.health.checks``) turns these readings into results.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agent.health.node import calls_pool, read_cards, read_chips, read_node
from agent.health.reader import NodeReader
from agent.health.readings import LogScan, QuickReadings

__all__ = ["read_quick"]


def _quiet(_text: str) -> None:
    """Progress nobody watches."""


def read_quick(tools: NodeReader, *, want_hccs: bool = True, want_boards: bool = True, want_roce: bool = True,
               scan: Callable[[], LogScan] | None = None, agent: Callable[[], Any] | None = None,
               gap_s: float = 0.0, say: Callable[[str], None] = _quiet) -> QuickReadings:
    """Everything the quick checks judge, read once. The cards' ``-t board``/``-t hccs`` calls, the
    agent and the logs run beside ``read_node`` (which reads the chips and their RoCE ports, optics and
    counters twice ``gap_s`` apart), so the reading takes as long as its busiest tool, not the sum of its
    phases. ``say`` hears the progress (for a progress line)."""
    started = time.monotonic()
    with calls_pool(tools, 2, "check-side") as side:
        agent_future = side.submit(agent) if agent is not None else None
        cards_future = side.submit(read_cards, tools, want_hccs, want_boards) if want_hccs or want_boards else None
        node = read_node(tools, gap_s, scan, say) if want_roce else read_chips(tools, scan)
        readings = QuickReadings(node=node)
        if cards_future is not None:
            readings.boards, readings.hccs = cards_future.result()
        if agent_future is not None:
            readings.agent = agent_future.result()
    readings.read_s = time.monotonic() - started
    return readings
