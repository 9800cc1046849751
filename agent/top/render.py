"""One frame of ``npuwatch top`` as lines of styled segments, for any terminal size: the curses screen paints
them, ``--once`` prints them as plain text. Pure: the view, the history and the screen state in, lines out.

Nothing is cut inside a word: the table drops its columns of lowest priority as the terminal narrows
(``agent.top.columns``), the header leaves out its least needed parts, and the panels' text is folded. Rows go,
in this order, to the header, the table's title, the footer, every NPU (scrolling to the selected one when they
do not all fit, the last row then saying how many are hidden above and below), the HCCL, probe and check panels,
the History panel (when the table has no history columns and the rows left hold it and the first processes),
then the process list. A cell whose reading is stale (``agent.top.freshness``) carries the stale mark.
"""

from __future__ import annotations

import time

from agent.top.columns import CODES, columns, stale_cell
from agent.top.freshness import Freshness
from agent.top.history import History
from agent.top.lines import Line, fit, plain, wrap
from agent.top.model import Fetched
from agent.top.panels import detail, header, panels, processes
from agent.top.state import SORT_KEYS, TopState, sorted_rows
from agent.top.trends import trends

__all__ = ["HELP", "SORT_KEYS", "Line", "TopState", "frame", "plain", "sorted_rows"]

HELP = [
    ("npuwatch top: the node as the local agent sees it (a client of its /metrics: it runs no tool)", ""),
    ("", ""),
    ("q", "quit"),
    ("? or h", "this help (any key closes it)"),
    ("s / S", "sort by the next / previous column: npu, aicore, hbm, temp, power, health"),
    ("r", "reverse the order"),
    ("up / down", "select an NPU (also k / j)"),
    ("enter", "the selected NPU's detail: codes, link, optics, ECC, HCCS, processes"),
    ("esc", "back to the table"),
    ("", ""),
    ("Colours are the agent's findings; set NO_COLOR (or --no-color) for none.", ""),
    ("A ? after a reading: stale (its collector is down or late); the header says which and since when.", ""),
]
_KEY_W = 13


def _help(width: int) -> list[Line]:
    lines: list[Line] = []
    for index, (key, said) in enumerate(HELP):
        if not said:
            lines += wrap(key, width, "head" if index == 0 else "")
        else:
            lines += wrap(f"  {key:<{_KEY_W - 2}}{said}", width, "", _KEY_W)
    return lines


def _sort_column(sort: str) -> str:
    return {"npu": "NPU", "aicore": "AI Core", "hbm": "HBM", "temp": "Temp", "power": "Power",
            "health": "Health"}.get(sort, "")


def _footer(state: TopState, width: int) -> Line:
    return fit([(f"q quit  ? help  s sort ({state.sort}{', reversed' if state.reverse else ''})  enter detail",
                 "dim")], width)


def frame(fetched: Fetched, history: History, state: TopState, *, width: int, height: int, node: str,
          now: float | None = None) -> list[Line]:
    """The screen's lines (at most ``height``, each at most ``width`` characters)."""
    now = time.time() if now is None else now
    if width < 12 or height < 2:
        return [[("npuwatch top"[:max(0, width)], "head")]][:max(0, height)]
    if state.help:
        return _help(width)[:height]
    if fetched.view is None:
        text = f"no data from {fetched.where}: {fetched.error or 'waiting for the first read'}"
        return [fit([("npuwatch top", "head")], width), *wrap(text, width, "bad", 2)][:height]
    view = fetched.view
    fresh = Freshness(view, now)
    top = header(fetched, node, now, width, history, fresh=fresh)
    rows = sorted_rows(view, state)
    state.selected = max(0, min(state.selected, len(rows) - 1))
    if state.detail and rows:
        return [*top, *detail(rows[state.selected], now, width, fresh)][:height]
    shown = columns(rows, width, history, state)
    title: Line = []
    for column in shown:
        label = column.title + ("*" if _sort_column(state.sort) == column.title else "")
        title.append((label.ljust(column.width) if column.title != CODES else label, "head"))
    table: list[Line] = []
    for index, row in enumerate(rows):
        line: Line = []
        for column in shown:
            cell = column.cell(row)
            line += stale_cell(cell) if column.metric and fresh.is_stale(column.metric) else cell
        if index == state.selected:
            line = [(text, "sel" if style in ("", "dim") else style) for text, style in line]
        table.append(fit(line, width))
    lines = [*top, fit(title, width)]
    room = height - len(lines) - 1  # the footer
    if len(table) > room:
        table = _scrolled(table, state.selected, room, width)
    lines += table
    lines += panels(view, history, now, width, fresh)[:max(0, height - len(lines) - 1)]
    left = height - len(lines) - 1
    listed = processes(view, width, left, history, now)
    if not any(column.keep == 0 for column in shown) and left - min(len(listed), 3) > len(rows):
        lines += trends(rows, history, width, left - min(len(listed), 3), state.ascii_only)
    lines += processes(view, width, height - len(lines) - 1, history, now)
    if len(lines) < height:
        lines.append(_footer(state, width))
    return lines[:height]


def _scrolled(table: list[Line], selected: int, room: int, width: int) -> list[Line]:
    """The rows around the selected one in ``room`` lines, the last of them saying how many are hidden where."""
    if room <= 1:
        return table[:max(0, room)]
    shown = room - 1
    start = max(0, min(selected - shown + 1, len(table) - shown))
    above, below = start, len(table) - start - shown
    where = ", ".join(f"{n} {side}" for n, side in ((above, "above"), (below, "below")) if n)
    said = f"{above + below} more NPUs: {where} (up/down scrolls)"
    return [*table[start:start + shown], fit([(said, "warn")], width)]
